import test from "ava";
import { randomBytes } from "node:crypto";
import { createKafkaBus, ensureTopics, TOPIC_PARTITIONS } from "../../services/shared/adapters/kafka-bus.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { eventually } from "../helpers/eventually.js";

const brokers = (process.env.KAFKA_BROKERS ?? "").split(",");
const log = createLogger("kafka-bus-test", "silent");

test("a consumer that kafkajs crashes without restarting is recreated, the message is redelivered and /readyz's ping reports it meanwhile", async (t) => {
  const topic = `bus-test-${randomBytes(5).toString("hex")}`;
  await ensureTopics(brokers, [topic], 1);
  const bus = createKafkaBus({ brokers, clientId: "bus-test", log });
  t.teardown(() => bus.close());
  let calls = 0;
  const handled: string[] = [];
  let pingFailedWhileDown = false;
  const subscription = await bus.subscribe({
    groupId: `bus-test-${randomBytes(5).toString("hex")}`,
    topics: [topic],
    handler: async (message) => {
      calls++;
      if (calls === 1) {
        // kafkajs treats a non-retriable error as fatal: it crashes the consumer and does not restart it.
        throw Object.assign(new Error("simulated fatal consumer error"), { retriable: false });
      }
      handled.push(Buffer.from(message.value).toString("utf8"));
    },
  });
  t.teardown(() => subscription.stop());
  await bus.publish(topic, [{ key: "k", value: Buffer.from("hello") }]);
  await eventually(
    async () => {
      if (!pingFailedWhileDown && calls >= 1 && handled.length === 0) {
        pingFailedWhileDown = await bus.ping().then(
          () => false,
          () => true,
        );
      }
      return handled.length === 1;
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  t.deepEqual(handled, ["hello"], "the uncommitted message is delivered again to the recreated consumer");
  t.true(pingFailedWhileDown, "readiness reports the crashed consumer until it is recreated");
  await bus.ping();
});

test("a batch consumer handles every partition of a fetch at once: a slow partition does not hold the others' batches behind it", async (t) => {
  const topic = `bus-test-${randomBytes(5).toString("hex")}`;
  await ensureTopics(brokers, [topic], TOPIC_PARTITIONS);
  const bus = createKafkaBus({ brokers, clientId: "bus-test", log });
  t.teardown(() => bus.close());
  // 60 keys: every one of the partitions holds some of them (the default partitioner spreads keys by hash).
  await bus.publish(
    topic,
    Array.from({ length: 60 }, (_, i) => ({ key: `server-${i}`, value: Buffer.from(String(i)) })),
  );
  const inHandler = new Set<number>();
  const seen = new Set<number>();
  let mostAtOnce = 0;
  let release: () => void = () => {};
  const allIn = new Promise<void>((resolve) => {
    release = resolve;
  });
  const timer = setTimeout(release, 5_000);
  t.teardown(() => clearTimeout(timer));
  let handled = 0;
  const subscription = await bus.subscribe({
    groupId: `bus-test-${randomBytes(5).toString("hex")}`,
    topics: [topic],
    batchHandler: async (messages) => {
      const partition = messages[0]!.partition;
      inHandler.add(partition);
      seen.add(partition);
      mostAtOnce = Math.max(mostAtOnce, inHandler.size);
      if (inHandler.size === TOPIC_PARTITIONS) release();
      // Each partition's first batch waits (at most 5 s) until every partition's batch is in its handler.
      await allIn;
      inHandler.delete(partition);
      handled += messages.length;
    },
  });
  t.teardown(() => subscription.stop());
  await eventually(async () => handled === 60, { timeoutMs: 60_000, intervalMs: 50 });
  t.is(seen.size, TOPIC_PARTITIONS, "the keys reached every partition");
  t.is(mostAtOnce, TOPIC_PARTITIONS, "every partition's batch was in its handler at the same time");
});

test("connectPublisher connects the producer ahead of the first publish: it fails where no broker answers and succeeds where one does", async (t) => {
  const nowhere = createKafkaBus({ brokers: ["127.0.0.1:1"], clientId: "bus-test", log, retries: 0 });
  t.teardown(() => nowhere.close());
  await t.throwsAsync(() => nowhere.connectPublisher!());
  const bus = createKafkaBus({ brokers, clientId: "bus-test", log });
  t.teardown(() => bus.close());
  await t.notThrowsAsync(() => bus.connectPublisher!());
});
