/**
 * The referral history rules read about the rows they remove, never the history that stays: beside 20,000 young
 * qualified referrals (with their linked clicks, credits and dedup rows), 20,000 referrals held for review from long before the
 * horizon (with their linked clicks, as old) and 20,000 young clicks that never registered anyone, a batch of the
 * click rule and of the referral rule, and each rule's oldest-age read, read a few rows per table. Each statement is
 * recorded (not run), then run under EXPLAIN ANALYZE and rolled back (test/helpers/rows-read.ts).
 */
import test from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { endedReferralRetention } from "../../services/referral/apply-event.js";
import { unlinkedClickRetention } from "../../services/referral/record-click.js";
import { executeSql } from "../../services/shared/adapters/sql/executor.js";
import { linkedReferralOf, referralEventOf, seedListServers, unlinkedClickOf } from "../helpers/list-servers.js";
import { recordingOnlyClient, rowsReadByTable, rowsReadByTableGeneric } from "../helpers/rows-read.js";
import { insertAddressClicks, insertLinkedReferrals } from "../helpers/skewed-history.js";

/** Rows that must stay, per kind; rows past the horizon that go, per rule. */
const STAY = 20_000;
const DUE = 3;
const NOW = new Date("2027-03-01T12:00:00.000Z");
const KEEP_SECONDS = 400 * 86_400;
const ADDRESS = { ip: "203.0.113.7", subnet: "203.0.113.0/24" };

let db: TestDatabase;
test.before(async () => {
  db = await createTestDatabase();
  const server = await db.prisma.server.create({ data: { name: "referral history" } });
  const heldServer = await db.prisma.server.create({ data: { name: "held for review" } });
  const seed = (sql: Prisma.Sql) => executeSql(db.prisma, sql);
  const longAgo = new Date(NOW.getTime() - 500 * 86_400_000);
  // Young: qualified referrals (linked clicks, credits) and clicks that never registered anyone.
  await insertLinkedReferrals(db.prisma, { serverId: server.id, ...ADDRESS, rows: STAY, at: NOW }, "young");
  await insertAddressClicks(db.prisma, { serverId: server.id, ...ADDRESS, rows: STAY, at: NOW, spreadSeconds: 3_600 });
  // The young referrals' dedup rows: one `registered` per linked click.
  await seed(Prisma.sql`INSERT INTO referral_events (token, type, server_event_id, server_id, referral_id, outcome, received_at)
    SELECT token, 'registered', 'e-' || token, server_id, referral_id, 'advanced', created_at FROM referral_clicks WHERE referral_id IS NOT NULL`);
  // Held for review since long before the horizon: they stay whatever their age, and so do their linked clicks.
  await insertLinkedReferrals(db.prisma, { serverId: heldServer.id, ...ADDRESS, rows: STAY, at: longAgo }, "held");
  await seed(Prisma.sql`UPDATE referrals SET review = 'held' WHERE referrer_identity = 'held'`);
  // Due: DUE qualified referrals and DUE never-linked clicks from before the horizon, with their dedup rows.
  await seed(Prisma.sql`
    WITH r AS (
      INSERT INTO referrals (id, server_id, referee_identity, referrer_identity, state, version, registered_at, qualified_at)
      SELECT gen_random_uuid(), ${server.id}::uuid, 'due-' || g, 'due', 'qualified', 2, ${longAgo}::timestamptz, ${longAgo}::timestamptz
      FROM generate_series(1, ${DUE}::int) g RETURNING id, server_id
    ), c AS (
      INSERT INTO referral_credits (referral_id, server_id, referrer_identity, period, credited_at)
      SELECT id, server_id, 'due', '2025-10', ${longAgo}::timestamptz FROM r
    ), k AS (
      INSERT INTO referral_clicks (id, server_id, referrer_identity, token, referral_id, created_at)
      SELECT gen_random_uuid(), server_id, 'due', 'due-' || id::text, id, ${longAgo}::timestamptz FROM r RETURNING token, server_id, referral_id
    )
    INSERT INTO referral_events (token, type, server_event_id, server_id, referral_id, outcome, received_at)
    SELECT token, 'registered', 'e-' || token, server_id, referral_id, 'advanced', ${longAgo}::timestamptz FROM k`);
  await seed(Prisma.sql`INSERT INTO referral_clicks (id, server_id, referrer_identity, token, created_at)
    SELECT gen_random_uuid(), ${server.id}::uuid, 'due', 'unlinked-due-' || g, ${longAgo}::timestamptz FROM generate_series(1, ${DUE}::int) g`);
  // A list's other servers, each with a young qualified referral (its credit, its linked click, its dedup row) and a
  // young unlinked click (all staying): the tables' statistics then say a server has few rows (one server's share of a
  // list's), as on a list, for the generic plans below.
  await seedListServers(db.prisma, { at: NOW, rowsOf: [linkedReferralOf, referralEventOf, unlinkedClickOf], analyze: [] });
  await seed(Prisma.sql`ANALYZE referrals, referral_clicks, referral_credits, referral_events`);
});
test.after.always(async () => {
  await db?.drop();
});

for (const rule of [unlinkedClickRetention(KEEP_SECONDS), endedReferralRetention(KEEP_SECONDS)]) {
  test(`the ${rule.name} rule's batch (limit 10) and oldest-age read, beside 20,000 rows of each kind that stay, read about its ${DUE} due rows per table`, async (t) => {
    const recorded = recordingOnlyClient();
    await rule.removeBatch(recorded.client, NOW, 10);
    await rule.oldestAge(recorded.client, NOW);
    t.is(recorded.statements.length, 2);
    const over: string[] = [];
    for (const statement of recorded.statements) {
      const read = await rowsReadByTable(db.prisma, statement);
      for (const [table, rows] of Object.entries(read)) if (rows > 4 * DUE + 2) over.push(`${rows} rows of ${table}: ${statement.text}`);
      // The same statement on its generic plan (the executor names it).
      const generic = await rowsReadByTableGeneric(db.prisma, statement);
      for (const [table, rows] of Object.entries(generic)) if (rows > 4 * DUE + 2) over.push(`generic plan: ${rows} rows of ${table}: ${statement.text}`);
    }
    t.deepEqual(over, []);
  });
}
