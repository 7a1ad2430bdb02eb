import { create } from "@bufbuild/protobuf";
import {
  GetHeartStatsResponseSchema,
  HeartCountBucketSchema,
  type GetHeartStatsRequest,
  type GetHeartStatsResponse,
} from "../../gen/proto/hearts/v1/hearts_pb.js";
import { Prisma } from "../../gen/prisma/client.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { dailyWindow, monthlyWindow, readWindowSize, type StatsWindow } from "../shared/values/stats-window.js";
import { requireServerId } from "../servers/server-exists.js";

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

  const [daily, monthly] = await Promise.all([countByBucket(deps, serverId, "day", days), countByBucket(deps, serverId, "month", months)]);
  const toBucket = (row: BucketRow) => create(HeartCountBucketSchema, { bucket: row.bucket, counted: row.counted, cooldown: row.cooldown, fraud: row.fraud });
  return create(GetHeartStatsResponseSchema, { daily: daily.map(toBucket), monthly: monthly.map(toBucket) });
}

/** The bucket label of each unit: `YYYY-MM-DD` for days, `YYYY-MM` for months. */
const BUCKET_FORMAT = { day: "YYYY-MM-DD", month: "YYYY-MM" } as const;

/** One server's hearts per `unit` of `window`, by verdict: one grouped aggregate joined onto generate_series. */
function countByBucket(deps: CoreDeps, serverId: string, unit: "day" | "month", window: StatsWindow): Promise<BucketRow[]> {
  return runSql<BucketRow>(
    deps.prisma,
    Prisma.sql`
      SELECT to_char(series.bucket, ${BUCKET_FORMAT[unit]}) AS bucket,
             coalesce(c.counted, 0) AS counted, coalesce(c.cooldown, 0) AS cooldown, coalesce(c.fraud, 0) AS fraud
      FROM generate_series(${window.firstDay}::date, ${window.lastDay}::date, ${`1 ${unit}`}::interval) AS series(bucket)
      LEFT JOIN (
        SELECT date_trunc(${unit}, created_at AT TIME ZONE 'UTC') AS bucket,
               count(*) FILTER (WHERE verdict = 'counted') AS counted,
               count(*) FILTER (WHERE verdict = 'cooldown') AS cooldown,
               count(*) FILTER (WHERE verdict = 'fraud') AS fraud
        FROM hearts
        WHERE server_id = ${serverId}::uuid AND created_at >= ${window.from}::timestamptz AND created_at < ${window.to}::timestamptz
        GROUP BY 1
      ) c ON c.bucket = series.bucket
      ORDER BY series.bucket`,
  );
}
