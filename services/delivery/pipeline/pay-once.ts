import { Prisma } from "../../../gen/prisma/client.js";
import type { PrismaClient } from "../../shared/adapters/db.js";
import { executeSql, runSql } from "../../shared/adapters/sql/executor.js";
import {
  markPayoutsInDoubtSql,
  reservePayoutSql,
  settlePayoutSql,
  type PayoutHolder,
  type PayoutTransport,
  type PushSettlement,
} from "../../payouts/write-payouts.js";
import { withdrawDeliveries, withdrawnText, withdrawOthers } from "./withdraw-unpaid.js";
import type { AttemptExchange } from "./attempt-exchange.js";
import { insertAttemptsSql, toAttemptRow } from "./attempt-log.js";
import type { ClaimedDelivery } from "./claim-deliveries.js";
import { neverConnected } from "./send-callback.js";
import type { AttemptOutcome } from "./transport.js";
import { deferDeliverySql } from "./write-deliveries.js";

/**
 * Pay-once mode (servers.pay_once, opt-in with SetClaimSettings) for a push: one heart pays once across
 * transports. Its `heart_payouts` row (primary key heart_id; every write of it in services/payouts/write-payouts.ts)
 * is taken first come by the transport that pays, in one conditional statement:
 * - a ledger claim (ClaimVote, GET /api/votes): inside its claim statement (services/claims/ledger-store.ts);
 * - a pull claim: inside its claim statement (claim-pull-hearts.ts);
 * - a push (HTTP callback, Votifier): reservePayout BEFORE sending, settlePayout after, by PAYOUT_TRANSITIONS:
 *   paid on a 2xx or an accepted vote; given back (deleted) on a definite failure (nothing reached the receiver,
 *   or it answered a refusal) while no earlier attempt is in doubt; `in_doubt` after a timeout or a cut
 *   connection once the request left, and from then on only a delivered attempt of the same delivery (the same
 *   heart id) settles it: a later attempt's failure never gives it back, because the receiver may have acted
 *   on the attempt in doubt. An attempt a dispatcher took over from a process that stopped mid-send is in
 *   doubt too (markTakenOverInDoubt).
 * Whoever finds the row taken by another transport does not pay: a claim answers "already claimed", the pull
 * list leaves the heart out, a push is withdrawn (never sent, never retried). Once a transport has paid,
 * withdrawOthers (withdraw-unpaid.ts) marks the heart's ledger row `withdrawn` and its other waiting deliveries `withdrawn`.
 * Servers not in the mode never reach this module (the claim reads `s.pay_once`).
 */

/** How long a push waits when another push holds the heart's reservation (in flight), before it tries again. */
export const PAY_ONCE_DEFER_MS = 5_000;

/** Whether a claimed delivery goes through pay-once: a counted heart of a server in pay-once mode. */
export function isPayOnce(delivery: ClaimedDelivery): boolean {
  // A Discord message announces a vote; it pays no reward, so it takes no part in pay-once.
  return delivery.payOnce === true && delivery.eventType === "heart.counted" && delivery.transport !== "discord";
}

/** The payout transport of a push that takes part in pay-once (isPayOnce: never a Discord message). */
function payoutTransportOf(delivery: ClaimedDelivery): PayoutTransport {
  if (delivery.transport === "discord") throw new Error("a Discord delivery takes no part in pay-once");
  return delivery.transport;
}

/** What a push's reservation found. */
export type Reservation =
  /** The heart's payout is this delivery's (new, or kept from an earlier attempt): send. */
  | { kind: "reserved" }
  /** Another transport paid it (or holds it in doubt for good): the delivery is withdrawn, with an attempt row. */
  | { kind: "withdrawn"; reason: string }
  /** Another push holds it while in flight: the lease is given back and the delivery is due again after PAY_ONCE_DEFER_MS. */
  | { kind: "deferred"; reason: string };

/**
 * Takes the heart's payout for a push before it is sent, in ONE statement: INSERT ... ON CONFLICT DO
 * UPDATE (a no-op update, so the row returned is the latest committed one even when it committed after
 * this statement began). When the row is another's, a second statement ends the attempt without sending:
 * withdrawn when that transport paid (or its push is no longer pending: it may have paid), deferred
 * while its push is still pending (in flight or retried; a definite failure gives the heart back).
 */
export async function reservePayout(prisma: PrismaClient, delivery: ClaimedDelivery, now: Date): Promise<Reservation> {
  const [row] = await runSql<PayoutHolder>(
    prisma,
    reservePayoutSql({ heartId: delivery.heartId, serverId: delivery.serverId, transport: payoutTransportOf(delivery), deliveryId: delivery.id }, now),
  );
  if (row === undefined || row.delivery_id === delivery.id) return { kind: "reserved" };
  if (row.state !== "paid" && row.holder_status === "pending") {
    const reason = `the heart is reserved by a ${row.transport} delivery in flight (pay-once mode); tried again in ${PAY_ONCE_DEFER_MS} ms`;
    await executeSql(prisma, deferDeliverySql(delivery, new Date(now.getTime() + PAY_ONCE_DEFER_MS)));
    return { kind: "deferred", reason };
  }
  const reason = withdrawnText(row.transport);
  await withdrawDeliveries(prisma, { serverId: delivery.serverId, heartIds: [delivery.heartId], now, reason, only: delivery });
  return { kind: "withdrawn", reason };
}

/** Whether an attempt that did not deliver certainly did not pay: nothing reached the receiver, or it refused. */
export function isDefiniteFailure(outcome: AttemptOutcome): boolean {
  if (outcome.kind === "held" || outcome.kind === "deferred" || outcome.kind === "gone") return true;
  if (outcome.kind === "delivered") return false;
  if (outcome.final) return true;
  const { request, response } = outcome.exchange;
  // An HTTP receiver that answered a non-2xx status refused it.
  if (response !== null && response.status > 0) return true;
  // Votifier: no payload sent (refused address, no connection, no greeting), or the listener answered an error.
  if (request.body === "") return true;
  if (response?.body.split("\n").some((line) => line.includes('"status":"error"'))) return true;
  // No connection was ever made (the request cannot have reached the receiver).
  return neverConnected(outcome.error);
}

/** How an attempt settles its payout (pure): delivered, a definite failure (refused), or in doubt. */
export function toSettlement(outcome: AttemptOutcome): PushSettlement {
  if (outcome.kind === "delivered") return "delivered";
  return isDefiniteFailure(outcome) ? "refused" : "in_doubt";
}

/**
 * After a reserved push's attempt, before it is recorded (PAYOUT_TRANSITIONS): a delivered one makes the
 * payout `paid` and withdraws the heart from the other transports (withdrawOthers); a definite failure
 * gives the reservation back unless an earlier attempt was in doubt; an attempt in doubt keeps it, as
 * `in_doubt`, until a delivered attempt of the same delivery settles it.
 */
export async function settlePayout(prisma: PrismaClient, delivery: ClaimedDelivery, outcome: AttemptOutcome, now: Date): Promise<void> {
  const settlement = toSettlement(outcome);
  const changed = await executeSql(prisma, settlePayoutSql(settlement, delivery.heartId, delivery.id, now));
  if (settlement === "delivered" && changed > 0) {
    await withdrawOthers(prisma, { serverId: delivery.serverId, heartIds: [delivery.heartId], paidBy: payoutTransportOf(delivery), now });
  }
}

/**
 * Deliveries a dispatcher took over after their lease ran out (the process that held them stopped before
 * it recorded its attempt): that attempt may have reached the receiver, so in ONE statement each gets an
 * attempt row saying so, and its heart's reservation (pay-once mode) becomes `in_doubt` (PAYOUT_TRANSITIONS):
 * the attempt about to be made carries the same heart id, and only a delivered one settles it.
 */
export async function markTakenOverInDoubt(prisma: PrismaClient, deliveries: readonly ClaimedDelivery[], now: Date): Promise<void> {
  if (deliveries.length === 0) return;
  const ids = deliveries.map((d) => d.id);
  const attempts = deliveries.map((d, n) => toAttemptRow(n, d.id, now, takenOverExchange()));
  await runSql(
    prisma,
    Prisma.sql`
    WITH logged AS (
      ${insertAttemptsSql(attempts, Prisma.sql`(SELECT d.id::text AS key, d.id AS delivery_id, d.server_id FROM deliveries d WHERE d.id = ANY(${ids}::uuid[]))`)}
    ), doubt AS (
      ${markPayoutsInDoubtSql(ids)}
    )
    SELECT (SELECT count(*) FROM doubt)::int AS in_doubt`,
  );
}

/** What the attempt log shows for an attempt whose process stopped before recording it. */
export const TAKEN_OVER_TEXT = "in doubt: the delivery process stopped during this attempt before recording it; the next attempt carries the same heart_id";

/** The attempt row of an attempt lost with its process: nothing known of what was sent or answered. */
function takenOverExchange(): AttemptExchange {
  return { target: TAKEN_OVER_TARGET, request: { headers: {}, body: "" }, response: null, latencyMs: 0, error: TAKEN_OVER_TEXT, succeeded: false };
}

/** What the attempt log shows as the target of an attempt lost with its process. */
export const TAKEN_OVER_TARGET = "lease taken over";
