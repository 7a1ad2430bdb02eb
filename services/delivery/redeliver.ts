import type { Delivery as DeliveryRow } from "../../gen/prisma/client.js";
import type { CoreDeps } from "../shared/deps.js";
import { DomainError } from "../shared/errors.js";

/** Puts one finished delivery (delivered or failed) back in the queue with a fresh retry cycle; the attempt log stays. */
export async function redeliver(deps: CoreDeps, row: DeliveryRow): Promise<DeliveryRow> {
  // Pay-once mode: another transport paid this heart; sending it now would pay twice.
  if (row.status === "withdrawn") throw new DomainError("failed_precondition", "delivery was withdrawn: another transport paid the heart (pay-once mode)");
  // Conditional write: only a finished delivery goes back to the queue, with a fresh retry cycle; the attempt log stays.
  // The row is returned by the same statement (RETURNING): a read after the write could already see the
  // dispatcher's next attempt, and the caller must get the delivery as it was put back.
  const [requeued] = await deps.prisma.delivery.updateManyAndReturn({
    where: { id: row.id, status: { in: ["failed", "delivered"] } },
    data: requeueData(deps.now()),
  });
  if (requeued === undefined) throw new DomainError("failed_precondition", "delivery is already pending; it will be sent when due");
  return requeued;
}

/** Puts every delivery of `serverId` that failed at or after `since` back in the queue; returns how many. */
export async function redeliverFailedSince(deps: CoreDeps, serverId: string, since: Date): Promise<number> {
  const changed = await deps.prisma.delivery.updateMany({
    where: { serverId, status: "failed", failedAt: { gte: since } },
    data: requeueData(deps.now()),
  });
  return changed.count;
}

function requeueData(now: Date) {
  return { status: "pending" as const, attempts: 0, nextAttemptAt: now, leaseUntil: null, failedAt: null, deliveredAt: null };
}
