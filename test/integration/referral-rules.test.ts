/**
 * Issue 20's referral rules against real PostgreSQL through real Connect clients (the production
 * referral service, a clock the test moves): reversal reasons stored, shown and sent on (R1), the
 * attribution window (R2) and the lock period with its clawback records (R3), and the settings RPC.
 */
import anyTest, { type TestFn } from "ava";
import { fromBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { EnvelopeSchema } from "../../gen/proto/events/v1/events_pb.js";
import { ReferralEventType, ReferralState } from "../../gen/proto/referral/v1/referral_pb.js";
import { REVERSAL_REASONS } from "../../services/shared/values/contract.js";
import { applyEvent, clickToken, createReferralServer, errorDetails, rpcError, startHarness, type Harness } from "../../scripts/harness/referral-harness.js";

// Serial: several tests move the file's one clock, which every test reads.
const test = (anyTest as TestFn<{ h: Harness }>).serial;
const DAY_SECONDS = 86_400;

anyTest.before(async (t) => {
  (t.context as { h: Harness }).h = await startHarness();
});
anyTest.after.always(async (t) => {
  await (t.context as { h?: Harness }).h?.close();
});

async function reversalsOf(h: Harness, serverId: string) {
  const rows = await h.db.prisma.outboxMessage.findMany({ where: { key: serverId, type: "referral.reversed" }, orderBy: { id: "asc" } });
  return rows.map((row) => {
    const envelope = fromBinary(EnvelopeSchema, row.payload);
    if (envelope.payload.case !== "referralTransitioned") throw new Error("unexpected payload");
    return envelope.payload.value;
  });
}

function reverse(h: Harness, e: { serverId: string; token: string; serverEventId: string; reason?: string }) {
  return h.referral.applyEvent({
    serverId: e.serverId,
    event: ReferralEventType.REVERSED,
    token: e.token,
    serverEventId: e.serverEventId,
    reason: e.reason ?? "",
  });
}

/** A fresh server (settings applied), a click of alice's and that click registered (and qualified when asked) for "bob". */
async function referral(h: Harness, opts: { qualify?: boolean; lockDays?: number } = {}) {
  const { serverId } = await createReferralServer(h);
  if (opts.lockDays !== undefined) await h.admin.setReferralSettings({ serverId, lockDays: opts.lockDays });
  const token = await clickToken(h, serverId, "alice");
  const res = await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-bob", refereeIdentity: "bob" });
  if (res.outcome.case !== "applied") throw new Error("registration not applied");
  if (opts.qualify) await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q-bob" });
  return { serverId, token, referralId: res.outcome.value.referralId };
}

// ---- R1: reasons ----

for (const reason of REVERSAL_REASONS) {
  test(`R1: reversed with reason ${reason} -> stored on the referral and the event row, shown by GetReferral, sent in the outbox`, async (t) => {
    const { h } = t.context;
    const { serverId, token, referralId } = await referral(h, { qualify: true });
    const res = await reverse(h, { serverId, token, serverEventId: "rev-1", reason });
    t.is(res.outcome.case === "applied" ? res.outcome.value.state : null, ReferralState.REVERSED);
    const stored = await h.db.prisma.referral.findUniqueOrThrow({ where: { id: referralId } });
    t.like(stored, { reversalReason: reason, reversalReasonText: null, clawbackAt: null });
    const event = await h.db.prisma.referralEvent.findFirstOrThrow({ where: { serverId, type: "reversed" } });
    t.like(event, { reason, reasonText: null, outcome: "advanced" });
    const shown = await h.referral.getReferral({ referralId });
    t.like(shown.referral, { reversalReason: reason, reversalReasonText: "" });
    const [sent] = await reversalsOf(h, serverId);
    t.like(sent, { reason, reasonText: "", clawback: false, state: "reversed", previousState: "qualified" });
  });
}

test("R1: an unknown reason is kept as other with the text as sent, bounded; no reason leaves both empty", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await referral(h);
  await reverse(h, { serverId, token, serverEventId: "rev-1", reason: `  goodwill ${"x".repeat(500)}` });
  const stored = await h.db.prisma.referral.findUniqueOrThrow({ where: { id: referralId } });
  t.is(stored.reversalReason, "other");
  t.is(stored.reversalReasonText, `goodwill ${"x".repeat(191)}`);
  const [sent] = await reversalsOf(h, serverId);
  t.like(sent, { reason: "other", reasonText: stored.reversalReasonText ?? "", previousState: "registered" });

  const other = await referral(h);
  await reverse(h, { serverId: other.serverId, token: other.token, serverEventId: "rev-2" });
  t.like(await h.db.prisma.referral.findUniqueOrThrow({ where: { id: other.referralId } }), { reversalReason: null, reversalReasonText: null });
  t.like((await reversalsOf(h, other.serverId))[0], { reason: "", reasonText: "" });
});

test("R1: the funnel lists the period's reversal records by reason, its existing counts unchanged", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const reasons = ["refund", "refund", "fraud", ""];
  for (const [n, reason] of reasons.entries()) {
    const token = await clickToken(h, serverId, "alice");
    await applyEvent(h, { serverId, event: "registered", token, serverEventId: `reg-${n}`, refereeIdentity: `referee-${n}` });
    await applyEvent(h, { serverId, event: "qualified", token, serverEventId: `q-${n}` });
    await reverse(h, { serverId, token, serverEventId: `rev-${n}`, reason });
  }
  const funnel = await h.referral.getFunnel({ serverId, period: "" });
  t.like(funnel, { clicks: 4n, registered: 4n, qualified: 4n, reversed: 4n, reversalRate: 1, clawbacks: 0n });
  t.deepEqual(
    funnel.reversalsByReason.map((r) => [r.reason, r.count, r.clawbacks]),
    [
      ["refund", 2n, 0n],
      ["", 1n, 0n],
      ["fraud", 1n, 0n],
    ],
  );
  t.deepEqual((await h.referral.getFunnel({ serverId, period: "2023-01" })).reversalsByReason, [], "another month lists none");
});

// ---- R2: attribution window ----

test("R2: registered from a click older than the window -> 404 unknown referral token for this server, no event row; inside it -> applied", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const old = await clickToken(h, serverId, "alice");
  const fresh = await clickToken(h, serverId, "carol");
  h.clock.advanceSeconds(90 * DAY_SECONDS + 1);
  const error = await rpcError(applyEvent(h, { serverId, event: "registered", token: old, serverEventId: "reg-late", refereeIdentity: "bob" }));
  t.like(errorDetails(error), { code: Code.NotFound, message: "unknown referral token for this server" });
  t.is(await h.db.prisma.referralEvent.count({ where: { serverId } }), 0, "an error outcome leaves no event row");
  t.is(await h.db.prisma.referral.count({ where: { serverId } }), 0);

  await h.admin.setReferralSettings({ serverId, attributionWindowDays: 120 });
  const res = await applyEvent(h, { serverId, event: "registered", token: fresh, serverEventId: "reg-in", refereeIdentity: "dave" });
  t.is(res.outcome.case, "applied", "a wider window lets the click register");
});

test("R2: after the window an exact replay is still a duplicate, and qualified/reversed on an anchor registered in time still work", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await referral(h);
  await h.admin.setReferralSettings({ serverId, attributionWindowDays: 1 });
  h.clock.advanceSeconds(2 * DAY_SECONDS);
  const replay = await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-bob", refereeIdentity: "bob" });
  t.is(replay.outcome.case, "duplicate");
  const again = await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-bob-2", refereeIdentity: "bob" });
  t.like(again.outcome.value, { referralId, state: ReferralState.REGISTERED, advanced: false }, "a linked click is attributed already");
  const qualified = await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q-bob" });
  t.like(qualified.outcome.value, { state: ReferralState.QUALIFIED, advanced: true });
  const reversed = await reverse(h, { serverId, token, serverEventId: "rev-bob", reason: "refund" });
  t.like(reversed.outcome.value, { state: ReferralState.REVERSED, advanced: true });
});

// ---- R3: lock period ----

test("R3: a reversal inside the lock removes the credit (reversal record), as without a lock", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await referral(h, { qualify: true, lockDays: 30 });
  h.clock.advanceSeconds(29 * DAY_SECONDS);
  const res = await reverse(h, { serverId, token, serverEventId: "rev-1", reason: "chargeback" });
  t.like(res.outcome.value, { state: ReferralState.REVERSED, advanced: true });
  const credit = await h.db.prisma.referralCredit.findUniqueOrThrow({ where: { referralId } });
  t.truthy(credit.reversedAt);
  t.is(credit.clawbackAt, null);
  t.deepEqual(
    (await h.referral.getLeaderboard({ serverId, period: "", limit: 0 })).entries.map((e) => [e.credits, e.reversed]),
    [[0n, 1n]],
  );
  t.like((await reversalsOf(h, serverId))[0], { clawback: false, reason: "chargeback" });
});

test("R3: a reversal after the lock keeps the credit counted and records a clawback (state reversed, outbox says clawback)", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await referral(h, { qualify: true, lockDays: 30 });
  h.clock.advanceSeconds(30 * DAY_SECONDS);
  const res = await reverse(h, { serverId, token, serverEventId: "rev-1", reason: "refund" });
  t.like(res.outcome.value, { referralId, state: ReferralState.REVERSED, advanced: true });
  const credit = await h.db.prisma.referralCredit.findUniqueOrThrow({ where: { referralId } });
  t.is(credit.reversedAt, null, "the credit stays counted");
  t.deepEqual(credit.clawbackAt, h.clock.now());
  const stored = await h.db.prisma.referral.findUniqueOrThrow({ where: { id: referralId } });
  t.like(stored, { state: "reversed", reversalReason: "refund" });
  t.deepEqual(stored.clawbackAt, h.clock.now());
  t.truthy((await h.referral.getReferral({ referralId })).referral?.clawbackAt);
  t.deepEqual(
    (await h.referral.getLeaderboard({ serverId, period: "", limit: 0 })).entries.map((e) => [e.credits, e.reversed, e.clawbacks]),
    [[1n, 0n, 1n]],
    "the credit stays counted; the leaderboard shows the clawback record",
  );
  t.like((await reversalsOf(h, serverId))[0], { clawback: true, reason: "refund", state: "reversed", previousState: "qualified" });
  const funnel = await h.referral.getFunnel({ serverId, period: "" });
  t.like(funnel, { reversed: 1n, clawbacks: 1n });
  t.deepEqual(
    funnel.reversalsByReason.map((r) => [r.reason, r.count, r.clawbacks]),
    [["refund", 1n, 1n]],
  );
  const again = await reverse(h, { serverId, token, serverEventId: "rev-2" });
  t.like(again.outcome.value, { state: ReferralState.REVERSED, advanced: false }, "reversed again is idempotent");
  const requalify = await rpcError(applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q-2" }));
  t.like(errorDetails(requalify), { from: "reversed", event: "qualified" });
});

test("R3: lock_days 0 (the default) never claws back, however late the reversal", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await referral(h, { qualify: true });
  h.clock.advanceSeconds(400 * DAY_SECONDS);
  await reverse(h, { serverId, token, serverEventId: "rev-1" });
  const credit = await h.db.prisma.referralCredit.findUniqueOrThrow({ where: { referralId } });
  t.truthy(credit.reversedAt);
  t.is(credit.clawbackAt, null);
});

// ---- Settings ----

test("SetReferralSettings: defaults 90 / 0 on a new server; sets each field alone; refuses values out of range naming the field", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  t.like((await h.admin.getServer({ serverId })).server, { attributionWindowDays: 90, lockDays: 0 });
  t.like((await h.admin.setReferralSettings({ serverId, lockDays: 14 })).server, { attributionWindowDays: 90, lockDays: 14 });
  t.like((await h.admin.setReferralSettings({ serverId, attributionWindowDays: 30 })).server, { attributionWindowDays: 30, lockDays: 14 });
  const refused: Array<[Parameters<Harness["admin"]["setReferralSettings"]>[0], string]> = [
    [{ serverId, attributionWindowDays: 0 }, "attribution_window_days must be an integer between 1 and 365"],
    [{ serverId, attributionWindowDays: 366 }, "attribution_window_days must be an integer between 1 and 365"],
    [{ serverId, lockDays: -1 }, "lock_days must be an integer between 0 and 365"],
    [{ serverId, lockDays: 400 }, "lock_days must be an integer between 0 and 365"],
  ];
  for (const [request, message] of refused) {
    t.like(errorDetails(await rpcError(h.admin.setReferralSettings(request))), { code: Code.InvalidArgument, message });
  }
  t.like((await h.admin.getServer({ serverId })).server, { attributionWindowDays: 30, lockDays: 14 }, "a refused call changes nothing");
  t.like(errorDetails(await rpcError(h.admin.setReferralSettings({ serverId: "not-a-uuid", lockDays: 1 }))), {
    code: Code.NotFound,
    message: "unknown server",
  });
});
