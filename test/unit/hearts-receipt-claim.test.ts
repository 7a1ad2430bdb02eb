/**
 * The voter's view of a claim-ledger row (services/hearts/get-receipt.ts, toReceiptClaim): a held row inside its window
 * is held until its end; past it, expired at its end even before the ledger marks it; marked rows keep their times.
 */
import test from "ava";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { ReceiptClaimState } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { toReceiptClaim } from "../../services/hearts/get-receipt.js";

const EXPIRES = "2026-12-04T10:00:00.000Z";
const iso = (t: Parameters<typeof timestampDate>[0] | undefined) => (t ? timestampDate(t).toISOString() : null);
const view = (row: { state: string; claimed_at?: string; expired_at?: string }, now: string) => {
  const claim = toReceiptClaim(
    { expires_at: EXPIRES, claimed_at: row.claimed_at ?? null, expired_at: row.expired_at ?? null, state: row.state },
    new Date(now),
  );
  return { state: ReceiptClaimState[claim.state], heldUntil: iso(claim.heldUntil), claimedAt: iso(claim.claimedAt), expiredAt: iso(claim.expiredAt) };
};

test("held inside its window: held until the window's end", (t) => {
  t.deepEqual(view({ state: "held" }, "2026-12-04T09:59:59.999Z"), { state: "HELD", heldUntil: EXPIRES, claimedAt: null, expiredAt: null });
});

test("held at or past its window's end, not marked yet: expired at the window's end", (t) => {
  for (const now of [EXPIRES, "2027-01-01T00:00:00.000Z"]) {
    t.deepEqual(view({ state: "held" }, now), { state: "EXPIRED", heldUntil: EXPIRES, claimedAt: null, expiredAt: EXPIRES }, now);
  }
});

test("marked rows keep their own times: claimed at, expired at (window or cap), withdrawn", (t) => {
  const now = "2026-11-30T00:00:00.000Z";
  t.deepEqual(view({ state: "claimed", claimed_at: "2026-11-28T12:00:00.000Z" }, now), {
    state: "CLAIMED",
    heldUntil: EXPIRES,
    claimedAt: "2026-11-28T12:00:00.000Z",
    expiredAt: null,
  });
  t.deepEqual(view({ state: "expired", expired_at: "2026-11-29T08:00:00.000Z" }, now), {
    state: "EXPIRED",
    heldUntil: EXPIRES,
    claimedAt: null,
    expiredAt: "2026-11-29T08:00:00.000Z",
  });
  t.deepEqual(view({ state: "withdrawn" }, now), { state: "WITHDRAWN", heldUntil: EXPIRES, claimedAt: null, expiredAt: null });
});
