import { create } from "@bufbuild/protobuf";
import { GetHeartStatsResponseSchema, HeartCountBucketSchema, type GetHeartStatsRequest, type GetHeartStatsResponse } from "../../gen/proto/hearts/v1/hearts_pb.js";
import type { CoreDeps } from "../shared/deps.js";
import { dailyWindow, monthlyWindow, readWindowSize } from "../shared/stats-window.js";
import { requireServerId } from "../servers/server-store.js";

/** Days and months charted when the caller gives none, and the most allowed. */
export const DEFAULT_STATS_DAYS = 30;
export const MAX_STATS_DAYS = 366;
export const DEFAULT_STATS_MONTHS = 12;
export const MAX_STATS_MONTHS = 60;

interface BucketRow {
  bucket: string;
  counted: bigint;
  cooldown: bigint;
  fraud: bigint;
}

/**
 * GetHeartStats: one server's hearts per UTC day and per UTC month, split by verdict.
 * Set-based: one grouped aggregate per series, joined onto generate_series so that
 * quiet days and months are zeros rather than gaps.
 */
export async function getHeartStats(deps: CoreDeps, req: GetHeartStatsRequest): Promise<GetHeartStatsResponse> {
  const serverId = await requireServerId(deps, req.serverId);
  const now = deps.now();
  const days = dailyWindow(now, readWindowSize(req.days, "days", DEFAULT_STATS_DAYS, MAX_STATS_DAYS));
  const months = monthlyWindow(now, readWindowSize(req.months, "months", DEFAULT_STATS_MONTHS, MAX_STATS_MONTHS));

  const daily = await deps.prisma.$queryRaw<BucketRow[]>`
    SELECT to_char(series.day, 'YYYY-MM-DD') AS bucket,
           coalesce(c.counted, 0) AS counted, coalesce(c.cooldown, 0) AS cooldown, coalesce(c.fraud, 0) AS fraud
    FROM generate_series(${days.firstDay}::date, ${days.lastDay}::date, interval '1 day') AS series(day)
    LEFT JOIN (
      SELECT date_trunc('day', created_at AT TIME ZONE 'UTC') AS day,
             count(*) FILTER (WHERE verdict = 'counted') AS counted,
             count(*) FILTER (WHERE verdict = 'cooldown') AS cooldown,
             count(*) FILTER (WHERE verdict = 'fraud') AS fraud
      FROM hearts
      WHERE server_id = ${serverId}::uuid AND created_at >= ${days.from}::timestamptz AND created_at < ${days.to}::timestamptz
      GROUP BY 1
    ) c ON c.day = series.day
    ORDER BY series.day`;

  const monthly = await deps.prisma.$queryRaw<BucketRow[]>`
    SELECT to_char(series.month, 'YYYY-MM') AS bucket,
           coalesce(c.counted, 0) AS counted, coalesce(c.cooldown, 0) AS cooldown, coalesce(c.fraud, 0) AS fraud
    FROM generate_series(${months.firstDay}::date, ${months.lastDay}::date, interval '1 month') AS series(month)
    LEFT JOIN (
      SELECT date_trunc('month', created_at AT TIME ZONE 'UTC') AS month,
             count(*) FILTER (WHERE verdict = 'counted') AS counted,
             count(*) FILTER (WHERE verdict = 'cooldown') AS cooldown,
             count(*) FILTER (WHERE verdict = 'fraud') AS fraud
      FROM hearts
      WHERE server_id = ${serverId}::uuid AND created_at >= ${months.from}::timestamptz AND created_at < ${months.to}::timestamptz
      GROUP BY 1
    ) c ON c.month = series.month
    ORDER BY series.month`;

  const toBucket = (row: BucketRow) => create(HeartCountBucketSchema, { bucket: row.bucket, counted: row.counted, cooldown: row.cooldown, fraud: row.fraud });
  return create(GetHeartStatsResponseSchema, { daily: daily.map(toBucket), monthly: monthly.map(toBucket) });
}
