import { Prisma } from "../../gen/prisma/client.js";
import type { Tx } from "../shared/db.js";
import { notifyEndpointDisabled } from "./owner-notifications.js";

/**
 * The callback endpoint's health transition, written once: a callback attempt that succeeded ends
 * the server's run of failures, one that failed starts it (or continues it) and records its reason.
 * foldEndpointHealth folds any number of attempts (one, or a recorded batch) into one row per server,
 * and upsertEndpointHealthSql applies those rows to `callback_health`; the attempt log
 * (attempt-log.ts) runs both with every recorded attempt. A run of failures older than
 * AUTO_DISABLE_AFTER_MS disables the callback (disableCallback, also used for a 410).
 */

/** A callback endpoint whose every attempt failed for this long is disabled (besides a 410). */
export const AUTO_DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;

/** A callback attempt as the health transition sees it. */
export interface HealthAttempt {
  serverId: string;
  startedAt: Date;
  succeeded: boolean;
  /** Why it did not succeed (null when it did; "attempt failed" when no reason was given). */
  error: string | null;
}

/** A server's callback_health change folded from a run of attempts (ISO text, as the statement reads it). */
export interface HealthChange {
  server_id: string;
  last_success_at: string | null;
  failing_since: string | null;
  last_failure_at: string | null;
  last_failure_reason: string | null;
}

/** The reason recorded for a failed attempt without one. */
const UNNAMED_FAILURE = "attempt failed";

/** The attempts' effect on each server's callback_health row, folded in recording order. */
export function foldEndpointHealth(attempts: readonly HealthAttempt[]): HealthChange[] {
  const byServer = new Map<string, HealthChange>();
  for (const a of attempts) {
    let h = byServer.get(a.serverId);
    if (!h) {
      h = { server_id: a.serverId, last_success_at: null, failing_since: null, last_failure_at: null, last_failure_reason: null };
      byServer.set(a.serverId, h);
    }
    const at = a.startedAt.toISOString();
    if (a.succeeded) {
      if (h.last_success_at === null || at > h.last_success_at) h.last_success_at = at;
      h.failing_since = null;
    } else {
      h.failing_since ??= at;
      h.last_failure_at = at;
      h.last_failure_reason = a.error ?? UNNAMED_FAILURE;
    }
  }
  return [...byServer.values()];
}

/**
 * The one upsert of callback_health: applies folded changes (foldEndpointHealth), in server order,
 * returning each server's `server_id, failing_since` (the start of its current run of failures,
 * null after a success). A success in the changes ends the stored run (the changes' own failures
 * after it start the next one); failures alone continue it.
 */
export function upsertEndpointHealthSql(changes: readonly HealthChange[]): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO callback_health (server_id, last_success_at, failing_since, last_failure_at, last_failure_reason)
    SELECT h.server_id, h.last_success_at, h.failing_since, h.last_failure_at, h.last_failure_reason
    FROM jsonb_to_recordset(${JSON.stringify(changes)}::jsonb)
      AS h(server_id uuid, last_success_at timestamptz, failing_since timestamptz, last_failure_at timestamptz, last_failure_reason text)
    ORDER BY h.server_id
    ON CONFLICT (server_id) DO UPDATE
    SET last_success_at = greatest(callback_health.last_success_at, EXCLUDED.last_success_at),
        failing_since = CASE WHEN EXCLUDED.last_success_at IS NOT NULL THEN EXCLUDED.failing_since
                             ELSE coalesce(callback_health.failing_since, EXCLUDED.failing_since) END,
        last_failure_at = coalesce(EXCLUDED.last_failure_at, callback_health.last_failure_at),
        last_failure_reason = CASE WHEN EXCLUDED.last_failure_at IS NOT NULL THEN EXCLUDED.last_failure_reason
                                   ELSE callback_health.last_failure_reason END
    RETURNING server_id, failing_since`;
}

/** The last attempt of `serverId` among `attempts`, when it failed, with its reason. */
export function lastFailureOf<T extends HealthAttempt>(attempts: readonly T[], serverId: string): { attempt: T; error: string } | undefined {
  for (let n = attempts.length - 1; n >= 0; n--) {
    const a = attempts[n]!;
    if (a.serverId !== serverId) continue;
    return a.succeeded ? undefined : { attempt: a, error: a.error ?? UNNAMED_FAILURE };
  }
  return undefined;
}

/** The reason shown when an endpoint is disabled for failing every attempt. */
export function autoDisableReason(failingSince: Date, lastError: string): string {
  return `every attempt failed for 5 days (since ${failingSince.toISOString()}); last error: ${lastError}`;
}

/**
 * Disables the server's callback when its run of failures is older than AUTO_DISABLE_AFTER_MS
 * (disableCallback). Returns whether it did.
 */
export async function autoDisableIfFailingTooLong(
  tx: Tx,
  a: { serverId: string; failingSince: Date; lastError: string; at: Date; afterMs?: number },
): Promise<boolean> {
  if (a.at.getTime() - a.failingSince.getTime() < (a.afterMs ?? AUTO_DISABLE_AFTER_MS)) return false;
  return disableCallback(tx, a.serverId, autoDisableReason(a.failingSince, a.lastError), a.at);
}

/**
 * Disables the server's callback with `reason` and writes `owner.endpoint_disabled` in the same
 * transaction. Conditional on the callback still being enabled, so concurrent attempts disable
 * (and notify) once. Returns whether it did.
 */
export async function disableCallback(tx: Tx, serverId: string, reason: string, at: Date): Promise<boolean> {
  const disabled = await tx.$queryRaw<{ name: string; callback_url: string | null }[]>`
    UPDATE servers SET callback_disabled_at = ${at}::timestamptz, callback_disabled_reason = ${reason}
    WHERE id = ${serverId}::uuid AND callback_disabled_at IS NULL
    RETURNING name, callback_url`;
  const server = disabled[0];
  if (!server) return false;
  await notifyEndpointDisabled(tx, { id: serverId, name: server.name, callbackUrl: server.callback_url }, reason, at);
  return true;
}
