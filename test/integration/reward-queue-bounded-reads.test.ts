/**
 * The plugin's reward queue reads stay bounded whatever the server's history (the same cost on day 1,000 as on day 1).
 * One server holds 20,000 acknowledged entries and 20,000 online-only entries of players who are offline, all older
 * than the few entries a list should answer. A list of the whole queue reads about a page; a list for the players
 * online reads about the entries it answers, never the offline players' online-only entries nor the acknowledged ones.
 * Statements are recorded, then re-run under EXPLAIN ANALYZE (rolled back).
 */
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { randomUUID } from "node:crypto";
import { Prisma } from "../../gen/prisma/client.js";
import {
  ackRewardEntries,
  closeRewardEntriesPaidElsewhere,
  findServerRewardEntries,
  findVoteEntriesPaidElsewhere,
  listPendingRewardEntries,
  queueRewardEntries,
  REQUEUE_PAGE_ENTRIES,
  requeueAckedRewardEntries,
  type RewardPlayer,
} from "../../services/rewards/reward-queue-store.js";
import { executeSql, runSqlTransaction, sqlOf } from "../../services/shared/adapters/sql/executor.js";
import { parseRewardRules, REWARD_RULE_LIMITS } from "../../services/rewards/domain/reward-rules.js";
import { rewardPeriodsOf } from "../../services/rewards/domain/period-awards.js";
import { countPeriodVotes } from "../../services/rewards/period-store.js";
import { type CountedHeart, queueVoteRewards } from "../../services/rewards/queue-vote-rewards.js";
import { saveRewardRules } from "../../services/rewards/reward-rules-store.js";
import { storeProgressionEvents } from "../../services/delivery/pipeline/progression-event.js";
import { insertServer, startMeasuredHarness, type MeasuredHarness } from "../../scripts/harness/delivery-harness.js";
import { pendingRewardEntryOf, seedListServers, voterRewardStateOf } from "../helpers/list-servers.js";
import { recordingClient, rowsReadByStatements, rowsReadByTableGeneric } from "../helpers/rows-read.js";

const HISTORY = 20_000;
const PAGE = 50;
/** Index neighbours, the rows by primary key, a handful. */
const FEW = 10;

/** Each of `statements`, on its generic plan, reads at most `bound` reward_queue_entries rows. */
async function eachReadsEntriesOnItsGenericPlan(t: ExecutionContext, prisma: object, statements: readonly Prisma.Sql[], bound: number): Promise<void> {
  for (const statement of statements) {
    const generic = await rowsReadByTableGeneric(prisma, statement);
    t.log("generic plan", generic);
    t.true(
      (generic.reward_queue_entries ?? 0) <= bound,
      `generic plan: reward_queue_entries rows read: ${generic.reward_queue_entries} by ${statement.text.slice(0, 120)}`,
    );
  }
}

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void>; serverId: string; answerable: string[] }>;

const playerOf = (username: string): RewardPlayer => ({ username, steamId: null, discordId: null, minecraftUuid: null, accountId: null });
const entries = (n: number, onlineOnly: boolean) =>
  Array.from({ length: n }, (_, i) => ({ key: `${randomUUID()}:vote:${i}`, reason: "vote" as const, commands: [`give p ${i}`], onlineOnly }));

test.before(async (t) => {
  const harness = await startMeasuredHarness("2026-05-10T12:00:00.000Z");
  const { prisma } = harness.h.db;
  const serverId = await insertServer(prisma);
  const tx = <T>(body: Parameters<typeof runSqlTransaction<T>>[1]) => runSqlTransaction(prisma, body, { timeoutMs: 120_000 });
  // 20,000 entries the plugin ran and acknowledged (20 players of 1,000 entries).
  for (let p = 0; p < HISTORY / 1_000; p++) {
    await tx(async (q) => {
      const ids = await queueRewardEntries(q, { serverId, heartId: null, player: playerOf(`veteran${p}`), rulesVersion: 1, entries: entries(1_000, false) });
      await ackRewardEntries(q, { serverId, ids, at: harness.clock.now() });
    });
  }
  // 20,000 online-only entries of 1,000 players who are not online (20 each).
  await tx(async (q) => {
    for (let p = 0; p < HISTORY / 20; p++)
      await queueRewardEntries(q, { serverId, heartId: null, player: playerOf(`offline${p}`), rulesVersion: 1, entries: entries(20, true) });
  });
  // Then what a list for the players online answers: entries any time, and the online player's online-only ones.
  const answerable = await tx(async (q) => [
    ...(await queueRewardEntries(q, { serverId, heartId: null, player: playerOf("offline0"), rulesVersion: 1, entries: entries(3, false) })),
    ...(await queueRewardEntries(q, { serverId, heartId: null, player: playerOf("Alice"), rulesVersion: 1, entries: entries(4, true) })),
  ]);
  // The list's 5,000 other servers, each with a pending entry and a voter's reward state: the statistics then say a
  // server has few pending entries (one server's share of a list's table), so a generic plan may walk the server's
  // pending partial index. (The reward counting's test ANALYZEs voter_reward_states after its own rows.)
  await seedListServers(prisma, { at: harness.clock.now(), rowsOf: [pendingRewardEntryOf, voterRewardStateOf], analyze: ["reward_queue_entries"] });
  t.context = { ...harness, serverId, answerable };
});

test.after.always(async (t) => {
  await t.context.close?.();
});

test.serial("a list of the whole queue of a server with 20,000 acknowledged entries reads about a page of entries", async (t) => {
  const { h, pool, serverId } = t.context;
  const { client, statements } = recordingClient(pool);
  const page = await listPendingRewardEntries(sqlOf(client), { serverId, limit: PAGE });
  t.is(page.length, PAGE);
  t.true(page.every((e) => e.onlineOnly && e.player.username.startsWith("offline")));
  t.is(statements().length, 1);
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.true((read.reward_queue_entries ?? 0) <= PAGE + FEW, `reward_queue_entries rows read: ${read.reward_queue_entries}`);
  const generic = await rowsReadByTableGeneric(h.db.prisma, statements()[0] as Prisma.Sql);
  t.true((generic.reward_queue_entries ?? 0) <= PAGE + FEW, `generic plan: reward_queue_entries rows read: ${generic.reward_queue_entries}`);
});

test.serial(
  "a list for the players online reads about the entries it answers, never the 20,000 online-only entries of offline players nor the 20,000 acknowledged",
  async (t) => {
    const { h, pool, serverId, answerable } = t.context;
    const { client, statements } = recordingClient(pool);
    const page = await listPendingRewardEntries(sqlOf(client), { serverId, limit: PAGE, online: ["alice", "nobody"] });
    t.deepEqual(page.map((e) => e.id).sort(), [...answerable].sort());
    t.is(statements().length, 1);
    const read = await rowsReadByStatements(h.db.prisma, statements());
    t.log("custom plan", read);
    t.true((read.reward_queue_entries ?? 0) <= 3 * answerable.length + FEW, `reward_queue_entries rows read: ${read.reward_queue_entries}`);
    const generic = await rowsReadByTableGeneric(h.db.prisma, statements()[0] as Prisma.Sql);
    t.log("generic plan", generic);
    t.true((generic.reward_queue_entries ?? 0) <= 3 * answerable.length + FEW, `generic plan: reward_queue_entries rows read: ${generic.reward_queue_entries}`);
  },
);

test.serial("a bulk re-queue page of a server with 20,000 acknowledged entries reads one page of them; a range without any reads a handful", async (t) => {
  const { h, pool, serverId, clock } = t.context;
  const { client, statements } = recordingClient(pool);
  const at = clock.now();
  const day = 86_400_000;
  const page = await requeueAckedRewardEntries(sqlOf(client), {
    serverId,
    from: new Date(at.getTime() - day),
    to: new Date(at.getTime() + day),
    after: null,
    limit: REQUEUE_PAGE_ENTRIES,
    at,
  });
  t.is(page.scanned, REQUEUE_PAGE_ENTRIES, "a full page of the 20,000");
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.log(read);
  // The page's index entries, then the same rows by primary key for their copies: 2 x the page.
  t.true((read.reward_queue_entries ?? 0) <= 2 * REQUEUE_PAGE_ENTRIES + FEW, `reward_queue_entries rows read: ${read.reward_queue_entries}`);
  for (const statement of statements()) {
    const generic = await rowsReadByTableGeneric(h.db.prisma, statement);
    t.true(
      (generic.reward_queue_entries ?? 0) <= 2 * REQUEUE_PAGE_ENTRIES + FEW,
      `generic plan: reward_queue_entries rows read: ${generic.reward_queue_entries}`,
    );
  }

  const empty = recordingClient(pool);
  const none = await requeueAckedRewardEntries(sqlOf(empty.client), {
    serverId,
    from: new Date(at.getTime() + day),
    to: new Date(at.getTime() + 2 * day),
    after: null,
    limit: REQUEUE_PAGE_ENTRIES,
    at,
  });
  t.is(none.scanned, 0);
  const readNone = await rowsReadByStatements(h.db.prisma, empty.statements());
  t.true((readNone.reward_queue_entries ?? 0) <= FEW, `reward_queue_entries rows read for an empty range: ${readNone.reward_queue_entries}`);
  for (const statement of empty.statements()) {
    const generic = await rowsReadByTableGeneric(h.db.prisma, statement);
    t.true((generic.reward_queue_entries ?? 0) <= FEW, `generic plan: reward_queue_entries rows read for an empty range: ${generic.reward_queue_entries}`);
  }
});

test.serial(
  "an acknowledgement of a few entries of a server with 20,000 pending online-only entries among 5,000 servers reads those entries, on its custom and on the generic plan",
  async (t) => {
    const { h, pool, serverId, clock } = t.context;
    const { prisma } = h.db;
    const ids = await runSqlTransaction(
      prisma,
      (q) => queueRewardEntries(q, { serverId, heartId: null, player: playerOf("acker"), rulesVersion: 1, entries: entries(5, false) }),
      { timeoutMs: 60_000 },
    );
    const { client, statements } = recordingClient(pool);
    const acked = await runSqlTransaction(
      client,
      async (q) => {
        const now = await ackRewardEntries(q, { serverId, ids, at: clock.now() });
        t.deepEqual([...(await findServerRewardEntries(q, { serverId, ids }))].sort(), [...ids].sort());
        return now;
      },
      { timeoutMs: 60_000 },
    );
    t.deepEqual([...acked].sort(), [...ids].sort());
    const recorded = statements().filter((x) => x.text.includes("reward_queue_entries"));
    t.is(recorded.length, 2);
    // Re-run on the entries pending again (the measure is rolled back, but the acknowledgement above was not).
    await executeSql(prisma, Prisma.sql`UPDATE reward_queue_entries SET acked_at = NULL WHERE id = ANY(${ids}::uuid[])`);
    const custom = await rowsReadByStatements(prisma, recorded);
    t.log("custom plan", custom);
    // Each entry by primary key: the acknowledgement's lookup and write, then the check of which are the server's.
    t.true((custom.reward_queue_entries ?? 0) <= 3 * ids.length + FEW, `custom plan: reward_queue_entries rows read: ${custom.reward_queue_entries}`);
    await eachReadsEntriesOnItsGenericPlan(t, prisma, recorded, 2 * ids.length + FEW);
    await executeSql(prisma, Prisma.sql`DELETE FROM reward_queue_entries WHERE id = ANY(${ids}::uuid[])`);
  },
);

test.serial(
  "a pay-once check and close of a few vote entries of a server with 20,000 pending online-only entries among 5,000 servers read those entries, on their custom and on the generic plan",
  async (t) => {
    const { h, pool, serverId, clock } = t.context;
    const { prisma } = h.db;
    const ids = await runSqlTransaction(
      prisma,
      (q) => queueRewardEntries(q, { serverId, heartId: randomUUID(), player: playerOf("payee"), rulesVersion: 1, entries: entries(5, false) }),
      { timeoutMs: 60_000 },
    );
    // A pay-once server (for this test only), so the check reads its entries rather than stopping at the server's row.
    await executeSql(prisma, Prisma.sql`UPDATE servers SET pay_once = true WHERE id = ${serverId}::uuid`);
    const { client, statements } = recordingClient(pool);
    await runSqlTransaction(
      client,
      async (q) => {
        await findVoteEntriesPaidElsewhere(q, { serverId, ids });
        await closeRewardEntriesPaidElsewhere(q, { serverId, ids, at: clock.now() });
      },
      { timeoutMs: 60_000 },
    );
    const recorded = statements().filter((x) => x.text.includes("reward_queue_entries"));
    t.is(recorded.length, 2);
    await executeSql(prisma, Prisma.sql`UPDATE reward_queue_entries SET acked_at = NULL WHERE id = ANY(${ids}::uuid[])`);
    const custom = await rowsReadByStatements(prisma, recorded);
    t.log("custom plan", custom);
    t.true((custom.reward_queue_entries ?? 0) <= 2 * (2 * ids.length) + FEW, `custom plan: reward_queue_entries rows read: ${custom.reward_queue_entries}`);
    await eachReadsEntriesOnItsGenericPlan(t, prisma, recorded, 2 * ids.length + FEW);
    await executeSql(prisma, Prisma.sql`UPDATE servers SET pay_once = false WHERE id = ${serverId}::uuid`);
    await executeSql(prisma, Prisma.sql`DELETE FROM reward_queue_entries WHERE id = ANY(${ids}::uuid[])`);
  },
);

test.serial(
  "a batch's reward counting reads a few rows per heart: 100 hearts, ten of them a veteran's with 20,000 entries and 200 weeks of tallies behind them, on a server with 20,000 acknowledged entries and 20,000 voters' reward states",
  async (t) => {
    const { h, pool, serverId, clock } = t.context;
    const { prisma } = h.db;
    const parsed = parseRewardRules(
      {
        perVote: [{ commands: ["give {player} diamond 1"] }],
        streak: { graceDays: 1, rewards: [{ day: 2, reward: { commands: ["give {player} emerald 1"] } }] },
        milestones: [{ scope: "all", every: 2, reward: { commands: ["crate give {player} vote"] } }],
      },
      REWARD_RULE_LIMITS,
    );
    if (!parsed.ok) throw new Error(parsed.errors.join("; "));
    t.is(await saveRewardRules(prisma, { serverId, rules: parsed.rules, baseVersion: 0, savedBy: "test", at: clock.now() }), 1);
    // The veteran's 200 weeks of counted votes (about 250 tally rows) and 20,000 entries (veteran0's acknowledged ones).
    const week = 7 * 86_400_000;
    await runSqlTransaction(
      prisma,
      (q) =>
        countPeriodVotes(
          q,
          Array.from({ length: 200 }, (_, i) => {
            const countedAt = new Date(clock.now().getTime() - (i + 1) * week);
            return { serverId, voterIdentity: "veteran0", countedAt, periods: rewardPeriodsOf(countedAt) };
          }),
        ),
      { timeoutMs: 60_000 },
    );
    // 20,000 other voters' reward states on the server.
    await executeSql(
      prisma,
      Prisma.sql`INSERT INTO voter_reward_states (server_id, voter_identity, last_counted_at, total, month, month_total, week, week_total, streak_last_day, streak_days)
        SELECT ${serverId}::uuid, 'regular' || g, now(), 5, '2026-05', 1, '2026-W19', 1, '2026-05-10', 1 FROM generate_series(1, ${HISTORY}::int) g`,
    );
    await executeSql(prisma, Prisma.sql`ANALYZE voter_period_tallies, voter_reward_states`);
    const at = clock.now().getTime();
    const hearts: CountedHeart[] = Array.from({ length: 100 }, (_, i) => ({
      heartId: randomUUID(),
      serverId,
      voterIdentity: i < 10 ? "veteran0" : `newcomer${i}`,
      countedAt: new Date(at - (100 - i) * 86_400_000),
      player: playerOf(i < 10 ? "veteran0" : `newcomer${i}`),
    }));
    const { client, statements } = recordingClient(pool);
    const done = await queueVoteRewards(client, hearts, h.deps.log, storeProgressionEvents);
    t.is(done.counted, 100);
    t.true(done.queued >= 100);
    const read = await rowsReadByStatements(prisma, statements());
    t.log(read, `${statements().length} statements`);
    // Per heart: its voter's state (lock and upsert), its entries (a few, each a unique-index probe), its week and
    // month tallies and periods, its events' server and endpoints: a few rows each, never the server's or the veteran's history.
    for (const table of ["reward_queue_entries", "voter_reward_states", "voter_period_tallies", "reward_periods", "deliveries"]) {
      t.true((read[table] ?? 0) <= 10 * hearts.length, `${table} rows read: ${read[table]}`);
    }
    const generic: Record<string, number> = {};
    for (const statement of statements().filter((x) => !x.text.includes("/* planner-fence */")))
      for (const [table, rows] of Object.entries(await rowsReadByTableGeneric(prisma, statement))) generic[table] = Math.max(generic[table] ?? 0, rows);
    t.log("generic plan, most of a statement", generic);
    for (const table of ["reward_queue_entries", "voter_reward_states", "voter_period_tallies", "reward_periods", "deliveries"]) {
      t.true((generic[table] ?? 0) <= 10 * hearts.length, `generic plan: ${table} rows read: ${generic[table]}`);
    }
  },
);
