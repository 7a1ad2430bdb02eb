import test from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { IllegalTransition } from "../../services/shared/rpc/errors.js";
import {
  DELIVERY_STATUSES,
  DELIVERY_TRANSITIONS,
  nextDeliveryStatus,
  type DeliveryMove,
  type DeliveryStatus,
} from "../../services/delivery/pipeline/domain/delivery-transitions.js";
import { ATTEMPT_RESULT_MOVES, deliveryGuardSql } from "../../services/delivery/pipeline/write-deliveries.js";

/** Every move the delivery code makes, written out independently of the table: from (or new) -> to. */
const allowed: Array<{ move: DeliveryMove; from: DeliveryStatus | "new"; to: DeliveryStatus }> = [
  { move: "store", from: "new", to: "pending" },
  { move: "store_withdrawn", from: "new", to: "withdrawn" },
  { move: "lease", from: "pending", to: "pending" },
  { move: "release", from: "pending", to: "pending" },
  { move: "defer", from: "pending", to: "pending" },
  { move: "deliver", from: "pending", to: "delivered" },
  { move: "fail", from: "pending", to: "failed" },
  { move: "retry", from: "pending", to: "pending" },
  { move: "hold", from: "pending", to: "pending" },
  { move: "withdraw", from: "pending", to: "withdrawn" },
  { move: "withdraw_waiting", from: "pending", to: "withdrawn" },
  { move: "park", from: "pending", to: "pending" },
  { move: "unpark", from: "pending", to: "pending" },
  { move: "claim_pull", from: "pending", to: "delivered" },
  { move: "redeliver", from: "delivered", to: "pending" },
  { move: "redeliver", from: "failed", to: "pending" },
];

test("every (status, move) pair: pending -> delivered | failed | withdrawn | pending (retry, hold, lease...), delivered | failed -> pending on redeliver; anything else is an IllegalTransition", (t) => {
  const moves = Object.keys(DELIVERY_TRANSITIONS) as DeliveryMove[];
  t.deepEqual([...new Set(allowed.map((a) => a.move))].sort(), [...moves].sort(), "the table lists exactly the moves above");
  for (const move of moves) {
    for (const from of ["new", ...DELIVERY_STATUSES] as const) {
      const expected = allowed.find((a) => a.move === move && a.from === from);
      if (expected) t.is(nextDeliveryStatus(from, move), expected.to, `${from} --${move}--> ${expected.to}`);
      else t.throws(() => nextDeliveryStatus(from, move), { instanceOf: IllegalTransition }, `${from} --${move}--> refused`);
    }
  }
});

test("withdrawn is final: no move leaves it (pay-once mode never sends a heart another transport paid)", (t) => {
  for (const move of Object.keys(DELIVERY_TRANSITIONS) as DeliveryMove[])
    t.throws(() => nextDeliveryStatus("withdrawn", move), { instanceOf: IllegalTransition });
});

test("the moves under a sender's lease need that lease; the claim needs a free row; withdrawing others leaves a row in flight alone", (t) => {
  for (const move of ["release", "defer", "deliver", "fail", "retry", "hold", "withdraw"] as const) t.is(DELIVERY_TRANSITIONS[move].lease, "held", move);
  t.is(DELIVERY_TRANSITIONS.lease.lease, "free");
  t.is(DELIVERY_TRANSITIONS.park.lease, "free", "a poll parks only a row no live sender holds");
  t.is(DELIVERY_TRANSITIONS.withdraw_waiting.lease, "idle");
  t.throws(() => deliveryGuardSql("deliver"), { message: /needs the lease/ });
});

test("the attempt log's four results share one guard (pending, under the attempt's lease), so its one UPDATE states it once", (t) => {
  const lease = Prisma.sql`i.lease_until`;
  const guards = Object.values(ATTEMPT_RESULT_MOVES).map((move) => deliveryGuardSql(move, { lease }).sql);
  t.is(new Set(guards).size, 1);
  t.is(guards[0], "d.status = 'pending'::\"DeliveryStatus\" AND d.lease_until = i.lease_until");
});

test("guards name statuses as literals (the partial indexes on status stay usable), never as parameters", (t) => {
  const guard = deliveryGuardSql("redeliver");
  t.is(guard.sql, "d.status IN ('delivered'::\"DeliveryStatus\",'failed'::\"DeliveryStatus\")");
  t.deepEqual(guard.values, []);
});
