import { Prisma } from "../../../gen/prisma/client.js";

/**
 * A delivery's lease terms, read by every claim of sent deliveries (the dispatcher's, an insert's lease, a test
 * callback's): how long a lease outlives its attempt, and when a lease may be taken over. Apart from the
 * dispatcher and the worker's heartbeat (worker-liveness.ts) so the referral service, which sends test callbacks
 * but runs no dispatcher, loads neither.
 */

/** A lease outlives the attempt's timeout by this much; after it, another dispatcher may claim the row. */
export const LEASE_MARGIN_MS = 30_000;

/**
 * A worker whose last beat is older than this is taken for dead: five beats missed, so a busy event
 * loop or a slow commit does not lose a live worker its leases (if it does, the cost is a second send
 * of the same heart_id, which receivers dedupe, as after any lease that ran out).
 */
export const WORKER_DEAD_AFTER_MS = 10_000;

/**
 * Whether the lease of delivery `d` may be taken by a claim at `now`: none, run out, or held by a
 * worker that stopped beating (WORKER_DEAD_AFTER_MS by the database's clock; one primary-key read, only
 * for rows still leased). The one rule of every claim of sent deliveries.
 */
export function leaseFreeSql(now: Date): Prisma.Sql {
  return Prisma.sql`(d.lease_until IS NULL OR d.lease_until < ${now}::timestamptz
    OR (d.leased_by IS NOT NULL AND NOT EXISTS (
      SELECT 1 FROM delivery_workers w
      WHERE w.id = d.leased_by AND w.heartbeat_at >= now() - ${WORKER_DEAD_AFTER_MS}::int * interval '1 millisecond')))`;
}
