import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { GoalReachedSchema } from "../../gen/proto/events/v1/events_pb.js";
import { HEARTS_TOPIC } from "../shared/adapters/bus.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { insertOutboxRows, toOutboxRow } from "../shared/adapters/outbox.js";
import { runSqlTransaction, sqlOf } from "../shared/adapters/sql/executor.js";
import type { Logger } from "../shared/runtime/log.js";
import { GOAL_REACHED_EVENT } from "../shared/values/event-types.js";
import { countGoalVotes } from "./domain/network-goal.js";
import {
  findGoalsOfServers,
  type GoalVoter,
  lockNetworkGoals,
  recordGoalHearts,
  recordGoalVoters,
  type StoredGoal,
  writeGoalCounters,
} from "./network-goal-store.js";
import type { CountedHeart } from "./counted-heart.js";

/** What counting a batch into the network goals did, in counts (nothing of a voter). */
export interface CountedGoalVotes {
  /** Heart-goal pairs counted now (a heart on two goals' servers counts in each). */
  counted: number;
  /** Rounds reached now (each with its goal.reached events). */
  reached: number;
}

/** The transaction's bounds: a batch (a few hundred hearts, a few statements) commits in well under a second. */
const COUNT_TRANSACTION = { timeoutMs: 30_000, maxWaitMs: 10_000 };

/** Batch order: by time, then heart id, so the round a heart counts in does not depend on how the batch came. */
function byCountedAt(a: CountedHeart, b: CountedHeart): number {
  return a.countedAt.getTime() - b.countedAt.getTime() || (a.heartId < b.heartId ? -1 : a.heartId > b.heartId ? 1 : 0);
}

/**
 * Counts a batch of counted hearts into the network goals of their servers (issue 31, vote party), each heart once
 * per goal. One probe statement for the batch finds the goals of its servers (a batch of servers without a goal costs
 * that and nothing else). Otherwise ONE transaction of at most five statements, whatever the batch's size: the goals
 * are locked (what orders two consumers during a rebalance); the (goal, heart) pairs are recorded, and only those new
 * now count (a redelivered heart, a consumer restart or a second consumer finds its pair recorded: it counts nothing);
 * the new hearts fill the rounds in time order (countGoalVotes: votes past the target count toward the next round);
 * the rounds' voters, the counters with the rounds reached, and one `goal.reached` per reached round and chosen server
 * are written. The reached rounds are paid later, in pages, by the goal payer (pay-reached-goals.ts). Throws on a
 * database error, nothing committed: the caller must not acknowledge the batch.
 */
export async function countGoalVotesOf(prisma: PrismaClient, hearts: readonly CountedHeart[], log: Logger): Promise<CountedGoalVotes> {
  const done: CountedGoalVotes = { counted: 0, reached: 0 };
  if (hearts.length === 0) return done;
  const serverIds = [...new Set(hearts.map((h) => h.serverId.toLowerCase()))];
  const links = await findGoalsOfServers(sqlOf(prisma), serverIds);
  if (links.length === 0) return done;

  const goalsOfServer = new Map<string, string[]>();
  for (const l of links) goalsOfServer.set(l.serverId, [...(goalsOfServer.get(l.serverId) ?? []), l.goalId]);
  const sorted = [...hearts].sort(byCountedAt);
  await runSqlTransaction(
    prisma,
    async (tx) => {
      const goals = new Map((await lockNetworkGoals(tx, [...new Set(links.map((l) => l.goalId))])).map((g) => [g.id, g]));
      // A goal counts the hearts counted from its creation on; one named twice in a batch (a redelivery inside it) once.
      const pairs = new Map<string, { goal: StoredGoal; heart: CountedHeart }>();
      for (const heart of sorted) {
        for (const goalId of goalsOfServer.get(heart.serverId.toLowerCase()) ?? []) {
          const goal = goals.get(goalId);
          if (goal !== undefined && heart.countedAt >= goal.countsFrom) pairs.set(`${goalId}:${heart.heartId}`, { goal, heart });
        }
      }
      const recorded = await recordGoalHearts(
        tx,
        [...pairs.values()].map((p) => ({ goalId: p.goal.id, heartId: p.heart.heartId, countedAt: p.heart.countedAt })),
      );
      const fresh = new Set(recorded.map((r) => `${r.goalId}:${r.heartId}`));
      const counters: Array<{ goalId: string; round: number; progress: number }> = [];
      const reached: Array<{ goal: StoredGoal; round: number; at: Date }> = [];
      const voters = new Map<string, GoalVoter>();
      for (const goal of goals.values()) {
        const mine = [...pairs.entries()].filter(([key, p]) => p.goal.id === goal.id && fresh.has(key)).map(([, p]) => p.heart);
        if (mine.length === 0) continue;
        const counted = countGoalVotes(goal, goal.target, mine.length);
        mine.forEach((heart, i) => {
          const round = counted.roundOf[i] as number;
          // Sorted by time: a voter's later vote in the round replaces their earlier one (the player and server paid).
          voters.set(`${goal.id}:${round}:${heart.voterIdentity}`, {
            goalId: goal.id,
            round,
            voterIdentity: heart.voterIdentity,
            serverId: heart.serverId.toLowerCase(),
            player: heart.player,
            lastCountedAt: heart.countedAt,
          });
        });
        counters.push({ goalId: goal.id, ...counted.after });
        // A round is reached when the vote that reached it counted (the hearts' own time: a replay or a clock makes no other).
        for (const [i, round] of counted.reached.entries()) reached.push({ goal, round, at: (mine[counted.reachedBy[i] as number] as CountedHeart).countedAt });
        done.counted += mine.length;
      }
      await recordGoalVoters(tx, [...voters.values()]);
      await writeGoalCounters(tx, { counters, reached: reached.map((r) => ({ goalId: r.goal.id, round: r.round, at: r.at })) });
      // One statement: a row per reached round and chosen server (at most MAX_GOAL_SERVERS each).
      const events = reached.flatMap((r) => r.goal.serverIds.map((serverId) => goalReachedEvent(r.goal, r.round, serverId, r.at)));
      if (events.length > 0) await tx.execute(insertOutboxRows(events.map((e, idx) => ({ idx, row: toOutboxRow(e) }))));
      done.reached = reached.length;
    },
    COUNT_TRANSACTION,
  );
  if (done.reached > 0) log.info(done, "network goals reached");
  return done;
}

/** The `goal.reached` event of a goal's round, for one of its servers. */
function goalReachedEvent(goal: StoredGoal, round: number, serverId: string, at: Date) {
  return {
    topic: HEARTS_TOPIC,
    type: GOAL_REACHED_EVENT,
    serverId,
    occurredAt: at,
    payload: {
      case: "goalReached" as const,
      value: create(GoalReachedSchema, {
        goalId: goal.id,
        serverId,
        name: goal.name,
        round,
        target: goal.target,
        payees: goal.payees,
        serverIds: goal.serverIds,
        reachedAt: timestampFromDate(at),
      }),
    },
  };
}
