/**
 * When a game plugin should list its reward queue again (docs/reward-queue.md, "next_check"): soon while there is
 * something to run or a vote arrived recently, backing off while the server stays quiet. Pure: the clock is passed in.
 */

/** Seconds to the next list while entries are pending, or a vote arrived within RECENT_VOTE_SECONDS. */
export const BUSY_CHECK_SECONDS = 10;
/** A vote this recent keeps the plugin polling at BUSY_CHECK_SECONDS (its rewards may be queued any moment). */
export const RECENT_VOTE_SECONDS = 5 * 60;
/** Seconds to the next list when the last vote is older than RECENT_VOTE_SECONDS but within QUIET_VOTE_SECONDS. */
export const QUIET_CHECK_SECONDS = 60;
/** Past this since the last vote (or with none), the plugin polls every idle interval. */
export const QUIET_VOTE_SECONDS = 60 * 60;
/** REWARD_QUEUE_IDLE_CHECK_SECONDS' default: the interval of a server with nothing pending and no vote within the hour. */
export const DEFAULT_IDLE_CHECK_SECONDS = 120;

/**
 * The seconds the plugin waits before its next list: BUSY_CHECK_SECONDS when the page it got holds entries or the
 * server's last vote is at most RECENT_VOTE_SECONDS old; the smaller of QUIET_CHECK_SECONDS and `idleSeconds` when
 * it is at most QUIET_VOTE_SECONDS old; else `idleSeconds`.
 */
export function nextCheckSeconds(q: { pending: boolean; lastVoteAt: Date | null; now: Date; idleSeconds: number }): number {
  if (q.pending) return BUSY_CHECK_SECONDS;
  const sinceVote = q.lastVoteAt === null ? Number.POSITIVE_INFINITY : (q.now.getTime() - q.lastVoteAt.getTime()) / 1000;
  if (sinceVote <= RECENT_VOTE_SECONDS) return BUSY_CHECK_SECONDS;
  if (sinceVote <= QUIET_VOTE_SECONDS) return Math.min(QUIET_CHECK_SECONDS, q.idleSeconds);
  return q.idleSeconds;
}
