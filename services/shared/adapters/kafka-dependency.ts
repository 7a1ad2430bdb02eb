import { prepareKafka } from "./kafka-bus.js";
import type { Dependency } from "../runtime/startup.js";

/** Kafka as a start dependency: brokers answer, topics exist, and the consumer group's coordinator is available. */
export function kafkaDependency(brokers: string[], topics: string[], groupId?: string): Dependency {
  return {
    name: "kafka",
    target: brokers.join(","),
    attempt: () => prepareKafka(brokers, topics, { groupId }),
    // An unreachable broker fails within about 3 s; a fresh broker may need ~10 s to host the group coordinator.
    timeoutMs: 20_000,
  };
}
