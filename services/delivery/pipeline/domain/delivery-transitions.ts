/**
 * The delivery lifecycle: ONE table of every move a stored delivery makes, with the status it must be in,
 * the status it goes to and the lease the writer must hold. Pure: no I/O, no clock. Each move is written by
 * one SQL fragment (services/delivery/pipeline/write-deliveries.ts), whose guard is built from this table.
 */
import { IllegalTransition } from "../../../shared/rpc/errors.js";

/** The statuses of a delivery (the `DeliveryStatus` enum of the schema). */
export const DELIVERY_STATUSES = ["pending", "delivered", "failed", "withdrawn"] as const;
/** One of DELIVERY_STATUSES. */
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/**
 * The lease a move requires of the row:
 * - `held`: the writer's own lease (`lease_until` = the lease it took); a lost lease changes nothing;
 * - `free`: not leased, or its lease ran out, or its worker stopped beating (a takeover);
 * - `idle`: not leased now (no lease, or one that ran out): a row in flight is left to its sender;
 * - `any`: pull deliveries and finished ones carry no lease.
 */
export type LeaseGuard = "held" | "free" | "idle" | "any";

/** One move: from which statuses (`new`: the row is inserted), to which status, under which lease. */
export interface DeliveryTransition {
  from: readonly DeliveryStatus[] | "new";
  to: DeliveryStatus;
  lease: LeaseGuard;
}

/** Every move the code makes; `to` equal to `from` changes the row's schedule or lease, not its status. */
export const DELIVERY_TRANSITIONS = {
  /** The consumer's insert, or the test callback's: a new delivery, leased to the inserter or not. */
  store: { from: "new", to: "pending", lease: "any" },
  /** Pay-once mode: a heart another transport already paid is stored withdrawn, never sent. */
  store_withdrawn: { from: "new", to: "withdrawn", lease: "any" },
  /** A dispatcher's claim: leases a due row, taking over one whose lease lapsed unrecorded. */
  lease: { from: ["pending"], to: "pending", lease: "free" },
  /** Gives the lease back without an attempt (a secret revoked meanwhile). */
  release: { from: ["pending"], to: "pending", lease: "held" },
  /** Pay-once mode: another push holds the heart in flight; the lease is given back and the row is due later. */
  defer: { from: ["pending"], to: "pending", lease: "held" },
  /** An attempt delivered it. */
  deliver: { from: ["pending"], to: "delivered", lease: "held" },
  /** An attempt failed for good (retries used up, or a final refusal). */
  fail: { from: ["pending"], to: "failed", lease: "held" },
  /** An attempt failed; due again later. */
  retry: { from: ["pending"], to: "pending", lease: "held" },
  /** The endpoint answered 410 Gone: pending and due at once, skipped by claims while the endpoint is disabled. */
  hold: { from: ["pending"], to: "pending", lease: "held" },
  /** Pay-once mode: the push found its heart paid by another transport; withdrawn without sending. */
  withdraw: { from: ["pending"], to: "withdrawn", lease: "held" },
  /** Pay-once mode: another transport paid the heart; its waiting deliveries (not in flight) are withdrawn. */
  withdraw_waiting: { from: ["pending"], to: "withdrawn", lease: "idle" },
  /** A dispatcher's poll found the row held (not sendable now): parked, out of the claim's index (parkHeldDeliveries, claim-deliveries.ts). */
  park: { from: ["pending"], to: "pending", lease: "free" },
  /** A write made the server's or endpoint's held rows sendable again: their parked rows are back in the claim's index. */
  unpark: { from: ["pending"], to: "pending", lease: "any" },
  /** The owner claimed a pull delivery. */
  claim_pull: { from: ["pending"], to: "delivered", lease: "any" },
  /** The owner put a finished delivery back in the queue with a fresh retry cycle. */
  redeliver: { from: ["delivered", "failed"], to: "pending", lease: "any" },
} as const satisfies Record<string, DeliveryTransition>;

/** A move of DELIVERY_TRANSITIONS. */
export type DeliveryMove = keyof typeof DELIVERY_TRANSITIONS;

/**
 * The status `move` takes a delivery in `from` to. Throws `IllegalTransition{from, event}` when the
 * table does not allow the move from that status (the writers' guards make the database say the same).
 */
export function nextDeliveryStatus(from: DeliveryStatus | "new", move: DeliveryMove): DeliveryStatus {
  const rule: DeliveryTransition = DELIVERY_TRANSITIONS[move];
  const allowed = rule.from === "new" ? from === "new" : from !== "new" && rule.from.includes(from);
  if (!allowed) throw new IllegalTransition(from, move);
  return rule.to;
}
