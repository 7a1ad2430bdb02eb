/**
 * Network goals' reads stay bounded whatever the history (issue 31, vote party): the reward step's probe for a batch of
 * servers without a goal reads about nothing among 20,000 goals' servers; counting a batch into a goal that counted
 * 20,000 hearts of 20,000 voters reads about the batch; a payer's page of a round of 20,000 voters reads about the page,
 * and finds its round among 20,000 paid ones by the unpaid index; a page of an owner's goals reads about the page among
 * 20,000 goals the owner deleted and 20,000 of another owner. Statements are recorded, then re-run under EXPLAIN
 * ANALYZE (rolled back).
 */
import { randomUUID } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { countGoalVotesOf } from "../../services/rewards/count-goal-votes.js";
import { payReachedGoals } from "../../services/rewards/pay-reached-goals.js";
import type { CountedHeart } from "../../services/rewards/queue-vote-rewards.js";
import { listNetworkGoals } from "../../services/rewards/network-goal-store.js";
import { executeSql, sqlOf } from "../../services/shared/adapters/sql/executor.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { insertServer, startMeasuredHarness, type MeasuredHarness } from "../../scripts/harness/delivery-harness.js";
import { networkGoalOf, seedListServers } from "../helpers/list-servers.js";
import { recordingClient, rowsReadByStatements, rowsReadByStatementsGeneric } from "../helpers/rows-read.js";

const MANY = 20_000;
const PAGE = 50;
/** Index neighbours, the rows by primary key, a handful. */
const FEW = 10;
const log = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void>; serverId: string; lonelyServerId: string }>;

/** A goal counting `serverId` with `voters` voters in round 1 and as many hearts; returns its id. */
async function seedGoal(h: MeasuredHarness["h"], serverId: string, voters: number): Promise<string> {
  const goalId = randomUUID();
  const { prisma } = h.db;
  await executeSql(
    prisma,
    Prisma.sql`INSERT INTO network_goals (id, name, target, payees, rewards, counts_from, created_by, created_at, updated_at)
               VALUES (${goalId}::uuid, 'Party', 1000000, 'voters', '[{"commands":["give {player} cake 1"],"onlineOnly":true}]'::jsonb,
                       '2027-01-01T00:00:00Z', 'test', now(), now())`,
  );
  await executeSql(prisma, Prisma.sql`INSERT INTO network_goal_servers (server_id, goal_id) VALUES (${serverId}::uuid, ${goalId}::uuid)`);
  await executeSql(
    prisma,
    Prisma.sql`INSERT INTO network_goal_hearts (goal_id, heart_id, counted_at)
               SELECT ${goalId}::uuid, gen_random_uuid(), '2027-01-02T00:00:00Z'::timestamptz + g * interval '1 second' FROM generate_series(1, ${voters}::int) g`,
  );
  await executeSql(
    prisma,
    Prisma.sql`INSERT INTO network_goal_voters (goal_id, round, voter_identity, server_id, username, last_counted_at)
               SELECT ${goalId}::uuid, 1, 'voter-' || g, ${serverId}::uuid, 'P' || g, '2027-01-02T00:00:00Z' FROM generate_series(1, ${voters}::int) g`,
  );
  return goalId;
}

test.before(async (t) => {
  const harness = await startMeasuredHarness("2027-02-10T12:00:00.000Z");
  const { prisma } = harness.h.db;
  const serverId = await insertServer(prisma);
  const lonelyServerId = await insertServer(prisma);
  // 20,000 goals' servers (other owners), and 20,000 rounds paid long ago.
  await executeSql(
    prisma,
    Prisma.sql`INSERT INTO network_goal_servers (server_id, goal_id) SELECT gen_random_uuid(), gen_random_uuid() FROM generate_series(1, ${MANY}::int)`,
  );
  await executeSql(
    prisma,
    Prisma.sql`INSERT INTO network_goal_rounds (goal_id, round, reached_at, paid_at)
               SELECT gen_random_uuid(), 1, '2026-01-01T00:00:00Z', '2026-01-01T00:01:00Z' FROM generate_series(1, ${MANY}::int)`,
  );
  // The counted goal, and a reached one whose round of 20,000 voters waits to be paid.
  await seedGoal(harness.h, serverId, MANY);
  const paying = await seedGoal(harness.h, await insertServer(prisma), MANY);
  await executeSql(prisma, Prisma.sql`INSERT INTO network_goal_rounds (goal_id, round, reached_at) VALUES (${paying}::uuid, 1, '2027-02-01T00:00:00Z')`);
  // An owner who deleted 20,000 goals and keeps 3, beside another owner's 20,000 live goals.
  await executeSql(
    prisma,
    Prisma.sql`INSERT INTO network_goals (id, owner_id, name, target, payees, rewards, counts_from, created_by, created_at, updated_at, deleted_at)
               SELECT gen_random_uuid(), CASE WHEN g % 2 = 0 THEN 'lister' ELSE 'other' END, 'Old', 10, 'online', '[]'::jsonb, now(), 'test',
                      '2026-01-01T00:00:00Z'::timestamptz + g * interval '1 second', now(), CASE WHEN g % 2 = 0 THEN now() END
               FROM generate_series(1, ${2 * MANY}::int) g`,
  );
  await executeSql(
    prisma,
    Prisma.sql`INSERT INTO network_goals (id, owner_id, name, target, payees, rewards, counts_from, created_by, created_at, updated_at)
               SELECT gen_random_uuid(), 'lister', 'Live ' || g, 10, 'online', '[]'::jsonb, now(), 'test', '2026-01-01T00:00:00Z'::timestamptz + g * interval '1 day', now()
               FROM generate_series(1, 3) g`,
  );
  // A list's other servers, each counted by a live goal of its own owner with a heart, a voter and a paid round: the
  // tables' statistics then say a goal, a server and an owner have few rows (one's share of a list's), as on a list,
  // for the generic plans below.
  await seedListServers(prisma, { at: new Date("2027-02-10T12:00:00.000Z"), rowsOf: [networkGoalOf], analyze: [] });
  for (const table of ["network_goal_servers", "network_goal_rounds", "network_goal_hearts", "network_goal_voters", "network_goals"]) {
    await executeSql(prisma, Prisma.sql`ANALYZE ${Prisma.raw(table)}`);
  }
  t.context = { ...harness, serverId, lonelyServerId };
});

test.after.always(async (t) => {
  await t.context.close?.();
});

const heartsOn = (serverId: string, n: number): CountedHeart[] =>
  Array.from({ length: n }, (_, i) => ({
    heartId: randomUUID(),
    serverId,
    voterIdentity: `batch-voter-${i}`,
    countedAt: new Date(Date.parse("2027-02-10T12:00:00Z") + i * 1000),
    player: { username: `B${i}`, steamId: null, discordId: null, minecraftUuid: null, accountId: null },
  }));

test.serial("a batch of servers without a goal costs one probe that reads about nothing among 20,000 goals' servers", async (t) => {
  const { h, pool, lonelyServerId } = t.context;
  const { client, statements } = recordingClient(pool);
  t.like(await countGoalVotesOf(client, heartsOn(lonelyServerId, 3), log), { counted: 0 });
  t.is(statements().length, 1);
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.true((read.network_goal_servers ?? 0) <= FEW, `network_goal_servers rows read: ${read.network_goal_servers}`);
  const generic = await rowsReadByStatementsGeneric(h.db.prisma, statements());
  t.log("generic plan", generic);
  t.true((generic.network_goal_servers ?? 0) <= FEW, `generic plan: network_goal_servers rows read: ${generic.network_goal_servers}`);
});

test.serial("counting a batch into a goal that counted 20,000 hearts of 20,000 voters reads about the batch", async (t) => {
  const { h, pool, serverId } = t.context;
  const { client, statements } = recordingClient(pool);
  t.like(await countGoalVotesOf(client, heartsOn(serverId, 3), log), { counted: 3 });
  t.true(statements().length <= 6, `statements: ${statements().length}`);
  const read = await rowsReadByStatements(h.db.prisma, statements());
  for (const table of ["network_goal_servers", "network_goals", "network_goal_hearts", "network_goal_voters"]) {
    t.true((read[table] ?? 0) <= 3 + FEW, `${table} rows read: ${read[table]}`);
  }
  const generic = await rowsReadByStatementsGeneric(h.db.prisma, statements());
  t.log("generic plan", generic);
  for (const table of ["network_goal_servers", "network_goals", "network_goal_hearts", "network_goal_voters"]) {
    t.true((generic[table] ?? 0) <= 3 + FEW, `generic plan: ${table} rows read: ${generic[table]}`);
  }
});

test.serial("a payer's page of a round of 20,000 voters reads about the page, and its round among 20,000 paid ones by the unpaid index", async (t) => {
  const { h, pool } = t.context;
  const { client, statements } = recordingClient(pool);
  t.like(await payReachedGoals({ prisma: client, log }, { pagePayees: PAGE, passMaxPages: 1 }, new Date("2027-02-10T12:00:00Z")), { queued: PAGE, rounds: 0 });
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.true((read.network_goal_rounds ?? 0) <= FEW, `network_goal_rounds rows read: ${read.network_goal_rounds}`);
  // The page taken: its index entries, its rows by primary key, and the rows the DELETE removes (counted as read too).
  t.true((read.network_goal_voters ?? 0) <= 3 * PAGE + FEW, `network_goal_voters rows read: ${read.network_goal_voters}`);
  t.true((read.network_goal_servers ?? 0) <= FEW, `network_goal_servers rows read: ${read.network_goal_servers}`);
  t.true((read.reward_queue_entries ?? 0) <= PAGE + FEW, `reward_queue_entries rows read: ${read.reward_queue_entries}`);
  const generic = await rowsReadByStatementsGeneric(h.db.prisma, statements());
  t.log("generic plan", generic);
  t.true((generic.network_goal_rounds ?? 0) <= FEW, `generic plan: network_goal_rounds rows read: ${generic.network_goal_rounds}`);
  t.true((generic.network_goal_voters ?? 0) <= 3 * PAGE + FEW, `generic plan: network_goal_voters rows read: ${generic.network_goal_voters}`);
  t.true((generic.network_goal_servers ?? 0) <= FEW, `generic plan: network_goal_servers rows read: ${generic.network_goal_servers}`);
  t.true((generic.reward_queue_entries ?? 0) <= PAGE + FEW, `generic plan: reward_queue_entries rows read: ${generic.reward_queue_entries}`);
});

test.serial("a page of an owner's goals reads about the page among 20,000 goals the owner deleted and 20,000 of another owner", async (t) => {
  const { h, pool } = t.context;
  const { client, statements } = recordingClient(pool);
  const page = await listNetworkGoals(sqlOf(client), {
    ownerId: "lister",
    after: { createdAt: new Date(0), id: "00000000-0000-0000-0000-000000000000" },
    limit: 2,
  });
  t.deepEqual(
    page.map((g) => g.name),
    ["Live 1", "Live 2"],
  );
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.true((read.network_goals ?? 0) <= 2 + FEW, `network_goals rows read: ${read.network_goals}`);
  const generic = await rowsReadByStatementsGeneric(h.db.prisma, statements());
  t.log("generic plan", generic);
  t.true((generic.network_goals ?? 0) <= 2 + FEW, `generic plan: network_goals rows read: ${generic.network_goals}`);
});
