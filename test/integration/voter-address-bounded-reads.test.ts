/**
 * The address erasure's reads are bounded (issue 30, docs/referral-rules.md "Voters' addresses age out"): beside a
 * long history of hearts and clicks whose addresses are already erased, and young ones still inside the horizon, one
 * batch of the `heart_addresses` or `click_addresses` rule reads the rows it erases (through the partial index of the
 * rows still holding an address) and their primary keys, never the table; the oldest-age gauge reads one entry.
 */
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { insertServer, startMeasuredHarness, type MeasuredHarness } from "../../scripts/harness/delivery-harness.js";
import { heartAddressesRetention } from "../../services/hearts/store.js";
import { clickAddressesRetention } from "../../services/referral/record-click.js";
import { createStatementNamer } from "../../services/shared/adapters/db.js";
import type { RetentionRule } from "../../services/shared/adapters/retention-rule.js";
import { executeSql, runSql } from "../../services/shared/adapters/sql/executor.js";
import { countedHeartOf, seedListServers, unlinkedClickOf } from "../helpers/list-servers.js";
import { recordingClient, rowsReadByStatements } from "../helpers/rows-read.js";

/** Rows whose address is already erased: the history a pass must not read. */
const ERASED_ROWS = 20_000;
/** Rows past the horizon still holding their address, and young rows inside it. */
const DUE_ROWS = 300;
const YOUNG_ROWS = 300;
const BATCH = 100;
/**
 * A batch reads its rows from the partial index, then their primary-key entries to write them (a bitmap scan of the
 * keys), plus a few neighbours.
 */
const BOUND = 3 * BATCH + 10;
const HOUR_MS = 3_600_000;
const KEEP_SECONDS = 48 * 3_600;

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void> }>;
test.before(async (t) => {
  t.context = await startMeasuredHarness("2027-03-01T12:00:00.000Z");
  // A list's other servers, each with a young counted heart and a young click holding their addresses: the tables'
  // statistics (each test ANALYZEs its table) then say a server has few rows (one server's share of a list's), as on a
  // list, for the generic plans below.
  await seedListServers(t.context.h.db.prisma, { at: t.context.clock.now(), rowsOf: [countedHeartOf, unlinkedClickOf], analyze: [] });
});
test.after.always(async (t) => {
  await t.context.close?.();
});

/** Inserts `n` rows of `table` (hearts or referral_clicks) created `hoursAgo` hours (and up to n minutes more) ago, with or without an address. */
async function insertRows(t: { context: MeasuredHarness }, table: "hearts" | "referral_clicks", serverId: string, n: number, hoursAgo: number, held: boolean) {
  const { h, clock } = t.context;
  const at = new Date(clock.now().getTime() - hoursAgo * HOUR_MS);
  const ip = held ? "203.0.113.9" : null;
  const subnet = held ? "203.0.113.0/24" : null;
  const agent = held ? "Mozilla/5.0" : null;
  const sql =
    table === "hearts"
      ? Prisma.sql`
        INSERT INTO hearts (id, server_id, username, voter_identity, ip, subnet, user_agent, counted, verdict, fraud_score, fraud_reasons, period, created_at)
        SELECT gen_random_uuid(), ${serverId}::uuid, 'voter' || g, 'voter' || g, ${ip}, ${subnet}, ${agent}, true, 'counted', 0, '{}', '2027-02',
               ${at}::timestamptz - g * interval '1 minute'
        FROM generate_series(1, ${n}::int) AS g`
      : Prisma.sql`
        INSERT INTO referral_clicks (id, server_id, referrer_identity, token, ip, subnet, user_agent, created_at)
        SELECT gen_random_uuid(), ${serverId}::uuid, 'referrer', gen_random_uuid()::text, ${ip}, ${subnet}, ${agent},
               ${at}::timestamptz - g * interval '1 minute'
        FROM generate_series(1, ${n}::int) AS g`;
  await executeSql(h.db.prisma, sql);
}

async function batchReadsItsRows(t: ExecutionContext<MeasuredHarness>, table: "hearts" | "referral_clicks", rule: RetentionRule) {
  const { h, clock, pool } = t.context;
  const serverId = await insertServer(h.db.prisma);
  await insertRows(t, table, serverId, ERASED_ROWS, 24 * 30, false);
  await insertRows(t, table, serverId, DUE_ROWS, 72, true);
  await insertRows(t, table, serverId, YOUNG_ROWS, 1, true);
  await executeSql(h.db.prisma, Prisma.sql`ANALYZE ${Prisma.raw(table)}`);

  const { client, statements } = recordingClient(pool);
  t.is(await rule.removeBatch(client, clock.now(), BATCH), BATCH);
  t.is(statements().length, 1);
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.true((read[table] ?? 0) <= BOUND, `${table} rows read by one batch of ${BATCH}: ${read[table]}`);
  // Never on a generic plan: the batch runs unnamed, planned with its cutoff each time (a generic plan of the hearts'
  // batch, forced, walked hearts_age_key_idx through the 20,000 erased hearts: 20,500 rows for a batch of 100).
  t.is(createStatementNamer()({ sql: statements()[0]!.text }), undefined, "the batch is planned with its values each run");

  const gauge = recordingClient(pool);
  t.true(((await rule.oldestAge(gauge.client, clock.now())) ?? 0) > KEEP_SECONDS, "the oldest held address is past the horizon");
  const gaugeRead = await rowsReadByStatements(h.db.prisma, gauge.statements());
  t.true((gaugeRead[table] ?? 0) <= 2, `${table} rows read by the oldest-age gauge: ${gaugeRead[table]}`);
  t.is(createStatementNamer()({ sql: gauge.statements()[0]!.text }), undefined, "the gauge is planned with its values each run");

  // The rest of the due rows go; the young ones and the erased history are untouched.
  while ((await rule.removeBatch(h.db.prisma, clock.now(), BATCH)) > 0);
  const [held] = await runSql<{ n: number }>(
    h.db.prisma,
    Prisma.sql`SELECT count(*)::int AS n FROM ${Prisma.raw(table)} WHERE server_id = ${serverId}::uuid AND ip IS NOT NULL`,
  );
  t.is(held!.n, YOUNG_ROWS);
}

test.serial("one batch of the hearts' address erasure beside 20,000 erased hearts reads about the hearts it erases, never the table", (t) =>
  batchReadsItsRows(t, "hearts", heartAddressesRetention(KEEP_SECONDS)),
);

test.serial("one batch of the clicks' address erasure beside 20,000 erased clicks reads about the clicks it erases, never the table", (t) =>
  batchReadsItsRows(t, "referral_clicks", clickAddressesRetention(KEEP_SECONDS)),
);
