import kafkajs, { Kafka, logLevel, CompressionTypes, type Consumer, type Producer } from "kafkajs";
import { RejectedMessagesError, type BusMessage, type EventBus, type ReceivedMessage, type SubscribeOptions, type Subscription } from "./bus.js";
import type { Logger } from "../runtime/log.js";
import { DEFAULT_KAFKA_TOPIC_RETENTION_HOURS } from "../runtime/process-config.js";

/** Pause before a crashed consumer is recreated. */
const CONSUMER_RESTART_DELAY_MS = 2_000;
/** Messages handed to a batch handler at most at once (a fetch may bring thousands). */
const MAX_HANDLER_BATCH = 500;
/** Partitions of every topic this bus creates (prepareKafka, ensureTopics): a topic's keys spread over them. */
export const TOPIC_PARTITIONS = 6;
/** Attempts of topic creation at start (a fresh broker may not host a new partition yet). */
const ENSURE_TOPICS_ATTEMPTS = 8;

/**
 * Broker error types that refuse the messages themselves: resending them can never
 * succeed. Every other error (broker down, leader moving, too few in-sync replicas)
 * is retryable. Kafka error codes: 10, 18, 17, 87, 32.
 */
// kafkajs spreads its error classes into module.exports, which Node's CommonJS named-export detection cannot see.
const { KafkaJSProtocolError, Partitioners, ConfigResourceTypes } = kafkajs;

const MESSAGE_REJECTION_TYPES = new Set(["MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_TOPIC_EXCEPTION", "INVALID_RECORD", "INVALID_TIMESTAMP"]);

/**
 * A RejectedMessagesError when `error` (or one of its causes: kafkajs wraps errors in
 * KafkaJSNonRetriableError / KafkaJSNumberOfRetriesExceeded) is a broker refusal of the
 * messages; undefined otherwise. Classified by the protocol error's type, never its text.
 */
export function toRejectedMessages(error: unknown): RejectedMessagesError | undefined {
  const seen = new Set<unknown>();
  for (let current: unknown = error; current instanceof Error && !seen.has(current); current = current.cause) {
    seen.add(current);
    if (current instanceof KafkaJSProtocolError && MESSAGE_REJECTION_TYPES.has(current.type)) {
      return new RejectedMessagesError(current.type, `${current.type}: ${current.message}`);
    }
  }
  return undefined;
}

/**
 * kafkajs's warning at every start of an idempotent producer with bounded retries. Bounded on purpose: a send
 * that exhausts them fails, the bus drops the producer (resetProducer) and the caller (the relay) retries on a
 * fresh one, so the warning says nothing an operator can act on; it is logged at debug. Matched on kafkajs's
 * text because its log entries carry no code.
 */
const IDEMPOTENT_RETRIES_WARNING = "Limiting retries for the idempotent producer may invalidate EoS guarantees";

/** kafkajs's fields worth a log line (never `stack`, nor its own `timestamp` and `logger`). */
const KAFKA_LOG_FIELDS = ["broker", "clientId", "groupId", "memberId", "topic", "partition", "retryCount", "retryTime", "error"] as const;

/**
 * One concise line for a kafkajs log entry: its message with the retry count and delay appended, the
 * broker and group as fields, no stack trace (except a consumer crash caused by our own code's error). The per-connection "Connection error" entry kafkajs
 * writes before each retry's own line says the same thing with a stack: it goes to debug (`quiet`).
 */
export function toKafkaLogLine(log: { message?: unknown; [field: string]: unknown }): { message: string; fields: Record<string, unknown>; quiet: boolean } {
  const fields: Record<string, unknown> = {};
  for (const name of KAFKA_LOG_FIELDS) if (log[name] !== undefined) fields[name] = log[name] instanceof Error ? (log[name] as Error).message : log[name];
  const text = String(log.message ?? "").split("\n")[0] ?? "";
  // A consumer crashing on an error of our own code (not a kafkajs one: broker down, retries exhausted) keeps its stack.
  if (/^Crash: (?!KafkaJS)/.test(text) && log.stack !== undefined) fields.stack = log.stack;
  const retry =
    typeof log.retryCount === "number"
      ? ` (retry ${log.retryCount}${typeof log.retryTime === "number" ? `, next in ${Math.round(log.retryTime)} ms` : ""})`
      : "";
  const quiet = (/^Connection error:/.test(text) && log.stack !== undefined) || text === IDEMPOTENT_RETRIES_WARNING;
  return { message: `${text}${retry}`, fields, quiet };
}

/** What a bus tells its outage log: kafkajs's error lines, and every sign that Kafka answers. */
export interface KafkaOutageLog {
  /** A kafkajs error line (toKafkaLogLine): the first while Kafka answered is the "down" line, the rest go to debug. */
  failure(line: { message: string; fields: Record<string, unknown> }): void;
  /** Kafka answered (a send, a fetch, a group join, a readiness ping): after a "down" line, one "up" line. */
  success(): void;
}

/**
 * One line per state change while Kafka is away: kafkajs logs an error for every retry of every client (several a
 * second per process during an outage). The first error after Kafka answered is logged at error with its cause
 * (`kafka down: <cause>`); later ones at debug; the first success after it logs `kafka answering again` at info with
 * how long it was down and how many errors went to debug meanwhile.
 */
export function createKafkaOutageLog(log: Logger, nowMs: () => number = Date.now): KafkaOutageLog {
  let down: { sinceMs: number; repeated: number } | undefined;
  return {
    failure({ message, fields }) {
      if (down !== undefined) {
        down.repeated++;
        log.debug({ kafka: fields }, message);
        return;
      }
      down = { sinceMs: nowMs(), repeated: 0 };
      log.error({ kafka: fields, kafkaState: "down" }, `kafka down: ${message}`);
    },
    success() {
      if (down === undefined) return;
      log.info({ kafkaState: "up", downMs: nowMs() - down.sinceMs, errorsAtDebug: down.repeated }, "kafka answering again");
      down = undefined;
    },
  };
}

/**
 * The one kafkajs wrapper: every process talks to Kafka through this bus. kafkajs's own log goes through
 * toKafkaLogLine; its errors through the bus's KafkaOutageLog (one line when Kafka goes away, one when it is back),
 * except a consumer crash caused by our own handler, which is always logged with its stack.
 */
export function createKafkaBus(opts: { brokers: string[]; clientId: string; log: Logger; retries?: number }): EventBus {
  const outage = createKafkaOutageLog(opts.log);
  const kafka = new Kafka({
    clientId: opts.clientId,
    brokers: opts.brokers,
    logLevel: logLevel.WARN,
    logCreator:
      () =>
      ({ level, log }) => {
        const line = toKafkaLogLine(log);
        if (line.quiet) opts.log.debug({ kafka: line.fields }, line.message);
        else if (level !== logLevel.ERROR) opts.log.warn({ kafka: line.fields }, line.message);
        else if (line.fields.stack !== undefined) opts.log.error({ kafka: line.fields }, line.message);
        else outage.failure(line);
      },
    // Tests that provoke retryable errors pass fewer retries, so a failed send surfaces sooner.
    retry: { initialRetryTime: 200, retries: opts.retries ?? 8 },
  });
  let producer: Producer | undefined;
  let producerReady: Promise<Producer> | undefined;
  const consumers = new Set<Consumer>();
  /** One liveness check per subscription: false while its consumer is crashed and being recreated. */
  const subscriptions = new Set<() => boolean>();
  let closed = false;
  const admin = kafka.admin();
  let adminConnected: Promise<void> | undefined;

  const connectAdmin = (): Promise<void> =>
    (adminConnected ??= admin.connect().catch((error: unknown) => {
      // Failure policy: retry the admin connection on the next readiness probe or lag query.
      adminConnected = undefined;
      throw error;
    }));

  const getProducer = (): Promise<Producer> => {
    producerReady ??= (async () => {
      // Idempotent producer: broker-side dedup of retried sends, acks from all in-sync replicas. The partitioner
      // is kafkajs's default, named so that kafkajs does not print its v2 migration warning at every start.
      const p = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: true, createPartitioner: Partitioners.DefaultPartitioner });
      await p.connect();
      outage.success();
      producer = p;
      return p;
    })().catch((error: unknown) => {
      // Failure policy: forget the failed connect so the next publish tries again.
      producerReady = undefined;
      throw error;
    });
    return producerReady;
  };

  /**
   * Drops the producer after a failed send. The idempotent producer rolls its sequence
   * numbers back for every partition of a failed request, including partitions the broker
   * did write, so reusing it could make the broker drop (as duplicates) or refuse (out of
   * order) the next messages; a new producer gets a new producer id and fresh sequences.
   */
  const resetProducer = async (): Promise<void> => {
    const stale = producerReady;
    producerReady = undefined;
    producer = undefined;
    // Failure policy: a producer that fails to disconnect is abandoned; the next publish makes a new one.
    await stale?.then((p) => p.disconnect()).catch(() => undefined);
  };

  /**
   * Messages not yet committed by `groupId` on the given partitions of each topic (undefined: every
   * partition of the topic).
   */
  const lagOf = async (groupId: string, partitionsByTopic: Record<string, readonly number[] | undefined>): Promise<number> => {
    await connectAdmin();
    const topics = Object.keys(partitionsByTopic);
    let total = 0;
    const committed = await admin.fetchOffsets({ groupId, topics });
    for (const topic of topics) {
      const only = partitionsByTopic[topic];
      const ends = (await admin.fetchTopicOffsets(topic)).filter((end) => only === undefined || only.includes(end.partition));
      const mine = committed.find((c) => c.topic === topic)?.partitions ?? [];
      for (const end of ends) {
        const at = Number(mine.find((p) => p.partition === end.partition)?.offset ?? "-1");
        // -1: nothing committed yet; the group starts at the earliest retained offset.
        total += Math.max(0, Number(end.high) - (at < 0 ? Number(end.low) : at));
      }
    }
    return total;
  };

  return {
    async connectPublisher() {
      await getProducer();
    },
    async publish(topic: string, messages: BusMessage[]) {
      if (messages.length === 0) return;
      const p = await getProducer();
      try {
        await p.send({
          topic,
          acks: -1,
          compression: CompressionTypes.None,
          messages: messages.map((m) => ({ key: m.key, value: Buffer.from(m.value) })),
        });
        outage.success();
      } catch (error) {
        // Failure policy: start the next publish on a fresh producer; tell a refusal of these messages apart from an outage.
        await resetProducer();
        throw toRejectedMessages(error) ?? error;
      }
    },
    lag: (groupId: string, topics: string[]) => lagOf(groupId, Object.fromEntries(topics.map((topic) => [topic, undefined]))),
    async subscribe({ groupId, topics, handler, batchHandler, fromBeginning = true, session }: SubscribeOptions): Promise<Subscription> {
      let current: Consumer | undefined;
      let stopped = false;
      let restartTimer: NodeJS.Timeout | undefined;
      /** The partitions the group gave this member at its last join; undefined while it holds none it knows of. */
      let assigned: Record<string, number[]> | undefined;

      const run = async (): Promise<void> => {
        const consumer = kafka.consumer({
          groupId,
          allowAutoTopicCreation: true,
          sessionTimeout: session?.sessionTimeoutMs ?? 30_000,
          heartbeatInterval: session?.heartbeatIntervalMs ?? 3_000,
          ...(session ? { maxWaitTimeInMs: session.fetchMaxWaitMs } : {}),
        });
        current = consumer;
        consumers.add(consumer);
        // Each join (the first, and after every rebalance) hands this member its partitions; until then it owns none it knows of.
        // A fetch answered or the group joined: Kafka is back for this consumer.
        consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
          if (current === consumer) assigned = payload.memberAssignment;
          outage.success();
        });
        consumer.on(consumer.events.REBALANCING, () => {
          if (current === consumer) assigned = undefined;
        });
        consumer.on(consumer.events.FETCH, () => outage.success());
        // kafkajs gives up on some errors (for example the group coordinator missing for a few
        // seconds after a broker restart) and never restarts the consumer by itself.
        consumer.on(consumer.events.CRASH, ({ payload }) => {
          if (payload.restart || stopped || closed) return;
          // Failure policy: recreate the consumer after a pause; offsets are committed only after
          // the handler succeeds, so nothing is lost, at worst redelivered.
          opts.log.warn({ groupId, error: payload.error?.message }, "kafka consumer crashed without restart; recreating it");
          consumers.delete(consumer);
          restartTimer = setTimeout(() => {
            void consumer
              .disconnect()
              .catch(() => undefined)
              .then(() => (stopped || closed ? undefined : run()))
              .catch((error: unknown) => {
                // Failure policy: keep trying; a consumer that is not running makes ping() fail, so /readyz shows it.
                opts.log.error({ err: error, groupId }, "recreating the kafka consumer failed; retrying");
                restartTimer = setTimeout(() => void run().catch(() => undefined), CONSUMER_RESTART_DELAY_MS);
              });
          }, CONSUMER_RESTART_DELAY_MS);
        });
        await consumer.connect();
        for (const topic of topics) await consumer.subscribe({ topic, fromBeginning });
        const toReceived = (topic: string, partition: number, message: kafkajs.KafkaMessage): ReceivedMessage => ({
          topic,
          partition,
          offset: message.offset,
          key: message.key?.toString("utf8") ?? "",
          value: message.value ?? new Uint8Array(),
        });
        // Every partition of a fetch is handled at once: kafkajs fetches again only when the whole fetch is handled, so with
        // fewer workers than partitions a message waited behind other partitions' handlers (rounds of them) before its own.
        const partitionsConsumedConcurrently = TOPIC_PARTITIONS * topics.length;
        if (batchHandler) {
          await consumer.run({
            partitionsConsumedConcurrently,
            eachBatchAutoResolve: false,
            eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
              const messages = batch.messages.map((m) => toReceived(batch.topic, batch.partition, m));
              for (let i = 0; i < messages.length; i += MAX_HANDLER_BATCH) {
                if (!isRunning() || isStale()) return;
                const chunk = messages.slice(i, i + MAX_HANDLER_BATCH);
                // A slow handler (the database away for a moment) keeps the membership alive: with a short
                // session timeout, silence while handling would hand the partition to another member.
                const keepAlive = setInterval(() => {
                  // Failure policy: a failed heartbeat (a rebalance under way) is seen again, and handled, by the runner's own next one.
                  heartbeat().catch(() => undefined);
                }, session?.heartbeatIntervalMs ?? 3_000);
                try {
                  await batchHandler(chunk);
                } finally {
                  clearInterval(keepAlive);
                }
                // Committed (auto-commit) only up to what was handled: a throw above redelivers the rest.
                resolveOffset(chunk[chunk.length - 1]!.offset);
                await heartbeat();
              }
            },
          });
        } else if (handler) {
          await consumer.run({
            partitionsConsumedConcurrently,
            eachMessage: async ({ topic, partition, message }) => {
              await handler(toReceived(topic, partition, message));
            },
          });
        }
      };
      subscriptions.add(() => current !== undefined && consumers.has(current));
      await run();
      return {
        async lag() {
          const mine = assigned;
          return mine === undefined ? undefined : lagOf(groupId, Object.fromEntries(topics.map((topic) => [topic, mine[topic] ?? []])));
        },
        async stop() {
          stopped = true;
          assigned = undefined;
          clearTimeout(restartTimer);
          if (current) {
            consumers.delete(current);
            await current.disconnect();
          }
        },
      };
    },
    async ping() {
      await connectAdmin();
      await admin.describeCluster();
      outage.success();
      for (const isRunning of subscriptions) if (!isRunning()) throw new Error("a kafka consumer is being recreated after a crash");
    },
    async close() {
      closed = true;
      await Promise.allSettled([...consumers].map((c) => c.disconnect()));
      if (producer) await producer.disconnect();
      if (adminConnected) await admin.disconnect();
    },
  };
}

const HOUR_MS = 3_600_000;
/**
 * Longest `segment.ms` of a topic this bus creates: Kafka deletes a segment once its NEWEST message is past
 * `retention.ms`, so a message can outlive it by its segment's span; 12 hours keeps that inside the margin the
 * referral service's delivery retention keeps above the topics' (retention-settings.ts: 24 hours).
 */
export const MAX_TOPIC_SEGMENT_MS = 12 * HOUR_MS;

/** The configuration of a topic this bus creates: keeps a message `retentionHours` (plus at most a segment's span). */
export function topicConfigEntries(retentionHours: number): { name: string; value: string }[] {
  const retentionMs = retentionHours * HOUR_MS;
  return [
    { name: "retention.ms", value: String(retentionMs) },
    { name: "segment.ms", value: String(Math.min(retentionMs, MAX_TOPIC_SEGMENT_MS)) },
  ];
}

/** An existing topic that keeps messages longer than KAFKA_TOPIC_RETENTION_HOURS (its retention.ms, -1: for ever). */
export interface LongRetentionTopic {
  topic: string;
  retentionMs: number;
  settingMs: number;
}

/**
 * The topics of `topics` whose `retention.ms` is longer than `retentionHours` (or unlimited, -1): created before the
 * setting, or by hand, they keep messages after the deliveries those messages made may have been removed.
 */
async function findLongRetentionTopics(admin: kafkajs.Admin, topics: string[], retentionHours: number): Promise<LongRetentionTopic[]> {
  if (topics.length === 0) return [];
  const settingMs = retentionHours * HOUR_MS;
  const described = await admin.describeConfigs({
    includeSynonyms: false,
    resources: topics.map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: ["retention.ms"] })),
  });
  const long: LongRetentionTopic[] = [];
  for (const resource of described.resources) {
    const value = resource.configEntries.find((e) => e.configName === "retention.ms")?.configValue;
    if (value === undefined || value === null) continue;
    const retentionMs = Number(value);
    if (retentionMs < 0 || retentionMs > settingMs) long.push({ topic: resource.resourceName, retentionMs, settingMs });
  }
  return long;
}

/** What prepareKafka needs besides the brokers and topics. */
export interface PrepareKafkaOptions {
  numPartitions?: number;
  groupId?: string;
  /** KAFKA_TOPIC_RETENTION_HOURS: `retention.ms` of the topics created (default 168, Kafka's own). */
  topicRetentionHours?: number;
  /** Where an existing topic that keeps messages longer than that is reported (an error line each). */
  log?: Logger;
}

/**
 * One bounded attempt at what a process needs from Kafka before it starts: the broker answers,
 * the topics exist with several partitions (auto-created topics would get the broker default),
 * and, with `groupId`, the group's coordinator is available. Fails fast (about 2 s) when no broker
 * answers, so the caller can report it and retry (services/shared/runtime/startup.ts).
 *
 * The coordinator step is why a normal first start logs no error: on a fresh broker the first
 * FindCoordinator request makes Kafka create `__consumer_offsets` and answers "The group coordinator
 * is not available" until it exists. kafkajs retries that, but its consumer logs each such answer as
 * an error; asking here, through a client that logs nothing, lets the consumer find it ready.
 */
export async function prepareKafka(brokers: string[], topics: string[], opts: PrepareKafkaOptions = {}): Promise<LongRetentionTopic[]> {
  const retentionHours = opts.topicRetentionHours ?? DEFAULT_KAFKA_TOPIC_RETENTION_HOURS;
  let long: LongRetentionTopic[];
  const quick = new Kafka({
    clientId: "kafka-setup",
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1_500,
    retry: { retries: 1, initialRetryTime: 200 },
  }).admin();
  try {
    await quick.connect();
    const existing = new Set(await quick.listTopics());
    const missing = topics.filter((t) => !existing.has(t));
    if (missing.length > 0)
      await quick.createTopics({
        waitForLeaders: true,
        topics: missing.map((topic) => ({ topic, numPartitions: opts.numPartitions ?? TOPIC_PARTITIONS, configEntries: topicConfigEntries(retentionHours) })),
      });
    try {
      long = await findLongRetentionTopics(
        quick,
        topics.filter((t) => existing.has(t)),
        retentionHours,
      );
    } catch (error) {
      // Failure policy: fail open - the check only reports (a broker that refuses DescribeConfigs to this client must not
      // keep the process from starting); the warning says it was skipped.
      opts.log?.warn({ err: error instanceof Error ? error.message : String(error) }, "kafka topics' retention.ms could not be read; not checked");
      long = [];
    }
  } finally {
    await quick.disconnect().catch(() => undefined);
  }
  // Reported, not refused: a replay needs the group's offsets lost too, and stopping the process would stop every
  // reward; the operator shortens the topic's retention.ms (kafka-configs --alter) without a restart.
  for (const t of long)
    opts.log?.error(
      { topic: t.topic, retentionMs: t.retentionMs, kafkaTopicRetentionMs: t.settingMs },
      `kafka topic ${t.topic} keeps messages longer (retention.ms ${t.retentionMs}) than KAFKA_TOPIC_RETENTION_HOURS (${t.settingMs} ms): ` +
        "a message replayed after its delivery was removed by retention would be delivered again; set the topic's retention.ms to the setting",
    );
  if (opts.groupId === undefined) return long;
  // The broker answered: give the coordinator the seconds a fresh broker needs to create __consumer_offsets.
  const patient = new Kafka({ clientId: "kafka-setup", brokers, logLevel: logLevel.NOTHING, retry: { retries: 6, initialRetryTime: 300 } }).admin();
  try {
    await patient.connect();
    await patient.describeGroups([opts.groupId]);
  } finally {
    await patient.disconnect().catch(() => undefined);
  }
  return long;
}

/**
 * Creates topics with several partitions (idempotent), retrying while a fresh broker settles; for tests and tools (and
 * the all-in-one start, which passes KAFKA_TOPIC_RETENTION_HOURS and its log). Returns the existing topics that keep
 * messages longer than that (prepareKafka).
 */
export async function ensureTopics(
  brokers: string[],
  topics: string[],
  numPartitions = TOPIC_PARTITIONS,
  opts: Pick<PrepareKafkaOptions, "topicRetentionHours" | "log"> = {},
): Promise<LongRetentionTopic[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await prepareKafka(brokers, topics, { numPartitions, ...opts });
    } catch (error) {
      // Failure policy: a fresh broker answers "does not host this topic-partition" for a moment; retry with backoff, then fail.
      if (attempt >= ENSURE_TOPICS_ATTEMPTS) throw error;
      await new Promise((r) => setTimeout(r, 250 * 2 ** Math.min(attempt, 5)));
    }
  }
}
