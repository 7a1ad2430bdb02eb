/**
 * A list's other servers, for a bounded-reads test: the statistics of a list's thousands of servers.
 *
 * The executor names its statements, so PostgreSQL may run one on a generic plan (planned without the parameters'
 * values), which estimates `server_id = $1` as one server's share of the table: its rows over the number of distinct
 * servers. With the handful of servers of a test database that share is large, and the planner keeps to the index a
 * statement's ids name; with a list's thousands it is tiny, and a statement that names a server and a status can walk
 * the server's partial index of that status whole, filtering by id. The pull claim did (bench s35): on the history
 * its generic plan read the server's whole pending backlog per claim, while every test passed. Seeding the list's
 * other servers, each with a row of the tables a test measures, gives the test the list's statistics.
 */
import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../../services/shared/adapters/db.js";
import { executeSql, runSql } from "../../services/shared/adapters/sql/executor.js";

/** How many other servers a list-shaped test database gets: enough that one server's share of a table is tiny. */
export const LIST_SERVERS = 5_000;

/** A statement writing rows for each of the servers `servers` (a subquery of their ids, column `id`) at `at`. */
export type ListRowsOf = (servers: Prisma.Sql, at: Date) => Prisma.Sql;

/** One delivered callback per server (a delivery of a counted heart, no endpoint needed for the statistics). */
export const deliveredCallbackOf: ListRowsOf = (servers, at) => Prisma.sql`
  INSERT INTO deliveries (id, server_id, heart_id, dedup_key, transport, event_type, username, voter_identity, period, counted_at, status, attempts,
                          delivered_at, created_at)
  SELECT gen_random_uuid(), s.id, x.h, x.h::text, 'callback', 'heart.counted', 'p', 'p', '2026-05', ${at}::timestamptz, 'delivered', 1,
         ${at}::timestamptz, ${at}::timestamptz - interval '3 days'
  FROM (${servers}) s CROSS JOIN LATERAL (SELECT gen_random_uuid() AS h) x`;

/**
 * Creates `count` servers and writes `rowsOf`'s rows for them (each statement once, over all of them), then ANALYZEs
 * the tables `analyze` names. Returns the servers' ids.
 */
export async function seedListServers(
  prisma: PrismaClient,
  q: { at: Date; rowsOf: readonly ListRowsOf[]; analyze: readonly string[]; count?: number },
): Promise<string[]> {
  const ids = (
    await runSql<{ id: string }>(
      prisma,
      Prisma.sql`INSERT INTO servers (id, name) SELECT gen_random_uuid(), 'list server ' || g FROM generate_series(1, ${q.count ?? LIST_SERVERS}::int) g
                 RETURNING id::text`,
    )
  ).map((r) => r.id);
  const servers = Prisma.sql`SELECT unnest(${ids}::uuid[]) AS id`;
  for (const rowsOf of q.rowsOf) await executeSql(prisma, rowsOf(servers, q.at));
  if (q.analyze.length > 0) await executeSql(prisma, Prisma.raw(`ANALYZE ${q.analyze.join(", ")}`));
  return ids;
}

/** One pending reward entry per server (a vote's entry the plugin has not acknowledged yet). */
export const pendingRewardEntryOf: ListRowsOf = (servers, at) => Prisma.sql`
  INSERT INTO reward_queue_entries (server_id, entry_key, reason, heart_id, username, username_lower, commands, online_only, rules_version, created_at)
  SELECT s.id, 'list:vote:0', 'vote', gen_random_uuid(), 'p', 'p', ARRAY['give p 1'], false, 1, ${at}::timestamptz - interval '1 day'
  FROM (${servers}) s`;

/** One attempt per delivery of the servers (run after deliveredCallbackOf: the attempt of each one's delivered callback). */
export const deliveryAttemptOf: ListRowsOf = (servers) => Prisma.sql`
  INSERT INTO delivery_attempts (delivery_id, server_id, attempt, url, started_at, status_code, latency_ms, succeeded, request_body, response_body)
  SELECT d.id, d.server_id, 1, 'http://127.0.0.1:9/callback', d.delivered_at, 200, 5, true, '{}', 'ok'
  FROM deliveries d WHERE d.server_id IN (${servers})`;

/** One counted heart per server, from a voter of its own. */
export const countedHeartOf: ListRowsOf = (servers, at) => Prisma.sql`
  INSERT INTO hearts (id, server_id, username, voter_identity, ip, subnet, user_agent, counted, verdict, fraud_score, fraud_reasons, period, created_at)
  SELECT gen_random_uuid(), s.id, 'p', 'voter-' || s.id, '192.0.2.2', '192.0.2.0/24', 'ua', true, 'counted', 0, '{}', to_char(${at}::timestamptz, 'YYYY-MM'),
         ${at}::timestamptz - interval '2 days'
  FROM (${servers}) s`;

/** One voter's reward state per server (a voter rewarded once). */
export const voterRewardStateOf: ListRowsOf = (servers, at) => Prisma.sql`
  INSERT INTO voter_reward_states (server_id, voter_identity, last_counted_at, total, month, month_total, week, week_total, streak_last_day, streak_days)
  SELECT s.id, 'p', ${at}::timestamptz - interval '1 day', 1, to_char(${at}::timestamptz, 'YYYY-MM'), 1, to_char(${at}::timestamptz, 'IYYY-"W"IW'), 1,
         (${at}::timestamptz - interval '1 day')::date, 1
  FROM (${servers}) s`;
