import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import {
  DeliveryDayStatsSchema,
  DeliveryStatsService,
  GetDeliveryStatsResponseSchema,
  type GetDeliveryStatsRequest,
  type GetDeliveryStatsResponse,
} from "../../../gen/proto/delivery/v1/delivery_stats_pb.js";
import { DeliveryTransport } from "../../../gen/proto/delivery/v1/delivery_pb.js";
import { Prisma } from "../../../gen/prisma/client.js";
import type { CoreDeps } from "../../shared/adapters/deps.js";
import { runSql } from "../../shared/adapters/sql/executor.js";
import { DomainError } from "../../shared/rpc/errors.js";
import { dailyWindow, readWindowSize } from "../../shared/values/stats-window.js";
import { requireServerId } from "../../servers/server-exists.js";
import { DEFAULT_STATS_DAYS, MAX_STATS_DAYS } from "../../hearts/heart-stats.js";
import { DELIVERY_TRANSPORT_NAMES, DELIVERY_TRANSPORT_TO_PROTO } from "../../shared/values/proto-names.js";
import { choiceText } from "../../shared/values/contract.js";

interface DayRow {
  day: string;
  delivered: bigint;
  failed: bigint;
  pending: bigint;
  attempts: bigint;
  attempts_ok: bigint;
  p50: number | null;
  p95: number | null;
  max: number | null;
}

/** Registers DeliveryStatsService (GetDeliveryStats) on a Connect router. */
export function deliveryStatsRoutes(deps: CoreDeps): (router: ConnectRouter) => void {
  return (router) => {
    router.service(DeliveryStatsService, { getDeliveryStats: (req) => getDeliveryStats(deps, req) });
  };
}

/**
 * GetDeliveryStats: per UTC day, the deliveries (of one transport, or all) created that
 * day by where they stand now (delivered, failed, pending), and the attempts started that day (and how many
 * succeeded: the attempt's `succeeded` flag, set by its transport - a 2xx callback answer, a Votifier
 * `{"status":"ok"}`, a pull claim - not only from an HTTP status, which Votifier does not have; a 2xx
 * counts too, for a row written without the flag, the column's default) with their
 * latency (median, 95th percentile, max; timeouts included, since a receiver that
 * times out is slow). Two grouped aggregates joined onto generate_series.
 */
export async function getDeliveryStats(deps: CoreDeps, req: GetDeliveryStatsRequest): Promise<GetDeliveryStatsResponse> {
  const serverId = await requireServerId(deps, req.serverId);
  const window = dailyWindow(deps.now(), readWindowSize(req.days, "days", DEFAULT_STATS_DAYS, MAX_STATS_DAYS));
  // "" (UNSPECIFIED): every transport together.
  const transport = req.transport === DeliveryTransport.UNSPECIFIED ? "" : DELIVERY_TRANSPORT_NAMES[req.transport];
  if (transport === undefined) throw new DomainError("invalid_argument", choiceText("transport", Object.keys(DELIVERY_TRANSPORT_TO_PROTO)));
  const rows = await runSql<DayRow>(
    deps.prisma,
    Prisma.sql`
    WITH made AS (
      SELECT date_trunc('day', created_at AT TIME ZONE 'UTC') AS day,
             count(*) FILTER (WHERE status = 'delivered') AS delivered,
             count(*) FILTER (WHERE status = 'failed') AS failed,
             count(*) FILTER (WHERE status = 'pending') AS pending
      FROM deliveries
      WHERE server_id = ${serverId}::uuid AND created_at >= ${window.from}::timestamptz AND created_at < ${window.to}::timestamptz
        AND (${transport} = '' OR transport::text = ${transport})
      GROUP BY 1
    ), tried AS (
      SELECT date_trunc('day', a.started_at AT TIME ZONE 'UTC') AS day,
             count(*) AS attempts,
             count(*) FILTER (WHERE a.succeeded OR a.status_code BETWEEN 200 AND 299) AS attempts_ok,
             percentile_disc(0.5) WITHIN GROUP (ORDER BY a.latency_ms) AS p50,
             percentile_disc(0.95) WITHIN GROUP (ORDER BY a.latency_ms) AS p95,
             max(a.latency_ms) AS max
      FROM delivery_attempts a
      JOIN deliveries d ON d.id = a.delivery_id
      WHERE d.server_id = ${serverId}::uuid AND a.started_at >= ${window.from}::timestamptz AND a.started_at < ${window.to}::timestamptz
        AND (${transport} = '' OR d.transport::text = ${transport})
      GROUP BY 1
    )
    SELECT to_char(series.day, 'YYYY-MM-DD') AS day,
           coalesce(made.delivered, 0) AS delivered, coalesce(made.failed, 0) AS failed, coalesce(made.pending, 0) AS pending,
           coalesce(tried.attempts, 0) AS attempts, coalesce(tried.attempts_ok, 0) AS attempts_ok,
           tried.p50, tried.p95, tried.max
    FROM generate_series(${window.firstDay}::date, ${window.lastDay}::date, interval '1 day') AS series(day)
    LEFT JOIN made ON made.day = series.day
    LEFT JOIN tried ON tried.day = series.day
    ORDER BY series.day`,
  );
  return create(GetDeliveryStatsResponseSchema, {
    days: rows.map((r) =>
      create(DeliveryDayStatsSchema, {
        day: r.day,
        delivered: r.delivered,
        failed: r.failed,
        pending: r.pending,
        attempts: r.attempts,
        attemptsOk: r.attempts_ok,
        latencyP50Ms: r.p50 ?? 0,
        latencyP95Ms: r.p95 ?? 0,
        latencyMaxMs: r.max ?? 0,
      }),
    ),
  });
}
