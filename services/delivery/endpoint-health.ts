import type { PrismaClient, Tx } from "../shared/db.js";
import type { AttemptExchange } from "./attempt-exchange.js";
import { notifyEndpointDisabled } from "./owner-notifications.js";

/** A callback endpoint whose every attempt failed for this long is disabled (besides a 410). */
export const AUTO_DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Keeps `callback_health` up to date with one recorded attempt, in the attempt's transaction:
 * a success ends the run of failures, a failure starts one (or continues it) and records its
 * reason. Returns the start of the current run of failures (null after a success).
 */
export async function recordEndpointHealth(tx: Tx, serverId: string, exchange: AttemptExchange, startedAt: Date): Promise<Date | null> {
  if (exchange.succeeded) {
    await tx.$executeRaw`
      INSERT INTO callback_health (server_id, last_success_at) VALUES (${serverId}::uuid, ${startedAt}::timestamptz)
      ON CONFLICT (server_id) DO UPDATE
      SET last_success_at = greatest(callback_health.last_success_at, EXCLUDED.last_success_at), failing_since = NULL`;
    return null;
  }
  const reason = exchange.error ?? "attempt failed";
  const rows = await tx.$queryRaw<{ failing_since: Date }[]>`
    INSERT INTO callback_health (server_id, failing_since, last_failure_at, last_failure_reason)
    VALUES (${serverId}::uuid, ${startedAt}::timestamptz, ${startedAt}::timestamptz, ${reason})
    ON CONFLICT (server_id) DO UPDATE
    SET failing_since = coalesce(callback_health.failing_since, EXCLUDED.failing_since),
        last_failure_at = EXCLUDED.last_failure_at,
        last_failure_reason = EXCLUDED.last_failure_reason
    RETURNING failing_since`;
  return rows[0]?.failing_since ?? startedAt;
}

/** The reason shown when an endpoint is disabled for failing every attempt. */
export function autoDisableReason(failingSince: Date, lastError: string): string {
  return `every attempt failed for 5 days (since ${failingSince.toISOString()}); last error: ${lastError}`;
}

/**
 * Disables the server's callback when its run of failures is older than AUTO_DISABLE_AFTER_MS,
 * and writes `owner.endpoint_disabled` in the same transaction. Conditional on the callback
 * still being enabled, so concurrent attempts disable (and notify) once. Returns whether it did.
 */
export async function autoDisableIfFailingTooLong(
  tx: Tx,
  a: { serverId: string; failingSince: Date; lastError: string; at: Date; afterMs?: number },
): Promise<boolean> {
  if (a.at.getTime() - a.failingSince.getTime() < (a.afterMs ?? AUTO_DISABLE_AFTER_MS)) return false;
  const reason = autoDisableReason(a.failingSince, a.lastError);
  const disabled = await tx.$queryRaw<{ name: string; callback_url: string | null }[]>`
    UPDATE servers SET callback_disabled_at = ${a.at}::timestamptz, callback_disabled_reason = ${reason}
    WHERE id = ${a.serverId}::uuid AND callback_disabled_at IS NULL
    RETURNING name, callback_url`;
  const server = disabled[0];
  if (!server) return false;
  await notifyEndpointDisabled(tx, { id: a.serverId, name: server.name, callbackUrl: server.callback_url }, reason, a.at);
  return true;
}

/** Attempts of one time window. */
export interface EndpointWindow {
  attempts: number;
  succeeded: number;
  /** succeeded / attempts, 0 when there were none. */
  successRate: number;
}

/** How a server's callback endpoint is doing. */
export interface EndpointHealth {
  callbackUrl: string | null;
  last24h: EndpointWindow;
  last7d: EndpointWindow;
  lastSuccessAt: Date | null;
  lastFailureAt: Date | null;
  lastFailureReason: string | null;
  failingSince: Date | null;
  /** When the callback is disabled if the run of failures goes on; null when not failing or already disabled. */
  autoDisableAt: Date | null;
  disabledAt: Date | null;
  disabledReason: string | null;
  failedDeliveries7d: number;
  pendingDeliveries: number;
}

/**
 * Reads the health of a server's callback endpoint at `now`: its callback attempts in the last
 * 24 h and 7 days (by start time) and its callback deliveries (other transports are not the endpoint).
 */
export async function readEndpointHealth(prisma: PrismaClient, serverId: string, now: Date): Promise<EndpointHealth> {
  const since24h = new Date(now.getTime() - DAY_MS);
  const since7d = new Date(now.getTime() - 7 * DAY_MS);
  const [server, health, windows, deliveries] = await Promise.all([
    prisma.server.findUniqueOrThrow({ where: { id: serverId }, select: { callbackUrl: true, callbackDisabledAt: true, callbackDisabledReason: true } }),
    prisma.callbackHealth.findUnique({ where: { serverId } }),
    prisma.$queryRaw<{ a24: number; s24: number; a7: number; s7: number }[]>`
      SELECT count(*) FILTER (WHERE a.started_at >= ${since24h}::timestamptz)::int AS a24,
             count(*) FILTER (WHERE a.started_at >= ${since24h}::timestamptz AND a.succeeded)::int AS s24,
             count(*)::int AS a7,
             count(*) FILTER (WHERE a.succeeded)::int AS s7
      FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
      WHERE a.server_id = ${serverId}::uuid AND d.transport = 'callback'
        AND a.started_at >= ${since7d}::timestamptz AND a.started_at <= ${now}::timestamptz`,
    prisma.$queryRaw<{ failed7d: number; pending: number }[]>`
      SELECT count(*) FILTER (WHERE status = 'failed' AND failed_at >= ${since7d}::timestamptz)::int AS failed7d,
             count(*) FILTER (WHERE status = 'pending')::int AS pending
      FROM deliveries WHERE server_id = ${serverId}::uuid AND transport = 'callback'`,
  ]);
  const w = windows[0] ?? { a24: 0, s24: 0, a7: 0, s7: 0 };
  const failingSince = health?.failingSince ?? null;
  const disabledAt = server.callbackDisabledAt;
  return {
    callbackUrl: server.callbackUrl,
    last24h: toWindow(w.a24, w.s24),
    last7d: toWindow(w.a7, w.s7),
    lastSuccessAt: health?.lastSuccessAt ?? null,
    lastFailureAt: health?.lastFailureAt ?? null,
    lastFailureReason: health?.lastFailureReason ?? null,
    failingSince,
    autoDisableAt: failingSince && !disabledAt ? new Date(failingSince.getTime() + AUTO_DISABLE_AFTER_MS) : null,
    disabledAt,
    disabledReason: server.callbackDisabledReason,
    failedDeliveries7d: deliveries[0]?.failed7d ?? 0,
    pendingDeliveries: deliveries[0]?.pending ?? 0,
  };
}

function toWindow(attempts: number, succeeded: number): EndpointWindow {
  return { attempts, succeeded, successRate: attempts === 0 ? 0 : succeeded / attempts };
}
