import type { BusMessage, EventBus, MessageHandler, ReceivedMessage } from "./bus.js";

/**
 * The in-process bus of the embedded single-process mode. Each topic is an
 * append-only log; each consumer group keeps a committed offset per topic and
 * handles messages one at a time, retrying a failing handler with a delay, so
 * the semantics match Kafka's at-least-once, in-order delivery for one partition.
 */
export function createMemoryBus(opts: { retryDelayMs?: number } = {}): EventBus {
  const retryDelayMs = opts.retryDelayMs ?? 500;
  const logs = new Map<string, ReceivedMessage[]>();
  const wakeups = new Set<() => void>();
  let closed = false;

  const logOf = (topic: string): ReceivedMessage[] => {
    let log = logs.get(topic);
    if (!log) {
      log = [];
      logs.set(topic, log);
    }
    return log;
  };

  return {
    async publish(topic: string, messages: BusMessage[]) {
      const log = logOf(topic);
      for (const m of messages) log.push({ topic, key: m.key, value: m.value, partition: 0, offset: String(log.length) });
      for (const wake of wakeups) wake();
    },
    async subscribe({ topics, handler }: { groupId: string; topics: string[]; handler: MessageHandler }) {
      const offsets = new Map<string, number>(topics.map((t) => [t, 0]));
      let running = true;
      let wake: () => void = () => {};
      const loop = async () => {
        while (running && !closed) {
          let progressed = false;
          for (const topic of topics) {
            const log = logOf(topic);
            const next = offsets.get(topic) ?? 0;
            const message = log[next];
            if (!message) continue;
            try {
              await handler(message);
              offsets.set(topic, next + 1);
              progressed = true;
            } catch {
              // Failure policy: keep the offset so the message is redelivered, as Kafka would.
              await new Promise((r) => setTimeout(r, retryDelayMs));
            }
          }
          if (!progressed) await new Promise<void>((resolve) => {
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
  };
}
