import { Prisma } from "../../../gen/prisma/client.js";
import type { Delivery as DeliveryRow } from "../../../gen/prisma/client.js";
import type { CoreDeps } from "../../shared/adapters/deps.js";
import { DomainError } from "../../shared/rpc/errors.js";
import { executeSql, runSql } from "../../shared/adapters/sql/executor.js";
import { redeliverSql } from "../pipeline/write-deliveries.js";

/** The columns redelivery changes, as the statement returns them (Prisma's field names). */
const REQUEUED_COLUMNS = Prisma.sql`d.status::text AS status, d.attempts, d.next_attempt_at AS "nextAttemptAt", d.lease_until AS "leaseUntil",
  d.failed_at AS "failedAt", d.delivered_at AS "deliveredAt"`;

/** Puts one finished delivery (delivered or failed) back in the queue with a fresh retry cycle; the attempt log stays. */
export async function redeliver(deps: CoreDeps, row: DeliveryRow): Promise<DeliveryRow> {
  // Pay-once mode: another transport paid this heart; sending it now would pay twice.
  if (row.status === "withdrawn") throw new DomainError("failed_precondition", "delivery was withdrawn: another transport paid the heart (pay-once mode)");
  // Conditional write (redeliverSql: only a finished delivery goes back to the queue). What it changed is returned by the same
  // statement (RETURNING): a read after the write could already see the dispatcher's next attempt, and the caller must get the
  // delivery as it was put back.
  const [requeued] = await runSql<Pick<DeliveryRow, "status" | "attempts" | "nextAttemptAt" | "leaseUntil" | "failedAt" | "deliveredAt">>(
    deps.prisma,
    redeliverSql(Prisma.sql`d.id = ${row.id}::uuid`, deps.now(), REQUEUED_COLUMNS),
  );
  if (requeued === undefined) throw new DomainError("failed_precondition", "delivery is already pending; it will be sent when due");
  return { ...row, ...requeued };
}

/** Puts every delivery of `serverId` that failed at or after `since` back in the queue; returns how many. */
export async function redeliverFailedSince(deps: CoreDeps, serverId: string, since: Date): Promise<number> {
  return executeSql(
    deps.prisma,
    redeliverSql(Prisma.sql`d.server_id = ${serverId}::uuid AND d.status = 'failed' AND d.failed_at >= ${since}::timestamptz`, deps.now(), Prisma.sql`d.id`),
  );
}
