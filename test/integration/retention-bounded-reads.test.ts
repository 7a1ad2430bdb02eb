/**
 * Every retention statement finds the rows past its age limit as a range of an index led by its age column: on a
 * table of thousands of rows that must stay (young ones, and rows the rule never removes), a batch reads about the
 * rows it removes, never the table. Each rule's statements are recorded (not run), then run under EXPLAIN ANALYZE
 * and rolled back (test/helpers/rows-read.ts).
 */
import { randomUUID } from "node:crypto";
import test from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { createStatementNamer } from "../../services/shared/adapters/db.js";
import { retentionRules } from "../../services/retention/retention-rules.js";
import { readRetentionSettings } from "../../services/retention/retention-settings.js";
import { executeSql } from "../../services/shared/adapters/sql/executor.js";
import { createEnvReader } from "../../services/shared/runtime/config.js";
import { DEFAULT_FRAUD_RULES } from "../../services/hearts/domain/fraud-rules.js";
import { countedHeartOf, deliveredCallbackOf, deliveryAttemptOf, pendingRewardEntryOf, seedListServers } from "../helpers/list-servers.js";
import { recordingOnlyClient, rowsReadByTable } from "../helpers/rows-read.js";

/** Rows that must stay, per table; and rows past every limit, per table. */
const KEPT = 3_000;
const DUE = 3;
const NOW = new Date("2027-03-01T12:00:00.000Z");

let db: TestDatabase;
test.before(async () => {
  db = await createTestDatabase();
  const server = await db.prisma.server.create({ data: { name: "history" } });
  const owner = await db.prisma.owner.create({ data: { id: "history-owner", displayName: "o" } });
  const seed = (sql: Prisma.Sql) => executeSql(db.prisma, sql);
  const rows = (n: number, young: boolean) => ({ n, young });
  for (const { n, young } of [rows(KEPT, true), rows(DUE, false)]) {
    // young: under a minute ago (inside every limit); old: 400 days ago (past every limit).
    const at = young
      ? Prisma.sql`${NOW}::timestamptz - (g % 60) * interval '1 second'`
      : Prisma.sql`${NOW}::timestamptz - interval '400 days' - g * interval '1 second'`;
    await seed(Prisma.sql`INSERT INTO outbox (topic, key, type, payload, shard, created_at, published_at)
      SELECT 't', 'k', 'e', '\\x00', 0, ${at}, ${at} FROM generate_series(1, ${n}::int) g`);
    await seed(Prisma.sql`INSERT INTO dead_letters (source, code, reason, topic, key, payload, created_at)
      SELECT 'delivery', 'undecodable', 'r', 't', 'k', '\\x00', ${at} FROM generate_series(1, ${n}::int) g`);
    await seed(Prisma.sql`INSERT INTO dashboard_login_links (id, owner_id, token_hash, created_at, expires_at)
      SELECT gen_random_uuid(), ${owner.id}, gen_random_uuid()::text, ${at}, ${at} FROM generate_series(1, ${n}::int) g`);
    await seed(Prisma.sql`INSERT INTO dashboard_sessions (id, owner_id, token_hash, created_at, expires_at)
      SELECT gen_random_uuid(), ${owner.id}, gen_random_uuid()::text, ${at}, ${at} FROM generate_series(1, ${n}::int) g`);
    await seed(Prisma.sql`INSERT INTO heart_address_voters (server_id, address, voter_identity, last_counted_at)
      SELECT ${server.id}::uuid, '203.0.113.' || (g % 200), ${young ? "young" : "old"} || g, ${at} FROM generate_series(1, ${n}::int) g`);
    await seed(Prisma.sql`INSERT INTO vote_claims (heart_id, server_id, player_key, username_lower, counted_at, expires_at, state, expired_reason, expired_at)
      SELECT gen_random_uuid(), ${server.id}::uuid, 'name:v' || g, 'v' || g, ${at}, ${at}, 'expired', 'window', ${at} FROM generate_series(1, ${n}::int) g`);
    // Reward queue entries the plugin acknowledged at `at`.
    await seed(Prisma.sql`INSERT INTO reward_queue_entries (server_id, entry_key, reason, username, username_lower, commands, online_only, rules_version, created_at, acked_at)
      SELECT ${server.id}::uuid, ${young ? "young" : "old"} || g, 'vote', 'v', 'v', '{say hi}', false, 1, ${at}, ${at} FROM generate_series(1, ${n}::int) g`);
    // Deliveries delivered at `at`, one attempt each with its exchange.
    await seed(Prisma.sql`WITH d AS (
        INSERT INTO deliveries (id, server_id, heart_id, dedup_key, event_type, username, voter_identity, period, counted_at, status, delivered_at, created_at)
        SELECT gen_random_uuid(), ${server.id}::uuid, gen_random_uuid(), 'd' || g || ${randomUUID()}, 'heart.counted', 'v', 'v', '2027-03', ${at}, 'delivered', ${at}, ${at}
        FROM generate_series(1, ${n}::int) g RETURNING id, delivered_at)
      INSERT INTO delivery_attempts (delivery_id, server_id, attempt, url, started_at, status_code, latency_ms, succeeded, request_body, response_body)
      SELECT id, ${server.id}::uuid, 1, 'https://example.test/', delivered_at, 200, 5, true, '{}', 'ok' FROM d`);
  }
  // Rows no rule removes, however old: held ledger rows, unpublished outbox rows, attempts of held deliveries.
  await seed(Prisma.sql`INSERT INTO vote_claims (heart_id, server_id, player_key, username_lower, counted_at, expires_at)
    SELECT gen_random_uuid(), ${server.id}::uuid, 'name:h' || g, 'h' || g, ${NOW}::timestamptz - interval '500 days', ${NOW}::timestamptz - interval '470 days'
    FROM generate_series(1, ${KEPT}::int) g`);
  await seed(Prisma.sql`INSERT INTO outbox (topic, key, type, payload, shard, created_at)
    SELECT 't', 'k', 'e', '\\x00', 0, ${NOW}::timestamptz - interval '500 days' FROM generate_series(1, ${KEPT}::int) g`);
  // Pending reward queue entries, however old, stay until acknowledged.
  await seed(Prisma.sql`INSERT INTO reward_queue_entries (server_id, entry_key, reason, username, username_lower, commands, online_only, rules_version, created_at)
    SELECT ${server.id}::uuid, 'pending' || g, 'vote', 'v', 'v', '{say hi}', g % 2 = 0, 1, ${NOW}::timestamptz - interval '500 days' FROM generate_series(1, ${KEPT}::int) g`);
  // Deliveries no rule removes, however old: 20,000 pending rows of one server (due, never sent; unclaimed pull rows),
  // beside young withdrawn ones (besides the young delivered ones above).
  await seed(Prisma.sql`INSERT INTO deliveries (id, server_id, heart_id, dedup_key, transport, event_type, username, voter_identity, period, counted_at, status, created_at)
    SELECT gen_random_uuid(), ${server.id}::uuid, gen_random_uuid(), 'p' || g, CASE WHEN g % 2 = 0 THEN 'pull' ELSE 'callback' END::"DeliveryTransport",
           'heart.counted', 'v', 'v', '2027-03', ${NOW}::timestamptz - interval '500 days', 'pending', ${NOW}::timestamptz - interval '500 days' - g * interval '1 second'
    FROM generate_series(1, 20000) g`);
  await seed(Prisma.sql`INSERT INTO deliveries (id, server_id, heart_id, dedup_key, event_type, username, voter_identity, period, counted_at, status, created_at)
    SELECT gen_random_uuid(), ${server.id}::uuid, gen_random_uuid(), 'w' || g, 'heart.counted', 'v', 'v', '2027-03', ${NOW}::timestamptz, 'withdrawn',
           ${NOW}::timestamptz - (g % 60) * interval '1 second'
    FROM generate_series(1, ${KEPT}::int) g`);
  // Hearts: 20,000 young hearts of one voter; KEPT old hearts kept by a pending delivery each, older than the DUE old
  // hearts no delivery is left of (each with its ledger row and payout); and voter states, KEPT young and DUE old.
  const heartsAt = (n: number, voter: string, at: Prisma.Sql) =>
    seed(Prisma.sql`
    INSERT INTO hearts (id, server_id, username, voter_identity, counted, verdict, fraud_score, fraud_reasons, period, created_at)
    SELECT gen_random_uuid(), ${server.id}::uuid, ${voter}, ${voter}, g = 1, CASE WHEN g = 1 THEN 'counted' ELSE 'cooldown' END, 0, '{}', '2026-01', ${at}
    FROM generate_series(1, ${n}::int) g`);
  await heartsAt(20_000, "repeat", Prisma.sql`${NOW}::timestamptz - g * interval '1 second'`);
  await heartsAt(KEPT, "waiting", Prisma.sql`${NOW}::timestamptz - interval '500 days' - g * interval '1 second'`);
  await seed(Prisma.sql`INSERT INTO deliveries (id, server_id, heart_id, dedup_key, transport, event_type, username, voter_identity, period, counted_at, status, created_at)
    SELECT gen_random_uuid(), server_id, id, id::text, 'pull', 'heart.counted', username, voter_identity, period, created_at, 'pending', created_at
    FROM hearts WHERE voter_identity = 'waiting'`);
  await heartsAt(DUE, "gone", Prisma.sql`${NOW}::timestamptz - interval '400 days' - g * interval '1 second'`);
  await seed(Prisma.sql`INSERT INTO vote_claims (heart_id, server_id, player_key, username_lower, counted_at, expires_at, state, claimed_at)
    SELECT id, server_id, 'name:gone', 'gone', created_at, created_at + interval '30 days', 'claimed', created_at FROM hearts WHERE voter_identity = 'gone'`);
  await seed(Prisma.sql`INSERT INTO heart_payouts (heart_id, server_id, transport, state, taken_at, paid_at)
    SELECT id, server_id, 'claim', 'paid', created_at, created_at FROM hearts WHERE voter_identity = 'gone'`);
  await seed(Prisma.sql`INSERT INTO voter_states (server_id, voter_identity, last_counted_at, last_day, streak_days)
    SELECT ${server.id}::uuid, 'young' || g, ${NOW}::timestamptz - g * interval '1 second', ${NOW}::date, 1 FROM generate_series(1, ${KEPT}::int) g`);
  await seed(Prisma.sql`INSERT INTO voter_states (server_id, voter_identity, last_counted_at, last_day, streak_days)
    SELECT ${server.id}::uuid, 'old' || g, ${NOW}::timestamptz - interval '400 days' - g * interval '1 second', ${NOW}::date - 400, 1 FROM generate_series(1, ${DUE}::int) g`);
  // The list's 5,000 other servers, each with young rows no rule removes (a delivered callback and its attempt, a
  // counted heart, a pending reward entry): the tables' statistics of a list, where one server's share looks tiny.
  await seedListServers(db.prisma, { at: NOW, rowsOf: [deliveredCallbackOf, deliveryAttemptOf, countedHeartOf, pendingRewardEntryOf], analyze: [] });
  await seed(Prisma.sql`ANALYZE`);
});
test.after.always(async () => {
  if (!process.env.KEEP_DB) await db?.drop();
  else console.log(db.url);
});

test("each rule's batch (limit 10) and oldest-age read, on thousands of rows that stay, read about the rows due, never the table, planned with their values", async (t) => {
  const rules = retentionRules(readRetentionSettings(createEnvReader({}), DEFAULT_FRAUD_RULES));
  const over: string[] = [];
  const named: string[] = [];
  for (const rule of rules) {
    const recorded = recordingOnlyClient();
    await rule.removeBatch(recorded.client, NOW, 10);
    await rule.oldestAge(recorded.client, NOW);
    t.true(recorded.statements.length >= 2, rule.name);
    for (const statement of recorded.statements) {
      // Planned with its values each run (never prepared, so never on a generic plan that cannot see the cutoff).
      if (createStatementNamer()({ sql: statement.text }) !== undefined) named.push(`${rule.name}: ${statement.text.slice(0, 80)}`);
      const read = await rowsReadByTable(db.prisma, statement);
      for (const [table, rows] of Object.entries(read)) if (rows > 4 * DUE + 2) over.push(`${rule.name} read ${rows} rows of ${table}: ${statement.text}`);
    }
  }
  t.deepEqual(over, []);
  t.deepEqual(named, [], "every retention statement runs unnamed");
});
