import { Prisma } from "../../gen/prisma/client.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { runSqlTransaction } from "../shared/adapters/sql/executor.js";
import { queueApprovedReferral } from "../rewards/queue-referral-rewards.js";
import { readCurrentRewardRules } from "../rewards/reward-rules-store.js";
import { DomainError } from "../shared/rpc/errors.js";
import { requireServerId } from "../servers/server-exists.js";
import { decideReview, isCounted, type ReviewAction, type ReviewMode } from "./domain/abuse-signals.js";
import { getReviewedReferral, type ReviewedReferral } from "./list-referrals.js";

/** Reruns of a review whose conditional update lost to a concurrent one (each rerun reads afresh). */
const MAX_REVIEW_RETRIES = 3;

/** How long a review's transaction may stay open: its conditional update and, on an approval, the referral's few queue entries. */
const REVIEW_TRANSACTION_TIMEOUT_MS = 10_000;

/** The error text of a review of a referral that carries no signal. */
export const NOT_FLAGGED_TEXT = "referral is not flagged for review";

/**
 * ReviewReferral: the owner approves or declines a flagged referral. Idempotent (`changed` false when
 * it is there already); the write is conditional on the review state read (`WHERE review = <read>`), so two
 * concurrent reviews end in one of the two decisions, never a mix. An approval of a referral that is qualified at the
 * write queues its referral rewards in the same transaction (services/rewards/queue-referral-rewards.ts; idempotent
 * keys, so approving again, or the referral's `referral.qualified` handled later, queues nothing twice). An unflagged referral is
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
    // An approval may queue the referral's rewards (issue 31): the server's rules are read before the transaction.
    const rules =
      decision.to === "approved" ? (await readCurrentRewardRules(deps.prisma, [current.serverId], deps.log)).get(current.serverId.toLowerCase()) : undefined;
    const updated = await runSqlTransaction(
      deps.prisma,
      async (tx) => {
        // Bounded: one row by primary key; conditional on the review read.
        const [row] = await tx.query<{ state: string; clawed_back: boolean; referrer_identity: string; referee_identity: string }>(Prisma.sql`
          UPDATE referrals SET review = ${decision.to}::"ReferralReview", reviewed_at = ${reviewedAt}::timestamptz
          WHERE id = ${current.id}::uuid AND review = ${current.review}::"ReferralReview"
          RETURNING state::text AS state, clawback_at IS NOT NULL AS clawed_back, referrer_identity, referee_identity`);
        if (row === undefined) return false;
        // With the review, in its transaction: an approved qualified referral's rewards are queued (no event follows an approval).
        if (decision.to === "approved") {
          await queueApprovedReferral(tx, rules, {
            id: current.id,
            serverId: current.serverId,
            state: row.state,
            clawedBack: row.clawed_back,
            review: decision.to,
            referrerIdentity: row.referrer_identity,
            refereeIdentity: row.referee_identity,
          });
        }
        return true;
      },
      { timeoutMs: REVIEW_TRANSACTION_TIMEOUT_MS },
    );
    // The answer is what this write made (a later concurrent review may already have changed it again).
    if (updated) {
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
