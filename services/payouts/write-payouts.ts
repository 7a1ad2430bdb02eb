import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import type { Logger } from "../shared/runtime/log.js";

/**
 * Pay-once mode's payouts (servers.pay_once): one `heart_payouts` row per heart (primary key heart_id),
 * taken first come by the transport that pays. Every write of the table is built here, as SQL the
 * paying statements compose into their own CTE chains (so each keeps its one round trip), and so is the
 * one "still payable" rule (payableSql):
 * - a ledger claim takes it paid inside its claim statement (takeClaimPayoutSql; services/claims/ledger-store.ts);
 * - a pull claim takes it paid inside its claim statement (takePullPayoutsSql; services/delivery/rpc/claim-pull-hearts.ts);
 * - a push (HTTP callback, Votifier) reserves it before sending (reservePayoutSql) and settles it after,
 *   by PAYOUT_TRANSITIONS (settlePayoutSql, markPayoutsInDoubtSql; services/delivery/pipeline/pay-once.ts);
 * - the hearts' retention removes a heart's row with the heart (removePayoutsSql; services/hearts/store.ts);
 * - the reward queue takes it paid for a `vote` entry as the entry is listed to the game plugin (which runs what it is
 *   listed) and again, first come, in its acknowledgement's transaction (takeQueuePayoutsSql; services/rewards/
 *   list-reward-queue.ts, ack-reward-entries.ts); the list leaves out (or closes) the vote entries of hearts another
 *   transport holds (payoutHeldByOtherSql).
 */

/** The transports that can pay a heart, as `heart_payouts.transport` stores them. */
export type PayoutTransport = "claim" | "pull" | "callback" | "votifier" | "queue";

/**
 * What a transport calls once it has paid hearts (its payout rows committed): withdraws them from the other
 * transports (services/delivery/pipeline/withdraw-unpaid.ts withdrawOthers; the claim API gets it from its wiring, as
 * claims/ does not import delivery/). Never fails the paying call.
 */
export type WithdrawOthers = (
  prisma: PrismaClient,
  q: { serverId: string; heartIds: string[]; paidBy: PayoutTransport; now: Date },
  log?: Logger,
) => Promise<void>;

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

/**
 * THE "still payable" rule: heart `heartId` (an SQL expression) has no payout row, so no transport has
 * paid it, reserved it for a push in flight, or holds it in doubt. One primary-key probe. Whoever finds a
 * heart not payable does not pay it: the ledger claim skips it (and a check does not offer it as held),
 * the pull list leaves it out, and the pull claim answers it already claimed.
 */
export function payableSql(heartId: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`NOT EXISTS (SELECT 1 FROM heart_payouts p WHERE p.heart_id = ${heartId})`;
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

/** What a push's reservation returns: the row now holding the heart, and its holder delivery's status (null: a ledger claim, or gone). */
export interface PayoutHolder {
  transport: string;
  delivery_id: string | null;
  state: string;
  holder_status: string | null;
}

/**
 * A push's reservation of its heart's payout, ONE statement: INSERT ... ON CONFLICT DO UPDATE (a no-op update,
 * so the row returned is the latest committed one even when it committed after this statement began), with
 * the holder delivery's status (PayoutHolder). The reservation is the push's when delivery_id is its own.
 */
export function reservePayoutSql(push: { heartId: string; serverId: string; transport: PayoutTransport; deliveryId: string }, now: Date): Prisma.Sql {
  return Prisma.sql`
    WITH r AS (
      INSERT INTO heart_payouts (heart_id, server_id, transport, delivery_id, state, taken_at)
      VALUES (${push.heartId}::uuid, ${push.serverId}::uuid, ${push.transport}, ${push.deliveryId}::uuid, 'reserved', ${now}::timestamptz)
      ON CONFLICT (heart_id) DO UPDATE SET taken_at = heart_payouts.taken_at
      RETURNING transport, delivery_id, state
    )
    SELECT r.transport, r.delivery_id::text AS delivery_id, r.state, d.status::text AS holder_status
    FROM r LEFT JOIN deliveries d ON d.id = r.delivery_id`;
}

/** The statement that applies one transition of PAYOUT_TRANSITIONS to the payout a push's delivery holds (its own row only). */
export function settlePayoutSql(settlement: PushSettlement, heartId: string, deliveryId: string, now: Date): Prisma.Sql {
  const { from, to } = PAYOUT_TRANSITIONS[settlement];
  const mine = Prisma.sql`heart_id = ${heartId}::uuid AND delivery_id = ${deliveryId}::uuid AND state = ANY(${[...from]}::text[])`;
  if (to === null) return Prisma.sql`DELETE FROM heart_payouts WHERE ${mine}`;
  const paidAt = to === "paid" ? Prisma.sql`${now}::timestamptz` : Prisma.sql`paid_at`;
  return Prisma.sql`UPDATE heart_payouts SET state = ${to}, paid_at = ${paidAt} WHERE ${mine}`;
}

/** PAYOUT_TRANSITIONS.in_doubt for the payouts the deliveries `deliveryIds` hold (a data-modifying CTE; RETURNING heart_id). */
export function markPayoutsInDoubtSql(deliveryIds: readonly string[]): Prisma.Sql {
  const { from, to } = PAYOUT_TRANSITIONS.in_doubt;
  return Prisma.sql`
    UPDATE heart_payouts SET state = ${to} WHERE delivery_id = ANY(${[...deliveryIds]}::uuid[]) AND state = ANY(${[...from]}::text[])
    RETURNING heart_id`;
}

/**
 * The payout a ledger claim takes inside its claim statement (a data-modifying CTE): `target` is a CTE of
 * (heart_id, pay_once); a row is inserted paid for the pay-once ones, first come (ON CONFLICT DO NOTHING: a
 * concurrent taker's row is waited for), and RETURNING names the hearts this claim took.
 */
export function takeClaimPayoutSql(serverId: string, now: Date): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO heart_payouts (heart_id, server_id, transport, state, taken_at, paid_at)
    SELECT t.heart_id, ${serverId}::uuid, 'claim', 'paid', ${now}::timestamptz, ${now}::timestamptz FROM target t WHERE t.pay_once
    ON CONFLICT (heart_id) DO NOTHING
    RETURNING heart_id`;
}

/**
 * The payouts a pull claim takes inside its claim statement (a data-modifying CTE): for each delivery of `named` (an
 * SQL set of delivery ids, the claim's pull deliveries of one server) still pending, on a pay-once server, a row paid by
 * `pull`, first come (ON CONFLICT DO NOTHING). RETURNING delivery_id: the deliveries whose payout this claim took.
 * Bounded: one primary-key read per named delivery, its server's row, a payout probe.
 */
export function takePullPayoutsSql(named: Prisma.Sql, now: Date): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO heart_payouts (heart_id, server_id, transport, delivery_id, state, taken_at, paid_at)
    SELECT d.heart_id, d.server_id, 'pull', d.id, 'paid', ${now}::timestamptz, ${now}::timestamptz
    FROM deliveries d JOIN servers s ON s.id = d.server_id AND s.pay_once
    WHERE d.id IN (${named}) AND d.status = 'pending'
    ON CONFLICT (heart_id) DO NOTHING
    RETURNING delivery_id`;
}

/**
 * The hearts' retention (services/hearts/store.ts heartHistoryRetention): the payouts of the hearts `heartIds` (an SQL
 * uuid[] of hearts past RETENTION_HEART_DAYS that no delivery is left of), removed in the statement that removes the
 * hearts (a data-modifying CTE; by primary key). The heart stops being "paid" only as it stops existing: no transport
 * can reach it again (no delivery is left to pull or push, and its ledger row goes in the same statement).
 */
export function removePayoutsSql(heartIds: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`DELETE FROM heart_payouts WHERE heart_id = ANY(${heartIds}) RETURNING heart_id`;
}

/**
 * The payouts the reward queue takes (issue 31): the hearts of the server's `vote` entries `entryIds` (the entries a
 * list shows, or an acknowledgement acknowledged now), on a pay-once server, each taken `paid` by `queue`, first come
 * (ON CONFLICT DO NOTHING: a heart another transport took stays theirs; one an earlier entry of the same heart took is
 * the queue's already). RETURNING heart_id: the hearts this statement paid. Bounded: at most entryIds.length entries by
 * primary key, their server's row, a payout probe per heart.
 */
export function takeQueuePayoutsSql(serverId: string, entryIds: readonly string[], now: Date): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO heart_payouts (heart_id, server_id, transport, state, taken_at, paid_at)
    SELECT DISTINCT e.heart_id, e.server_id, 'queue', 'paid', ${now}::timestamptz, ${now}::timestamptz
    FROM reward_queue_entries e JOIN servers s ON s.id = e.server_id AND s.pay_once
    WHERE e.id = ANY(${[...entryIds]}::uuid[]) AND e.server_id = ${serverId}::uuid AND e.reason = 'vote' AND e.heart_id IS NOT NULL
    ON CONFLICT (heart_id) DO NOTHING
    RETURNING heart_id`;
}

/**
 * The state of heart `heartId`'s payout when a transport other than the reward queue holds it (`paid`, or a push's
 * `reserved` / `in_doubt`), as a scalar subquery; NULL when no one holds it or the queue does. One primary-key probe.
 */
export function payoutHeldByOtherSql(heartId: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`(SELECT p.state FROM heart_payouts p WHERE p.heart_id = ${heartId} AND p.transport <> 'queue')`;
}
