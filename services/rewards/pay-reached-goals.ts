import type { PrismaClient } from "../shared/adapters/db.js";
import { runSqlTransaction } from "../shared/adapters/sql/executor.js";
import type { EnvReader } from "../shared/runtime/config.js";
import type { Logger } from "../shared/runtime/log.js";
import { createPassLoop, type PassLoop } from "../shared/runtime/pass-loop.js";
import { goalEntriesFor } from "./domain/network-goal.js";
import { claimUnpaidRound, markRoundPaid, readNetworkGoal, takeGoalVoters } from "./network-goal-store.js";
import { idsOf } from "./queue-vote-rewards.js";
import { queuePlayersRewardEntries } from "./reward-queue-store.js";

/** The goal payer's settings (REWARD_GOAL_PAY_*; README's settings table). */
export interface GoalPayerSettings {
  /** REWARD_GOAL_PAY_ENABLED (default true): false pays nothing (reached rounds wait). */
  enabled: boolean;
  /** REWARD_GOAL_PAY_INTERVAL_SECONDS (default 15): seconds between two passes. */
  intervalSeconds: number;
  /** REWARD_GOAL_PAY_PAGE (default 200): payees one transaction pays at most. */
  pagePayees: number;
  /** REWARD_GOAL_PAY_PASS_MAX (default 100): pages one pass pays at most; the rest wait for the next pass. */
  passMaxPages: number;
}

/** Reads the goal payer's settings (REWARD_GOAL_PAY_*), each bounded; problems are reported with the process's others. */
export function readGoalPayerSettings(r: EnvReader): GoalPayerSettings {
  return {
    enabled: r.bool("REWARD_GOAL_PAY_ENABLED", true),
    intervalSeconds: r.int("REWARD_GOAL_PAY_INTERVAL_SECONDS", 15, { min: 1, max: 3_600 }),
    pagePayees: r.int("REWARD_GOAL_PAY_PAGE", 200, { min: 1, max: 1_000 }),
    passMaxPages: r.int("REWARD_GOAL_PAY_PASS_MAX", 100, { min: 1, max: 10_000 }),
  };
}

/** What one pass did, in counts (logged; nothing of a voter). */
export interface PaidGoals {
  /** Rounds paid in full now. */
  rounds: number;
  /** Entries queued. */
  queued: number;
  /** Rewards not queued: the payee's name or ids cannot be put in the command. */
  skipped: number;
}

/** A page's transaction bounds: a page (pagePayees voters, a few statements) commits in well under a second. */
const PAY_TRANSACTION = { timeoutMs: 30_000, maxWaitMs: 10_000 };

/**
 * ONE pass of the goal payer at `now` (issue 31, network goals): the reached rounds not paid yet are paid, oldest
 * first, one page per transaction: the round is claimed (locked; another payer's is skipped); a `voters` goal takes
 * (reads and removes) up to `pagePayees` of the round's voters and queues their entries on the server of each one's
 * latest vote in the round, and the round is marked paid on the page that finds fewer than a page left; an `online`
 * goal queues one entry set per chosen server (once: their keys) and clears the round's voters in the same pages. Every statement is bounded by the page. A crash
 * rolls the page back whole (the voters are taken again); a second payer, a rerun or a clock that moved finds the
 * page's voters gone or the round paid, and the entries' keys (`<goal>:goal:<round>:<payee>:<reward>`) refuse a
 * second queueing anyway.
 */
export async function payReachedGoals(
  deps: { prisma: PrismaClient; log: Logger },
  settings: Pick<GoalPayerSettings, "pagePayees" | "passMaxPages">,
  now: Date,
): Promise<PaidGoals> {
  const done: PaidGoals = { rounds: 0, queued: 0, skipped: 0 };
  for (let pages = 0; pages < settings.passMaxPages; pages++) {
    const paidSome = await runSqlTransaction(
      deps.prisma,
      async (tx) => {
        const claimed = await claimUnpaidRound(tx);
        if (claimed === null) return false;
        const goal = await readNetworkGoal(tx, claimed.goalId);
        if (goal === null) {
          await markRoundPaid(tx, { ...claimed, at: now });
          return true;
        }
        if (goal.payees === "online") {
          const given = goalEntriesFor(goal, claimed.round, null);
          done.skipped += given.skipped.length * goal.serverIds.length;
          const online = { username: "", steamId: null, discordId: null, minecraftUuid: null, accountId: null };
          // Queued once (their keys), however many pages it takes to clear the round's voters: they are not paid by an
          // online goal, but their rows go with the round (a goal switched from paying voters kept them).
          done.queued += await queuePlayersRewardEntries(
            tx,
            goal.serverIds.map((serverId) => ({ serverId, player: online, entries: given.entries })),
          );
          const cleared = await takeGoalVoters(tx, { ...claimed, limit: settings.pagePayees });
          if (cleared.length < settings.pagePayees) {
            await markRoundPaid(tx, { ...claimed, at: now });
            done.rounds++;
          }
          return true;
        }
        const voters = await takeGoalVoters(tx, { ...claimed, limit: settings.pagePayees });
        const items = voters.map((v) => {
          const given = goalEntriesFor(goal, claimed.round, { identity: v.voterIdentity, ids: idsOf(v.player) });
          done.skipped += given.skipped.length;
          return { serverId: v.serverId, player: v.player, entries: given.entries };
        });
        done.queued += await queuePlayersRewardEntries(tx, items);
        if (voters.length < settings.pagePayees) {
          await markRoundPaid(tx, { ...claimed, at: now });
          done.rounds++;
        }
        return true;
      },
      PAY_TRANSACTION,
    );
    if (!paidSome) break;
  }
  // Counts only: a skip's why names the payee's name or ids as unsafe or missing, never their value.
  if (done.queued > 0 || done.skipped > 0) deps.log.info(done, "network goals paid");
  return done;
}

/**
 * The goal payer's loop: a pass every `settings.intervalSeconds` (createPassLoop), with the time from `now`. Started by
 * the referral service and the all-in-one start, beside the period closer. Several instances at once are safe: a round
 * is claimed by one (SKIP LOCKED) and its voters are taken once.
 */
export function createGoalPayerLoop(deps: { prisma: PrismaClient; settings: GoalPayerSettings; log: Logger; now: () => Date }): PassLoop {
  return createPassLoop({
    enabled: deps.settings.enabled,
    intervalSeconds: deps.settings.intervalSeconds,
    now: deps.now,
    pass: (now) => payReachedGoals(deps, deps.settings, now),
    log: deps.log,
    failureText: "goal pay pass failed; retried at the next interval",
  });
}
