import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { runSqlTransaction, type SqlTx } from "../shared/adapters/sql/executor.js";
import type { Logger } from "../shared/runtime/log.js";
import { isCounted, type ReviewState } from "../shared/values/review-states.js";
import { MAX_ENTRIES } from "./domain/reward-rules.js";
import { allReferralEntryKeys, rewardsForReferral, type ReferralRewardReason } from "./domain/rewards-for-referral.js";
import { findRewardEntryKeys, queueRewardEntries } from "./reward-queue-store.js";
import { type CurrentRewardRules, readCurrentRewardRules } from "./reward-rules-store.js";

/**
 * Referral rewards in the reward queue (issue 31, docs/reward-rules.md "Referral rewards"). Where: the delivery consumer
 * queues them from the `referral.qualified` and `referral.reversed` events it already stores deliveries for, before it
 * commits their offsets, exactly as it queues a counted vote's (queue-vote-rewards.ts). Not in ApplyEvent's transaction:
 * that is the referral ingest's hot path (one write statement per round of many events), and a server's reward rules,
 * their parsing and rendering would be paid by every qualification of every server; the outcome events carry
 * everything needed, and the queue's entry keys make a redelivery harmless. The one exception is an owner's approval
 * of a held referral: it queues the referral's rewards in the review's own transaction (reviewReferral), since no
 * event follows an approval.
 */

/** A referral outcome that may give rewards, as the delivery consumer decoded it. */
export interface ReferralOutcome {
  referralId: string;
  serverId: string;
  /** `qualified`: the referral qualified. `clawback`: a qualified referral reversed after its server's lock period. */
  kind: "qualified" | "clawback";
}

/** What queueing a batch's referral rewards did, in counts (logged; nothing of a player). */
export interface QueuedReferralRewards {
  /** Queue entries added. */
  queued: number;
  /** Qualified referrals held or declined by review: nothing queued (an approval queues them). */
  held: number;
  /** Clawbacks of referrals that had queued nothing: no reversal queued. */
  unpaid: number;
  /** Qualified referrals reversed inside their lock before their event was handled (credit removed): nothing queued. */
  reversed: number;
}

/** The referral as the queue reads it (by primary key). */
export interface ReferralForRewards {
  id: string;
  serverId: string;
  state: string;
  /** Reversed after its lock (clawback_at set): it was qualified for good, and its credit stays. */
  clawedBack: boolean;
  review: ReviewState;
  referrerIdentity: string;
  refereeIdentity: string;
}

/** A batch's transaction bound: a few hundred referrals at most, a few primary-key or unique-index statements each. */
const QUEUE_TRANSACTION = { timeoutMs: 30_000, maxWaitMs: 10_000 };

/** Whether rules give anything for `reason` (no statement is run for a server whose rules give nothing). */
function givesAny(rules: CurrentRewardRules, reason: ReferralRewardReason): boolean {
  const lists = reason === "referral" ? rules.rules.referral : rules.rules.referral.reversal;
  return lists.referrer.length + lists.referee.length > 0;
}

/** The referrals `ids`, by primary key. */
async function readReferrals(tx: SqlTx, ids: readonly string[]): Promise<Map<string, ReferralForRewards>> {
  // Bounded: at most ids.length rows, by primary key.
  const rows = await tx.query<{
    id: string;
    server_id: string;
    state: string;
    clawed_back: boolean;
    review: string;
    referrer_identity: string;
    referee_identity: string;
  }>(
    Prisma.sql`SELECT id, server_id, state::text AS state, clawback_at IS NOT NULL AS clawed_back, review::text AS review, referrer_identity, referee_identity
               FROM referrals WHERE id = ANY(${[...ids]}::uuid[])`,
  );
  return new Map(
    rows.map((r) => [
      r.id,
      {
        id: r.id,
        serverId: r.server_id,
        state: r.state,
        clawedBack: r.clawed_back,
        review: r.review as ReviewState,
        referrerIdentity: r.referrer_identity,
        refereeIdentity: r.referee_identity,
      },
    ]),
  );
}

/**
 * Queues a referral's entries for `reason` under `rules`: the referrer's entries for the referrer, the referee's for
 * the referee, each `{player}` the side's identity (idempotent by key: `<referral id>:<reason>:<side>:<rule index>`).
 * Returns how many were queued now and how many rewards were skipped (an identity a command cannot carry safely).
 */
export async function queueReferralEntries(
  tx: SqlTx,
  rules: CurrentRewardRules,
  referral: ReferralForRewards,
  reason: ReferralRewardReason,
): Promise<{ queued: number; skipped: number }> {
  const sides = rewardsForReferral(rules.rules, { referralId: referral.id, referrer: referral.referrerIdentity, referee: referral.refereeIdentity }, reason);
  let queued = 0;
  for (const side of sides) {
    const player = { username: side.player, steamId: null, discordId: null, minecraftUuid: null, accountId: null };
    queued += (await queueRewardEntries(tx, { serverId: referral.serverId, heartId: null, player, rulesVersion: rules.version, entries: side.entries })).length;
  }
  return { queued, skipped: sides.reduce((n, s) => n + s.skipped.length, 0) };
}

/**
 * Queues what a batch's referral outcomes give (one transaction; none when no outcome's server has rules that give
 * anything for it):
 * - `qualified`: the referrer's and the referee's rewards, unless the referral is held or declined by review now (an
 *   owner's approval queues them then: queueApprovedReferral), or was reversed inside its lock before the event was
 *   handled (its credit was removed: there is nothing to reward);
 * - `clawback`: the reversal commands, only when the referral's rewards were queued (a referral that paid nothing, held
 *   and never approved, has nothing to take back).
 * Throws on a database error, nothing committed: the caller must not acknowledge the batch.
 */
export async function queueReferralRewards(prisma: PrismaClient, outcomes: readonly ReferralOutcome[], log: Logger): Promise<QueuedReferralRewards> {
  const done: QueuedReferralRewards = { queued: 0, held: 0, unpaid: 0, reversed: 0 };
  if (outcomes.length === 0) return done;
  const rulesOf = await readCurrentRewardRules(prisma, [...new Set(outcomes.map((o) => o.serverId.toLowerCase()))], log);
  const due = outcomes.filter((o) => {
    const rules = rulesOf.get(o.serverId.toLowerCase());
    return rules !== undefined && givesAny(rules, o.kind === "qualified" ? "referral" : "reversal");
  });
  if (due.length === 0) return done;
  let skipped = 0;
  await runSqlTransaction(
    prisma,
    async (tx) => {
      const referrals = await readReferrals(tx, [...new Set(due.map((o) => o.referralId.toLowerCase()))]);
      for (const outcome of due) {
        const referral = referrals.get(outcome.referralId.toLowerCase());
        // Failure policy: skip - a referral removed since its event (retention, its server deleted) has no one left to pay.
        if (referral === undefined) continue;
        const rules = rulesOf.get(outcome.serverId.toLowerCase())!;
        if (outcome.kind === "qualified") {
          if (!isCounted(referral.review)) {
            done.held++;
            continue;
          }
          if (referral.state === "reversed" && !referral.clawedBack) {
            done.reversed++;
            continue;
          }
          const r = await queueReferralEntries(tx, rules, referral, "referral");
          done.queued += r.queued;
          skipped += r.skipped;
          continue;
        }
        // Bounded: 2 x MAX_ENTRIES unique-index probes (every key the referral's rewards can have, whatever its rules were).
        const paid = await findRewardEntryKeys(tx, { serverId: referral.serverId, keys: allReferralEntryKeys(referral.id, MAX_ENTRIES) });
        if (paid.length === 0) {
          done.unpaid++;
          continue;
        }
        const r = await queueReferralEntries(tx, rules, referral, "reversal");
        done.queued += r.queued;
        skipped += r.skipped;
      }
    },
    QUEUE_TRANSACTION,
  );
  // A count only: the why of a skip would say which identity could not be carried, and identities are not logged.
  if (skipped > 0) log.warn({ skipped }, "referral rewards skipped: a player's identity cannot be put in their commands");
  return done;
}

/**
 * An owner's approval of a held (or declined) referral, inside the review's transaction: when the referral is
 * `qualified` now and its server's rules give referral rewards, they are queued (idempotent by key: a `referral.qualified`
 * event handled after the approval queues nothing twice). A referral approved after it was reversed gets nothing.
 * `rules`: the server's current rules, read before the transaction (readCurrentRewardRules), or undefined for none.
 */
export async function queueApprovedReferral(tx: SqlTx, rules: CurrentRewardRules | undefined, referral: ReferralForRewards): Promise<number> {
  if (rules === undefined || !givesAny(rules, "referral") || referral.state !== "qualified") return 0;
  return (await queueReferralEntries(tx, rules, referral, "referral")).queued;
}
