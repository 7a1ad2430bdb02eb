import { Prisma } from "../../../gen/prisma/client.js";
import type { SqlTx } from "../../shared/adapters/sql/executor.js";
import { notifyEndpointDisabled } from "./owner-notifications.js";
import { endpointDisabledAlert } from "../../alerts/alert-kinds.js";
import { raiseAlerts } from "../../alerts/alert-store.js";

/**
 * A callback endpoint's health transition, written once: a callback attempt that succeeded ends
 * the endpoint's run of failures, one that failed starts it (or continues it) and records its reason.
 * foldEndpointHealth folds any number of attempts (one, or a recorded batch) into one row per endpoint,
 * and upsertEndpointHealthSql applies those rows to `callback_health`; the attempt log
 * (attempt-log.ts) runs both with every recorded attempt. A run of failures older than
 * AUTO_DISABLE_AFTER_MS disables the endpoint (disableCallback, also used for a 410).
 */

import { AUTO_DISABLE_AFTER_MS } from "../../shared/values/endpoint-health-limits.js";

export { AUTO_DISABLE_AFTER_MS };

/** A callback attempt as the health transition sees it. */
export interface HealthAttempt {
  serverId: string;
  /** The endpoint the attempt went to. */
  endpointId: string;
  startedAt: Date;
  succeeded: boolean;
  /** Why it did not succeed (null when it did; "attempt failed" when no reason was given). */
  error: string | null;
}

/** An endpoint's callback_health change folded from a run of attempts (ISO text, as the statement reads it). */
export interface HealthChange {
  endpoint_id: string;
  server_id: string;
  last_success_at: string | null;
  failing_since: string | null;
  last_failure_at: string | null;
  last_failure_reason: string | null;
}

/** The reason recorded for a failed attempt without one. */
const UNNAMED_FAILURE = "attempt failed";

/** The attempts' effect on each endpoint's callback_health row, folded in recording order. */
export function foldEndpointHealth(attempts: readonly HealthAttempt[]): HealthChange[] {
  const byEndpoint = new Map<string, HealthChange>();
  for (const a of attempts) {
    let h = byEndpoint.get(a.endpointId);
    if (!h) {
      h = { endpoint_id: a.endpointId, server_id: a.serverId, last_success_at: null, failing_since: null, last_failure_at: null, last_failure_reason: null };
      byEndpoint.set(a.endpointId, h);
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
  return [...byEndpoint.values()];
}

/**
 * The one upsert of callback_health: applies folded changes (foldEndpointHealth), in endpoint order,
 * returning each endpoint's `endpoint_id, failing_since` (the start of its current run of failures,
 * null after a success). A success in the changes ends the stored run (the changes' own failures
 * after it start the next one); failures alone continue it.
 */
export function upsertEndpointHealthSql(changes: readonly HealthChange[]): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO callback_health (endpoint_id, server_id, last_success_at, failing_since, last_failure_at, last_failure_reason)
    SELECT h.endpoint_id, h.server_id, h.last_success_at, h.failing_since, h.last_failure_at, h.last_failure_reason
    FROM jsonb_to_recordset(${JSON.stringify(changes)}::jsonb)
      AS h(endpoint_id uuid, server_id uuid, last_success_at timestamptz, failing_since timestamptz, last_failure_at timestamptz, last_failure_reason text)
    ORDER BY h.endpoint_id
    ON CONFLICT (endpoint_id) DO UPDATE
    SET last_success_at = greatest(callback_health.last_success_at, EXCLUDED.last_success_at),
        failing_since = CASE WHEN EXCLUDED.last_success_at IS NOT NULL THEN EXCLUDED.failing_since
                             ELSE coalesce(callback_health.failing_since, EXCLUDED.failing_since) END,
        last_failure_at = coalesce(EXCLUDED.last_failure_at, callback_health.last_failure_at),
        last_failure_reason = CASE WHEN EXCLUDED.last_failure_at IS NOT NULL THEN EXCLUDED.last_failure_reason
                                   ELSE callback_health.last_failure_reason END
    RETURNING endpoint_id, failing_since`;
}

/** The last attempt to `endpointId` among `attempts`, when it failed, with its reason. */
export function lastFailureOf<T extends HealthAttempt>(attempts: readonly T[], endpointId: string): { attempt: T; error: string } | undefined {
  for (let n = attempts.length - 1; n >= 0; n--) {
    const a = attempts[n]!;
    if (a.endpointId !== endpointId) continue;
    return a.succeeded ? undefined : { attempt: a, error: a.error ?? UNNAMED_FAILURE };
  }
  return undefined;
}

/** The reason shown when an endpoint is disabled for failing every attempt. */
export function autoDisableReason(failingSince: Date, lastError: string): string {
  return `every attempt failed for 5 days (since ${failingSince.toISOString()}); last error: ${lastError}`;
}

/**
 * Disables the endpoint when its run of failures is older than AUTO_DISABLE_AFTER_MS
 * (disableCallback). Returns whether it did.
 */
export async function autoDisableIfFailingTooLong(
  tx: SqlTx,
  a: { endpointId: string; failingSince: Date; lastError: string; at: Date; afterMs?: number },
): Promise<boolean> {
  if (a.at.getTime() - a.failingSince.getTime() < (a.afterMs ?? AUTO_DISABLE_AFTER_MS)) return false;
  return disableCallback(tx, a.endpointId, autoDisableReason(a.failingSince, a.lastError), a.at);
}

/**
 * Disables the callback endpoint `endpointId` with `reason` and writes `owner.endpoint_disabled`
 * and the owner's "disabled" alert (docs/owner-alerts.md) in the same transaction. Conditional on the endpoint still being enabled, so concurrent attempts
 * disable (and notify) once. Returns whether it did.
 */
export async function disableCallback(tx: SqlTx, endpointId: string, reason: string, at: Date): Promise<boolean> {
  const disabled = await tx.query<{ server_id: string; name: string; url: string | null }>(Prisma.sql`
    UPDATE callback_endpoints e SET disabled_at = ${at}::timestamptz, disabled_reason = ${reason}
    FROM servers s
    WHERE e.id = ${endpointId}::uuid AND e.disabled_at IS NULL AND s.id = e.server_id
    RETURNING e.server_id::text, s.name, e.url`);
  const endpoint = disabled[0];
  if (!endpoint) return false;
  await notifyEndpointDisabled(tx, { id: endpoint.server_id, name: endpoint.name, callbackUrl: endpoint.url }, reason, at);
  await raiseAlerts(tx, [endpointDisabledAlert({ serverId: endpoint.server_id, serverName: endpoint.name, endpointId, url: endpoint.url, reason, at })]);
  return true;
}
