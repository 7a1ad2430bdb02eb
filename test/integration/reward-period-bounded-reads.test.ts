/**
 * The period closer's reads stay bounded whatever the history (issue 31, period awards): a month's standings of a
 * server with 20,000 voters read the top N tallies and one heart per placed voter (whose own history holds 2,000 counted
 * hearts), and the closer's batch of due periods reads about the batch among 20,000 closed periods. Statements are
 * recorded, then re-run under EXPLAIN ANALYZE (rolled back).
 */
import anyTest, { type TestFn } from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { periodOfKind, type RewardPeriod } from "../../services/rewards/domain/period-awards.js";
import { claimDuePeriods, readPeriodStandings } from "../../services/rewards/period-store.js";
import { executeSql, runSqlTransaction, sqlOf } from "../../services/shared/adapters/sql/executor.js";
import { insertServer, startMeasuredHarness, type MeasuredHarness } from "../../scripts/harness/delivery-harness.js";
import { closedRewardPeriodOf, countedHeartOf, periodTallyOf, seedListServers } from "../helpers/list-servers.js";
import { recordingClient, rowsReadByStatements, rowsReadByStatementsGeneric } from "../helpers/rows-read.js";
import { insertPlayerHearts } from "../helpers/skewed-history.js";

const VOTERS = 20_000;
const CLOSED = 20_000;
const TOP = 10;
/** Index neighbours, the rows by primary key, a handful. */
const FEW = 10;

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void>; serverId: string; january: RewardPeriod }>;

test.before(async (t) => {
  const harness = await startMeasuredHarness("2027-02-10T12:00:00.000Z");
  const { prisma } = harness.h.db;
  const serverId = await insertServer(prisma);
  const january = periodOfKind("month", "2027-01")!;
  // 20,000 voters of January with 1 to 20 votes; `player` leads with 31, and has 2,000 counted hearts on the server.
  await executeSql(
    prisma,
    Prisma.sql`INSERT INTO voter_period_tallies (server_id, period, voter_identity, votes, last_counted_at)
               SELECT ${serverId}::uuid, '2027-01', 'voter-' || g, 1 + g % 20, '2027-01-20T00:00:00Z'::timestamptz + g * interval '1 second'
               FROM generate_series(1, ${VOTERS}::int) AS g`,
  );
  await executeSql(
    prisma,
    Prisma.sql`INSERT INTO voter_period_tallies (server_id, period, voter_identity, votes, last_counted_at)
               VALUES (${serverId}::uuid, '2027-01', 'player', 31, '2027-01-31T12:00:00Z')`,
  );
  await insertPlayerHearts(prisma, serverId, "player", 2_000, new Date("2027-01-31T12:00:00Z"));
  // 20,000 closed periods (weeks of many servers long ago) and 3 open ones that are due.
  await executeSql(
    prisma,
    Prisma.sql`INSERT INTO reward_periods (server_id, kind, period, ends_at, closed_at)
               SELECT gen_random_uuid(), 'week', '2026-W01', '2026-01-05T00:00:00Z', '2026-01-05T00:10:00Z' FROM generate_series(1, ${CLOSED}::int)`,
  );
  await executeSql(
    prisma,
    Prisma.sql`INSERT INTO reward_periods (server_id, kind, period, ends_at)
               SELECT gen_random_uuid(), 'month', '2027-01', '2027-02-01T00:00:00Z' FROM generate_series(1, 3)`,
  );
  // A list's other servers, each with a voter's January tally, a counted heart and a closed period: the tables'
  // statistics then say a server has few rows (one server's share of a list's), as on a list, for the generic plans below.
  await seedListServers(prisma, { at: new Date("2027-02-10T12:00:00.000Z"), rowsOf: [periodTallyOf, countedHeartOf, closedRewardPeriodOf], analyze: [] });
  await executeSql(prisma, Prisma.sql`ANALYZE voter_period_tallies`);
  await executeSql(prisma, Prisma.sql`ANALYZE reward_periods`);
  await executeSql(prisma, Prisma.sql`ANALYZE hearts`);
  t.context = { ...harness, serverId, january };
});

test.after.always(async (t) => {
  await t.context.close?.();
});

test.serial("a month's standings of a server with 20,000 voters read the top N tallies and one heart per placed voter", async (t) => {
  const { h, pool, serverId, january } = t.context;
  const { client, statements } = recordingClient(pool);
  const standings = await readPeriodStandings(sqlOf(client), { serverId, period: january, top: TOP });
  t.is(standings.length, TOP);
  t.like(standings[0], { place: 1, position: 1, voterIdentity: "player", votes: 31, player: { username: "player" } });
  t.true(standings.slice(1).every((s) => s.votes === 20 && s.place === 2));
  t.is(statements().length, 1);
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.true((read.voter_period_tallies ?? 0) <= TOP + FEW, `voter_period_tallies rows read: ${read.voter_period_tallies}`);
  t.true((read.hearts ?? 0) <= TOP + FEW, `hearts rows read: ${read.hearts}`);
  const generic = await rowsReadByStatementsGeneric(h.db.prisma, statements());
  t.log("generic plan", generic);
  t.true((generic.voter_period_tallies ?? 0) <= TOP + FEW, `generic plan: voter_period_tallies rows read: ${generic.voter_period_tallies}`);
  t.true((generic.hearts ?? 0) <= TOP + FEW, `generic plan: hearts rows read: ${generic.hearts}`);
});

test.serial("the closer's batch reads about the due open periods, never the 20,000 closed ones", async (t) => {
  const { h, pool } = t.context;
  const { client, statements } = recordingClient(pool);
  const due = await runSqlTransaction(client, (tx) => claimDuePeriods(tx, { due: new Date("2027-02-01T00:05:00Z"), limit: 20 }), { timeoutMs: 10_000 });
  t.is(due.length, 3);
  const claims = statements().filter((s) => s.text.includes("reward_periods"));
  t.is(claims.length, 1);
  const read = await rowsReadByStatements(h.db.prisma, claims);
  t.true((read.reward_periods ?? 0) <= 3 + FEW, `reward_periods rows read: ${read.reward_periods}`);
  const generic = await rowsReadByStatementsGeneric(h.db.prisma, claims);
  t.log("generic plan", generic);
  t.true((generic.reward_periods ?? 0) <= 3 + FEW, `generic plan: reward_periods rows read: ${generic.reward_periods}`);
});
