import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError } from "../shared/rpc/errors.js";
import { requireServerId } from "../servers/server-exists.js";
import { decideReview, isCounted, type ReviewAction, type ReviewMode } from "./domain/abuse-signals.js";
import { getReviewedReferral, type ReviewedReferral } from "./list-referrals.js";

/** Reruns of a review whose conditional update lost to a concurrent one (each rerun reads afresh). */
const MAX_REVIEW_RETRIES = 3;

/** The error text of a review of a referral that carries no signal. */
export const NOT_FLAGGED_TEXT = "referral is not flagged for review";

/**
 * ReviewReferral: the owner approves or declines a flagged referral. Idempotent (`changed` false when
 * it is there already); the write is conditional on the review state read (`WHERE review = <read>`),
 * so two concurrent reviews end in one of the two decisions, never a mix. An unflagged referral is
 * failed_precondition `referral is not flagged for review`; an unknown one 404 `referral not found`.
 */
export async function reviewReferral(
  deps: CoreDeps,
  input: { referralId: string; action: ReviewAction },
): Promise<{ referral: ReviewedReferral; changed: boolean }> {
  for (let attempt = 0; ; attempt++) {
    const current = await getReviewedReferral(deps, input.referralId);
    const decision = decideReview(current.review, input.action);
    if (decision.kind === "not_flagged") throw new DomainError("failed_precondition", NOT_FLAGGED_TEXT);
    if (decision.kind === "unchanged") return { referral: current, changed: false };
    const reviewedAt = deps.now();
    const updated = await deps.prisma.referral.updateMany({
      where: { id: current.id, review: current.review },
      data: { review: decision.to, reviewedAt },
    });
    // The answer is what this write made (a later concurrent review may already have changed it again).
    if (updated.count === 1) {
      return { referral: { ...current, review: decision.to, reviewedAt, counted: current.liveCredit && isCounted(decision.to) }, changed: true };
    }
    // Failure policy: a concurrent review changed the state between the read and the write; decide again from a
    // fresh read, a bounded number of times (one of the racing reviews always wins).
    if (attempt >= MAX_REVIEW_RETRIES) throw new Error(`review of referral ${current.id} kept losing to concurrent reviews`);
  }
}

/** A server's anti-abuse mode. */
export async function getReviewMode(deps: CoreDeps, rawServerId: string): Promise<ReviewMode> {
  const serverId = await requireServerId(deps, rawServerId);
  const server = await deps.prisma.server.findUniqueOrThrow({ where: { id: serverId }, select: { referralReviewMode: true } });
  return server.referralReviewMode;
}

/**
 * Sets a server's anti-abuse mode. It applies to referrals minted or qualified from then on; review
 * states already recorded stay (turning review off does not release held referrals: the owner does).
 */
export async function setReviewMode(deps: CoreDeps, input: { serverId: string; mode: ReviewMode }): Promise<ReviewMode> {
  const serverId = await requireServerId(deps, input.serverId);
  const server = await deps.prisma.server.update({ where: { id: serverId }, data: { referralReviewMode: input.mode }, select: { referralReviewMode: true } });
  return server.referralReviewMode;
}
