import type { Delivery as DeliveryRow, DeliveryAttempt as AttemptRow } from "../../../gen/prisma/client.js";
import { Prisma } from "../../../gen/prisma/client.js";
import type { PrismaClient } from "../../shared/adapters/db.js";
import { runSql } from "../../shared/adapters/sql/executor.js";
import type { CoreDeps } from "../../shared/adapters/deps.js";
import { DomainError } from "../../shared/rpc/errors.js";
import { isUuid } from "../../shared/values/ids.js";
import { requiredText } from "../../shared/values/contract.js";
import { requireServerId } from "../../servers/server-exists.js";
import { AUTO_DISABLE_AFTER_MS } from "../pipeline/endpoint-health.js";
import type { EndpointRecord } from "../../servers/endpoint-store.js";
import { heldReasonOf, type HeldReason } from "../../shared/values/held-reason.js";

/**
 * The dashboard's reads of the delivery pipeline: a server's delivery list, one delivery with its
 * attempt log (every transport's attempts, written by attempt-log.ts and the pull claim), and the
 * health of its callback endpoint. The day-by-day figures are DeliveryStatsService's (delivery-stats.ts).
 */

const DAY_MS = 24 * 60 * 60 * 1000;

/** Deliveries per page when the caller gives no limit, and the most one page may hold. */
export const DEFAULT_DELIVERY_PAGE = 50;
export const MAX_DELIVERY_PAGE = 500;

/**
 * The include that reads a delivery with its endpoint's URL (which endpoint a callback delivery goes to) and what
 * decides whether it is held (heldReasonOf): the endpoint's state and the server's Votifier settings.
 */
export const WITH_ENDPOINT_URL = {
  endpoint: { select: { url: true, disabledAt: true, deletedAt: true } },
  server: { select: { votifierHost: true, votifierToken: true } },
} as const;

/** A delivery with its endpoint (null: Votifier or pull) and its server's Votifier settings. */
export type DeliveryWithEndpoint = DeliveryRow & {
  endpoint: { url: string | null; disabledAt: Date | null; deletedAt: Date | null } | null;
  server: { votifierHost: string | null; votifierToken: string | null };
};

/** Why the delivery is held (services/shared/values/held-reason.ts), or null. */
export function heldReasonOfDelivery(row: DeliveryWithEndpoint): HeldReason | null {
  return heldReasonOf({
    status: row.status,
    transport: row.transport,
    endpoint: row.endpoint,
    votifierSet: row.server.votifierHost !== null && row.server.votifierToken !== null,
  });
}

/** A server's delivery list filter; `username` is bounded and trimmed ("" matches every player), `limit` 0 means the default page. */
export interface DeliveryListQuery {
  serverId: string;
  status: "pending" | "delivered" | "failed" | "withdrawn" | undefined;
  transport: "callback" | "votifier" | "pull" | "discord" | undefined;
  username: string;
  limit: number;
}

/** A server's deliveries, newest first, filtered by status, transport and a case-insensitive player search. */
export async function listDeliveries(deps: CoreDeps, query: DeliveryListQuery): Promise<DeliveryWithEndpoint[]> {
  const { serverId, status, transport, username } = query;
  return deps.prisma.delivery.findMany({
    where: {
      serverId,
      ...(status ? { status } : {}),
      ...(transport ? { transport } : {}),
      ...(username === "" ? {} : { username: { contains: username, mode: "insensitive" } }),
    },
    orderBy: [{ createdAt: "desc" }, { id: "asc" }],
    include: WITH_ENDPOINT_URL,
    take: Math.min(query.limit === 0 ? DEFAULT_DELIVERY_PAGE : query.limit, MAX_DELIVERY_PAGE),
  });
}

/** The delivery `rawId`; with `rawServerId`, only when it belongs to that server (another server's id is unknown). */
export async function findDelivery(deps: CoreDeps, rawId: string, rawServerId = ""): Promise<DeliveryWithEndpoint> {
  const id = rawId.trim();
  if (id === "") throw new DomainError("invalid_argument", requiredText("delivery_id"));
  const serverId = rawServerId.trim() === "" ? undefined : await requireServerId(deps, rawServerId);
  const row = isUuid(id) ? await deps.prisma.delivery.findUnique({ where: { id }, include: WITH_ENDPOINT_URL }) : null;
  if (!row || (serverId !== undefined && row.serverId !== serverId)) throw new DomainError("not_found", "unknown delivery");
  return row;
}

/** A delivery's attempt log, oldest first. */
export async function listAttempts(deps: CoreDeps, deliveryId: string): Promise<AttemptRow[]> {
  return deps.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { id: "asc" } });
}

/** Attempts of one time window. */
export interface EndpointWindow {
  attempts: number;
  succeeded: number;
  /** succeeded / attempts, 0 when there were none. */
  successRate: number;
}

/** How a callback endpoint is doing. */
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
 * Reads the health of a callback endpoint at `now` (services/servers/endpoint-store.ts findEndpoint
 * resolves it within its server): its attempts in the last 24 h and 7 days (by start time) and its
 * deliveries (other transports are not an endpoint).
 */
export async function readEndpointHealth(prisma: PrismaClient, endpoint: EndpointRecord, now: Date): Promise<EndpointHealth> {
  const since24h = new Date(now.getTime() - DAY_MS);
  const since7d = new Date(now.getTime() - 7 * DAY_MS);
  const serverId = endpoint.serverId;
  const [health, windows, deliveries] = await Promise.all([
    prisma.callbackHealth.findUnique({ where: { endpointId: endpoint.id } }),
    runSql<{ a24: number; s24: number; a7: number; s7: number }>(
      prisma,
      Prisma.sql`
      SELECT count(*) FILTER (WHERE a.started_at >= ${since24h}::timestamptz)::int AS a24,
             count(*) FILTER (WHERE a.started_at >= ${since24h}::timestamptz AND a.succeeded)::int AS s24,
             count(*)::int AS a7,
             count(*) FILTER (WHERE a.succeeded)::int AS s7
      FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
      WHERE a.server_id = ${serverId}::uuid AND d.endpoint_id = ${endpoint.id}::uuid
        AND a.started_at >= ${since7d}::timestamptz AND a.started_at <= ${now}::timestamptz`,
    ),
    runSql<{ failed7d: number; pending: number }>(
      prisma,
      Prisma.sql`
      SELECT count(*) FILTER (WHERE status = 'failed' AND failed_at >= ${since7d}::timestamptz)::int AS failed7d,
             count(*) FILTER (WHERE status = 'pending')::int AS pending
      FROM deliveries WHERE server_id = ${serverId}::uuid AND transport = 'callback' AND endpoint_id = ${endpoint.id}::uuid`,
    ),
  ]);
  const w = windows[0] ?? { a24: 0, s24: 0, a7: 0, s7: 0 };
  const failingSince = health?.failingSince ?? null;
  const disabledAt = endpoint.disabledAt;
  return {
    callbackUrl: endpoint.url,
    last24h: toWindow(w.a24, w.s24),
    last7d: toWindow(w.a7, w.s7),
    lastSuccessAt: health?.lastSuccessAt ?? null,
    lastFailureAt: health?.lastFailureAt ?? null,
    lastFailureReason: health?.lastFailureReason ?? null,
    failingSince,
    autoDisableAt: failingSince && !disabledAt ? new Date(failingSince.getTime() + AUTO_DISABLE_AFTER_MS) : null,
    disabledAt,
    disabledReason: endpoint.disabledReason,
    failedDeliveries7d: deliveries[0]?.failed7d ?? 0,
    pendingDeliveries: deliveries[0]?.pending ?? 0,
  };
}

function toWindow(attempts: number, succeeded: number): EndpointWindow {
  return { attempts, succeeded, successRate: attempts === 0 ? 0 : succeeded / attempts };
}
