/**
 * ApplyEvent against real PostgreSQL through a real Connect client: every row of
 * the contract's state table, each `reversed` ruling, dedup and rollback rules.
 */
import anyTest, { type TestFn } from "ava";
import { fromBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { EnvelopeSchema } from "../../gen/proto/events/v1/events_pb.js";
import { ReferralEventType, ReferralState } from "../../gen/proto/referral/v1/referral_pb.js";
import { applyEvent, clickToken, createReferralServer, errorDetails, rpcError, startHarness, type Harness } from "../../scripts/harness/referral-harness.js";

const test = anyTest as TestFn<{ h: Harness }>;

test.before(async (t) => {
  t.context.h = await startHarness();
});
test.after.always(async (t) => {
  await t.context.h?.close();
});

async function outboxOf(h: Harness, serverId: string) {
  const rows = await h.db.prisma.outboxMessage.findMany({ where: { key: serverId }, orderBy: { id: "asc" } });
  return rows.map((row) => {
    const envelope = fromBinary(EnvelopeSchema, row.payload);
    if (envelope.payload.case !== "referralTransitioned") throw new Error("unexpected payload");
    return { topic: row.topic, type: row.type, envelopeType: envelope.type, ...envelope.payload.value };
  });
}

async function eventRows(h: Harness, serverId: string) {
  return h.db.prisma.referralEvent.findMany({ where: { serverId }, orderBy: { id: "asc" } });
}

/** A fresh server, a click of alice's, and that click registered for referee "bob". */
async function registeredReferral(h: Harness) {
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  const res = await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-bob", refereeIdentity: "bob" });
  if (res.outcome.case !== "applied") throw new Error("registration not applied");
  return { serverId, token, referralId: res.outcome.value.referralId };
}

test("clicked + registered -> anchor minted: applied, state registered, advanced, one referral.registered outbox row", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  const res = await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-1", refereeIdentity: "bob" });
  t.is(res.outcome.case, "applied");
  if (res.outcome.case !== "applied") return;
  t.is(res.outcome.value.state, ReferralState.REGISTERED);
  t.true(res.outcome.value.advanced);
  const referral = await h.db.prisma.referral.findUniqueOrThrow({ where: { id: res.outcome.value.referralId } });
  t.like(referral, { serverId, refereeIdentity: "bob", referrerIdentity: "alice", state: "registered", version: 1 });
  const click = await h.db.prisma.referralClick.findUniqueOrThrow({ where: { token } });
  t.is(click.referralId, referral.id, "the click is linked to the anchor it minted");
  const outbox = await outboxOf(h, serverId);
  t.is(outbox.length, 1);
  t.like(outbox[0], {
    topic: "referrals.events.v1",
    type: "referral.registered",
    envelopeType: "referral.registered",
    referralId: referral.id,
    serverId,
    referrerIdentity: "alice",
    refereeIdentity: "bob",
    state: "registered",
    previousState: "clicked",
    serverEventId: "reg-1",
  });
  t.like((await eventRows(h, serverId))[0], { outcome: "advanced", referralId: referral.id, type: "registered", serverEventId: "reg-1" });
});

test("registered + registered for the same anchor (new server_event_id) -> idempotent registered, no outbox row", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await registeredReferral(h);
  const res = await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-bob-again", refereeIdentity: "bob" });
  t.deepEqual(res.outcome.case === "applied" && { ...res.outcome.value }, {
    $typeName: "referral.v1.ApplyEventResponse.Applied",
    referralId,
    state: ReferralState.REGISTERED,
    advanced: false,
  });
  t.is((await outboxOf(h, serverId)).length, 1);
  t.is((await eventRows(h, serverId)).at(-1)?.outcome, "idempotent");
});

test("first touch wins: registered from a different referrer for an anchored referee -> first_touch_conflict, nothing applied", async (t) => {
  const { h } = t.context;
  const { serverId, referralId } = await registeredReferral(h);
  const carolToken = await clickToken(h, serverId, "carol");
  const res = await applyEvent(h, { serverId, event: "registered", token: carolToken, serverEventId: "reg-bob", refereeIdentity: "bob" });
  t.is(res.outcome.case, "firstTouchConflict");
  t.like(await h.db.prisma.referral.findUniqueOrThrow({ where: { id: referralId } }), { referrerIdentity: "alice", state: "registered", version: 1 });
  t.is(await h.db.prisma.referral.count({ where: { serverId } }), 1);
  t.is((await h.db.prisma.referralClick.findUniqueOrThrow({ where: { token: carolToken } })).referralId, null, "the losing click stays unlinked");
  t.is((await outboxOf(h, serverId)).length, 1, "no outbox row for a conflict");
  t.is((await eventRows(h, serverId)).at(-1)?.outcome, "first_touch_conflict");
});

test("registered + qualified -> qualified: referrer credited for the UTC month, one referral.qualified outbox row", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await registeredReferral(h);
  const res = await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "qual-bob" });
  t.like(res.outcome.case === "applied" ? res.outcome.value : {}, { referralId, state: ReferralState.QUALIFIED, advanced: true });
  const credit = await h.db.prisma.referralCredit.findUniqueOrThrow({ where: { referralId } });
  t.like(credit, { serverId, referrerIdentity: "alice", period: "2024-05", reversedAt: null });
  const outbox = await outboxOf(h, serverId);
  t.like(outbox.at(-1), { type: "referral.qualified", state: "qualified", previousState: "registered", serverEventId: "qual-bob" });
  t.not((await h.db.prisma.referral.findUniqueOrThrow({ where: { id: referralId } })).qualifiedAt, null);
});

test("qualified resolves the anchor from (token, server_id): referee_identity is not needed", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await registeredReferral(h);
  const res = await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q", refereeIdentity: "someone-else" });
  t.like(res.outcome.case === "applied" ? res.outcome.value : {}, { referralId, state: ReferralState.QUALIFIED });
});

test("qualified + qualified -> idempotent qualified, still one credit and one qualified outbox row", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await registeredReferral(h);
  await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "qual-1" });
  const res = await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "qual-2" });
  t.like(res.outcome.case === "applied" ? res.outcome.value : {}, { referralId, state: ReferralState.QUALIFIED, advanced: false });
  t.is(await h.db.prisma.referralCredit.count({ where: { serverId } }), 1);
  t.is((await outboxOf(h, serverId)).filter((o) => o.type === "referral.qualified").length, 1);
});

test("qualified + registered from the same referrer -> idempotent, state stays qualified", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await registeredReferral(h);
  await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "qual-1" });
  const res = await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-again", refereeIdentity: "bob" });
  t.like(res.outcome.case === "applied" ? res.outcome.value : {}, { referralId, state: ReferralState.QUALIFIED, advanced: false });
});

test("qualified before registered -> 422 invalid state transition from clicked, event qualified", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  const error = await rpcError(applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q" }));
  t.deepEqual(errorDetails(error), {
    code: Code.FailedPrecondition,
    message: "invalid state transition",
    kind: "illegal_transition",
    from: "clicked",
    event: "qualified",
  });
  t.is(await h.db.prisma.referralEvent.count({ where: { serverId } }), 0, "the error rolled the event row back");
});

test("ruling: reversed while clicked (no anchor) -> 422 from clicked", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  const error = await rpcError(applyEvent(h, { serverId, event: "reversed", token, serverEventId: "rev" }));
  t.like(errorDetails(error), { code: Code.FailedPrecondition, from: "clicked", event: "reversed" });
});

test("ruling: registered --reversed--> reversed: 200 with referral_id and state reversed, referral.reversed outbox row", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await registeredReferral(h);
  const res = await applyEvent(h, { serverId, event: "reversed", token, serverEventId: "rev" });
  t.like(res.outcome.case === "applied" ? res.outcome.value : {}, { referralId, state: ReferralState.REVERSED, advanced: true });
  t.like(await h.db.prisma.referral.findUniqueOrThrow({ where: { id: referralId } }), { state: "reversed", version: 2 });
  t.like((await outboxOf(h, serverId)).at(-1), { type: "referral.reversed", previousState: "registered", state: "reversed" });
  t.is(await h.db.prisma.referralCredit.count({ where: { serverId } }), 0, "no credit to reverse from registered");
});

test("ruling: qualified --reversed--> reversed keeps the credit as a reversal record (reversed_at set, not deleted)", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await registeredReferral(h);
  await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q" });
  const res = await applyEvent(h, { serverId, event: "reversed", token, serverEventId: "rev" });
  t.like(res.outcome.case === "applied" ? res.outcome.value : {}, { referralId, state: ReferralState.REVERSED, advanced: true });
  const credit = await h.db.prisma.referralCredit.findUniqueOrThrow({ where: { referralId } });
  t.not(credit.reversedAt, null);
  t.like((await outboxOf(h, serverId)).at(-1), { type: "referral.reversed", previousState: "qualified" });
});

test("ruling: reversed again -> 200 idempotent with state reversed", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await registeredReferral(h);
  await applyEvent(h, { serverId, event: "reversed", token, serverEventId: "rev-1" });
  const res = await applyEvent(h, { serverId, event: "reversed", token, serverEventId: "rev-2" });
  t.like(res.outcome.case === "applied" ? res.outcome.value : {}, { referralId, state: ReferralState.REVERSED, advanced: false });
  t.is((await outboxOf(h, serverId)).filter((o) => o.type === "referral.reversed").length, 1);
});

test("ruling: registered on a reversed referral -> 422 from reversed", async (t) => {
  const { h } = t.context;
  const { serverId, token } = await registeredReferral(h);
  await applyEvent(h, { serverId, event: "reversed", token, serverEventId: "rev" });
  const error = await rpcError(applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-2", refereeIdentity: "bob" }));
  t.like(errorDetails(error), { code: Code.FailedPrecondition, from: "reversed", event: "registered" });
});

test("ruling: qualified on a reversed referral -> 422 from reversed", async (t) => {
  const { h } = t.context;
  const { serverId, token } = await registeredReferral(h);
  await applyEvent(h, { serverId, event: "reversed", token, serverEventId: "rev" });
  const error = await rpcError(applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q" }));
  t.like(errorDetails(error), { code: Code.FailedPrecondition, from: "reversed", event: "qualified" });
  t.is(await h.db.prisma.referralCredit.count({ where: { serverId } }), 0);
});

test("ruling: a reversed anchor still holds first touch: another referrer's registered -> first_touch_conflict", async (t) => {
  const { h } = t.context;
  const { serverId, token } = await registeredReferral(h);
  await applyEvent(h, { serverId, event: "reversed", token, serverEventId: "rev" });
  const carolToken = await clickToken(h, serverId, "carol");
  const res = await applyEvent(h, { serverId, event: "registered", token: carolToken, serverEventId: "reg", refereeIdentity: "bob" });
  t.is(res.outcome.case, "firstTouchConflict");
  t.is(await h.db.prisma.referral.count({ where: { serverId } }), 1);
});

test("ruling: the same referrer registering the same referee through a different token is the same anchor (idempotent), and that click is linked", async (t) => {
  const { h } = t.context;
  const { serverId, referralId } = await registeredReferral(h);
  const secondToken = await clickToken(h, serverId, "alice");
  const res = await applyEvent(h, { serverId, event: "registered", token: secondToken, serverEventId: "reg-bob-2", refereeIdentity: "bob" });
  t.like(res.outcome.case === "applied" ? res.outcome.value : {}, { referralId, state: ReferralState.REGISTERED, advanced: false });
  t.is((await h.db.prisma.referralClick.findUniqueOrThrow({ where: { token: secondToken } })).referralId, referralId);
  const q = await applyEvent(h, { serverId, event: "qualified", token: secondToken, serverEventId: "q-via-2nd" });
  t.like(
    q.outcome.case === "applied" ? q.outcome.value : {},
    { referralId, state: ReferralState.QUALIFIED, advanced: true },
    "the second token now resolves to the anchor",
  );
});

test("a token that already registered one referee cannot register another -> 422 from that anchor's state, no second anchor", async (t) => {
  const { h } = t.context;
  const { serverId, token } = await registeredReferral(h);
  const error = await rpcError(applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-dave", refereeIdentity: "dave" }));
  t.like(errorDetails(error), { code: Code.FailedPrecondition, from: "registered", event: "registered" });
  t.is(await h.db.prisma.referral.count({ where: { serverId } }), 1);
});

test("exact replay of a seen (token, type, server_event_id) -> duplicate, nothing applied again", async (t) => {
  const { h } = t.context;
  const { serverId, token } = await registeredReferral(h);
  const replay = await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-bob", refereeIdentity: "bob" });
  t.is(replay.outcome.case, "duplicate");
  await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q" });
  const qualifiedReplay = await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q" });
  t.is(qualifiedReplay.outcome.case, "duplicate");
  t.is((await eventRows(h, serverId)).length, 2);
  t.is((await outboxOf(h, serverId)).length, 2);
});

test("replay of a first_touch_conflict is a duplicate too (applied outcomes are recorded)", async (t) => {
  const { h } = t.context;
  const { serverId } = await registeredReferral(h);
  const carolToken = await clickToken(h, serverId, "carol");
  const first = await applyEvent(h, { serverId, event: "registered", token: carolToken, serverEventId: "reg", refereeIdentity: "bob" });
  const replay = await applyEvent(h, { serverId, event: "registered", token: carolToken, serverEventId: "reg", refereeIdentity: "bob" });
  t.is(first.outcome.case, "firstTouchConflict");
  t.is(replay.outcome.case, "duplicate");
});

test("ruling: an error outcome rolls the event row back, so the same server_event_id is processed afresh once the cause is gone", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  const early = await rpcError(applyEvent(h, { serverId, event: "qualified", token, serverEventId: "qual-bob" }));
  t.is(early.code, Code.FailedPrecondition);
  await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-bob", refereeIdentity: "bob" });
  const retried = await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "qual-bob" });
  t.like(retried.outcome.case === "applied" ? retried.outcome.value : {}, { state: ReferralState.QUALIFIED, advanced: true });
});

test("registered and qualified with the same server_event_id are both accepted: dedup includes the event type", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  const reg = await applyEvent(h, { serverId, event: "registered", token, serverEventId: "acct-42", refereeIdentity: "bob" });
  const qual = await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "acct-42" });
  t.like(reg.outcome.case === "applied" ? reg.outcome.value : {}, { state: ReferralState.REGISTERED, advanced: true });
  t.like(qual.outcome.case === "applied" ? qual.outcome.value : {}, { state: ReferralState.QUALIFIED, advanced: true });
});

test("unknown token -> 404 unknown referral token for this server, nothing recorded", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const error = await rpcError(applyEvent(h, { serverId, event: "registered", token: "no-such-token", serverEventId: "r", refereeIdentity: "bob" }));
  t.like(errorDetails(error), { code: Code.NotFound, message: "unknown referral token for this server", kind: "unknown_token" });
  t.is(await h.db.prisma.referralEvent.count({ where: { serverId } }), 0);
});

test("ruling: another server's token -> 404 unknown referral token, even as a replay of an event that server already applied", async (t) => {
  const { h } = t.context;
  const { serverId: serverA } = await createReferralServer(h, "A");
  const { serverId: serverB } = await createReferralServer(h, "B");
  const tokenA = await clickToken(h, serverA, "alice");
  await applyEvent(h, { serverId: serverA, event: "registered", token: tokenA, serverEventId: "reg", refereeIdentity: "bob" });
  for (const serverEventId of ["reg", "other"]) {
    const error = await rpcError(applyEvent(h, { serverId: serverB, event: "registered", token: tokenA, serverEventId, refereeIdentity: "bob" }));
    t.like(errorDetails(error), { code: Code.NotFound, message: "unknown referral token for this server" }, serverEventId);
  }
  t.is(await h.db.prisma.referral.count({ where: { serverId: serverB } }), 0);
});

test("ApplyEvent validates defensively: registered without referee_identity -> InvalidArgument with the contract text", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  const error = await rpcError(applyEvent(h, { serverId, event: "registered", token, serverEventId: "r", refereeIdentity: "  " }));
  t.like(errorDetails(error), { code: Code.InvalidArgument, message: "referee_identity is required for a registered event" });
});

test("ApplyEvent validates defensively: unspecified event -> InvalidArgument with the contract's enum text", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const error = await rpcError(h.referral.applyEvent({ serverId, event: ReferralEventType.UNSPECIFIED, token: "t", serverEventId: "e" }));
  t.like(errorDetails(error), { code: Code.InvalidArgument, message: "event must be one of registered|qualified|reversed" });
});

test("ApplyEvent with a server_id that is not a uuid -> 404 unknown server (no database error)", async (t) => {
  const { h } = t.context;
  const error = await rpcError(applyEvent(h, { serverId: "srv-1", event: "qualified", token: "t", serverEventId: "e" }));
  t.like(errorDetails(error), { code: Code.NotFound, message: "unknown server", kind: "unknown_server" });
});

test("GetReferral returns the anchor with its state and timestamps; unknown id -> NotFound", async (t) => {
  const { h } = t.context;
  const { serverId, token, referralId } = await registeredReferral(h);
  await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q" });
  const { referral } = await h.referral.getReferral({ referralId });
  t.like(referral, { id: referralId, serverId, refereeIdentity: "bob", referrerIdentity: "alice", state: ReferralState.QUALIFIED });
  t.truthy(referral?.registeredAt);
  t.truthy(referral?.qualifiedAt);
  t.is(referral?.reversedAt, undefined);
  for (const id of ["00000000-0000-4000-8000-000000000000", "nope"]) {
    t.is((await rpcError(h.referral.getReferral({ referralId: id }))).code, Code.NotFound);
  }
});
