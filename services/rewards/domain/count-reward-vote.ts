import { isoWeekOf, periodOf } from "../../shared/values/period.js";
import type { VoterRewardState } from "../reward-queue-store.js";
import { type GraceStreakStep, nextGraceStreak } from "./grace-streak.js";

/** What a counted heart does to the voter's reward state: nothing (a replay), or the new state and what the rules see. */
export type CountedRewardVote =
  | { kind: "replay" }
  | { kind: "counted"; state: VoterRewardState; totals: { all: number; month: number; week: number }; streak: GraceStreakStep };

/**
 * Counts a heart counted at `countedAt` into the voter's reward state (issue 31). A heart counted at or before the
 * state's `lastCountedAt` was applied already (a redelivered event): a replay changes nothing. Otherwise the all-time
 * total grows by one; the month total too, or starts at 1 when the UTC month ("YYYY-MM") of `countedAt` is not the
 * state's; the same for the ISO week ("YYYY-Www"); and the reward streak steps with `graceDays` (nextGraceStreak).
 * Pure: the clock is the heart's own time.
 */
export function countRewardVote(previous: VoterRewardState | null, countedAt: Date, graceDays: number): CountedRewardVote {
  if (previous !== null && countedAt.getTime() <= previous.lastCountedAt.getTime()) return { kind: "replay" };
  const month = periodOf(countedAt);
  const week = isoWeekOf(countedAt);
  const total = (previous?.total ?? 0) + 1;
  const monthTotal = previous !== null && previous.month === month ? previous.monthTotal + 1 : 1;
  const weekTotal = previous !== null && previous.week === week ? previous.weekTotal + 1 : 1;
  const streak = nextGraceStreak(previous?.streak ?? null, countedAt, graceDays);
  return {
    kind: "counted",
    state: { lastCountedAt: countedAt, total, month, monthTotal, week, weekTotal, streak: streak.streak },
    totals: { all: total, month: monthTotal, week: weekTotal },
    streak,
  };
}
