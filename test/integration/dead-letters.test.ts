/**
 * Poison isolation on real Kafka and PostgreSQL: an outbox row Kafka refuses is
 * moved to dead_letters while every other server's hearts flow; an unreachable broker
 * is retried, never dead-lettered, and a relay that makes no progress turns its
 * readiness red with the reason; an undecodable message is dead-lettered by the delivery consumer; a
 * consumer blocked on one message turns its readiness red.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import pg from "pg";
import { Kafka, logLevel } from "kafkajs";
import { Registry } from "prom-client";
import { create } from "@bufbuild/protobuf";
import { Code, type ConnectError } from "@connectrpc/connect";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { HeartCountedSchema } from "../../gen/proto/events/v1/events_pb.js";
import { createDeliveryConsumer } from "../../services/delivery/pipeline/consumer.js";
import { createRelay } from "../../services/relay/relay.js";
import { HEARTS_TOPIC, type EventBus } from "../../services/shared/adapters/bus.js";
import { createKafkaBus } from "../../services/shared/adapters/kafka-bus.js";
import { createMetrics } from "../../services/shared/runtime/metrics.js";
import { createOpsServer } from "../../services/shared/runtime/ops-server.js";
import { toOutboxRow } from "../../services/shared/adapters/outbox.js";
import { eventually } from "../helpers/eventually.js";
import { freePort } from "../../scripts/harness/processes.js";
import { insertServer, startHarness, type Harness } from "../../scripts/harness/delivery-harness.js";

const brokers = (process.env.KAFKA_BROKERS ?? "").split(",").filter(Boolean);
const suffix = randomBytes(4).toString("hex");

const test = anyTest as TestFn<{ h: Harness; bus: EventBus; kafka: Kafka }>;

test.before(async (t) => {
  if (brokers.length === 0) throw new Error("KAFKA_BROKERS is not set: run integration tests through `npm test`");
  const h = await startHarness();
  const bus = createKafkaBus({ brokers, clientId: `dead-letters-${suffix}`, log: h.deps.log, retries: 2 });
  t.context = { h, bus, kafka: new Kafka({ clientId: `dead-letters-admin-${suffix}`, brokers, logLevel: logLevel.NOTHING }) };
});

test.after.always(async (t) => {
  await t.context.bus?.close();
  await t.context.h?.close();
});

/** Creates a topic of this file's own, with optional topic configs. */
async function createTopic(kafka: Kafka, name: string, configs: Record<string, string> = {}): Promise<string> {
  const topic = `dead-letters-${name}-${suffix}`;
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic, numPartitions: 3, configEntries: Object.entries(configs).map(([n, value]) => ({ name: n, value })) }],
    });
  } finally {
    await admin.disconnect();
  }
  return topic;
}

/** Casts a counted heart through the real HeartService; returns its id. */
async function castHeart(h: Harness, serverId: string, n: number): Promise<string> {
  const res = await h.hearts.castHeart({
    serverId,
    username: `Player${n}`,
    voterIdentity: `voter-${serverId}-${n}`,
    ip: `100.${64 + n}.${n}.9`,
    userAgent: "Mozilla/5.0 dead-letters",
  });
  if (!res.counted) throw new Error(`heart ${n} did not count: ${res.reason}`);
  return res.heartId;
}

/**
 * A counted heart's outbox row, moved to `topic` and 10 s old: it has waited longer
 * than the tests' stuck threshold (the readiness rule: no progress AND an old row).
 */
async function agedHeartRow(h: Harness, topic: string, n: number): Promise<{ id: bigint }> {
  await castHeart(h, await insertServer(h.db.prisma), n);
  await h.db.prisma.outboxMessage.updateMany({ where: { topic: HEARTS_TOPIC }, data: { topic } });
  const row = await h.db.prisma.outboxMessage.findFirstOrThrow({ where: { topic } });
  await h.db.prisma.$executeRaw`UPDATE outbox SET created_at = now() - interval '10 seconds' WHERE id = ${row.id}`;
  return row;
}

/** A running relay (stuck after 1 s) behind an ops server whose /readyz has the relay's check, as services/relay/main.ts wires it. */
async function startRelayWithReadiness(h: Harness, bus: EventBus) {
  const relay = createRelay({ prisma: h.db.prisma, bus, log: h.deps.log, pollIntervalMs: 20, stuckAfterMs: 1_000 });
  const ops = createOpsServer({ checks: [{ name: "relay", check: () => relay.checkProgress() }], metrics: createMetrics("relay-test") });
  const port = await ops.listen(0);
  relay.start();
  return { relay, ops, port };
}

/** GETs /readyz of an ops server. */
async function readyz(port: number): Promise<{ status: number; body: { ok: boolean; checks: Record<string, string> } }> {
  const response = await fetch(`http://127.0.0.1:${port}/readyz`);
  return { status: response.status, body: (await response.json()) as { ok: boolean; checks: Record<string, string> } };
}

test.serial(
  "a heart's outbox row Kafka refuses (2 MB username: MESSAGE_TOO_LARGE) is moved to dead_letters while every other server's hearts flow, counted and listed",
  async (t) => {
    const { h, bus, kafka } = t.context;
    const prisma = h.db.prisma;
    const topic = await createTopic(kafka, "too-large");
    const servers = [await insertServer(prisma), await insertServer(prisma), await insertServer(prisma)];
    const heartIds: string[] = [];
    for (const [i, serverId] of servers.entries()) heartIds.push(await castHeart(h, serverId, i));
    // The poison row, written by hand as issue-free code never would: a counted heart of the second server with a 2 MB username.
    const poisonHeartId = randomUUID();
    const poison = toOutboxRow({
      topic: HEARTS_TOPIC,
      type: "heart.counted",
      serverId: servers[1]!,
      occurredAt: new Date(),
      payload: {
        case: "heartCounted",
        value: create(HeartCountedSchema, {
          heartId: poisonHeartId,
          serverId: servers[1]!,
          username: "x".repeat(2 * 1024 * 1024),
          voterIdentity: "voter-big",
          period: "2026-11",
          countedAt: timestampFromDate(new Date()),
          streakDay: 1,
        }),
      },
    });
    const poisonRow = await prisma.outboxMessage.create({ data: poison });
    // Hearts after the poison row, for every server (the second one's included).
    for (const [i, serverId] of servers.entries()) heartIds.push(await castHeart(h, serverId, 10 + i));
    // This file's own topic stands in for the hearts topic (the shared broker's hearts topic belongs to other files).
    await prisma.outboxMessage.updateMany({ where: { topic: HEARTS_TOPIC }, data: { topic } });

    const registry = new Registry();
    const relay = createRelay({ prisma, bus, log: h.deps.log, registry, pollIntervalMs: 20 });
    const consumer = createDeliveryConsumer({ bus, prisma, log: h.deps.log, groupId: `dead-letters-${suffix}`, topic });
    relay.start();
    await consumer.start();
    try {
      const delivered = await eventually(
        async () => {
          const n = await prisma.delivery.count({ where: { heartId: { in: heartIds } } });
          return n === heartIds.length ? n : undefined;
        },
        { timeoutMs: 60_000, message: "a delivery for every heart but the poison one" },
      );
      t.is(delivered, 6, "every other heart (before and after the poison row, of every server) reached the consumer through Kafka");
    } finally {
      await consumer.stop();
      await relay.stop();
    }
    t.is(await prisma.outboxMessage.count({ where: { publishedAt: null } }), 0, "nothing left unpublished");
    t.is(await prisma.outboxMessage.count({ where: { id: poisonRow.id } }), 0, "the poison row left the outbox");
    t.is(await prisma.delivery.count({ where: { heartId: poisonHeartId } }), 0);
    const [dead] = await prisma.deadLetter.findMany({ where: { outboxId: poisonRow.id } });
    t.truthy(dead);
    t.like(dead, { source: "relay", code: "MESSAGE_TOO_LARGE", topic, key: servers[1], type: "heart.counted" });
    t.true(Buffer.from(dead!.payload).equals(poison.payload), "the original bytes are kept");
    t.is(dead!.outboxCreatedAt?.getTime(), poisonRow.createdAt.getTime());
    t.regex(dead!.reason, /^MESSAGE_TOO_LARGE: /);
    t.regex(await registry.getSingleMetricAsString("dead_letters_total"), new RegExp(`source="relay",topic="${topic}",code="MESSAGE_TOO_LARGE"} 1\\b`));

    const listed = await h.operator.listDeadLetters({ source: "relay" });
    t.is(listed.total, 1n);
    t.like(listed.deadLetters[0], {
      id: String(dead!.id),
      source: "relay",
      code: "MESSAGE_TOO_LARGE",
      topic,
      key: servers[1],
      outboxId: String(poisonRow.id),
      payloadSize: BigInt(poison.payload.length),
    });
    t.is(listed.deadLetters[0]!.payloadPreview.length, 256, "a listing shows the first bytes, not 2 MB");
    t.is((await h.operator.listDeadLetters({ source: "delivery" })).total, 0n);
  },
);

test.serial(
  "a relay that cannot reach Kafka retries and never dead-letters; its /readyz turns 503 naming the error, and the row is published once a broker answers",
  async (t) => {
    const { h, bus } = t.context;
    const prisma = h.db.prisma;
    const row = await agedHeartRow(h, `dead-letters-unreachable-${suffix}`, 30);
    const deadBefore = await prisma.deadLetter.count();

    // A broker address where nothing listens: every publish fails with a connection error (retryable).
    const unreachable = createKafkaBus({ brokers: [`127.0.0.1:${await freePort()}`], clientId: `dead-letters-down-${suffix}`, log: h.deps.log, retries: 1 });
    const { relay, ops, port } = await startRelayWithReadiness(h, unreachable);
    try {
      const red = await eventually(
        async () => {
          const r = await readyz(port);
          return r.status === 503 && /last error/.test(r.body.checks.relay ?? "") ? r : undefined;
        },
        { timeoutMs: 60_000, message: "/readyz 503 naming the relay's last error" },
      );
      t.regex(
        red.body.checks.relay!,
        /^down: relay stuck: no progress for \d+ s while 1 outbox rows wait \(oldest \d+ s\); last error: ECONNREFUSED: Connection error: /,
      );
      t.is(await prisma.deadLetter.count(), deadBefore, "a retryable error never dead-letters");
      t.is(await prisma.outboxMessage.count({ where: { id: row.id, publishedAt: null } }), 1, "the row waits in the outbox");
    } finally {
      await relay.stop();
      await unreachable.close();
      await ops.close();
    }
    // A relay on a reachable broker publishes the row that waited.
    const healthy = createRelay({ prisma, bus, log: h.deps.log });
    t.deepEqual(await healthy.runOnce(), { kind: "published", count: 1, deadLettered: 0 });
    await healthy.checkProgress();
  },
);

test.serial(
  "a relay pass blocked in the database (an outbox row locked elsewhere) reports the relay stuck on /readyz, and ready again once it commits",
  async (t) => {
    const { h, bus } = t.context;
    const prisma = h.db.prisma;
    const row = await agedHeartRow(h, `dead-letters-blocked-${suffix}`, 31);
    const blocker = new pg.Client({ connectionString: h.db.url });
    await blocker.connect();
    await blocker.query("BEGIN");
    await blocker.query("SELECT id FROM outbox WHERE id = $1 FOR UPDATE", [String(row.id)]);
    const { relay, ops, port } = await startRelayWithReadiness(h, bus);
    try {
      const red = await eventually(
        async () => {
          const r = await readyz(port);
          return r.status === 503 ? r : undefined;
        },
        { timeoutMs: 30_000, message: "/readyz 503 while the pass waits on the lock" },
      );
      t.regex(red.body.checks.relay!, /^down: relay stuck: no progress for \d+ s while \d+ outbox rows wait \(oldest \d+ s\); a pass is still running$/);
      await blocker.query("ROLLBACK");
      await eventually(async () => (await readyz(port)).status === 200, { timeoutMs: 30_000, message: "/readyz 200 again" });
      t.is(await prisma.outboxMessage.count({ where: { id: row.id, publishedAt: null } }), 0);
    } finally {
      await blocker.end();
      await relay.stop();
      await ops.close();
    }
  },
);

test.serial(
  "an undecodable message on the hearts topic is stored in dead_letters (bytes, partition, offset, reason), counted, and its offset committed; the next message is handled",
  async (t) => {
    const { h, bus, kafka } = t.context;
    const prisma = h.db.prisma;
    const topic = await createTopic(kafka, "undecodable");
    const serverId = await insertServer(prisma);
    const heartId = await castHeart(h, serverId, 40);
    const good = await prisma.outboxMessage.findFirstOrThrow({ where: { key: serverId } });
    const garbage = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02]);
    await bus.publish(topic, [
      { key: serverId, value: garbage },
      { key: serverId, value: good.payload },
    ]);
    const registry = new Registry();
    const groupId = `dead-letters-undecodable-${suffix}`;
    const consumer = createDeliveryConsumer({ bus, prisma, log: h.deps.log, groupId, topic, registry });
    await consumer.start();
    try {
      await eventually(() => prisma.delivery.findFirst({ where: { heartId } }).then((d) => d ?? undefined), {
        timeoutMs: 30_000,
        message: "the message after the poison one handled",
      });
      const dead = await eventually(() => prisma.deadLetter.findFirst({ where: { source: "delivery", topic } }).then((d) => d ?? undefined));
      t.like(dead, { code: "undecodable", key: serverId, offset: "0" });
      t.true(Buffer.from(dead.payload).equals(Buffer.from(garbage)));
      t.regex(dead.reason, /^undecodable envelope: /);
      t.regex(await registry.getSingleMetricAsString("dead_letters_total"), new RegExp(`source="delivery",topic="${topic}",code="undecodable"} 1\\b`));
      // Redelivered after a crash before the commit: stored once, counted once.
      await consumer.handle({ topic, key: serverId, value: garbage, partition: dead.partition!, offset: "0" });
      t.is(await prisma.deadLetter.count({ where: { source: "delivery", topic } }), 1);
      // Both offsets committed: nothing of the group's lag is left.
      await eventually(async () => (await bus.lag!(groupId, [topic])) === 0, { timeoutMs: 30_000, message: "the group's lag drops to 0" });
    } finally {
      await consumer.stop();
    }
    const listed = await h.operator.listDeadLetters({ source: "delivery" });
    t.like(listed.deadLetters[0], { code: "undecodable", topic, offset: "0", outboxId: "", payloadSize: BigInt(garbage.length) });
  },
);

test.serial("a consumer blocked on one message (a row lock held elsewhere) reports itself stuck on /readyz, and ready again once it moves", async (t) => {
  const { h, bus, kafka } = t.context;
  const prisma = h.db.prisma;
  const topic = await createTopic(kafka, "stuck-consumer");
  const serverId = await insertServer(prisma);
  const heartId = await castHeart(h, serverId, 50);
  const row = await prisma.outboxMessage.findFirstOrThrow({ where: { key: serverId } });
  // Another transaction inserts the same (server_id, transport, dedup_key = heart_id) and stays open: the consumer's insert waits on it.
  const blocker = new pg.Client({ connectionString: h.db.url });
  await blocker.connect();
  await blocker.query("BEGIN");
  await blocker.query(
    // The callback delivery goes to the server's default endpoint (one row per server, transport, endpoint and heart).
    "INSERT INTO deliveries (id, server_id, heart_id, dedup_key, endpoint_id, event_type, username, voter_identity, period, counted_at, next_attempt_at) VALUES ($1, $2, $3, $4, (SELECT id FROM callback_endpoints WHERE server_id = $2 AND is_default), 'heart.counted', 'x', 'y', '2026-11', now(), now())",
    [randomUUID(), serverId, heartId, heartId],
  );
  const consumer = createDeliveryConsumer({ bus, prisma, log: h.deps.log, groupId: `dead-letters-stuck-${suffix}`, topic, stuckAfterMs: 1_000 });
  const ops = createOpsServer({ checks: [{ name: "consumer", check: () => consumer.checkProgress() }], metrics: createMetrics("delivery-test") });
  const port = await ops.listen(0);
  try {
    await consumer.start();
    t.is((await readyz(port)).status, 200, "ready while nothing waits");
    await bus.publish(topic, [{ key: serverId, value: row.payload }]);
    const red = await eventually(
      async () => {
        const r = await readyz(port);
        return r.status === 503 ? r : undefined;
      },
      { timeoutMs: 30_000, message: "/readyz 503 while the consumer is blocked" },
    );
    // Either form, depending on which threshold the probe sees passed first.
    t.regex(
      red.body.checks.consumer!,
      new RegExp(`^down: consumer stuck: (message ${topic}/\\d+@0 in its handler for \\d+ s|1 messages wait on ${topic} and none was handled for \\d+ s)$`),
    );
    await blocker.query("ROLLBACK");
    await eventually(() => prisma.delivery.findFirst({ where: { heartId } }).then((d) => d ?? undefined), { timeoutMs: 30_000 });
    await eventually(async () => (await readyz(port)).status === 200, { timeoutMs: 30_000, message: "/readyz 200 again" });
  } finally {
    await blocker.end();
    await consumer.stop();
    await ops.close();
  }
  t.pass();
});

test.serial(
  "OperatorService.ListDeadLetters: newest first, filtered by source, paged by before_id; a bad source, limit or before_id is invalid_argument",
  async (t) => {
    const { h } = t.context;
    const topic = `dead-letters-listing-${suffix}`;
    const made = [];
    for (const [i, source] of (["relay", "delivery", "delivery"] as const).entries()) {
      made.push(
        await h.db.prisma.deadLetter.create({
          data: {
            source,
            code: "test",
            reason: `listing ${i}`,
            topic,
            key: "k",
            payload: Buffer.from([i]),
            ...(source === "delivery" ? { partition: 0, offset: String(i) } : {}),
          },
        }),
      );
    }
    const newest = made.map((d) => String(d.id)).reverse();
    const page = await h.operator.listDeadLetters({ limit: 3 });
    t.deepEqual(
      page.deadLetters.map((d) => d.id),
      newest,
      "newest first",
    );
    t.deepEqual(
      page.deadLetters.map((d) => d.reason),
      ["listing 2", "listing 1", "listing 0"],
    );
    const second = await h.operator.listDeadLetters({ limit: 1, beforeId: newest[0]! });
    t.deepEqual(
      second.deadLetters.map((d) => d.id),
      [newest[1]],
      "the next page starts below the last id",
    );
    const relayOnly = await h.operator.listDeadLetters({ source: "relay", limit: 1 });
    t.like(relayOnly.deadLetters[0], { id: newest[2], source: "relay", partition: -1, offset: "" });
    t.is(relayOnly.total, BigInt(await h.db.prisma.deadLetter.count({ where: { source: "relay" } })));
    for (const bad of [{ source: "kafka" }, { limit: -1 }, { beforeId: "abc" }, { beforeId: "0" }]) {
      const error = await t.throwsAsync(h.operator.listDeadLetters(bad));
      t.is((error as ConnectError).code, Code.InvalidArgument, JSON.stringify(bad));
    }
  },
);
