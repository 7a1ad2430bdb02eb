import { pingDatabase, type PrismaClient } from "./db.js";
import { prepareKafka } from "./kafka-bus.js";
import { redactUrl } from "./log.js";
import type { Dependency } from "./startup.js";

/**
 * The start dependencies of the processes that hold a database or a bus (referral service, relay,
 * delivery, all-in-one): each is awaited by `Startup.waitFor` (services/shared/startup.ts). Apart
 * from startup.ts so that the process skeleton (run-service.ts) loads no database or Kafka client:
 * the gateway, which talks to the referral service only, runs on it too (ARCHITECTURE.md, "Layers").
 */

/** The database as a start dependency: answers `SELECT 1`. */
export function databaseDependency(prisma: PrismaClient, databaseUrl: string): Dependency {
  return { name: "database", target: redactUrl(databaseUrl), attempt: () => pingDatabase(prisma) };
}

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
