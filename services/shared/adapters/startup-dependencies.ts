import { pingDatabase, type PrismaClient } from "./db.js";
import { redactUrl } from "../runtime/log.js";
import type { Dependency } from "../runtime/startup.js";

/**
 * The database as a start dependency of the processes that hold it (referral service, relay, delivery,
 * all-in-one), awaited by `Startup.waitFor` (services/shared/runtime/startup.ts). Apart from startup.ts so that the
 * process skeleton (run-service.ts) loads no database client: the gateway, which talks to the referral service
 * only, runs on it too (ARCHITECTURE.md, "Layers"). Kafka's is kafkaDependency (kafka-dependency.ts), apart
 * again so that the referral service, which holds no bus, loads no Kafka client.
 */

/** The database as a start dependency: answers `SELECT 1`. */
export function databaseDependency(prisma: PrismaClient, databaseUrl: string): Dependency {
  return { name: "database", target: redactUrl(databaseUrl), attempt: () => pingDatabase(prisma) };
}
