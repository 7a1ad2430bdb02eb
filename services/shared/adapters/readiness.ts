import type { EventBus } from "./bus.js";
import { pingDatabase, type PrismaClient } from "./db.js";
import type { ReadinessCheck } from "../runtime/health.js";
import { addressOf } from "../runtime/log.js";

/** PostgreSQL's port when a database URL names none. */
const POSTGRES_DEFAULT_PORT = 5432;

/**
 * The /readyz checks of a process: its database, and its bus when it has one (named `kafka` or `bus`). With
 * `databaseUrl` and `brokers`, a `down` reason names the address tried (`host:port`, the broker list; never credentials).
 */
export function readinessChecks(deps: { prisma: PrismaClient; bus?: EventBus; busName?: string; databaseUrl?: string; brokers?: string[] }): ReadinessCheck[] {
  const database: ReadinessCheck = { name: "database", check: () => pingDatabase(deps.prisma) };
  if (deps.databaseUrl !== undefined) database.target = addressOf(deps.databaseUrl, POSTGRES_DEFAULT_PORT);
  const checks: ReadinessCheck[] = [database];
  const bus = deps.bus;
  if (bus) {
    const kafka: ReadinessCheck = { name: deps.busName ?? "kafka", check: () => bus.ping() };
    if (deps.brokers !== undefined && deps.brokers.length > 0) kafka.target = deps.brokers.join(",");
    checks.push(kafka);
  }
  return checks;
}
