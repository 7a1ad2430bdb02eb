/**
 * POST /api/referral/events with issue 20's referral rules, against the real stack (gateway ->
 * Connect -> referral service -> PostgreSQL): the optional `reason` of `reversed` (R1, never a 400),
 * the attribution window (R2, the contract's 404) and the lock period (R3). Bodies are compared
 * byte-exact. Times in the past are made by moving stored timestamps back (the gateway checks
 * signatures against the real clock).
 */
import { randomBytes } from "node:crypto";
import { fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import test from "ava";
import { EnvelopeSchema } from "../../gen/proto/events/v1/events_pb.js";
import { REVERSAL_REASONS } from "../../services/shared/values/contract.js";
import { maxCharsOf } from "../../services/shared/values/field-rules.js";
import { createServiceClients } from "../../scripts/harness/stack.js";
import { startGatewayStack, type GatewayStack, type RawResponse, type TestServer } from "./gateway-stack.js";

let stack: GatewayStack;

test.before(async () => {
  stack = await startGatewayStack();
});
test.after.always(async () => {
  await stack?.close();
});

const exact = (t: { is(a: unknown, b: unknown, m?: string): void }, res: RawResponse, status: number, body: unknown) => {
  t.is(res.status, status, res.text);
  t.is(res.text, JSON.stringify(body));
};

let seq = 0;
const unique = (prefix: string) => `${prefix}-${++seq}-${Math.random().toString(36).slice(2, 8)}`;

/** A server of its own, a click registered (and qualified when asked) through the public endpoint. */
async function registered(opts: { qualify?: boolean } = {}): Promise<{ server: TestServer; token: string; referralId: string }> {
  const server = await stack.createServer();
  const token = await stack.click(server.serverId, unique("referrer"));
  const res = await stack.postSigned(server, {
    event: "registered",
    token,
    server_id: server.serverId,
    referee_identity: unique("referee"),
    server_event_id: unique("reg"),
  });
  const referralId = (JSON.parse(res.text) as { referral_id: string }).referral_id;
  if (opts.qualify) await stack.postSigned(server, { event: "qualified", token, server_id: server.serverId, server_event_id: unique("q") });
  return { server, token, referralId };
}

function reversed(server: TestServer, token: string, extra: Record<string, unknown> = {}) {
  return stack.postSigned(server, { event: "reversed", token, server_id: server.serverId, server_event_id: unique("rev"), ...extra });
}

async function sentReversal(serverId: string) {
  const row = await stack.db.prisma.outboxMessage.findFirstOrThrow({ where: { key: serverId, type: "referral.reversed" } });
  const envelope = fromBinary(EnvelopeSchema, row.payload);
  if (envelope.payload.case !== "referralTransitioned") throw new Error("unexpected payload");
  return envelope.payload.value;
}

// ---- R1 ----

for (const reason of REVERSAL_REASONS) {
  test(`R1: reversed with reason ${reason} -> 200 as without one; stored on the referral and event row, in the outbox payload`, async (t) => {
    const { server, token, referralId } = await registered({ qualify: true });
    exact(t, await reversed(server, token, { reason }), 200, { ok: true, referral_id: referralId, state: "reversed" });
    t.like(await stack.db.prisma.referral.findUniqueOrThrow({ where: { id: referralId } }), { reversalReason: reason, reversalReasonText: null });
    t.like(await stack.db.prisma.referralEvent.findFirstOrThrow({ where: { serverId: server.serverId, type: "reversed" } }), { reason, reasonText: null });
    t.like(await sentReversal(server.serverId), { reason, reasonText: "", clawback: false });
  });
}

test("R1: an unknown reason -> 200, stored as other with the sent text bounded, sent on as other + reason_text", async (t) => {
  const { server, token, referralId } = await registered();
  const sent = `store credit ${"z".repeat(5_000)}`;
  exact(t, await reversed(server, token, { reason: sent }), 200, { ok: true, referral_id: referralId, state: "reversed" });
  const bounded = sent.slice(0, maxCharsOf("reason"));
  t.like(await stack.db.prisma.referral.findUniqueOrThrow({ where: { id: referralId } }), { reversalReason: "other", reversalReasonText: bounded });
  t.like(await stack.db.prisma.referralEvent.findFirstOrThrow({ where: { serverId: server.serverId, type: "reversed" } }), {
    reason: "other",
    reasonText: bounded,
  });
  t.like(await sentReversal(server.serverId), { reason: "other", reasonText: bounded });
});

for (const [label, reason, text] of [
  ["a number", 7, "7"],
  ["an object", { code: "R1" }, '{"code":"R1"}'],
  ["a boolean", true, "true"],
] as const) {
  test(`R1: a non-string reason (${label}) -> 200, kept as other with its JSON text`, async (t) => {
    const { server, token, referralId } = await registered();
    exact(t, await reversed(server, token, { reason }), 200, { ok: true, referral_id: referralId, state: "reversed" });
    t.like(await stack.db.prisma.referral.findUniqueOrThrow({ where: { id: referralId } }), { reversalReason: "other", reversalReasonText: text });
  });
}

test("R1: reason: null is no reason; a reason on registered/qualified is ignored", async (t) => {
  const server = await stack.createServer();
  const token = await stack.click(server.serverId, unique("referrer"));
  const reg = await stack.postSigned(server, {
    event: "registered",
    token,
    server_id: server.serverId,
    referee_identity: unique("referee"),
    server_event_id: unique("reg"),
    reason: "fraud",
  });
  t.is(reg.status, 200, reg.text);
  t.like(await stack.db.prisma.referralEvent.findFirstOrThrow({ where: { serverId: server.serverId, type: "registered" } }), { reason: null });
  const referralId = (JSON.parse(reg.text) as { referral_id: string }).referral_id;
  exact(t, await reversed(server, token, { reason: null }), 200, { ok: true, referral_id: referralId, state: "reversed" });
  t.like(await stack.db.prisma.referral.findUniqueOrThrow({ where: { id: referralId } }), { reversalReason: null, reversalReasonText: null });
});

// ---- R2 ----

test("R2: a click older than the window -> 404 `unknown referral token for this server`; a replay of an event applied in time is still duplicate", async (t) => {
  const server = await stack.createServer();
  const late = await stack.click(server.serverId, unique("referrer"));
  const early = await stack.click(server.serverId, unique("referrer"));
  const applied = { event: "registered", token: early, server_id: server.serverId, referee_identity: unique("referee"), server_event_id: unique("reg") };
  t.is((await stack.postSigned(server, applied)).status, 200);
  // Both clicks now lie 91 days back: the window (default 90 days) has closed on them.
  await stack.db.prisma.$executeRaw`UPDATE referral_clicks SET created_at = now() - interval '91 days' WHERE server_id = ${server.serverId}::uuid`;
  const body = { event: "registered", token: late, server_id: server.serverId, referee_identity: unique("referee"), server_event_id: unique("reg") };
  exact(t, await stack.postSigned(server, body), 404, { error: "unknown referral token for this server" });
  t.is(await stack.db.prisma.referralEvent.count({ where: { serverId: server.serverId, token: late } }), 0, "the 404 leaves no event row");
  exact(t, await stack.postSigned(server, applied), 200, { ok: true, duplicate: true });
  const qualified = await stack.postSigned(server, { event: "qualified", token: early, server_id: server.serverId, server_event_id: unique("q") });
  t.is(JSON.parse(qualified.text).state, "qualified", "an anchor registered in time still qualifies");
});

// ---- R3 ----

test("R3: with a lock, a reversal inside it removes the credit and one after it keeps the credit as a clawback (200 reversed both)", async (t) => {
  const inside = await registered({ qualify: true });
  await stack.clients.admin.setReferralSettings({ serverId: inside.server.serverId, lockDays: 7 });
  exact(t, await reversed(inside.server, inside.token, { reason: "refund" }), 200, { ok: true, referral_id: inside.referralId, state: "reversed" });
  t.truthy((await stack.db.prisma.referralCredit.findUniqueOrThrow({ where: { referralId: inside.referralId } })).reversedAt);

  const after = await registered({ qualify: true });
  await stack.clients.admin.setReferralSettings({ serverId: after.server.serverId, lockDays: 7 });
  await stack.db.prisma.$executeRaw`UPDATE referrals SET qualified_at = now() - interval '8 days' WHERE id = ${after.referralId}::uuid`;
  exact(t, await reversed(after.server, after.token, { reason: "chargeback" }), 200, { ok: true, referral_id: after.referralId, state: "reversed" });
  const credit = await stack.db.prisma.referralCredit.findUniqueOrThrow({ where: { referralId: after.referralId } });
  t.is(credit.reversedAt, null, "the credit stays counted");
  t.truthy(credit.clawbackAt);
  t.like(await sentReversal(after.server.serverId), { clawback: true, reason: "chargeback" });
  const board = await stack.clients.referral.getLeaderboard({ serverId: after.server.serverId, period: "", limit: 0 });
  t.deepEqual(
    board.entries.map((e) => [e.credits, e.reversed]),
    [[1n, 0n]],
  );
});

// ---- SetReferralSettings access ----

test("SetReferralSettings needs the admin scope: a read or ingest token gets PermissionDenied, no token Unauthenticated; nothing changes", async (t) => {
  const server = await stack.createServer();
  const admin = createServiceClients(stack.serviceUrl);
  for (const scopes of [["read"], ["ingest", "clicks:record"]]) {
    const { token } = await admin.access.createServiceToken({ name: `settings-${randomBytes(3).toString("hex")}`, scopes });
    const refused = await t.throwsAsync(createServiceClients(stack.serviceUrl, token).admin.setReferralSettings({ serverId: server.serverId, lockDays: 9 }));
    t.is(ConnectError.from(refused).code, Code.PermissionDenied, scopes.join(","));
  }
  const anonymous = await t.throwsAsync(createServiceClients(stack.serviceUrl, "").admin.setReferralSettings({ serverId: server.serverId, lockDays: 9 }));
  t.is(ConnectError.from(anonymous).code, Code.Unauthenticated);
  t.like((await admin.admin.getServer({ serverId: server.serverId })).server, { lockDays: 0, attributionWindowDays: 90 });
  t.like((await admin.admin.setReferralSettings({ serverId: server.serverId, lockDays: 9 })).server, { lockDays: 9 }, "the admin token may");
});
