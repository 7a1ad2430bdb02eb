import type { EventBus } from "./bus.js";
import { pingDatabase, type PrismaClient } from "./db.js";
import type { ReadinessCheck } from "./health.js";

/** The /readyz checks of a process: its database, and its bus when it has one (named `kafka` or `bus`). */
export function readinessChecks(deps: { prisma: PrismaClient; bus?: EventBus; busName?: string }): ReadinessCheck[] {
  const checks: ReadinessCheck[] = [{ name: "database", check: () => pingDatabase(deps.prisma) }];
  const bus = deps.bus;
  if (bus) checks.push({ name: deps.busName ?? "kafka", check: () => bus.ping() });
  return checks;
}
