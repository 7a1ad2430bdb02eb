import { Prisma } from "../../gen/prisma/client.js";
import { runSql, type PrismaClient } from "../shared/db.js";
import type { Logger } from "../shared/log.js";
import type { AttemptExchange } from "./attempt-exchange.js";
import { insertAttemptsSql, toAttemptRow } from "./attempt-log.js";
import type { ClaimedDelivery } from "./claim-deliveries.js";
import { neverConnected } from "./send-callback.js";
import type { AttemptOutcome } from "./transport.js";

/**
 * Pay-once mode (servers.pay_once, opt-in with SetClaimSettings): one heart pays once across
 * transports. Its `heart_payouts` row (primary key heart_id) is taken first come by the transport
 * that pays, in one conditional statement:
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
 * withdrawOthers marks the heart's ledger row `withdrawn` and its other waiting deliveries `withdrawn`.
 * Servers not in the mode never reach this module (the claim reads `s.pay_once`).
 */

/** The transports that can pay a heart, as `heart_payouts.transport` stores them. */
export type PayoutTransport = "claim" | "pull" | "callback" | "votifier";

/** How long a push waits when another push holds the heart's reservation (in flight), before it tries again. */
export const PAY_ONCE_DEFER_MS = 5_000;

/** What the attempt log shows as the target of a withdrawn delivery that was never sent. */
export const WITHDRAWN_TARGET = "pay-once";

/** The error text of a delivery withdrawn because another transport paid its heart first, around the transport's name. */
const WITHDRAWN_TEXT = ["not sent: the heart was paid by ", " first (pay-once mode)"] as const;

/** The error text of a delivery withdrawn because another transport paid its heart first. */
export function withdrawnText(paidBy: string): string {
  return `${WITHDRAWN_TEXT[0]}${paidBy}${WITHDRAWN_TEXT[1]}`;
}

/** withdrawnText in SQL, for a transport name the statement reads (`paidBy`, a text expression). */
export function withdrawnTextSql(paidBy: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`(${WITHDRAWN_TEXT[0]}::text || ${paidBy} || ${WITHDRAWN_TEXT[1]}::text)`;
}

/**
 * The transport that has already paid heart `heartId` of server `s` (a `servers` row) in pay-once mode, as a
 * scalar subquery (NULL: none has, or not a pay-once server, or `eventType` is not a counted heart). One
 * primary-key read. A delivery stored for such a heart is stored `withdrawn` (insert-deliveries.ts).
 */
export function paidByTransportSql(s: Prisma.Sql, heartId: Prisma.Sql, eventType: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`(SELECT p.transport FROM heart_payouts p
    WHERE ${s}.pay_once AND ${eventType} = 'heart.counted' AND p.heart_id = ${heartId} AND p.state = 'paid')`;
}

/** Whether a claimed delivery goes through pay-once: a counted heart of a server in pay-once mode. */
export function isPayOnce(delivery: ClaimedDelivery): boolean {
  return delivery.payOnce === true && delivery.eventType === "heart.counted";
}

/** What a push's reservation found. */
export type Reservation =
  /** The heart's payout is this delivery's (new, or kept from an earlier attempt): send. */
  | { kind: "reserved" }
  /** Another transport paid it (or holds it in doubt for good): the delivery is withdrawn, with an attempt row. */
  | { kind: "withdrawn"; reason: string }
  /** Another push holds it while in flight: the lease is given back and the delivery is due again after PAY_ONCE_DEFER_MS. */
  | { kind: "deferred"; reason: string };

interface PayoutRow {
  transport: string;
  delivery_id: string | null;
  state: string;
  /** The holder's delivery status (null: a ledger claim, or the delivery is gone). */
  holder_status: string | null;
}

/**
 * Takes the heart's payout for a push before it is sent, in ONE statement: INSERT ... ON CONFLICT DO
 * UPDATE (a no-op update, so the row returned is the latest committed one even when it committed after
 * this statement began). When the row is another's, a second statement ends the attempt without sending:
 * withdrawn when that transport paid (or its push is no longer pending: it may have paid), deferred
 * while its push is still pending (in flight or retried; a definite failure gives the heart back).
 */
export async function reservePayout(prisma: PrismaClient, delivery: ClaimedDelivery, now: Date): Promise<Reservation> {
  const [row] = await prisma.$queryRaw<PayoutRow[]>`
    WITH r AS (
      INSERT INTO heart_payouts (heart_id, server_id, transport, delivery_id, state, taken_at)
      VALUES (${delivery.heartId}::uuid, ${delivery.serverId}::uuid, ${delivery.transport}, ${delivery.id}::uuid, 'reserved', ${now}::timestamptz)
      ON CONFLICT (heart_id) DO UPDATE SET taken_at = heart_payouts.taken_at
      RETURNING transport, delivery_id, state
    )
    SELECT r.transport, r.delivery_id::text AS delivery_id, r.state, d.status::text AS holder_status
    FROM r LEFT JOIN deliveries d ON d.id = r.delivery_id`;
  if (row === undefined || row.delivery_id === delivery.id) return { kind: "reserved" };
  if (row.state !== "paid" && row.holder_status === "pending") {
    const reason = `the heart is reserved by a ${row.transport} delivery in flight (pay-once mode); tried again in ${PAY_ONCE_DEFER_MS} ms`;
    await prisma.$executeRaw`
      UPDATE deliveries SET lease_until = NULL, next_attempt_at = ${new Date(now.getTime() + PAY_ONCE_DEFER_MS)}::timestamptz
      WHERE id = ${delivery.id}::uuid AND status = 'pending' AND lease_until = ${delivery.leaseUntil}::timestamptz`;
    return { kind: "deferred", reason };
  }
  const reason = withdrawnText(row.transport);
  await withdrawDeliveries(prisma, { serverId: delivery.serverId, heartIds: [delivery.heartId], now, reason, only: delivery });
  return { kind: "withdrawn", reason };
}

/** Whether an attempt that did not deliver certainly did not pay: nothing reached the receiver, or it refused. */
export function isDefiniteFailure(outcome: AttemptOutcome): boolean {
  if (outcome.kind === "held" || outcome.kind === "gone") return true;
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

/** The states of a `heart_payouts` row: a push's reservation, the same after an attempt in doubt, and paid. */
export type PayoutState = "reserved" | "in_doubt" | "paid";

/** How a push's attempt ended, as the payout sees it. */
export type PushSettlement = "delivered" | "refused" | "in_doubt";

/**
 * The payout's one transition table for a push's attempt: from which states each settlement moves the
 * row of THIS delivery, and to what (null: the row is deleted, the heart is payable by another transport).
 * A row in none of the `from` states is left as it is: `in_doubt` is never given back by a refusal.
 */
export const PAYOUT_TRANSITIONS: Record<PushSettlement, { from: readonly PayoutState[]; to: PayoutState | null }> = {
  delivered: { from: ["reserved", "in_doubt"], to: "paid" },
  refused: { from: ["reserved"], to: null },
  in_doubt: { from: ["reserved"], to: "in_doubt" },
};

/** How an attempt settles its payout (pure): delivered, a definite failure (refused), or in doubt. */
export function toSettlement(outcome: AttemptOutcome): PushSettlement {
  if (outcome.kind === "delivered") return "delivered";
  return isDefiniteFailure(outcome) ? "refused" : "in_doubt";
}

/** The statement that applies one transition of PAYOUT_TRANSITIONS to the payout of `delivery` (its own row only). */
function settlePayoutSql(settlement: PushSettlement, heartId: string, deliveryId: string, now: Date): Prisma.Sql {
  const { from, to } = PAYOUT_TRANSITIONS[settlement];
  const mine = Prisma.sql`heart_id = ${heartId}::uuid AND delivery_id = ${deliveryId}::uuid AND state = ANY(${[...from]}::text[])`;
  if (to === null) return Prisma.sql`DELETE FROM heart_payouts WHERE ${mine}`;
  const paidAt = to === "paid" ? Prisma.sql`${now}::timestamptz` : Prisma.sql`paid_at`;
  return Prisma.sql`UPDATE heart_payouts SET state = ${to}, paid_at = ${paidAt} WHERE ${mine}`;
}

/**
 * After a reserved push's attempt, before it is recorded (PAYOUT_TRANSITIONS): a delivered one makes the
 * payout `paid` and withdraws the heart from the other transports (withdrawOthers); a definite failure
 * gives the reservation back unless an earlier attempt was in doubt; an attempt in doubt keeps it, as
 * `in_doubt`, until a delivered attempt of the same delivery settles it.
 */
export async function settlePayout(prisma: PrismaClient, delivery: ClaimedDelivery, outcome: AttemptOutcome, now: Date): Promise<void> {
  const settlement = toSettlement(outcome);
  const changed = await prisma.$executeRaw(settlePayoutSql(settlement, delivery.heartId, delivery.id, now));
  if (settlement === "delivered" && changed > 0) {
    await withdrawOthers(prisma, { serverId: delivery.serverId, heartIds: [delivery.heartId], paidBy: delivery.transport, now });
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
  const { from, to } = PAYOUT_TRANSITIONS.in_doubt;
  await runSql(
    prisma,
    Prisma.sql`
    WITH logged AS (
      ${insertAttemptsSql(attempts, Prisma.sql`(SELECT d.id::text AS key, d.id AS delivery_id, d.server_id FROM deliveries d WHERE d.id = ANY(${ids}::uuid[]))`)}
    ), doubt AS (
      UPDATE heart_payouts SET state = ${to} WHERE delivery_id = ANY(${ids}::uuid[]) AND state = ANY(${[...from]}::text[])
      RETURNING heart_id
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

/** The attempt row of a withdrawn delivery: nothing sent, the reason as its error. */
function withdrawnExchange(reason: string): AttemptExchange {
  return { target: WITHDRAWN_TARGET, request: { headers: {}, body: "" }, response: null, latencyMs: 0, error: reason, succeeded: false };
}

/**
 * Withdraws waiting deliveries of hearts in ONE statement, each with an attempt row saying why: `only` the
 * given leased one (its lease must still be held), or every pending delivery of the hearts that is not leased
 * (one leased now is in flight, the payer's own push included: it settles or withdraws itself). `ledger`:
 * the same statement marks the hearts' held ledger rows `withdrawn`.
 */
async function withdrawDeliveries(
  prisma: PrismaClient,
  q: { serverId: string; heartIds: string[]; now: Date; reason: string; only?: ClaimedDelivery; ledger?: boolean },
): Promise<void> {
  const which = q.only
    ? Prisma.sql`id = ${q.only.id}::uuid AND lease_until = ${q.only.leaseUntil}::timestamptz`
    : Prisma.sql`(lease_until IS NULL OR lease_until < ${q.now}::timestamptz)`;
  const attempt = toAttemptRow(0, "w", q.now, withdrawnExchange(q.reason));
  await prisma.$queryRaw`
    WITH ended AS (
      UPDATE deliveries SET status = 'withdrawn', attempts = attempts + 1, lease_until = NULL, last_status_code = NULL, last_error = ${q.reason}
      WHERE server_id = ${q.serverId}::uuid AND heart_id = ANY(${q.heartIds}::uuid[]) AND event_type = 'heart.counted' AND status = 'pending'
        AND ${which}
      RETURNING id, server_id
    ), logged AS (
      ${insertAttemptsSql([attempt], Prisma.sql`(SELECT 'w'::text AS key, e.id AS delivery_id, e.server_id FROM ended e)`)}
    ), ledger AS (
      UPDATE vote_claims SET state = 'withdrawn'
      WHERE ${q.ledger === true} AND server_id = ${q.serverId}::uuid AND heart_id = ANY(${q.heartIds}::uuid[]) AND state = 'held'
      RETURNING heart_id
    )
    SELECT (SELECT count(*) FROM ended)::int AS deliveries, (SELECT count(*) FROM ledger)::int AS ledger`;
}

/**
 * After a transport paid hearts (its payout rows committed), ONE statement: each heart's ledger row, still
 * held, becomes `withdrawn` (unless the ledger claim paid it: it is `claimed`), and its other waiting
 * deliveries are withdrawn with an attempt row each. It runs after the paying statement, never inside it,
 * so no statement holds a payout row while it waits for a ledger row (a ledger claim holds its ledger row
 * while it takes the payout): the order of locks never crosses.
 */
export async function withdrawOthers(
  prisma: PrismaClient,
  q: { serverId: string; heartIds: string[]; paidBy: PayoutTransport; now: Date },
  log?: Logger,
): Promise<void> {
  if (q.heartIds.length === 0) return;
  try {
    await withdrawDeliveries(prisma, { serverId: q.serverId, heartIds: q.heartIds, now: q.now, reason: withdrawnText(q.paidBy), ledger: q.paidBy !== "claim" });
  } catch (error) {
    // Failure policy: the payer has paid (its payout row is committed), which alone keeps every other transport from paying
    // (a push withdraws itself when it reserves, a claim answers 2, the pull list leaves the heart out); only the eager
    // marking is lost, so the paying call still succeeds.
    log?.warn({ err: error, heartIds: q.heartIds }, "pay-once: withdrawing the other deliveries failed");
  }
}

/**
 * The payout a ledger claim takes inside its claim statement (ledger-store.ts): `target` is a CTE of
 * (heart_id, pay_once); a row is inserted for the pay-once ones, first come (ON CONFLICT DO NOTHING: a
 * concurrent taker's row is waited for), and RETURNING names the hearts this claim took.
 */
export function takeClaimPayoutSql(serverId: string, now: Date): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO heart_payouts (heart_id, server_id, transport, state, taken_at, paid_at)
    SELECT t.heart_id, ${serverId}::uuid, 'claim', 'paid', ${now}::timestamptz, ${now}::timestamptz FROM target t WHERE t.pay_once
    ON CONFLICT (heart_id) DO NOTHING
    RETURNING heart_id`;
}
