import type { PrismaClient } from "../shared/adapters/db.js";
import { runSqlTransaction, type SqlTx } from "../shared/adapters/sql/executor.js";
import type { Logger } from "../shared/runtime/log.js";
import { countGoalVotesOf } from "./count-goal-votes.js";
import type { CountedHeart } from "./counted-heart.js";
import { countRewardVote } from "./domain/count-reward-vote.js";
import { rewardPeriodsOf } from "./domain/period-awards.js";
import { type ProgressionPayload, progressionEventsOf } from "./domain/progression-events.js";
import { rewardsForVote, weightOf } from "./domain/rewards-for-vote.js";
import {
  lockVoterRewardStates,
  type QueuedRewards,
  queueRewardEntriesOf,
  type RewardPlayer,
  voterKeyOf,
  type VoterRewardStateWrite,
  writeVoterRewardStates,
} from "./reward-queue-store.js";
import { readCurrentRewardRules } from "./reward-rules-store.js";
import { countPeriodVotes, type PeriodVote } from "./period-store.js";

export type { CountedHeart };

/** What queueing a batch's rewards did, in counts (logged; nothing of a voter). */
export interface QueuedVoteRewards {
  /** Hearts counted into their voter's reward state now. */
  counted: number;
  /** Hearts applied before (a redelivered event): nothing changed. */
  replays: number;
  /** Queue entries added. */
  queued: number;
  /** Progression events made (handed to `storeEvents`). */
  events: number;
  /**
   * What the rules counted for each heart of a server with saved rules, by heart id (payload version 3): the heart's
   * weight, the voter's totals with it and the reward streak. A replay has its counts only when it is the voter's
   * newest counted heart (the state still holds them); otherwise it is absent, as for a server without rules.
   */
  counts: Map<string, HeartRewardCounts>;
}

/** What the reward rules counted for one heart (payload version 3's `weight`, `month_total`, `total`, `reward_streak`). */
export interface HeartRewardCounts {
  weight: number;
  monthTotal: number;
  total: number;
  rewardStreak: number;
}

/** A progression event of a counted heart, for the caller to store with the counts (its deliveries). */
export interface ProgressionEvent {
  heart: CountedHeart;
  payload: ProgressionPayload;
}

/** Stores a batch's progression events inside the reward transaction `tx` (the delivery service's deliveries of them). */
export type StoreProgressionEvents = (tx: SqlTx, events: readonly ProgressionEvent[]) => Promise<void>;

/**
 * The reward transaction's bounds: a batch of the consumer (a few hundred hearts at most, five statements for the
 * batch, each a primary-key or unique-index probe per heart) commits in well under a second; past this it is rolled back and the batch comes again.
 */
const QUEUE_TRANSACTION = { timeoutMs: 30_000, maxWaitMs: 10_000 };

/** The voter's ids a command may name, without the ones the vote did not carry. */
export function idsOf(player: RewardPlayer): Record<string, string> {
  const ids: Record<string, string | null> = {
    player: player.username,
    steam_id: player.steamId,
    discord_id: player.discordId,
    minecraft_uuid: player.minecraftUuid,
    account_id: player.accountId,
  };
  return Object.fromEntries(Object.entries(ids).filter((e): e is [string, string] => e[1] !== null && e[1] !== ""));
}

/** Lock order of a batch: by server, voter and time, so two consumers (during a rebalance) lock in the same order. */
function compareHearts(a: CountedHeart, b: CountedHeart): number {
  const keys: Array<[string | number, string | number]> = [
    [a.serverId, b.serverId],
    [a.voterIdentity, b.voterIdentity],
    [a.countedAt.getTime(), b.countedAt.getTime()],
    [a.heartId, b.heartId],
  ];
  for (const [x, y] of keys) if (x !== y) return x < y ? -1 : 1;
  return 0;
}

/**
 * Queues the rewards of a batch of counted hearts (issue 31), exactly once per heart. The batch's servers' rules are
 * read with one statement (one primary-key entry per server: a server without saved rules costs that probe and
 * nothing else: no state written, nothing queued). The hearts of servers with rules are then counted in ONE
 * transaction, in (server, voter, time) order: the batch's voters' reward states are locked with one statement; per
 * heart, on the state the voter's previous heart of the batch left, a heart counted at or before the state's last one
 * is a replay and changes nothing; otherwise the new totals, week and streak
 * (countRewardVote) decide the entries (rewardsForVote), which are queued (idempotent by key, so a replay after a
 * lost state queues nothing twice either) with the new state: the batch's entries, states and period tallies are each
 * written with one statement. The vote's progression events (progressionEventsOf)
 * are handed to `storeEvents` in the same transaction, one call for the batch: a replay makes none (and a replay the
 * state missed makes the same event ids again, which the store keeps once). Throws on a database error, nothing
 * committed: the caller must not acknowledge the batch, and its redelivery queues what was missed.
 */
export async function queueVoteRewards(
  prisma: PrismaClient,
  hearts: readonly CountedHeart[],
  log: Logger,
  storeEvents?: StoreProgressionEvents,
): Promise<QueuedVoteRewards> {
  const done: QueuedVoteRewards = { counted: 0, replays: 0, queued: 0, events: 0, counts: new Map() };
  if (hearts.length === 0) return done;
  const serverIds = [...new Set(hearts.map((h) => h.serverId.toLowerCase()))];
  // Network goals count their servers' hearts, rules or not (count-goal-votes.ts): their probe and the rules' read go
  // out together, one round trip's wait for the batch instead of two (they share nothing).
  const [, rulesOf] = await Promise.all([countGoalVotesOf(prisma, hearts, log), readCurrentRewardRules(prisma, serverIds, log)]);
  const due = hearts.filter((h) => rulesOf.has(h.serverId.toLowerCase())).sort(compareHearts);
  if (due.length === 0) return done;

  const skippedLogs: Array<{ serverId: string; heartId: string; skipped: Record<string, number> }> = [];
  const events: ProgressionEvent[] = [];
  await runSqlTransaction(
    prisma,
    async (tx) => {
      // Every voter of the batch locked at once, in (server, voter) order; the votes are then counted in memory, in the
      // batch's order, each on the state the one before left, and written with one statement per table (bounded: the
      // batch's hearts, voters and entries; no statement per heart).
      const states = await lockVoterRewardStates(tx, due);
      const written = new Map<string, VoterRewardStateWrite>();
      const queue: QueuedRewards[] = [];
      const periodVotes: PeriodVote[] = [];
      for (const heart of due) {
        const serverId = heart.serverId.toLowerCase();
        const { rules, version, drawSeed } = rulesOf.get(serverId)!;
        const key = voterKeyOf(heart);
        const previous = states.get(key) ?? null;
        const counted = countRewardVote(previous, heart.countedAt, rules.streak.graceDays);
        if (counted.kind === "replay") {
          done.replays++;
          // The voter's newest heart again (its deliveries were not stored when it was counted): the state holds its counts.
          if (previous !== null && previous.lastCountedAt.getTime() === heart.countedAt.getTime()) {
            done.counts.set(heart.heartId, {
              weight: weightOf(rules, heart.countedAt),
              monthTotal: previous.monthTotal,
              total: previous.total,
              rewardStreak: previous.streak.days,
            });
          }
          continue;
        }
        const vote = { heartId: heart.heartId, countedAt: heart.countedAt, ids: idsOf(heart.player), totals: counted.totals, streak: counted.streak };
        const given = rewardsForVote(rules, vote, drawSeed);
        queue.push({ serverId, heartId: heart.heartId, player: heart.player, rulesVersion: version, entries: given.entries });
        states.set(key, counted.state);
        written.set(key, { serverId, voterIdentity: heart.voterIdentity, state: counted.state });
        // The week's and month's standings count the vote here, once, as the totals do (period awards: close-periods.ts).
        periodVotes.push({ serverId, voterIdentity: heart.voterIdentity, countedAt: heart.countedAt, periods: rewardPeriodsOf(heart.countedAt) });
        if (storeEvents !== undefined) {
          for (const payload of progressionEventsOf(rules, serverId, heart.player.username, vote)) events.push({ heart, payload });
        }
        done.counts.set(heart.heartId, {
          weight: given.weight,
          monthTotal: counted.totals.month,
          total: counted.totals.all,
          rewardStreak: counted.streak.streak.days,
        });
        done.counted++;
        if (given.skipped.length > 0) {
          const skipped: Record<string, number> = {};
          for (const s of given.skipped) skipped[s.reason] = (skipped[s.reason] ?? 0) + 1;
          skippedLogs.push({ serverId, heartId: heart.heartId, skipped });
        }
      }
      done.queued = (await queueRewardEntriesOf(tx, queue)).length;
      await writeVoterRewardStates(tx, [...written.values()]);
      await countPeriodVotes(tx, periodVotes);
      // One statement for the batch's events, in the transaction of the counts that made them: both commit, or neither.
      if (events.length > 0) await storeEvents?.(tx, events);
      done.events = events.length;
    },
    QUEUE_TRANSACTION,
  );
  // Counts per reason only: the why of a skip names the player's name or id as unsafe or missing, never their value, and neither is logged.
  for (const s of skippedLogs) log.warn(s, "rewards skipped: the vote's name or ids cannot be put in their commands");
  return done;
}
