import { randomUUID } from "node:crypto";
import { Prisma } from "../../../gen/prisma/client.js";
import type { PrismaClient } from "../../shared/adapters/db.js";
import { runSql } from "../../shared/adapters/sql/executor.js";
import type { Logger } from "../../shared/runtime/log.js";

/**
 * Dispatcher liveness: the one owner of `delivery_workers`. A running dispatcher has a row it beats
 * every WORKER_HEARTBEAT_MS (the database's clock, so hosts' clocks never meet) and deletes when it
 * stops. Its leases carry its id (`deliveries.leased_by`); a lease whose worker has not beaten for
 * WORKER_DEAD_AFTER_MS (lease.ts; killed, or its host gone) is taken over by the next claim without waiting for
 * `lease_until` (the attempt timeout plus a margin), so a delivery, and a pay-once heart its push
 * reserved, come back within seconds. The taken-over attempt is recorded as in doubt (pay-once.ts).
 */

/** How often a running dispatcher beats. */
export const WORKER_HEARTBEAT_MS = 2_000;
/** A worker row whose process was killed is deleted by a starting dispatcher once it is this old. */
const STALE_WORKER_ROW_MS = 3_600_000;

/** A dispatcher's row in `delivery_workers`, beating until stopped. */
export interface WorkerLiveness {
  /** The id its leases carry. */
  id: string;
  /** Deletes the row (after the dispatcher's last attempt is recorded) and stops beating. */
  stop(): Promise<void>;
}

/**
 * Inserts this dispatcher's row and beats it every `heartbeatMs`. A beat that finds no row (deleted by
 * hand) inserts it again. Rows older than STALE_WORKER_ROW_MS, left by killed processes, are deleted.
 */
export async function startWorkerLiveness(prisma: PrismaClient, log: Logger, heartbeatMs = WORKER_HEARTBEAT_MS): Promise<WorkerLiveness> {
  const id = randomUUID();
  const beat = () =>
    runSql(
      prisma,
      Prisma.sql`INSERT INTO delivery_workers (id, started_at, heartbeat_at) VALUES (${id}::uuid, now(), now())
      ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()`,
    );
  await beat();
  await runSql(prisma, Prisma.sql`DELETE FROM delivery_workers WHERE heartbeat_at < now() - ${STALE_WORKER_ROW_MS}::int * interval '1 millisecond'`);
  let failing = false;
  const timer = setInterval(() => {
    beat().then(
      () => {
        if (failing) log.info({ workerId: id }, "delivery worker heartbeat recovered");
        failing = false;
      },
      (error: unknown) => {
        // Failure policy: logged once per outage; with the database away no claim can take the leases either, and
        // the next beat that lands keeps them.
        if (!failing) log.warn({ err: error, workerId: id }, "delivery worker heartbeat failed");
        failing = true;
      },
    );
  }, heartbeatMs);
  timer.unref();
  return {
    id,
    async stop() {
      clearInterval(timer);
      await runSql(prisma, Prisma.sql`DELETE FROM delivery_workers WHERE id = ${id}::uuid`);
    },
  };
}
