import test, { type ExecutionContext } from "ava";
import { randomUUID } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { EnvelopeSchema, HeartCountedSchema } from "../../gen/proto/events/v1/events_pb.js";
import { createDeliveryConsumer } from "../../services/delivery/pipeline/consumer.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { recordAttempts, type AttemptRecord } from "../../services/delivery/pipeline/attempt-log.js";
import { claimDueDeliveries, type ClaimedDelivery } from "../../services/delivery/pipeline/claim-deliveries.js";
import { insertDeliveries } from "../../services/delivery/pipeline/insert-deliveries.js";
import type { EventBus, ReceivedMessage } from "../../services/shared/adapters/bus.js";
import { eventually } from "../helpers/eventually.js";
import { headerOf, type RecordedRequest } from "../../scripts/harness/receiver.js";
import {
  expectedCallbackMac,
  hexEquals,
  insertSecret,
  insertServer,
  parseCallbackSignature,
  startDispatchWorld,
  addDelivery,
} from "../../scripts/harness/delivery-harness.js";

// Batching in the delivery service (issue #8): the consumer's one-statement insert, the claim that
// reads secrets with the rows, group-committed attempt records, keep-alive pools. Correctness only,
// no timings.

const world = (t: ExecutionContext) => startDispatchWorld(t, { scheduleText: "200ms,200ms,200ms", timeoutMs: 20_000 });

function macsOf(request: RecordedRequest): { t: number; v1: string[] } {
  const parsed = parseCallbackSignature(headerOf(request, "x-service-signature"));
  if (!parsed) throw new Error("malformed signature header");
  return parsed;
}

function heartMessage(serverId: string, heartId: string, offset: number): ReceivedMessage {
  const at = new Date();
  const value = toBinary(
    EnvelopeSchema,
    create(EnvelopeSchema, {
      eventId: randomUUID(),
      type: "heart.counted",
      occurredAt: timestampFromDate(at),
      serverId,
      payload: {
        case: "heartCounted",
        value: create(HeartCountedSchema, {
          heartId,
          serverId,
          username: "Alex",
          voterIdentity: `v-${heartId}`,
          period: "2026-03",
          countedAt: timestampFromDate(at),
          streakDay: 2,
        }),
      },
    }),
  );
  return { topic: "test.batch", key: serverId, value, partition: 0, offset: String(offset) };
}

/** handleBatch is called directly here; the consumer is never started, so the bus is never used. */
const unusedBus = {} as EventBus;

test.serial("a rotated callback secret signs the very next attempt: overlap signs with both (newest first), a revoked one no more", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver({ responses: [{ status: 503 }, { status: 503 }], fallback: { status: 200 } });
  const serverId = await insertServer(h.db.prisma, { callbackUrl: r.url });
  const old = await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback", { createdAt: new Date(Date.now() - 60_000) });
  const heartId = await addDelivery(h, serverId);
  // Pause between attempts long enough to rotate while the delivery waits for its retry.
  dispatcher({ schedule: parseRetrySchedule("1500ms,1500ms", { jitterRatio: 0 }) }).start();
  const [first] = await r.waitForRequests(1, 15_000);
  t.deepEqual(macsOf(first!).v1.length, 1);
  t.true(hexEquals(macsOf(first!).v1[0]!, expectedCallbackMac(old.secret, macsOf(first!).t, first!.body)), "first attempt: the old secret");

  const rotated = await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  const [, second] = await r.waitForRequests(2, 15_000);
  const s2 = macsOf(second!);
  t.is(s2.v1.length, 2, "during the overlap both secrets sign");
  t.true(hexEquals(s2.v1[0]!, expectedCallbackMac(rotated.secret, s2.t, second!.body)), "the new secret first");
  t.true(hexEquals(s2.v1[1]!, expectedCallbackMac(old.secret, s2.t, second!.body)));

  await h.db.prisma.serverSecret.updateMany({ where: { serverId, kid: old.kid }, data: { revokedAt: new Date() } });
  const [, , third] = await r.waitForRequests(3, 15_000);
  const s3 = macsOf(third!);
  t.is(s3.v1.length, 1, "the revoked secret signs nothing");
  t.true(hexEquals(s3.v1[0]!, expectedCallbackMac(rotated.secret, s3.t, third!.body)));
  await eventually(async () => (await h.db.prisma.delivery.findFirstOrThrow({ where: { heartId } })).status === "delivered");
});

test.serial(
  "one slow receiver never delays a fast one: every fast delivery is sent and recorded while the slow receiver still holds its first requests",
  async (t) => {
    const { h, dispatcher, receiver } = await world(t);
    const slow = await receiver({ fallback: { hang: true } });
    const fast = await receiver();
    const slowServer = await insertServer(h.db.prisma, { callbackUrl: slow.url });
    await insertSecret(h.db.prisma, h.deps.secretBox, slowServer, "callback");
    const fastServer = await insertServer(h.db.prisma, { callbackUrl: fast.url });
    await insertSecret(h.db.prisma, h.deps.secretBox, fastServer, "callback");
    // The slow server's rows first: they are due earliest and claimed first.
    for (let i = 0; i < 12; i++) await addDelivery(h, slowServer);
    const fastHearts: string[] = [];
    for (let i = 0; i < 60; i++) fastHearts.push(await addDelivery(h, fastServer));
    dispatcher({ concurrency: 8, perServerConcurrency: 4 }).start();
    await eventually(async () => (await h.db.prisma.delivery.count({ where: { serverId: fastServer, status: "delivered" } })) === fastHearts.length, {
      timeoutMs: 15_000,
    });
    t.is(new Set(fast.requests.map((q) => (JSON.parse(q.text) as { heart_id: string }).heart_id)).size, fastHearts.length, "each fast heart sent once");
    t.true(slow.requests.length <= 4, `the slow receiver holds at most its per-server share (${slow.requests.length})`);
    t.is(await h.db.prisma.deliveryAttempt.count({ where: { serverId: slowServer } }), 0, "no slow attempt has ended");
  },
);

test.serial(
  "adaptive per-server caps: a server answering fast gets more slots than the small cap while a hanging one keeps the small cap, and a failure drops a raised cap back",
  async (t) => {
    const { h, dispatcher, receiver } = await world(t);
    // 200 fast answers, then 503s.
    const fast = await receiver({ fallback: () => (fast.requests.length > 200 ? { status: 503, delayMs: 10 } : { delayMs: 10 }) });
    const slow = await receiver({ fallback: { hang: true } });
    const fastServer = await insertServer(h.db.prisma, { callbackUrl: fast.url });
    const slowServer = await insertServer(h.db.prisma, { callbackUrl: slow.url });
    for (const id of [fastServer, slowServer]) await insertSecret(h.db.prisma, h.deps.secretBox, id, "callback");
    const hearts = (serverId: string, n: number, offsetMs: number) =>
      Array.from({ length: n }, (_, i) => ({
        heartId: randomUUID(),
        serverId,
        eventType: "heart.counted",
        username: "Alex",
        voterIdentity: `v-${serverId}-${i}`,
        period: "2026-03",
        streakDay: null,
        countedAt: new Date(Date.now() - offsetMs + i),
      }));
    // The hanging server's rows first: due earliest, claimed first.
    await insertDeliveries(h.db.prisma, [...hearts(slowServer, 12, 120_000), ...hearts(fastServer, 300, 60_000)]);
    // Small cap 2, at most 8 (a quarter of 32).
    const d = dispatcher({ concurrency: 32, perServerConcurrency: 2 });
    let fastPeak = 0;
    let capPeak = 0;
    const sampler = setInterval(() => {
      fastPeak = Math.max(fastPeak, d.inFlight().get(fastServer) ?? 0);
      capPeak = Math.max(capPeak, d.capOf(fastServer));
    }, 1);
    t.teardown(() => clearInterval(sampler));
    d.start();
    await eventually(async () => (await h.db.prisma.delivery.count({ where: { serverId: fastServer, status: "delivered" } })) >= 200, { timeoutMs: 20_000 });
    t.true(fastPeak > 2, `the fast server had ${fastPeak} in flight at most`);
    t.true(capPeak > 2 && capPeak <= 8, `its cap grew to ${capPeak}, never over the maximum`);
    t.true(fastPeak <= 8, "never more in flight than the maximum");
    t.true(slow.requests.length <= 2, `the hanging receiver holds its small cap only (${slow.requests.length})`);
    t.is(d.capOf(slowServer), 2);
    // The fast receiver now answers 503: its cap falls back to the small one.
    await eventually(() => fast.requests.length > 205 && d.capOf(fastServer) === 2, { timeoutMs: 10_000, message: `cap ${d.capOf(fastServer)}` });
  },
);

test.serial(
  "steady traffic without a backlog: each consumer batch goes out leased by its own insert, and slots freeing up call no claim statement",
  async (t) => {
    const { h, dispatcher, receiver } = await world(t);
    const fast = await receiver();
    const servers = [await insertServer(h.db.prisma, { callbackUrl: fast.url }), await insertServer(h.db.prisma, { callbackUrl: fast.url })];
    for (const id of servers) await insertSecret(h.db.prisma, h.deps.secretBox, id, "callback");
    let claims = 0;
    // Counts the claim statements the dispatcher runs (the claim itself is unchanged).
    const claim: typeof claimDueDeliveries = (prisma, q) => {
      claims++;
      return claimDueDeliveries(prisma, q);
    };
    const d = dispatcher({ claim, concurrency: 32, perServerConcurrency: 4, pollIntervalMs: 3_600_000 });
    d.start();
    await eventually(() => claims === 1, { message: "the claim at start" });
    const consumer = createDeliveryConsumer({ bus: unusedBus, prisma: h.db.prisma, log: h.deps.log, topic: "test.batch", dispatcher: d });
    let offset = 0;
    for (let batch = 0; batch < 15; batch++) {
      const hearts = Array.from({ length: 4 }, (_, i) => heartMessage(servers[i % 2]!, randomUUID(), offset++));
      await consumer.handleBatch(hearts);
      // The previous batches' callbacks finish meanwhile, freeing their slots.
      await eventually(() => fast.requests.length === offset, { message: `batch ${batch}: ${fast.requests.length}/${offset} sent` });
    }
    await eventually(async () => (await h.db.prisma.delivery.count({ where: { status: "delivered" } })) === offset, { timeoutMs: 15_000 });
    t.is(claims, 1, "no claim after the one at start: every row was leased by its insert");
  },
);

test.serial("a backlog of one server beyond its cap drains as its slots free, without waiting for the poll", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const fast = await receiver();
  const serverId = await insertServer(h.db.prisma, { callbackUrl: fast.url });
  await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  for (let i = 0; i < 40; i++) await addDelivery(h, serverId);
  dispatcher({ concurrency: 32, perServerConcurrency: 2, pollIntervalMs: 3_600_000 }).start();
  await eventually(async () => (await h.db.prisma.delivery.count({ where: { status: "delivered" } })) === 40, { timeoutMs: 15_000 });
  t.is(new Set(fast.requests.map((q) => (JSON.parse(q.text) as { heart_id: string }).heart_id)).size, 40, "each heart sent once");
});

test.serial(
  "a consumer batch stores one delivery per heart: duplicates in the batch and across concurrent batches add nothing; poison and unknown servers are set aside without failing the rest",
  async (t) => {
    const { h } = await world(t);
    const consumer = createDeliveryConsumer({ bus: unusedBus, prisma: h.db.prisma, log: h.deps.log, topic: "test.batch" });
    const a = await insertServer(h.db.prisma);
    const b = await insertServer(h.db.prisma);
    const hearts = Array.from({ length: 20 }, () => randomUUID());
    const batch = hearts.map((id, i) => heartMessage(i % 2 === 0 ? a : b, id, i));
    const poison: ReceivedMessage = { topic: "test.batch", key: a, value: new Uint8Array([0xff, 0xff, 0x0f]), partition: 0, offset: "100" };
    const ghost = heartMessage(randomUUID(), randomUUID(), 101);
    // The same heart twice in one batch, and the batch handled twice at once (two instances during a rebalance).
    const withRepeats = [...batch, batch[0]!, poison, ghost, batch[1]!];
    await Promise.all([consumer.handleBatch(withRepeats), consumer.handleBatch([...withRepeats].reverse())]);
    for (const [i, heartId] of hearts.entries()) {
      t.is(await h.db.prisma.delivery.count({ where: { heartId, serverId: i % 2 === 0 ? a : b } }), 1, `heart ${i}`);
    }
    t.is(await h.db.prisma.delivery.count(), hearts.length, "nothing for the unknown server");
    t.is(await h.db.prisma.deadLetter.count({ where: { source: "delivery", topic: "test.batch", code: "undecodable" } }), 1);
    const stored = await h.db.prisma.delivery.findFirstOrThrow({ where: { heartId: hearts[3] } });
    t.like(stored, { serverId: b, username: "Alex", period: "2026-03", streakDay: 2, status: "pending", transport: "callback" });
  },
);

test.serial("attempts recorded together keep per-item outcomes: a lost lease is logged only, and a record the database refuses fails alone", async (t) => {
  const { h } = await world(t);
  const serverId = await insertServer(h.db.prisma, { callbackUrl: "http://127.0.0.1:9/hook" });
  await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  for (let i = 0; i < 5; i++) await addDelivery(h, serverId);
  const now = new Date();
  const claimed = await claimDueDeliveries(h.db.prisma, {
    now,
    leaseUntil: new Date(now.getTime() + 60_000),
    limit: 10,
    perServerLimit: 10,
    inFlightByServer: new Map(),
  });
  t.is(claimed.length, 5);
  const [delivered, lost, retried, refused, neighbour] = claimed as [ClaimedDelivery, ClaimedDelivery, ClaimedDelivery, ClaimedDelivery, ClaimedDelivery];
  // Another dispatcher took `lost` over after its lease expired.
  await h.db.prisma.delivery.update({ where: { id: lost.id }, data: { leaseUntil: new Date(now.getTime() + 120_000) } });
  const record = (d: ClaimedDelivery, result: AttemptRecord["result"], at: Date, body = "ok"): AttemptRecord => ({
    delivery: d,
    startedAt: at,
    finishedAt: at,
    result,
    exchange: {
      target: d.callbackUrl ?? "",
      request: { headers: { "X-Test": "1" }, body: "{}" },
      response: { status: result.kind === "delivered" ? 200 : 503, headers: {}, body, bodyTruncated: false },
      latencyMs: 3,
      error: result.kind === "delivered" ? null : "receiver answered 503",
      succeeded: result.kind === "delivered",
    },
  });
  const ms = (offset: number) => new Date(now.getTime() + offset);
  const later = ms(60_000);
  const outcomes = await recordAttempts(h.db.prisma, [
    record(delivered, { kind: "delivered" }, ms(1)),
    record(lost, { kind: "delivered" }, ms(2)),
    record(retried, { kind: "retry", nextAttemptAt: later }, ms(3)),
  ]);
  t.deepEqual(
    outcomes.map((o) => (o.kind === "recorded" ? o.owned : "error")),
    [true, false, true],
  );
  const rows = new Map((await h.db.prisma.delivery.findMany({ include: { attemptsLog: true } })).map((d) => [d.id, d]));
  t.like(rows.get(delivered.id), { status: "delivered", attempts: 1, leaseUntil: null, deliveredAt: ms(1) });
  t.like(rows.get(lost.id), { status: "pending", attempts: 0 });
  t.is(rows.get(lost.id)?.attemptsLog.length, 1, "the lost lease's attempt is still logged");
  t.like(rows.get(retried.id), { status: "pending", attempts: 1, nextAttemptAt: later, lastStatusCode: 503, leaseUntil: null });
  t.like(rows.get(retried.id)?.attemptsLog[0], { attempt: 1, statusCode: 503, succeeded: false, error: "receiver answered 503", requestBody: "{}" });
  // Health folded in recording order: the successes, then a failure after them starts a new run.
  t.like(await h.db.prisma.callbackHealth.findFirstOrThrow({ where: { serverId } }), {
    lastSuccessAt: ms(2),
    failingSince: ms(3),
    lastFailureAt: ms(3),
    lastFailureReason: "receiver answered 503",
  });

  const second = await recordAttempts(h.db.prisma, [
    // A NUL byte: PostgreSQL refuses it in text.
    record(refused, { kind: "retry", nextAttemptAt: later }, ms(4), "bad\u0000body"),
    record(neighbour, { kind: "delivered" }, ms(5)),
  ]);
  t.deepEqual(
    second.map((o) => (o.kind === "recorded" ? o.owned : "error")),
    ["error", true],
  );
  t.like(await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: refused.id } }), { attempts: 0, status: "pending" });
  t.like(await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: neighbour.id } }), { attempts: 1, status: "delivered" });
  t.like(await h.db.prisma.callbackHealth.findFirstOrThrow({ where: { serverId } }), { lastSuccessAt: ms(5), failingSince: null });
});

test.serial(
  "a consumer batch stored while the dispatcher has room goes out leased by the insert itself, no claim after it; beyond a server's room the rest waits for a claim",
  async (t) => {
    const { h, dispatcher } = await world(t);
    const a = await insertServer(h.db.prisma, { callbackUrl: "http://127.0.0.1:9/hook" });
    const b = await insertServer(h.db.prisma, { callbackUrl: "http://127.0.0.1:9/hook" });
    const noUrl = await insertServer(h.db.prisma);
    for (const id of [a, b, noUrl]) await insertSecret(h.db.prisma, h.deps.secretBox, id, "callback");
    const sent: ClaimedDelivery[] = [];
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    t.teardown(() => release()); // runs before the dispatcher stops (teardowns run last-registered first)
    const send = async (delivery: ClaimedDelivery) => {
      sent.push(delivery);
      await held;
      const exchange = { target: "stub", request: { headers: {}, body: "{}" }, response: null, latencyMs: 1, error: null, succeeded: true };
      return { kind: "delivered" as const, target: "stub", statusCode: 200, latencyMs: 1, exchange };
    };
    const d = dispatcher({ concurrency: 8, perServerConcurrency: 2, pollIntervalMs: 3_600_000, transports: { callback: { send } } });
    d.start();
    // The claim the dispatcher makes as it starts (an empty table) is long done by then; a claim running would withhold the lease.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const consumer = createDeliveryConsumer({ bus: unusedBus, prisma: h.db.prisma, log: h.deps.log, topic: "test.batch", dispatcher: d });
    const hearts = [a, a, a, b, noUrl].map((serverId) => ({ serverId, heartId: randomUUID() }));
    await consumer.handleBatch(hearts.map(({ serverId, heartId }, i) => heartMessage(serverId, heartId, i)));
    // Tracked before handleBatch returned: no claim statement (a round trip after the insert) could have leased them.
    t.is(d.inFlight().get(a), 2, "server a: its room of 2");
    t.is(d.inFlight().get(b), 1);
    t.is(d.inFlight().get(noUrl), undefined, "a callback without a URL is not sendable: stored, not leased");
    t.is(await h.db.prisma.delivery.count({ where: { leaseUntil: { not: null } } }), 3, "the leases are in the rows, durable with them");
    await eventually(() => sent.length === 3, { message: `sent ${sent.length}` });
    t.true(
      sent.every((s) => s.sealedCallbackSecrets?.length === 1 && s.username === "Alex"),
      "what sending needs came with the insert",
    );
    release();
    await eventually(async () => (await h.db.prisma.delivery.count({ where: { status: "delivered" } })) === 4, { timeoutMs: 15_000 });
    t.is(new Set(sent.map((s) => s.heartId)).size, 4, "server a's third heart was claimed once its room freed; each heart sent once");
    t.is(await h.db.prisma.delivery.count({ where: { serverId: noUrl, status: "pending", leaseUntil: null } }), 1);
  },
);
