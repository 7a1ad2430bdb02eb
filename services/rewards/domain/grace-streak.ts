import { daysBetween, utcDay } from "../../hearts/domain/streak.js";

/**
 * The reward streak (issue 31): consecutive UTC days with a counted vote, where up to `graceDays` missed days in a
 * row do not break it. It is the rewards' own count, beside the callback's `streak_day` (the contract's streak has no
 * grace and is unchanged): a missed day inside the grace neither breaks nor extends the streak; the next vote day
 * extends it by one.
 */
export interface GraceStreak {
  /** The UTC day of the last counted vote. */
  lastDay: Date;
  /** Vote days in the streak, ending at `lastDay`. */
  days: number;
}

/** What a counted vote does to the reward streak. */
export interface GraceStreakStep {
  streak: GraceStreak;
  /** The vote made the streak one day longer (a first vote too): streak rewards are judged on this vote. */
  extended: boolean;
  /** The vote came after the grace ran out: the length of the streak that was lost (0 when none was). */
  lostDays: number;
}

/** The reward streak after a vote counted at `now`. */
export function nextGraceStreak(previous: GraceStreak | null, now: Date, graceDays: number): GraceStreakStep {
  const today = utcDay(now);
  if (previous === null) return { streak: { lastDay: today, days: 1 }, extended: true, lostDays: 0 };
  const gap = daysBetween(previous.lastDay, now);
  // A vote dated before the last vote day (clocks of two processes): the streak stands as it is.
  if (gap <= 0) return { streak: previous, extended: false, lostDays: 0 };
  if (gap <= graceDays + 1) return { streak: { lastDay: today, days: previous.days + 1 }, extended: true, lostDays: 0 };
  return { streak: { lastDay: today, days: 1 }, extended: true, lostDays: previous.days };
}

/** The streak as it stands at `at` without a new vote: its days while the grace lasts, else 0 (lost). */
export function graceStreakAt(state: GraceStreak | null, at: Date, graceDays: number): number {
  if (state === null) return 0;
  return daysBetween(state.lastDay, at) <= graceDays + 1 ? state.days : 0;
}
