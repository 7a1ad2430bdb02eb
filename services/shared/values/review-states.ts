/**
 * A referral's anti-abuse review states and which of them count (its credit on the leaderboard, its referral
 * rewards). Here, beside the other shared values, because two service folders apply the rule: the referral service's
 * review (services/referral/domain/abuse-signals.ts re-exports these) and the reward queue's referral rewards
 * (services/rewards/queue-referral-rewards.ts), which must not import the referral folder (it imports the rewards).
 */

/** A referral's review state: none = not flagged; held, approved, declined = flagged. */
export type ReviewState = "none" | "held" | "approved" | "declined";
/** Every review state, as stored and filtered on. */
export const REVIEW_STATES: readonly ReviewState[] = ["none", "held", "approved", "declined"];

/** The review states whose credit counts on the leaderboard (and whose referral rewards are paid): unflagged and approved. */
export const COUNTED_REVIEWS: readonly ReviewState[] = ["none", "approved"];

/** Whether a referral's credit counts on the leaderboard (and its referral rewards are paid). */
export function isCounted(review: ReviewState): boolean {
  return COUNTED_REVIEWS.includes(review);
}
