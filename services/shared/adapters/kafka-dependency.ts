import { prepareKafka } from "./kafka-bus.js";
import type { Dependency } from "../runtime/startup.js";
import type { Logger } from "../runtime/log.js";

/**
 * Kafka as a start dependency: brokers answer, topics exist (created keeping messages `topicRetentionHours`; an
 * existing one that keeps them longer is reported on `log`), and the consumer group's coordinator is available.
 */
export function kafkaDependency(brokers: string[], topics: string[], opts: { groupId?: string; topicRetentionHours: number; log: Logger }): Dependency {
  return {
    name: "kafka",
    target: brokers.join(","),
    attempt: async () => {
      await prepareKafka(brokers, topics, opts);
    },
    // An unreachable broker fails within about 3 s; a fresh broker may need ~10 s to host the group coordinator.
    timeoutMs: 20_000,
  };
}
