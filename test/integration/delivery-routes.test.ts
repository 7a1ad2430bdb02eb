import anyTest, { type TestFn } from "ava";
import { createHmac, randomUUID } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { DeliveryStatus } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { NIL_UUID } from "../../services/shared/values/ids.js";
import { insertDelivery } from "../../services/delivery/pipeline/insert-deliveries.js";
import { eventually } from "../helpers/eventually.js";
import { headerOf, startReceiver, type RecordedRequest, type Receiver } from "../../scripts/harness/receiver.js";
import { startStack } from "../../scripts/harness/stack.js";
import { validateHeartCallbackHeaders, validateHeartEvent } from "./openapi-validate.js";
import {
  expectedCallbackMac,
  expectedStandardWebhookSignature,
  hexEquals,
  insertSecret,
  insertServer,
  parseCallbackSignature,
  startHarness,
  type Harness,
} from "../../scripts/harness/delivery-harness.js";

const test = anyTest as TestFn<{ h: Harness; strict: Harness; ingest: Receiver; receivers: Receiver[] }>;

/** The test event SendTestReferralEvent posted for `serverId` (tests run concurrently and share one ingest receiver). */
function testEventOf(ingest: Receiver, serverId: string): Promise<RecordedRequest> {
  const isOf = (r: RecordedRequest) => {
    try {
      return (JSON.parse(r.text) as { server_id?: unknown }).server_id === serverId;
    } catch {
      // Failure policy: a request that is not JSON is some other test's, not this server's event.
      return false;
    }
  };
  return eventually(() => ingest.requests.find(isOf), { message: `the test event of server ${serverId}` });
}

test.before(async (t) => {
  // A stand-in for the public gateway, so the exact test referral request can be inspected.
  const ingest = await startReceiver({ path: "", fallback: { status: 200, headers: { "content-type": "application/json" }, body: '{"ok":true,"test":true}' } });
  const h = await startHarness({ publicBaseUrl: `${ingest.url}/`, callbackTimeoutMs: 5_000 });
  const strict = await startHarness({ allowInsecureCallbacks: false });
  t.context = { h, strict, ingest, receivers: [ingest] };
});
test.after.always(async (t) => {
  await Promise.all(t.context.receivers.map((r) => r.close()));
  await t.context.h?.close();
  await t.context.strict?.close();
});

async function receiver(t: { context: { receivers: Receiver[] } }, opts?: Parameters<typeof startReceiver>[0]) {
  const r = await startReceiver(opts);
  t.context.receivers.push(r);
  return r;
}

function currentPeriod(): string {
  return new Date().toISOString().slice(0, 7);
}

test("SendTestCallback: heart.test with the nil uuid, the given username, the current UTC period and no streak_day, signed like a real callback", async (t) => {
  const { h } = t.context;
  const r = await receiver(t);
  const serverId = await insertServer(h.db.prisma, { callbackUrl: r.url });
  const { secret } = await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  const { report } = await h.delivery.sendTestCallback({ serverId, username: "Jeb" });
  const [request] = await r.waitForRequests(1);
  const signature = parseCallbackSignature(headerOf(request!, "x-service-signature"));
  t.truthy(signature);
  t.true(hexEquals(signature!.v1[0] ?? "", expectedCallbackMac(secret, signature!.t, request!.body)));
  t.is(headerOf(request!, "x-service-event"), "heart.test");
  t.is(headerOf(request!, "content-type"), "application/json");
  const body = JSON.parse(request!.text) as Record<string, unknown>;
  t.deepEqual(body, { event: "heart.test", server_id: serverId, username: "Jeb", heart_id: NIL_UUID, period: currentPeriod(), timestamp: signature!.t });
  t.deepEqual(validateHeartEvent(body).errors, []);
  t.deepEqual(validateHeartCallbackHeaders(request!.headers as Record<string, string>).errors, []);
  // Since issue #11 a test callback is a stored delivery like any other (it still pays nothing: heart.test, nil heart_id).
  const stored = await h.db.prisma.delivery.findMany({ where: { serverId } });
  t.is(stored.length, 1, "the test callback is stored as one delivery");
  t.like(stored[0], { eventType: "heart.test", heartId: NIL_UUID, status: "delivered", attempts: 1 });

  // The report is the exact exchange.
  t.truthy(report);
  t.is(report!.url, r.url);
  t.is(report!.requestBody, request!.text);
  t.is(report!.canonicalString, `${signature!.t}.${request!.text}`);
  t.is(report!.requestHeaders["X-Service-Signature"], headerOf(request!, "x-service-signature"));
  t.is(report!.requestHeaders["X-Service-Event"], "heart.test");
  t.is(report!.statusCode, 200);
  t.is(report!.responseBody, "ok");
  t.true(report!.ok);
  t.is(report!.error, "");
});

test("SendTestCallback: without a username the sample name TestPlayer is used; Standard Webhooks headers when opted in", async (t) => {
  const { h } = t.context;
  const r = await receiver(t);
  const serverId = await insertServer(h.db.prisma, { callbackUrl: r.url, standardWebhooks: true });
  const { secret } = await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  await h.delivery.sendTestCallback({ serverId, username: "" });
  const [request] = await r.waitForRequests(1);
  t.is((JSON.parse(request!.text) as { username: string }).username, "TestPlayer");
  const ts = Number(headerOf(request!, "webhook-timestamp"));
  t.is(headerOf(request!, "webhook-id"), NIL_UUID);
  t.is(headerOf(request!, "webhook-signature"), `v1,${expectedStandardWebhookSignature(secret, NIL_UUID, ts, request!.body)}`);
});

test("SendTestCallback reports a failing receiver: its status and (capped) body, ok = false", async (t) => {
  const { h } = t.context;
  const r = await receiver(t, { fallback: { status: 401, body: `bad signature ${"x".repeat(10_000)}` } });
  const serverId = await insertServer(h.db.prisma, { callbackUrl: r.url });
  await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  const { report } = await h.delivery.sendTestCallback({ serverId, username: "" });
  t.is(report?.statusCode, 401);
  t.false(report?.ok);
  t.is(report?.error, "receiver answered 401");
  t.true(report!.responseBody.startsWith("bad signature xxx"));
  t.is(report!.responseBody.length, 4096, "the response body is capped");
});

test("SendTestCallback reports an unreachable receiver with status 0 and the error", async (t) => {
  const { h } = t.context;
  const r = await receiver(t);
  await r.down();
  const serverId = await insertServer(h.db.prisma, { callbackUrl: r.url });
  await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  const { report } = await h.delivery.sendTestCallback({ serverId, username: "" });
  t.is(report?.statusCode, 0);
  t.is(report?.error, "connection failed: ECONNREFUSED");
  t.false(report?.ok);
});

test("SendTestCallback to a loopback address without the development flag is refused before connecting", async (t) => {
  const { strict } = t.context;
  const r = await receiver(t);
  const serverId = await insertServer(strict.db.prisma, { callbackUrl: `https://127.0.0.1:${r.port}/hook` });
  await insertSecret(strict.db.prisma, strict.deps.secretBox, serverId, "callback");
  const { report } = await strict.delivery.sendTestCallback({ serverId, username: "" });
  t.regex(report?.error ?? "", /^refused to connect to 127\.0\.0\.1/);
  t.is(r.requests.length, 0);
});

test("SendTestCallback preconditions: unknown server -> NotFound; no callback URL or no active secret -> FailedPrecondition", async (t) => {
  const { h } = t.context;
  const unknown = await t.throwsAsync(h.delivery.sendTestCallback({ serverId: randomUUID(), username: "" }), { instanceOf: ConnectError });
  t.is(unknown?.code, Code.NotFound);
  t.is(unknown?.rawMessage, "unknown server");
  const noUrl = await insertServer(h.db.prisma);
  await insertSecret(h.db.prisma, h.deps.secretBox, noUrl, "callback");
  const e1 = await t.throwsAsync(h.delivery.sendTestCallback({ serverId: noUrl, username: "" }), { instanceOf: ConnectError });
  t.is(e1?.code, Code.FailedPrecondition);
  t.regex(e1?.rawMessage ?? "", /no callback URL configured/);
  const noSecret = await insertServer(h.db.prisma, { callbackUrl: "http://127.0.0.1:9/hook" });
  const e2 = await t.throwsAsync(h.delivery.sendTestCallback({ serverId: noSecret, username: "" }), { instanceOf: ConnectError });
  t.is(e2?.code, Code.FailedPrecondition);
  t.regex(e2?.rawMessage ?? "", /no active callback secret/);
});

test("SendTestReferralEvent: signs a test:true event with the newest active referral secret (with its kid), posts it to <public base>/api/referral/events and reports the exact request", async (t) => {
  const { h, ingest } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const now = Date.now();
  await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "referral", { createdAt: new Date(now - 3600_000), expiresAt: new Date(now + 3600_000) });
  const newest = await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "referral", { createdAt: new Date(now - 60_000) });
  const { report } = await h.delivery.sendTestReferralEvent({ serverId, event: "" });
  const request = await testEventOf(ingest, serverId);
  t.is(request.path, "/api/referral/events");
  t.is(headerOf(request, "content-type"), "application/json");
  const header = headerOf(request, "x-service-signature") ?? "";
  const match = /^t=(\d+),v1=sha256=([0-9a-f]{64}),kid=(.+)$/.exec(header);
  t.truthy(match, header);
  const [, ts, hex, kid] = match!;
  t.is(kid, newest.kid);
  const expected = createHmac("sha256", newest.secret).update(`${ts}.`).update(request.body).digest("hex");
  t.is(hex, expected, "MAC over '<t>.<raw body>' with the newest referral secret, computed in the test");
  const body = JSON.parse(request.text) as Record<string, unknown>;
  t.deepEqual(Object.keys(body), ["event", "token", "server_id", "referee_identity", "server_event_id", "ts", "test"]);
  t.like(body, { event: "registered", token: "test-token", server_id: serverId, referee_identity: "test-player", ts: Number(ts), test: true });
  t.regex(String(body.server_event_id), /^dashboard-test-\d+$/);

  t.is(report?.url, `${ingest.url}/api/referral/events`);
  t.is(report?.requestBody, request.text);
  t.is(report?.canonicalString, `${ts}.${request.text}`);
  t.is(report?.requestHeaders["X-Service-Signature"], header);
  t.is(report?.statusCode, 200);
  t.is(report?.responseBody, '{"ok":true,"test":true}');
  t.true(report?.ok);
});

test("SendTestReferralEvent: the chosen event is signed; no active referral secret -> FailedPrecondition; a bad event -> InvalidArgument", async (t) => {
  const { h, ingest } = t.context;
  const serverId = await insertServer(h.db.prisma);
  await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "referral", { revokedAt: new Date() });
  const e1 = await t.throwsAsync(h.delivery.sendTestReferralEvent({ serverId, event: "qualified" }), { instanceOf: ConnectError });
  t.is(e1?.code, Code.FailedPrecondition);
  t.regex(e1?.rawMessage ?? "", /no active referral secret/);
  await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "referral");
  const e2 = await t.throwsAsync(h.delivery.sendTestReferralEvent({ serverId, event: "paid" }), { instanceOf: ConnectError });
  t.is(e2?.code, Code.InvalidArgument);
  await h.delivery.sendTestReferralEvent({ serverId, event: "qualified" });
  const request = await testEventOf(ingest, serverId);
  t.is((JSON.parse(request.text) as { event: string }).event, "qualified");
});

test("SendTestReferralEvent through the real gateway: the ingest endpoint verifies it and answers 200 {ok: true, test: true}", async (t) => {
  const stack = await startStack({ gateway: true });
  try {
    const serverId = await insertServer(stack.prisma, { referralsEnabled: true });
    await insertSecret(stack.prisma, stack.secretBox, serverId, "referral");
    const { report } = await stack.clients.delivery.sendTestReferralEvent({ serverId, event: "registered" });
    t.is(report?.url, `${stack.gatewayUrl}/api/referral/events`);
    t.is(report?.statusCode, 200, report?.responseBody);
    t.deepEqual(JSON.parse(report?.responseBody ?? "null"), { ok: true, test: true });
    t.true(report?.ok);
  } finally {
    await stack.close();
  }
});

async function seedDeliveries(h: Harness, serverId: string) {
  const make = async (status: "pending" | "delivered" | "failed", failedAt: Date | null, createdAt: Date) => {
    const heartId = randomUUID();
    await insertDelivery(h.db.prisma, {
      heartId,
      serverId,
      eventType: "heart.counted",
      username: "Steve",
      voterIdentity: `v-${heartId}`,
      period: "2026-03",
      streakDay: null,
      countedAt: createdAt,
    });
    const stored = await h.db.prisma.delivery.findFirstOrThrow({ where: { serverId, transport: "callback", dedupKey: heartId } });
    return h.db.prisma.delivery.update({
      where: { id: stored.id },
      data: { status, failedAt, createdAt, attempts: status === "pending" ? 0 : 11, nextAttemptAt: new Date(Date.now() + 3600_000) },
    });
  };
  return {
    pending: await make("pending", null, new Date("2026-03-01T00:00:00Z")),
    delivered: await make("delivered", null, new Date("2026-03-02T00:00:00Z")),
    oldFailure: await make("failed", new Date("2026-03-03T00:00:00Z"), new Date("2026-03-01T00:00:00Z")),
    newFailure: await make("failed", new Date("2026-03-05T00:00:00Z"), new Date("2026-03-04T00:00:00Z")),
  };
}

test("ListDeliveries: a server's deliveries newest first, filtered by status; GetDelivery returns the attempts; unknown ids -> NotFound", async (t) => {
  const { h } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const seeded = await seedDeliveries(h, serverId);
  const all = await h.delivery.listDeliveries({ serverId });
  t.deepEqual(
    all.deliveries.map((d) => d.id),
    [seeded.newFailure.id, seeded.delivered.id, ...[seeded.pending.id, seeded.oldFailure.id].sort()],
  );
  const failed = await h.delivery.listDeliveries({ serverId, status: DeliveryStatus.FAILED });
  t.deepEqual(
    failed.deliveries.map((d) => d.id),
    [seeded.newFailure.id, seeded.oldFailure.id],
  );
  t.true(failed.deliveries.every((d) => d.status === DeliveryStatus.FAILED && d.failedAt !== undefined));
  t.is((await h.delivery.listDeliveries({ serverId, limit: 1 })).deliveries.length, 1);

  await h.db.prisma.deliveryAttempt.create({
    data: {
      deliveryId: seeded.newFailure.id,
      attempt: 1,
      url: "http://127.0.0.1:9/hook",
      startedAt: new Date("2026-03-04T00:00:10Z"),
      statusCode: 503,
      latencyMs: 12,
      error: "receiver answered 503",
    },
  });
  const detail = await h.delivery.getDelivery({ deliveryId: seeded.newFailure.id });
  t.is(detail.delivery?.heartId, seeded.newFailure.heartId);
  t.like(detail.attempts[0], { attempt: 1, statusCode: 503, latencyMs: 12, error: "receiver answered 503", url: "http://127.0.0.1:9/hook" });

  const e1 = await t.throwsAsync(h.delivery.getDelivery({ deliveryId: randomUUID() }), { instanceOf: ConnectError });
  t.is(e1?.code, Code.NotFound);
  const e2 = await t.throwsAsync(h.delivery.listDeliveries({ serverId: randomUUID() }), { instanceOf: ConnectError });
  t.is(e2?.code, Code.NotFound);
});

test("Redeliver: a failed or delivered delivery goes back to pending with a fresh retry cycle; a pending one -> FailedPrecondition", async (t) => {
  const { h } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const seeded = await seedDeliveries(h, serverId);
  const before = Date.now();
  for (const d of [seeded.oldFailure, seeded.delivered]) {
    const res = await h.delivery.redeliver({ deliveryId: d.id });
    t.is(res.delivery?.status, DeliveryStatus.PENDING);
    const row = await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: d.id } });
    t.like(row, { status: "pending", attempts: 0, failedAt: null, deliveredAt: null, leaseUntil: null });
    t.true(row.nextAttemptAt.getTime() >= before - 1000 && row.nextAttemptAt.getTime() <= Date.now() + 1000, "due now");
  }
  const error = await t.throwsAsync(h.delivery.redeliver({ deliveryId: seeded.pending.id }), { instanceOf: ConnectError });
  t.is(error?.code, Code.FailedPrecondition);
});

test("RedeliverFailedSince requeues the server's deliveries that failed since the time and returns how many", async (t) => {
  const { h } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const other = await insertServer(h.db.prisma);
  const seeded = await seedDeliveries(h, serverId);
  const otherSeeded = await seedDeliveries(h, other);
  const res = await h.delivery.redeliverFailedSince({ serverId, since: timestampFromDate(new Date("2026-03-04T00:00:00Z")) });
  t.is(res.requeued, 1);
  t.is((await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: seeded.newFailure.id } })).status, "pending");
  t.is((await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: seeded.oldFailure.id } })).status, "failed");
  t.is((await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: otherSeeded.newFailure.id } })).status, "failed", "other servers untouched");
  const all = await h.delivery.redeliverFailedSince({ serverId, since: timestampFromDate(new Date("2026-01-01T00:00:00Z")) });
  t.is(all.requeued, 1);
  const missing = await t.throwsAsync(h.delivery.redeliverFailedSince({ serverId }), { instanceOf: ConnectError });
  t.is(missing?.code, Code.InvalidArgument);
});
