/** The per-identity cooldown: a heart counts when the identity has no counted heart in this window. */
export const HEART_COOLDOWN_MS = 24 * 60 * 60 * 1000;

const DAY_MS = 24 * 60 * 60 * 1000;

/** The UTC calendar day of an instant, as midnight UTC. */
export function utcDay(at: Date): Date {
  return new Date(Math.floor(at.getTime() / DAY_MS) * DAY_MS);
}

/** Whole UTC days from `from`'s day to `to`'s day (0 = same day, 1 = `from` is the day before). */
export function daysBetween(from: Date, to: Date): number {
  return Math.round((utcDay(to).getTime() - utcDay(from).getTime()) / DAY_MS);
}

/** What voter_states keeps per (server, voter identity) for the streak. */
export interface StreakState {
  /** The UTC day of the last counted heart. */
  lastDay: Date;
  /** Consecutive UTC days, ending at `lastDay`, with a counted heart. */
  streakDays: number;
}

/**
 * The streak after a heart counts at `now`: consecutive UTC days, ending today,
 * with a counted heart. Yesterday extends it, today keeps it, a gap restarts it at 1.
 * The store's conditional upsert computes the same CASE in SQL so concurrent casts
 * read the locked row; this function is the documented, tested definition.
 */
export function nextStreak(previous: StreakState | null, now: Date): number {
  if (previous === null) return 1;
  const gap = daysBetween(previous.lastDay, now);
  if (gap === 0) return previous.streakDays;
  if (gap === 1) return previous.streakDays + 1;
  return 1;
}

/**
 * The streak as seen at delivery time `at`: still alive when the last counted
 * heart was today or yesterday (UTC, relative to `at`), otherwise broken (0).
 * No state means no streak info: undefined, and the callback omits `streak_day`.
 */
export function streakAtDelivery(state: StreakState | null, at: Date): number | undefined {
  if (state === null) return undefined;
  // A last day after `at` (clock skew between processes) still counts as alive.
  return daysBetween(state.lastDay, at) <= 1 ? state.streakDays : 0;
}
