import { Kafka, logLevel, CompressionTypes, type Consumer, type Producer } from "kafkajs";
import type { BusMessage, EventBus, MessageHandler, Subscription } from "./bus.js";
import type { Logger } from "./log.js";

/** The one kafkajs wrapper: every process talks to Kafka through this bus. */
export function createKafkaBus(opts: { brokers: string[]; clientId: string; log: Logger }): EventBus {
  const kafka = new Kafka({
    clientId: opts.clientId,
    brokers: opts.brokers,
    logLevel: logLevel.WARN,
    logCreator: () => ({ level, log }) => {
      const { message, ...extra } = log;
      opts.log[level === logLevel.ERROR ? "error" : "warn"]({ kafka: extra }, String(message));
    },
    retry: { initialRetryTime: 200, retries: 8 },
  });
  let producer: Producer | undefined;
  let producerReady: Promise<Producer> | undefined;
  const consumers = new Set<Consumer>();
  const admin = kafka.admin();
  let adminConnected: Promise<void> | undefined;

  const getProducer = (): Promise<Producer> => {
    producerReady ??= (async () => {
      // Idempotent producer: broker-side dedup of retried sends, acks from all in-sync replicas.
      const p = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: true });
      await p.connect();
      producer = p;
      return p;
    })().catch((error: unknown) => {
      // Failure policy: forget the failed connect so the next publish tries again.
      producerReady = undefined;
      throw error;
    });
    return producerReady;
  };

  return {
    async publish(topic: string, messages: BusMessage[]) {
      if (messages.length === 0) return;
      const p = await getProducer();
      await p.send({
        topic,
        acks: -1,
        compression: CompressionTypes.None,
        messages: messages.map((m) => ({ key: m.key, value: Buffer.from(m.value) })),
      });
    },
    async subscribe({ groupId, topics, handler, fromBeginning = true }: { groupId: string; topics: string[]; handler: MessageHandler; fromBeginning?: boolean }): Promise<Subscription> {
      const consumer = kafka.consumer({ groupId, allowAutoTopicCreation: true, sessionTimeout: 30_000, heartbeatInterval: 3_000 });
      consumers.add(consumer);
      await consumer.connect();
      for (const topic of topics) await consumer.subscribe({ topic, fromBeginning });
      await consumer.run({
        partitionsConsumedConcurrently: 3,
        eachMessage: async ({ topic, partition, message }) => {
          await handler({
            topic,
            partition,
            offset: message.offset,
            key: message.key?.toString("utf8") ?? "",
            value: message.value ?? new Uint8Array(),
          });
        },
      });
      return {
        async stop() {
          consumers.delete(consumer);
          await consumer.disconnect();
        },
      };
    },
    async ping() {
      adminConnected ??= admin.connect().catch((error: unknown) => {
        // Failure policy: retry the admin connection on the next readiness probe.
        adminConnected = undefined;
        throw error;
      });
      await adminConnected;
      await admin.describeCluster();
    },
    async close() {
      await Promise.allSettled([...consumers].map((c) => c.disconnect()));
      if (producer) await producer.disconnect();
      if (adminConnected) await admin.disconnect();
    },
  };
}

/** Creates topics with several partitions (idempotent); auto-created topics would get the broker default. */
export async function ensureTopics(brokers: string[], topics: string[], numPartitions = 6): Promise<void> {
  const admin = new Kafka({ clientId: "topic-setup", brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = topics.filter((t) => !existing.has(t));
    if (missing.length > 0) await admin.createTopics({ waitForLeaders: true, topics: missing.map((topic) => ({ topic, numPartitions })) });
  } finally {
    await admin.disconnect();
  }
}
