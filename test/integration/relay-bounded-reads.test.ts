/**
 * The relay's pass reads a bounded number of rows whatever the outbox's history (issue: the same cost on day 1,000
 * as on day 1). The outbox holds 20,000 published rows of one key (so one shard) behind a few unpublished ones; a
 * pass must read the rows it publishes (and the index entries beside them), never the published history. Every
 * statement of the pass is recorded and re-run under EXPLAIN ANALYZE (rolled back) after its rows are made
 * unpublished again, so the re-run does the same work.
 */
import test from "ava";
import pg from "pg";
import { Prisma } from "../../gen/prisma/client.js";
import { createRelay } from "../../services/relay/relay.js";
import { createKafkaBus } from "../../services/shared/adapters/kafka-bus.js";
import { RELAY_SHARDS, shardOf } from "../../services/shared/adapters/outbox.js";
import type { EventBus } from "../../services/shared/adapters/bus.js";
import { executeSql } from "../../services/shared/adapters/sql/executor.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { LIST_SERVERS } from "../helpers/list-servers.js";
import { recordingClient, rowsReadByStatements, rowsReadByTableGeneric } from "../helpers/rows-read.js";

const HISTORY_ROWS = 20_000;
const NEW_ROWS = 3;
const KEY = "hot-server";
/** The pass's own rows (NEW_ROWS), read by its lock and claim statements and marked, plus their index neighbours. */
const FEW = 4 * NEW_ROWS + 4;

const log = createLogger("relay-bounded-reads", "silent");
let db: TestDatabase;
let bus: EventBus;
let pool: pg.Pool;

test.before(async () => {
  db = await createTestDatabase();
  bus = createKafkaBus({ brokers: (process.env.KAFKA_BROKERS ?? "").split(","), clientId: "relay-bounded-reads", log });
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
});
test.after.always(async () => {
  await pool?.end();
  await bus?.close();
  await db?.drop();
});

test.serial("a relay pass publishing 3 rows reads a handful of outbox rows, not the 20,000 published rows of their shard behind them", async (t) => {
  const topic = `relay-bounded-reads-${Date.now()}`;
  const row = (published: boolean) => Prisma.sql`
    INSERT INTO outbox (topic, key, type, payload, shard, created_at, published_at)
    SELECT ${topic}, ${KEY}, 'test.event', convert_to('{}', 'UTF8'), ${shardOf(KEY)}::int, now() - interval '1 day',
           CASE WHEN ${published}::boolean THEN now() - interval '1 day' END
    FROM generate_series(1, ${published ? HISTORY_ROWS : NEW_ROWS}::int)`;
  await executeSql(db.prisma, row(true));
  await executeSql(db.prisma, row(false));
  // A list's other servers' published events, one each over every shard: the outbox's statistics of a list (its keys
  // are servers), so the pass is also measured where one key's share of the table looks tiny to a generic plan.
  await executeSql(
    db.prisma,
    Prisma.sql`
    INSERT INTO outbox (topic, key, type, payload, shard, created_at, published_at)
    SELECT ${topic}, 'list-server-' || g, 'test.event', convert_to('{}', 'UTF8'), g % ${RELAY_SHARDS}::int, now() - interval '2 days', now() - interval '2 days'
    FROM generate_series(1, ${LIST_SERVERS}::int) g`,
  );
  await executeSql(db.prisma, Prisma.sql`ANALYZE outbox`);

  const { client, statements } = recordingClient(pool);
  const pass = await createRelay({ prisma: client, bus, log }).runOnce();
  t.deepEqual(pass, { kind: "published", count: NEW_ROWS, deadLettered: 0 });

  await executeSql(db.prisma, Prisma.sql`UPDATE outbox SET published_at = NULL WHERE id IN (SELECT id FROM outbox ORDER BY id DESC LIMIT ${NEW_ROWS}::int)`);
  const read = await rowsReadByStatements(db.prisma, statements());
  t.log(read);
  t.true((read.outbox ?? 0) <= FEW, `outbox rows read: ${read.outbox}`);
  // Each statement on its generic plan too (the relay's statements are named and run every pass).
  for (const statement of statements().filter((x) => !x.text.includes("/* planner-fence */"))) {
    const generic = await rowsReadByTableGeneric(db.prisma, statement);
    t.true((generic.outbox ?? 0) <= FEW, `generic plan: outbox rows read: ${generic.outbox} by ${statement.text.slice(0, 200)}`);
  }
});
