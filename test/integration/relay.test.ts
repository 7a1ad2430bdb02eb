import test from "ava";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { Kafka, logLevel } from "kafkajs";
import { Registry } from "prom-client";
import { createRelay, type RelayPass } from "../../services/relay/relay.js";
import { RELAY_LOCK_NAMESPACE } from "../../services/relay/statements.js";
import { createKafkaBus } from "../../services/shared/adapters/kafka-bus.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { shardOf } from "../../services/shared/adapters/outbox.js";
import { RejectedMessagesError, type EventBus } from "../../services/shared/adapters/bus.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { burnCpu } from "../helpers/burn-cpu.js";
import { eventually } from "../helpers/eventually.js";

const brokers = (process.env.KAFKA_BROKERS ?? "").split(",");
const log = createLogger("relay-test", "silent");
let db: TestDatabase;
let bus: EventBus;

test.before(async () => {
  db = await createTestDatabase();
  bus = createKafkaBus({ brokers, clientId: "relay-test", log });
});
test.after.always(async () => {
  await bus?.close();
  await db?.drop();
});

const uniqueTopic = () => `relay-test-${randomBytes(5).toString("hex")}`;

/** The first key (`key-0`, `key-1`, ...) whose rows go to relay shard `shard`. */
function keyOfShard(shard: number): string {
  for (let i = 0; ; i++) if (shardOf(`key-${i}`) === shard) return `key-${i}`;
}

/**
 * Runs one pass of a relay (batches of 4) while another instance holds the lock of `heldShard`; that instance
 * commits while the pass sends its first batch. Returns the pass and every message it sent, in order.
 */
async function runPassWhileShardHeldUntilFirstSend(heldShard: number): Promise<{ pass: RelayPass; seen: { key: string; seq: number }[] }> {
  const other = new pg.Client({ connectionString: db.url });
  await other.connect();
  await other.query("BEGIN");
  await other.query("SELECT pg_advisory_xact_lock($1::int, $2::int)", [RELAY_LOCK_NAMESPACE, heldShard]);
  const seen: { key: string; seq: number }[] = [];
  let released = false;
  const memory: EventBus = {
    ...bus,
    publish: async (_tp, messages) => {
      for (const m of messages) seen.push(JSON.parse(Buffer.from(m.value).toString("utf8")) as { key: string; seq: number });
      if (!released) {
        released = true;
        await other.query("COMMIT");
      }
    },
  };
  try {
    const pass = await createRelay({ prisma: db.prisma, bus: memory, log, batchSize: 4 }).runOnce();
    return { pass, seen };
  } finally {
    await other.end();
  }
}

/** Inserts an outbox row whose payload is `{key, seq}` as JSON. */
function outboxRow(topic: string, key: string, seq: number) {
  return { topic, key, type: "test.event", payload: Buffer.from(JSON.stringify({ key, seq })), shard: shardOf(key) };
}

/** Reads every message of a topic from the beginning with a consumer group of its own. */
async function consumeAll(topic: string, expected: number): Promise<{ key: string; seq: number }[]> {
  const kafka = new Kafka({ clientId: "relay-test-reader", brokers, logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `reader-${randomBytes(5).toString("hex")}` });
  const seen: { key: string; seq: number }[] = [];
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      seen.push(JSON.parse(message.value!.toString("utf8")) as { key: string; seq: number });
    },
  });
  try {
    await eventually(() => seen.length >= expected, { timeoutMs: 30_000, message: `${expected} messages on ${topic}` });
    return seen;
  } finally {
    await consumer.disconnect();
  }
}

async function drain(relay: ReturnType<typeof createRelay>): Promise<number> {
  let total = 0;
  for (;;) {
    const pass = await relay.runOnce();
    if (pass.kind === "idle") return total;
    total += pass.count;
  }
}

test.serial("a row that commits after a higher id was published is still published (no cursor skips it)", async (t) => {
  const topic = uniqueTopic();
  const relay = createRelay({ prisma: db.prisma, bus, log });
  const slow = new pg.Client({ connectionString: db.url });
  await slow.connect();
  try {
    await slow.query("BEGIN");
    const row = outboxRow(topic, "server-a", 1);
    await slow.query("INSERT INTO outbox (topic, key, type, payload, shard) VALUES ($1, $2, $3, $4, $5)", [
      row.topic,
      row.key,
      row.type,
      row.payload,
      row.shard,
    ]);
    // A later transaction takes a higher id and commits first.
    await db.prisma.outboxMessage.create({ data: outboxRow(topic, "server-b", 2) });
    t.is(await drain(relay), 1, "only the committed row is visible");
    await slow.query("COMMIT");
    t.is(await drain(relay), 1, "the late committer is published on the next pass");
  } finally {
    await slow.end();
  }
  const seen = await consumeAll(topic, 2);
  t.deepEqual(seen.map((m) => m.seq).sort(), [1, 2]);
  t.is(await db.prisma.outboxMessage.count({ where: { topic, publishedAt: null } }), 0);
});

test.serial("two relay instances publish every row exactly once and keep each key's order", async (t) => {
  const topic = uniqueTopic();
  const keys = ["k1", "k2", "k3", "k4", "k5", "k6"];
  const perKey = 60;
  const rows = [];
  for (let seq = 0; seq < perKey; seq++) for (const key of keys) rows.push(outboxRow(topic, key, seq));
  await db.prisma.outboxMessage.createMany({ data: rows });
  const a = createRelay({ prisma: db.prisma, bus, log, batchSize: 25 });
  const b = createRelay({ prisma: db.prisma, bus, log, batchSize: 25 });
  const [na, nb] = await Promise.all([drain(a), drain(b)]);
  t.is(na + nb, rows.length, "every row published once between the two");
  const seen = await consumeAll(topic, rows.length);
  t.is(seen.length, rows.length, "no duplicates");
  for (const key of keys) {
    const seqs = seen.filter((m) => m.key === key).map((m) => m.seq);
    t.deepEqual(
      seqs,
      [...seqs].sort((x, y) => x - y),
      `key ${key} in order`,
    );
    t.is(seqs.length, perKey);
  }
});

test.serial("a failed publish rolls the pass back and the rows are published on the next pass", async (t) => {
  const topic = uniqueTopic();
  await db.prisma.outboxMessage.createMany({ data: [outboxRow(topic, "s", 1), outboxRow(topic, "s", 2)] });
  let failNext = true;
  const flaky: EventBus = {
    ...bus,
    publish: async (tp, messages) => {
      if (failNext) {
        failNext = false;
        throw new Error("broker unavailable");
      }
      await bus.publish(tp, messages);
    },
  };
  const relay = createRelay({ prisma: db.prisma, bus: flaky, log });
  await t.throwsAsync(() => relay.runOnce(), { message: "broker unavailable" });
  t.is(await db.prisma.outboxMessage.count({ where: { topic, publishedAt: null } }), 2, "nothing marked published");
  t.is(await drain(relay), 2);
  const seen = await consumeAll(topic, 2);
  t.deepEqual(
    seen.map((m) => m.seq),
    [1, 2],
  );
});

test.serial("the relay loop publishes new rows without being called, and its lag metrics count unpublished rows", async (t) => {
  const topic = uniqueTopic();
  const registry = new Registry();
  const relay = createRelay({ prisma: db.prisma, bus, log, registry, pollIntervalMs: 20 });
  await db.prisma.outboxMessage.createMany({ data: [outboxRow(topic, "m", 1), outboxRow(topic, "m", 2), outboxRow(topic, "m", 3)] });
  const before = await registry.getSingleMetricAsString("relay_lag_rows");
  t.regex(before, /relay_lag_rows 3\b/);
  relay.start();
  try {
    await eventually(async () => (await db.prisma.outboxMessage.count({ where: { topic, publishedAt: null } })) === 0);
  } finally {
    await relay.stop();
  }
  t.regex(await registry.getSingleMetricAsString("relay_lag_rows"), /relay_lag_rows 0\b/);
  t.regex(await registry.getSingleMetricAsString("relay_lag_seconds"), /relay_lag_seconds 0\b/);
  t.regex(await registry.getSingleMetricAsString("relay_published_total"), new RegExp(`topic="${topic}"} 3`));
});

test.serial("with notifications, a commit that writes outbox rows wakes the relay at once: its polls are 60 s apart and the rows still arrive", async (t) => {
  const topic = uniqueTopic();
  const relay = createRelay({ prisma: db.prisma, bus, log, pollIntervalMs: 60_000, notifications: { databaseUrl: db.url, safetyPollIntervalMs: 60_000 } });
  relay.start();
  try {
    await eventually(() => relay.wakesOnCommit(), { timeoutMs: 30_000, message: "the relay listening for commits" });
    // Its first passes are over: from here on only a notification can start a pass within the test's time.
    await db.prisma.outboxMessage.create({ data: outboxRow(topic, "w", 1) });
    await eventually(async () => (await db.prisma.outboxMessage.count({ where: { topic, publishedAt: null } })) === 0, {
      timeoutMs: 20_000,
      message: "the first row published",
    });
    // A transaction writing several rows (by several statements) wakes it as well; it publishes them all, in order.
    await db.prisma.$transaction(async (tx) => {
      await tx.outboxMessage.create({ data: outboxRow(topic, "w", 2) });
      await tx.outboxMessage.createMany({ data: [outboxRow(topic, "w", 3), outboxRow(topic, "w", 4)] });
    });
    await eventually(async () => (await db.prisma.outboxMessage.count({ where: { topic, publishedAt: null } })) === 0, {
      timeoutMs: 20_000,
      message: "the transaction's rows published",
    });
  } finally {
    await relay.stop();
  }
  const seen = await consumeAll(topic, 4);
  t.deepEqual(
    seen.map((m) => m.seq),
    [1, 2, 3, 4],
  );
});

test.serial("where notifications never reach the relay (as with embedded PGlite), it says so and polls at its fast interval", async (t) => {
  const topic = uniqueTopic();
  // The relay listens on another database than the one it writes its probe to: the probe never comes back.
  const elsewhere = await createTestDatabase({ maxConnections: 1 });
  const lines: string[] = [];
  const captured = createLogger("relay-test", "warn", { write: (line: string) => void lines.push(line) });
  const relay = createRelay({
    prisma: db.prisma,
    bus,
    log: captured,
    pollIntervalMs: 20,
    notifications: { databaseUrl: elsewhere.url, safetyPollIntervalMs: 60_000 },
  });
  relay.start();
  try {
    await eventually(() => lines.some((l) => l.includes("does not deliver LISTEN notifications")), {
      timeoutMs: 30_000,
      message: "the relay giving up on notifications",
    });
    t.false(relay.wakesOnCommit());
    await db.prisma.outboxMessage.create({ data: outboxRow(topic, "p", 1) });
    await eventually(async () => (await db.prisma.outboxMessage.count({ where: { topic, publishedAt: null } })) === 0, {
      timeoutMs: 20_000,
      message: "the row published by the fast poll",
    });
  } finally {
    await relay.stop();
    await elsewhere.drop();
  }
  t.deepEqual(
    (await consumeAll(topic, 1)).map((m) => m.seq),
    [1],
  );
});

test.serial(
  "a pass of several batches sets a refused row of a later batch aside, publishes the rest once and in order, and marks every other row published",
  async (t) => {
    const topic = uniqueTopic();
    const rows = [];
    for (let seq = 0; seq < 50; seq++) rows.push(outboxRow(topic, `b${seq % 3}`, seq));
    await db.prisma.outboxMessage.createMany({ data: rows });
    const created = await db.prisma.outboxMessage.findMany({ where: { topic }, orderBy: { id: "asc" } });
    const poisonId = created[37]!.id;
    const poisonValue = Buffer.from(created[37]!.payload);
    const sends: number[] = [];
    const picky: EventBus = {
      ...bus,
      publish: async (tp, messages) => {
        sends.push(messages.length);
        if (messages.some((m) => Buffer.from(m.value).equals(poisonValue)))
          throw new RejectedMessagesError("INVALID_RECORD", "INVALID_RECORD: refused by the test bus");
        await bus.publish(tp, messages);
      },
    };
    const relay = createRelay({ prisma: db.prisma, bus: picky, log, batchSize: 10 });
    t.deepEqual(await relay.runOnce(), { kind: "published", count: 50, deadLettered: 1 }, "one pass, five batches");
    t.is(await db.prisma.outboxMessage.count({ where: { topic, publishedAt: null } }), 0);
    t.is(await db.prisma.deadLetter.count({ where: { outboxId: poisonId, code: "INVALID_RECORD" } }), 1);
    const seen = await consumeAll(topic, 49);
    t.is(seen.length, 49, "every other row once");
    t.false(seen.some((m) => m.seq === 37));
    for (const key of ["b0", "b1", "b2"]) {
      const seqs = seen.filter((m) => m.key === key).map((m) => m.seq);
      t.deepEqual(
        seqs,
        [...seqs].sort((x, y) => x - y),
        `key ${key} in order`,
      );
    }
  },
);

test.serial(
  "two relays looping on a CPU-loaded machine while rows keep committing: every row is published exactly once across many passes, and each key stays in order",
  async (t) => {
    const topic = uniqueTopic();
    const sent = new Map<string, number>();
    const order = new Map<string, number[]>();
    const memory: EventBus = {
      ...bus,
      publish: async (_tp, messages) => {
        await new Promise((resolve) => setImmediate(resolve));
        for (const m of messages) {
          const { key, seq } = JSON.parse(Buffer.from(m.value).toString("utf8")) as { key: string; seq: number };
          const id = `${key}/${seq}`;
          sent.set(id, (sent.get(id) ?? 0) + 1);
          const list = order.get(key) ?? [];
          list.push(seq);
          order.set(key, list);
        }
      },
    };
    const relays = [0, 1].map(() => createRelay({ prisma: db.prisma, bus: memory, log, batchSize: 4 }));
    const keys = Array.from({ length: 64 }, (_, i) => `s${i}`);
    // The load CI runs under, made here: two spinning threads while the relays loop (never beyond 60 s).
    const load = burnCpu(2, 60_000);
    let producing = true;
    let written = 0;
    const producer = (async () => {
      for (let seq = 0; producing; seq++) {
        await db.prisma.outboxMessage.createMany({ data: keys.slice(0, 8).map((_, i) => outboxRow(topic, keys[(seq * 8 + i) % keys.length]!, seq)) });
        written += 8;
      }
    })();
    const passes = [0, 0];
    const loops = relays.map(async (relay, i) => {
      while (producing) if ((await relay.runOnce()).kind === "published") passes[i]!++;
    });
    try {
      // Many passes, both relays among them (one can win every shard for a while on a loaded machine).
      await eventually(() => passes[0]! > 0 && passes[1]! > 0 && passes[0]! + passes[1]! >= 12, {
        timeoutMs: 60_000,
        message: "both relays publishing, 12 passes in all",
      });
    } finally {
      producing = false;
      await load.stop();
      await Promise.all([producer, ...loops]);
    }
    await Promise.all(relays.map(drain));
    const twice = [...sent].filter(([, n]) => n > 1);
    t.deepEqual(twice, [], "no row published twice");
    t.is(sent.size, written, "every row published");
    for (const [key, seqs] of order)
      t.deepEqual(
        seqs,
        [...seqs].sort((x, y) => x - y),
        `key ${key} in order`,
      );
  },
);

test.serial(
  "a shard another instance held when the pass began is taken later in the same pass from its lowest unpublished row, not above the pass's cursor",
  async (t) => {
    const topic = uniqueTopic();
    const k = keyOfShard(3);
    const j = keyOfShard(5);
    // r1 (shard of k), then 8 rows of another shard, r2 (shard of k), then 4 more of the other shard.
    const rows = [outboxRow(topic, k, 1)];
    for (let seq = 0; seq < 8; seq++) rows.push(outboxRow(topic, j, seq));
    rows.push(outboxRow(topic, k, 2));
    for (let seq = 8; seq < 12; seq++) rows.push(outboxRow(topic, j, seq));
    for (const row of rows) await db.prisma.outboxMessage.create({ data: row });
    const { pass, seen } = await runPassWhileShardHeldUntilFirstSend(shardOf(k));
    t.is(pass.kind === "published" && pass.count, rows.length, "one pass published every row");
    t.deepEqual(
      seen.filter((m) => m.key === k).map((m) => m.seq),
      [1, 2],
      "k's rows in order",
    );
  },
);

test.serial(
  "a shard taken late in a pass whose rows lie below the pass's cursor does not make the next claim publish the previous batch again (the claim's read does not see the rows its own statement marks)",
  async (t) => {
    const topic = uniqueTopic();
    const u = keyOfShard(3);
    const s = keyOfShard(5);
    // ids in order: u0, s0..s3, u1..u8, s4, u9..u12. Batches of 4: the first window (u0, s0..s2) takes u's
    // shard while s's is held elsewhere; s's is free from the second batch's send on but first appears in
    // the third claim's window (above u8's id), which reads it from its lowest row: s0..s3, below u4..u7 of
    // the batch before. The fourth claim reads above s3 and marks u4..u7 in the same statement.
    const rows = [outboxRow(topic, u, 0)];
    for (let seq = 0; seq < 4; seq++) rows.push(outboxRow(topic, s, seq));
    for (let seq = 1; seq <= 8; seq++) rows.push(outboxRow(topic, u, seq));
    rows.push(outboxRow(topic, s, 4));
    for (let seq = 9; seq <= 12; seq++) rows.push(outboxRow(topic, u, seq));
    await db.prisma.outboxMessage.createMany({ data: rows });
    const { pass, seen: messages } = await runPassWhileShardHeldUntilFirstSend(shardOf(s));
    t.is(pass.kind === "published" && pass.count, rows.length, "one pass published every row once");
    const seen = messages.map((m) => `${m.key === u ? "u" : "s"}${m.seq}`);
    t.deepEqual(
      seen.filter((m) => m.startsWith("u")),
      Array.from({ length: 13 }, (_, i) => `u${i}`),
      "u's rows once each, in order",
    );
    t.deepEqual(
      seen.filter((m) => m.startsWith("s")),
      Array.from({ length: 5 }, (_, i) => `s${i}`),
      "s's rows once each, in order",
    );
  },
);
