/**
 * Attempt exchanges, endpoint health, auto-disable, owner notifications and the test callback
 * as a delivery: real PostgreSQL, a real HTTP receiver, the production dispatcher and routes,
 * and real Kafka for the notification topic.
 */
import test, { type ExecutionContext } from "ava";
import { fromBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { randomBytes, randomUUID } from "node:crypto";
import { Kafka, logLevel } from "kafkajs";
import { DeliveryStatus } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { EnvelopeSchema, OwnerNotificationKind, type Envelope } from "../../gen/proto/events/v1/events_pb.js";
import { AUTO_DISABLE_AFTER_MS } from "../../services/delivery/pipeline/endpoint-health.js";
import { DELIVERY_FAILED_EVENT, ENDPOINT_DISABLED_EVENT } from "../../services/delivery/pipeline/owner-notifications.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { MAX_RESPONSE_BODY_BYTES } from "../../services/delivery/pipeline/send-callback.js";
import { NIL_UUID } from "../../services/shared/values/ids.js";
import { insertDelivery } from "../../services/delivery/pipeline/insert-deliveries.js";
import { createRelay } from "../../services/relay/relay.js";
import { OWNER_NOTIFICATIONS_TOPIC } from "../../services/shared/adapters/bus.js";
import { createKafkaBus, ensureTopics } from "../../services/shared/adapters/kafka-bus.js";
import { eventually } from "../helpers/eventually.js";
import { headerOf } from "../../scripts/harness/receiver.js";
import { startVotifierReceiver } from "../helpers/votifier-receiver.js";
import {
  createTestClock,
  insertSecret,
  insertServer,
  type Harness,
  type TestClock,
  startDispatchWorld,
  addDelivery,
  defaultEndpoint,
  type DispatchWorld,
} from "../../scripts/harness/delivery-harness.js";

const DAY_MS = 24 * 60 * 60 * 1000;

/** Waits for an asynchronous outcome; generously, because the whole suite shares two cores. */
const until = <T>(check: () => Promise<T | undefined | false> | T | undefined | false) => eventually(check, { timeoutMs: 30_000 });

/** One test's world (startDispatchWorld); with `clockAt`, a test clock for everything. */
async function world(t: ExecutionContext, opts: { clockAt?: string; testSchedule?: string } = {}): Promise<DispatchWorld & { clock: TestClock | undefined }> {
  const clock = opts.clockAt ? createTestClock(opts.clockAt) : undefined;
  const now = clock ? clock.now : () => new Date();
  const w = await startDispatchWorld(t, {
    harness: { now, retrySchedule: parseRetrySchedule(opts.testSchedule ?? "100ms,100ms", { jitterRatio: 0 }) },
    scheduleText: "100ms,100ms",
  });
  return { ...w, clock };
}

async function callbackServer(h: Harness, url: string) {
  const serverId = await insertServer(h.db.prisma, { callbackUrl: url, name: "Exchange test server" });
  const { secret } = await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  return { serverId, secret };
}

const deliveryOf = (h: Harness, heartId: string) => h.db.prisma.delivery.findFirstOrThrow({ where: { heartId } });

/** Outbox rows of owner notifications for a server, decoded. */
async function notificationsOf(h: Harness, serverId: string): Promise<Envelope[]> {
  const rows = await h.db.prisma.outboxMessage.findMany({ where: { topic: OWNER_NOTIFICATIONS_TOPIC, key: serverId }, orderBy: { id: "asc" } });
  return rows.map((r) => fromBinary(EnvelopeSchema, r.payload));
}

// ---- attempt exchanges ------------------------------------------------------------------------

test.serial(
  "every attempt stores the exact request (URL, headers with the signature, body) and the response (status, headers, first 4 KiB of the body); GetDelivery returns them",
  async (t) => {
    const { h, dispatcher, receiver } = await world(t);
    const longBody = `${"x".repeat(MAX_RESPONSE_BODY_BYTES)}TAIL`;
    const r = await receiver({ fallback: { status: 503, headers: { "x-receiver": "shard-7", "retry-after": "1" }, body: longBody } });
    const { serverId } = await callbackServer(h, r.url);
    const heartId = await addDelivery(h, serverId, { username: "Alex" });
    dispatcher().start();
    const [request] = await r.waitForRequests(1);
    const delivery = await until(async () => {
      const d = await deliveryOf(h, heartId);
      return d.attempts >= 1 ? d : undefined;
    });

    const { attempts } = await h.delivery.getDelivery({ deliveryId: delivery.id, serverId });
    const first = attempts[0]!;
    t.true(first.exchangeRecorded);
    t.is(first.url, r.url);
    t.is(first.requestBody, request!.text, "the stored body is the exact bytes the receiver got");
    t.is(first.requestHeaders["X-Service-Signature"], headerOf(request!, "x-service-signature"), "the signature header as sent");
    t.is(first.requestHeaders["X-Service-Event"], "heart.counted");
    t.is(first.requestHeaders["Content-Length"], String(request!.body.length));
    t.is(first.statusCode, 503);
    t.false(first.succeeded);
    t.is(first.responseHeaders["x-receiver"], "shard-7");
    t.is(first.responseBody, "x".repeat(MAX_RESPONSE_BODY_BYTES), "exactly the first 4 KiB are kept");
    t.true(first.responseBodyTruncated);
    t.is(first.error, "receiver answered 503");
  },
);

test.serial("no secret is ever stored with an attempt: a whsec_ value echoed by the receiver and its cookies are masked", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver();
  const { serverId, secret } = await callbackServer(h, r.url);
  r.setFallback({ status: 200, headers: { "set-cookie": "session=abc123", "x-echo": secret }, body: `my secret is ${secret}` });
  const heartId = await addDelivery(h, serverId);
  dispatcher().start();
  await until(async () => (await deliveryOf(h, heartId)).status === "delivered");
  const attempt = await h.db.prisma.deliveryAttempt.findFirstOrThrow({ where: { delivery: { heartId } } });
  const stored = JSON.stringify(attempt, (_, v: unknown) => (typeof v === "bigint" ? String(v) : v));
  t.false(stored.includes(secret), "the secret value is nowhere in the stored attempt");
  t.false(stored.includes("abc123"), "the receiver's cookie is not kept");
  t.is(attempt.responseBody, "my secret is whsec_[hidden]");
  t.like(attempt.responseHeaders, { "set-cookie": "[hidden]", "x-echo": "whsec_[hidden]" });
  t.true(attempt.succeeded);
});

test.serial("an attempt without a response stores the request and no response (connection refused)", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver();
  const { serverId } = await callbackServer(h, r.url);
  await r.down();
  const heartId = await addDelivery(h, serverId);
  dispatcher().start();
  const attempt = await until(() => h.db.prisma.deliveryAttempt.findFirst({ where: { delivery: { heartId } } }).then((a) => a ?? undefined));
  t.regex(attempt.requestBody ?? "", /"event":"heart.counted"/);
  t.is(attempt.responseHeaders, null);
  t.is(attempt.responseBody, null);
  t.is(attempt.statusCode, null);
  t.regex(attempt.error ?? "", /^connection failed: ECONNREFUSED/);
});

test.serial("GetDelivery and Redeliver scoped to a server: another server's delivery id is unknown", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver();
  const { serverId } = await callbackServer(h, r.url);
  const other = await insertServer(h.db.prisma, { name: "Someone else" });
  const heartId = await addDelivery(h, serverId);
  dispatcher().start();
  const delivery = await until(async () => {
    const d = await deliveryOf(h, heartId);
    return d.status === "delivered" ? d : undefined;
  });
  await t.throwsAsync(h.delivery.getDelivery({ deliveryId: delivery.id, serverId: other }), { message: /unknown delivery/ });
  await t.throwsAsync(h.delivery.redeliver({ deliveryId: delivery.id, serverId: other }), { message: /unknown delivery/ });
  t.is((await h.delivery.getDelivery({ deliveryId: delivery.id, serverId })).delivery?.id, delivery.id);
});

test.serial("ListDeliveries finds a player's deliveries by username (case-insensitive, part of the name)", async (t) => {
  const { h } = await world(t);
  const serverId = await insertServer(h.db.prisma);
  await addDelivery(h, serverId, { username: "Steve" });
  await addDelivery(h, serverId, { username: "Alex" });
  await addDelivery(h, serverId, { username: "steven_2" });
  const { deliveries } = await h.delivery.listDeliveries({ serverId, username: "STEV" });
  t.deepEqual(deliveries.map((d) => d.username).sort(), ["Steve", "steven_2"]);
  t.is((await h.delivery.listDeliveries({ serverId, username: "nobody" })).deliveries.length, 0);
});

// ---- the test callback as a delivery --------------------------------------------------------

test.serial(
  "SendTestCallback stores a heart.test delivery (nil heart_id), returns its first exchange at once, and a non-2xx is retried by the dispatcher until a 2xx",
  async (t) => {
    const { h, dispatcher, receiver } = await world(t);
    const r = await receiver({
      responses: [
        { status: 500, body: "not yet" },
        { status: 502, body: "still not" },
      ],
    });
    const { serverId } = await callbackServer(h, r.url);
    const { report, delivery } = await h.delivery.sendTestCallback({ serverId, username: "Notch" });
    t.is(report?.statusCode, 500);
    t.is(report?.responseBody, "not yet");
    t.false(report?.ok);
    t.is(delivery?.eventType, "heart.test");
    t.is(delivery?.heartId, NIL_UUID);
    t.is(delivery?.status, DeliveryStatus.PENDING, "a failed first attempt leaves it pending for a retry");
    t.is(delivery?.attempts, 1);

    dispatcher().start();
    await eventually(async () => (await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: delivery!.id } })).status === "delivered", {
      timeoutMs: 30_000,
      message: "the test delivery delivered after retries",
    });
    const requests = await r.waitForRequests(3);
    t.true(requests.every((q) => JSON.parse(q.text).event === "heart.test" && JSON.parse(q.text).heart_id === NIL_UUID));
    t.true(
      requests.every((q) => /^t=\d+,v1=[0-9a-f]{64}$/.test(headerOf(q, "x-service-signature") ?? "")),
      "each attempt signed",
    );
    const { attempts } = await h.delivery.getDelivery({ deliveryId: delivery!.id, serverId });
    t.deepEqual(
      attempts.map((a) => a.statusCode),
      [500, 502, 200],
    );
    const listed = await h.delivery.listDeliveries({ serverId });
    t.true(
      listed.deliveries.some((d) => d.id === delivery!.id),
      "visible in the delivery log",
    );

    const again = await h.delivery.redeliver({ deliveryId: delivery!.id, serverId });
    t.is(again.delivery?.status, DeliveryStatus.PENDING, "redeliverable like any other");
    await until(async () => (await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: delivery!.id } })).status === "delivered");
    await r.waitForRequests(4);
    t.is(r.requests.length, 4);
  },
);

test.serial("a test callback that never gets a 2xx fails for good when the schedule ends", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver({ fallback: { status: 500, body: "broken" } });
  const { serverId } = await callbackServer(h, r.url);
  const { delivery } = await h.delivery.sendTestCallback({ serverId, username: "" });
  dispatcher().start();
  const failed = await until(async () => {
    const d = await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: delivery!.id } });
    return d.status === "failed" ? d : undefined;
  });
  t.is(failed.attempts, 3, "the first attempt and the two scheduled retries");
  t.is(failed.username, "TestPlayer");
});

test.serial("every test callback is its own delivery, while heart.counted stays unique per (heart, server)", async (t) => {
  const { h, receiver } = await world(t);
  const r = await receiver();
  const { serverId } = await callbackServer(h, r.url);
  const first = await h.delivery.sendTestCallback({ serverId, username: "A" });
  const second = await h.delivery.sendTestCallback({ serverId, username: "B" });
  t.not(first.delivery?.id, second.delivery?.id);
  t.is(first.delivery?.status, DeliveryStatus.DELIVERED);
  t.is(await h.db.prisma.delivery.count({ where: { serverId, heartId: NIL_UUID } }), 2);

  const heartId = randomUUID();
  const counted = {
    heartId,
    serverId,
    eventType: "heart.counted",
    username: "S",
    voterIdentity: "v",
    period: "2026-03",
    streakDay: null,
    countedAt: new Date(),
  };
  t.is(await insertDelivery(h.db.prisma, counted), "inserted");
  t.is(await insertDelivery(h.db.prisma, counted), "duplicate", "a redelivered Kafka message adds nothing");
});

// ---- endpoint health and auto-disable ----------------------------------------------------------

test.serial("GetEndpointHealth: success rate over 24 h and 7 days, last success, last failure and its reason, the current run of failures", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver({ responses: [{ status: 200 }], fallback: { status: 500, body: "boom" } });
  const { serverId } = await callbackServer(h, r.url);
  const okHeart = await addDelivery(h, serverId);
  const d = dispatcher({ scheduleText: "50ms" });
  d.start();
  await until(async () => (await deliveryOf(h, okHeart)).status === "delivered");
  const badHeart = await addDelivery(h, serverId);
  d.wake();
  await until(async () => (await deliveryOf(h, badHeart)).status === "failed");
  // One old attempt, three days ago: in the 7-day window, not in the 24-hour one.
  await h.db.prisma.deliveryAttempt.updateMany({ where: { delivery: { heartId: okHeart } }, data: { startedAt: new Date(Date.now() - 3 * DAY_MS) } });

  const health = await h.delivery.getEndpointHealth({ serverId });
  t.like(health.last24h, { attempts: 2, succeeded: 0, successRate: 0 });
  t.like(health.last7d, { attempts: 3, succeeded: 1 });
  t.true(Math.abs(health.last7d!.successRate - 1 / 3) < 1e-9);
  t.truthy(health.lastSuccessAt);
  t.is(health.lastFailureReason, "receiver answered 500");
  t.truthy(health.failingSince, "failing since the first failure after the last success");
  t.is(timestampDate(health.autoDisableAt!).getTime() - timestampDate(health.failingSince!).getTime(), AUTO_DISABLE_AFTER_MS);
  t.is(health.failedDeliveries7d, 1);
  t.is(health.disabledReason, "");
  await t.throwsAsync(h.delivery.getEndpointHealth({ serverId: randomUUID() }), { message: /unknown server/ });
});

test.serial(
  "after 5 days of nothing but failures the callback is disabled with its reason, deliveries are held, and owner.endpoint_disabled is written to the outbox",
  async (t) => {
    const { h, clock, dispatcher, receiver } = await world(t, { clockAt: "2027-03-01T00:00:00Z" });
    const r = await receiver({ fallback: { status: 500, body: "down" } });
    const { serverId } = await callbackServer(h, r.url);
    const heartId = await addDelivery(h, serverId);
    const d = dispatcher({ scheduleText: "1h,1h,1h" });
    d.start();
    await until(async () => (await deliveryOf(h, heartId)).attempts === 1);
    // Four days later: still failing, not yet disabled.
    clock!.set("2027-03-05T00:00:00Z");
    d.wake();
    await until(async () => (await deliveryOf(h, heartId)).attempts === 2);
    t.is((await defaultEndpoint(h.db.prisma, serverId)).disabledAt, null);
    // Five days and a minute after the first failure: the next failure disables.
    clock!.set("2027-03-06T00:01:00Z");
    d.wake();
    await until(async () => (await deliveryOf(h, heartId)).attempts === 3);
    const server = await defaultEndpoint(h.db.prisma, serverId);
    t.is(server.disabledReason, "every attempt failed for 5 days (since 2027-03-01T00:00:00.000Z); last error: receiver answered 500");
    t.deepEqual(server.disabledAt, new Date("2027-03-06T00:01:00Z"));
    const delivery = await deliveryOf(h, heartId);
    t.is(delivery.status, "pending", "held, not lost");

    const notes = await notificationsOf(h, serverId);
    t.is(notes.length, 1);
    t.is(notes[0]!.type, ENDPOINT_DISABLED_EVENT);
    t.is(notes[0]!.payload.case, "ownerNotification");
    const n = notes[0]!.payload.value as { kind: OwnerNotificationKind; reason: string; callbackUrl: string; serverName: string };
    t.is(n.kind, OwnerNotificationKind.ENDPOINT_DISABLED);
    t.is(n.reason, server.disabledReason ?? "(none)");
    t.is(n.callbackUrl, r.url);
    t.is(n.serverName, "Exchange test server");

    const health = await h.delivery.getEndpointHealth({ serverId });
    t.is(health.disabledReason, server.disabledReason ?? "(none)");
    t.is(health.autoDisableAt, undefined, "no auto-disable time while already disabled");

    // Re-enabling starts a fresh period: the next failure does not disable again at once.
    const { server: enabled } = await h.admin.enableCallback({ serverId });
    t.is(enabled?.callbackDisabledReason, "");
    clock!.set("2027-03-06T02:00:00Z");
    d.wake();
    await until(async () => (await deliveryOf(h, heartId)).attempts === 4);
    t.is((await defaultEndpoint(h.db.prisma, serverId)).disabledAt, null);
  },
);

test.serial("a 2xx in between ends the run of failures: failures spread over 5 days with a success among them do not disable", async (t) => {
  const { h, clock, dispatcher, receiver } = await world(t, { clockAt: "2027-04-01T00:00:00Z" });
  const r = await receiver({ fallback: { status: 500 } });
  const { serverId } = await callbackServer(h, r.url);
  // The first delivery's retry is due on day 3, after the success of day 2.
  const d = dispatcher({ scheduleText: "3d,3d" });
  d.start();
  const first = await addDelivery(h, serverId);
  d.wake();
  await until(async () => (await deliveryOf(h, first)).attempts === 1);
  clock!.set("2027-04-03T00:00:00Z");
  r.enqueue({ status: 204 });
  const ok = await addDelivery(h, serverId);
  d.wake();
  await until(async () => (await deliveryOf(h, ok)).status === "delivered");
  clock!.set("2027-04-06T00:01:00Z");
  d.wake();
  await until(async () => (await deliveryOf(h, first)).attempts === 2);
  t.is((await defaultEndpoint(h.db.prisma, serverId)).disabledAt, null);
  const health = await h.delivery.getEndpointHealth({ serverId });
  t.deepEqual(timestampDate(health.failingSince!), new Date("2027-04-06T00:01:00Z"));
  t.deepEqual(timestampDate(health.lastSuccessAt!), new Date("2027-04-03T00:00:00Z"));
});

test.serial(
  "a delivery that fails for good writes owner.delivery_failed (delivery, player, attempts, last error); a 410 writes owner.endpoint_disabled",
  async (t) => {
    const { h, dispatcher, receiver } = await world(t);
    const r = await receiver({ fallback: { status: 500, body: "no" } });
    const { serverId } = await callbackServer(h, r.url);
    const heartId = await addDelivery(h, serverId, { username: "Herobrine" });
    const d = dispatcher({ scheduleText: "50ms" });
    d.start();
    const failed = await until(async () => {
      const x = await deliveryOf(h, heartId);
      return x.status === "failed" ? x : undefined;
    });
    let notes = await notificationsOf(h, serverId);
    t.is(notes.length, 1);
    t.is(notes[0]!.type, DELIVERY_FAILED_EVENT);
    t.like(notes[0]!.payload.value, {
      kind: OwnerNotificationKind.DELIVERY_FAILED,
      deliveryId: failed.id,
      heartId,
      eventType: "heart.counted",
      username: "Herobrine",
      attempts: 2,
      lastStatusCode: 500,
      reason: "receiver answered 500",
    });

    r.setFallback({ status: 410, body: "gone" });
    await addDelivery(h, serverId);
    d.wake();
    await until(async () => (await defaultEndpoint(h.db.prisma, serverId)).disabledAt !== null);
    notes = await notificationsOf(h, serverId);
    t.is(notes.length, 2);
    t.is(notes[1]!.type, ENDPOINT_DISABLED_EVENT);
    t.regex((notes[1]!.payload.value as { reason: string }).reason, /^receiver answered 410 Gone at /);
  },
);

test.serial("owner notifications reach real Kafka: the relay publishes them on owner.notifications.v1, keyed by server id", async (t) => {
  const brokers = (process.env.KAFKA_BROKERS ?? "").split(",").filter(Boolean);
  if (brokers.length === 0) throw new Error("KAFKA_BROKERS is not set: run through `npm test`");
  const { h, dispatcher, receiver } = await world(t);
  await ensureTopics(brokers, [OWNER_NOTIFICATIONS_TOPIC]);
  const r = await receiver({ fallback: { status: 410 } });
  const { serverId } = await callbackServer(h, r.url);
  await addDelivery(h, serverId);
  dispatcher().start();
  await until(async () => (await notificationsOf(h, serverId)).length === 1);

  const log = h.deps.log;
  const bus = createKafkaBus({ brokers, clientId: `notify-test-${randomBytes(4).toString("hex")}`, log });
  const relay = createRelay({ prisma: h.db.prisma, bus, log, pollIntervalMs: 25 });
  const kafka = new Kafka({ clientId: "notify-reader", brokers, logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `notify-reader-${randomBytes(5).toString("hex")}` });
  t.teardown(async () => {
    await consumer.disconnect();
    await relay.stop();
    await bus.close();
  });
  const seen: { key: string; envelope: Envelope }[] = [];
  await consumer.connect();
  await consumer.subscribe({ topic: OWNER_NOTIFICATIONS_TOPIC, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      const key = message.key?.toString("utf8") ?? "";
      if (key === serverId) seen.push({ key, envelope: fromBinary(EnvelopeSchema, message.value!) });
    },
  });
  relay.start();
  await eventually(() => seen.length >= 1, { timeoutMs: 30_000, message: "the notification on Kafka" });
  const { envelope } = seen[0]!;
  t.is(envelope.type, ENDPOINT_DISABLED_EVENT);
  t.is(envelope.serverId, serverId);
  t.like(envelope.payload.value, { kind: OwnerNotificationKind.ENDPOINT_DISABLED, serverId, callbackUrl: r.url });
  // The relay publishes before it commits, so the reader may see the message a moment before the row is marked.
  await eventually(async () => (await h.db.prisma.outboxMessage.count({ where: { key: serverId, publishedAt: null } })) === 0, {
    timeoutMs: 30_000,
    message: "the outbox row marked published",
  });
  t.pass();
});

test.serial(
  "a Votifier attempt stores its exchange too (the signed payload, the greeting and the answer; never the token) and leaves the callback endpoint's health alone",
  async (t) => {
    const { h, dispatcher } = await world(t);
    const token = "nvtoken-exchange-test-4k2m9x";
    const r = await startVotifierReceiver({ tokens: { default: token } });
    t.teardown(() => r.close());
    const serverId = await insertServer(h.db.prisma, { name: "Votifier only" });
    await h.db.prisma.server.update({
      where: { id: serverId },
      data: { votifierHost: r.host, votifierPort: r.port, votifierServiceName: "HeartsList", votifierToken: h.deps.secretBox.seal(token) },
    });
    const heartId = await addDelivery(h, serverId, { username: "Alex" });
    dispatcher().start();
    await r.waitForVotes(1);
    const attempt = await until(() =>
      h.db.prisma.deliveryAttempt.findFirst({ where: { delivery: { heartId, transport: "votifier" } } }).then((a) => a ?? undefined),
    );
    t.true(attempt.succeeded);
    t.regex(attempt.url, /^votifier:\/\//);
    t.deepEqual(attempt.requestHeaders, {});
    t.true((attempt.requestBody ?? "").includes('"username":"Alex"'), attempt.requestBody ?? "");
    t.regex(attempt.responseBody ?? "", /^VOTIFIER 2 \S+\n.*"status":"ok"/s);
    t.false(JSON.stringify(attempt, (_, v: unknown) => (typeof v === "bigint" ? String(v) : v)).includes(token), "the token is never stored");
    const { attempts } = await h.delivery.getDelivery({ deliveryId: attempt.deliveryId, serverId });
    t.true(attempts[0]!.responseReceived);
    t.is(await h.db.prisma.callbackHealth.count({ where: { serverId } }), 0, "not the callback endpoint's health");
  },
);
