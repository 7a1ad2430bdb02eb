import type { BusMessage, EventBus, MessageHandler, ReceivedMessage, SubscribeOptions } from "./bus.js";

/** Messages a topic keeps at most: unacknowledged by some group, or, on a topic no group reads, the newest. */
export const DEFAULT_MAX_RETAINED_MESSAGES = 10_000;

/** Acknowledged messages dropped together (removing from an array's front is O(n)). */
const TRIM_BATCH = 256;

/** The in-process bus, plus what its bound can be checked with. */
export interface MemoryBus extends EventBus {
  /** Messages of `topic` currently held in memory (acknowledged ones are dropped in batches). */
  retainedMessages(topic: string): number;
}

/** One topic's log: `messages[i]` has offset `base + i`. */
interface TopicLog {
  base: number;
  messages: ReceivedMessage[];
}

/**
 * The in-process bus of the embedded single-process mode. Each topic is an append-only log;
 * each consumer group keeps a committed offset per topic and handles messages one at a time,
 * retrying a failing handler with a delay, so the semantics match Kafka's at-least-once,
 * in-order delivery for one partition.
 *
 * Memory is bounded: a message every group of its topic has acknowledged is dropped at once;
 * a topic no group reads keeps only its newest `maxRetainedMessages` (like Kafka's retention);
 * and while a group lags `maxRetainedMessages` behind, `publish` refuses (the relay keeps the
 * rows in the outbox and retries, so nothing is lost). Committed offsets of a group survive its
 * subscription, as Kafka's do.
 */
export function createMemoryBus(opts: { retryDelayMs?: number; maxRetainedMessages?: number } = {}): MemoryBus {
  const retryDelayMs = opts.retryDelayMs ?? 500;
  const maxRetained = opts.maxRetainedMessages ?? DEFAULT_MAX_RETAINED_MESSAGES;
  const logs = new Map<string, TopicLog>();
  /** topic -> group -> next offset to handle (the committed offset). */
  const committed = new Map<string, Map<string, number>>();
  const wakeups = new Set<() => void>();
  let closed = false;

  const logOf = (topic: string): TopicLog => {
    let log = logs.get(topic);
    if (!log) {
      log = { base: 0, messages: [] };
      logs.set(topic, log);
    }
    return log;
  };
  const groupsOf = (topic: string): Map<string, number> => {
    let groups = committed.get(topic);
    if (!groups) {
      groups = new Map();
      committed.set(topic, groups);
    }
    return groups;
  };
  /**
   * Drops the messages every group has acknowledged, or, with no group, all but the newest
   * `maxRetained`. Unless `force`, small drops wait for a batch (removing from an array's front is O(n)).
   */
  const trim = (topic: string, force = false) => {
    const log = logOf(topic);
    const groups = groupsOf(topic);
    const end = log.base + log.messages.length;
    const keepFrom = groups.size === 0 ? end - maxRetained : Math.min(...groups.values());
    const drop = keepFrom - log.base;
    if (drop <= 0 || (!force && drop < TRIM_BATCH && drop < log.messages.length)) return;
    log.messages.splice(0, drop);
    log.base += drop;
  };

  return {
    async publish(topic: string, messages: BusMessage[]) {
      const log = logOf(topic);
      const groups = groupsOf(topic);
      trim(topic, true);
      if (groups.size > 0 && log.messages.length + messages.length > maxRetained) {
        // Failure policy: refuse rather than grow without bound; the publisher (relay) keeps the rows and retries.
        throw new Error(`in-process bus: ${log.messages.length} messages of ${topic} not yet acknowledged by every consumer group (at most ${maxRetained})`);
      }
      for (const m of messages) log.messages.push({ topic, key: m.key, value: m.value, partition: 0, offset: String(log.base + log.messages.length) });
      trim(topic, true);
      for (const wake of wakeups) wake();
    },
    async subscribe({ groupId, topics, ...handlers }: SubscribeOptions) {
      // One message at a time either way: a batch handler gets batches of one.
      const handler: MessageHandler = handlers.handler ?? ((message) => handlers.batchHandler!([message]));
      // A group new to a topic starts at the oldest retained message; a known group resumes where it committed.
      for (const topic of topics) {
        const groups = groupsOf(topic);
        if (!groups.has(groupId)) groups.set(groupId, logOf(topic).base);
      }
      let running = true;
      let wake: () => void = () => {};
      const loop = async () => {
        while (running && !closed) {
          let progressed = false;
          for (const topic of topics) {
            const log = logOf(topic);
            const groups = groupsOf(topic);
            const next = groups.get(groupId) ?? log.base;
            const message = log.messages[next - log.base];
            if (!message) continue;
            try {
              await handler(message);
              groups.set(groupId, next + 1);
              trim(topic);
              progressed = true;
            } catch {
              // Failure policy: keep the offset so the message is redelivered, as Kafka would.
              await new Promise((r) => setTimeout(r, retryDelayMs));
            }
          }
          if (!progressed)
            await new Promise<void>((resolve) => {
              wake = resolve;
              wakeups.add(resolve);
              setTimeout(resolve, 1000).unref();
            }).finally(() => wakeups.delete(wake));
        }
      };
      const done = loop();
      return {
        async stop() {
          running = false;
          wake();
          await done;
        },
      };
    },
    async ping() {
      if (closed) throw new Error("bus closed");
    },
    async close() {
      closed = true;
      for (const wake of wakeups) wake();
    },
    retainedMessages: (topic) => logs.get(topic)?.messages.length ?? 0,
  };
}
