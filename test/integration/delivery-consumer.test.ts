import anyTest, { type TestFn } from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import kafkajs, { Kafka, logLevel } from "kafkajs";
import { EnvelopeSchema, HeartCountedSchema } from "../../gen/proto/events/v1/events_pb.js";
import { createDeliveryConsumer, type DeliveryConsumer } from "../../services/delivery/pipeline/consumer.js";
import { createDispatcher } from "../../services/delivery/pipeline/dispatcher.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import type { EventBus } from "../../services/shared/adapters/bus.js";
import { createKafkaBus, ensureTopics } from "../../services/shared/adapters/kafka-bus.js";
import { eventually } from "../helpers/eventually.js";
import { headerOf, startReceiver } from "../../scripts/harness/receiver.js";
import {
  expectedCallbackMac,
  hexEquals,
  insertSecret,
  insertServer,
  parseCallbackSignature,
  startHarness,
  type Harness,
} from "../../scripts/harness/delivery-harness.js";

// Real Kafka (KAFKA_BROKERS from the test runner); a topic and consumer group of this file's own.
const suffix = randomBytes(4).toString("hex");
// kafkajs spreads its protocol helpers into module.exports, which Node's CommonJS named-export detection cannot see.
const { AssignerProtocol } = kafkajs;
const TOPIC = `test.hearts.${suffix}`;

const test = anyTest as TestFn<{ h: Harness; bus: EventBus; consumer: DeliveryConsumer }>;

test.before(async (t) => {
  const brokers = (process.env.KAFKA_BROKERS ?? "").split(",").filter(Boolean);
  if (brokers.length === 0) throw new Error("KAFKA_BROKERS is not set: run integration tests through `npm test`");
  const h = await startHarness();
  await ensureTopics(brokers, [TOPIC], 3);
  const bus = createKafkaBus({ brokers, clientId: `delivery-test-${suffix}`, log: h.deps.log });
  const consumer = createDeliveryConsumer({ bus, prisma: h.db.prisma, log: h.deps.log, groupId: `delivery-test-${suffix}`, topic: TOPIC });
  await consumer.start();
  t.context = { h, bus, consumer };
});

test.after.always(async (t) => {
  await t.context.consumer?.stop();
  await t.context.bus?.close();
  await t.context.h?.close();
});

function heartCountedEnvelope(serverId: string, heartId: string, username = "Steve") {
  const at = new Date();
  return toBinary(
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
          username,
          voterIdentity: `voter-${heartId}`,
          period: "2026-03",
          countedAt: timestampFromDate(at),
          streakDay: 1,
        }),
      },
    }),
  );
}

test.serial("consumer: a heart.counted envelope from Kafka becomes one pending delivery row", async (t) => {
  const { h, bus } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const heartId = randomUUID();
  await bus.publish(TOPIC, [{ key: serverId, value: heartCountedEnvelope(serverId, heartId, "Alex") }]);
  const delivery = await eventually(() => h.db.prisma.delivery.findFirst({ where: { heartId } }).then((d) => d ?? undefined), { timeoutMs: 30_000 });
  t.like(delivery, { serverId, heartId, eventType: "heart.counted", username: "Alex", period: "2026-03", status: "pending", attempts: 0, streakDay: 1 });
});

test.serial("consumer idempotency: the same envelope delivered twice gives one delivery (ON CONFLICT DO NOTHING)", async (t) => {
  const { h, bus, consumer } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const heartId = randomUUID();
  const value = heartCountedEnvelope(serverId, heartId);
  await bus.publish(TOPIC, [{ key: serverId, value }]);
  await bus.publish(TOPIC, [{ key: serverId, value }]);
  // A marker published after both, on the same key (same partition, in order): once it is stored, both copies were handled.
  const marker = randomUUID();
  await bus.publish(TOPIC, [{ key: serverId, value: heartCountedEnvelope(serverId, marker) }]);
  await eventually(() => h.db.prisma.delivery.findFirst({ where: { heartId: marker } }).then((d) => d ?? undefined), { timeoutMs: 30_000 });
  t.is(await h.db.prisma.delivery.count({ where: { heartId } }), 1);
  // And handled directly once more (a redelivery after a crash before the commit).
  await consumer.handle({ topic: TOPIC, key: serverId, value, partition: 0, offset: "0" });
  t.is(await h.db.prisma.delivery.count({ where: { heartId } }), 1);
});

test.serial("consumer: a poison message is set aside in dead_letters; the messages after it are still processed", async (t) => {
  const { h, bus } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const after = randomUUID();
  await bus.publish(TOPIC, [
    { key: serverId, value: new Uint8Array([0xff, 0xff, 0xff, 0xff, 0x0f]) },
    { key: serverId, value: heartCountedEnvelope(serverId, after) },
  ]);
  await eventually(() => h.db.prisma.delivery.findFirst({ where: { heartId: after } }).then((d) => d ?? undefined), { timeoutMs: 30_000 });
  t.is(await h.db.prisma.deadLetter.count({ where: { source: "delivery", topic: TOPIC, key: serverId, code: "undecodable" } }), 1);
});

test.serial("consumer: a heart for a server that no longer exists is skipped, not retried forever", async (t) => {
  const { h, bus } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const ghost = randomUUID();
  const after = randomUUID();
  await bus.publish(TOPIC, [{ key: serverId, value: heartCountedEnvelope(randomUUID(), ghost) }]);
  await bus.publish(TOPIC, [{ key: serverId, value: heartCountedEnvelope(serverId, after) }]);
  await eventually(() => h.db.prisma.delivery.findFirst({ where: { heartId: after } }).then((d) => d ?? undefined), { timeoutMs: 30_000 });
  t.is(await h.db.prisma.delivery.count({ where: { heartId: ghost } }), 0);
});

test.serial(
  "end to end without the relay: CastHeart's outbox row, published to Kafka, becomes a signed heart.counted callback the receiver verifies",
  async (t) => {
    const { h, bus } = t.context;
    const receiver = await startReceiver();
    const dispatcher = createDispatcher({
      prisma: h.db.prisma,
      secretBox: h.deps.secretBox,
      log: h.deps.log,
      now: () => new Date(),
      schedule: parseRetrySchedule("100ms"),
      timeoutMs: 2_000,
      allowInsecure: true,
      pollIntervalMs: 25,
    });
    try {
      const serverId = await insertServer(h.db.prisma, { callbackUrl: receiver.url });
      const { secret } = await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
      const res = await h.hearts.castHeart({
        serverId,
        username: "Notch",
        voterIdentity: "acct-e2e",
        ip: "203.0.113.200",
        userAgent: "Mozilla/5.0 Firefox/128.0",
      });
      t.true(res.counted);
      // What the relay does: publish the outbox row's payload, keyed by server id.
      const outbox = await h.db.prisma.outboxMessage.findFirstOrThrow({ where: { key: serverId } });
      await bus.publish(TOPIC, [{ key: outbox.key, value: outbox.payload }]);
      dispatcher.start();
      const [request] = await receiver.waitForRequests(1, 30_000);
      const signature = parseCallbackSignature(headerOf(request!, "x-service-signature"));
      t.truthy(signature);
      t.true(hexEquals(signature!.v1[0] ?? "", expectedCallbackMac(secret, signature!.t, request!.body)), "HMAC verified with node:crypto in the test");
      t.is(headerOf(request!, "x-service-event"), "heart.counted");
      const body = JSON.parse(request!.text) as Record<string, unknown>;
      t.deepEqual(body, {
        event: "heart.counted",
        server_id: serverId,
        username: "Notch",
        heart_id: res.heartId,
        period: res.period,
        timestamp: signature!.t,
        streak_day: 1,
      });
      await eventually(async () => (await h.db.prisma.delivery.findFirstOrThrow({ where: { heartId: res.heartId } })).status === "delivered");
    } finally {
      await receiver.close();
      await dispatcher.stop();
    }
  },
);

test.serial(
  "stuck check: an idle consumer whose own partitions are caught up is not stuck while another member of its group is stuck on its partitions",
  async (t) => {
    const { h } = t.context;
    const brokers = (process.env.KAFKA_BROKERS ?? "").split(",").filter(Boolean);
    const topic = `test.hearts.stuck.${suffix}`;
    const groupId = `delivery-stuck-${suffix}`;
    await ensureTopics(brokers, [topic], 3);
    const kafka = new Kafka({ clientId: `delivery-stuck-admin-${suffix}`, brokers, logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    const producer = kafka.producer();
    await Promise.all([admin.connect(), producer.connect()]);
    // Two delivery processes of one group, each with a bus (a client) of its own. B's handler stays in its insert
    // until released, as when its database is away: B makes no progress and its partitions' messages wait.
    const [busA, busB] = ["a", "b"].map((name) => createKafkaBus({ brokers, clientId: `delivery-stuck-${name}-${suffix}`, log: h.deps.log }));
    let release = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    const a = createDeliveryConsumer({ bus: busA!, prisma: h.db.prisma, log: h.deps.log, groupId, topic, stuckAfterMs: 1_000 });
    const b = createDeliveryConsumer({
      bus: busB!,
      prisma: h.db.prisma,
      log: h.deps.log,
      groupId,
      topic,
      stuckAfterMs: 1_000,
      dispatcher: { withInsertLease: async (insert) => released.then(() => insert(undefined)) },
    });
    t.teardown(async () => {
      release();
      await Promise.allSettled([a.stop(), b.stop()]);
      await Promise.allSettled([busA!.close(), busB!.close(), admin.disconnect(), producer.disconnect()]);
    });
    await a.start();
    await b.start();
    // The group's assignment as the broker tells it: B's partitions.
    const partitionsOfB = await eventually(
      async () => {
        const [group] = (await admin.describeGroups([groupId])).groups;
        if (group?.state !== "Stable" || group.members.length !== 2) return undefined;
        const assigned = group.members.map((m) => ({
          clientId: m.clientId,
          partitions: AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment[topic] ?? [],
        }));
        if (assigned.some((m) => m.partitions.length === 0)) return undefined;
        return assigned.find((m) => m.clientId === `delivery-stuck-b-${suffix}`)?.partitions;
      },
      { timeoutMs: 30_000, message: "both members hold partitions" },
    );
    const serverId = await insertServer(h.db.prisma, { callbackUrl: "https://hooks.example/hook" });
    await producer.send({
      topic,
      messages: [{ partition: partitionsOfB[0]!, key: serverId, value: Buffer.from(heartCountedEnvelope(serverId, randomUUID())) }],
    });

    const stuck = await eventually(
      () =>
        b.checkProgress().then(
          () => undefined,
          (error: Error) => error,
        ),
      { timeoutMs: 30_000, message: "B reports itself stuck" },
    );
    t.regex(stuck.message, /^consumer stuck: /);
    t.is(await busA!.lag!(groupId, [topic]), 1, "the group has lag: B's message waits");
    // A handled nothing for longer than its threshold too, but nothing of its own partitions waits.
    await t.notThrowsAsync(a.checkProgress(), "A is not stuck");
    release();
    await eventually(() => h.db.prisma.delivery.findFirst({ where: { serverId } }).then((d) => d ?? undefined), { timeoutMs: 30_000 });
    await eventually(
      () =>
        b.checkProgress().then(
          () => true,
          () => undefined,
        ),
      { timeoutMs: 30_000, message: "B moves again" },
    );
  },
);
