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

/** One claimed ledger row per server (a Steam player of its own, counted a week before `at`). */
export const claimedLedgerRowOf: ListRowsOf = (servers, at) => Prisma.sql`
  INSERT INTO vote_claims (heart_id, server_id, player_key, username_lower, steam_id, counted_at, expires_at, claimed_at, state)
  SELECT gen_random_uuid(), s.id, 'steam:' || x.n, 'p' || x.n, x.n::text, ${at}::timestamptz - interval '7 days', ${at}::timestamptz + interval '23 days',
         ${at}::timestamptz - interval '6 days', 'claimed'
  FROM (${servers}) s CROSS JOIN LATERAL (SELECT (76561190000000000 + floor(random() * 1e9))::bigint AS n) x`;

/** One held ledger row per server (a Steam player of its own, counted a day before `at`). */
export const heldLedgerRowOf: ListRowsOf = (servers, at) => Prisma.sql`
  INSERT INTO vote_claims (heart_id, server_id, player_key, username_lower, steam_id, counted_at, expires_at)
  SELECT gen_random_uuid(), s.id, 'steam:' || x.n, 'p' || x.n, x.n::text, ${at}::timestamptz - interval '1 day', ${at}::timestamptz + interval '29 days'
  FROM (${servers}) s CROSS JOIN LATERAL (SELECT (76561190000000000 + floor(random() * 1e9))::bigint AS n) x`;

/** One counted heart per server, from a voter and an address of its own, an hour before `at`. */
export const countedHeartOf: ListRowsOf = (servers, at) => Prisma.sql`
  INSERT INTO hearts (id, server_id, username, voter_identity, ip, subnet, user_agent, counted, verdict, fraud_score, fraud_reasons, period, created_at)
  SELECT gen_random_uuid(), s.id, 'list-' || x.n, 'list-' || x.n, '10.9.' || (x.n >> 8 & 255) || '.' || (x.n & 255), '10.9.' || (x.n >> 8 & 255) || '.0/24',
         'ua', true, 'counted', 0, '{}', 'list', ${at}::timestamptz - interval '1 hour'
  FROM (${servers}) s CROSS JOIN LATERAL (SELECT floor(random() * 65536)::int AS n) x`;

/** The (server, address, voter) rows of each server's counted hearts (as CastHeart's write keeps them): write after countedHeartOf. */
export const addressVotersOf: ListRowsOf = (servers) => Prisma.sql`
  INSERT INTO heart_address_voters (server_id, address, voter_identity, last_counted_at)
  SELECT h.server_id, a.address, h.voter_identity, max(h.created_at) FROM hearts h CROSS JOIN LATERAL (VALUES (h.ip), (h.subnet)) AS a(address)
  WHERE h.server_id IN (${servers}) AND h.counted AND a.address IS NOT NULL GROUP BY h.server_id, a.address, h.voter_identity`;

/** One unlinked referral click per server, from an address of its own, an hour before `at`. */
export const unlinkedClickOf: ListRowsOf = (servers, at) => Prisma.sql`
  INSERT INTO referral_clicks (id, server_id, referrer_identity, token, ip, subnet, user_agent, created_at)
  SELECT gen_random_uuid(), s.id, 'list-referrer', 'list-' || gen_random_uuid()::text, '10.8.' || (x.n >> 8 & 255) || '.' || (x.n & 255),
         '10.8.' || (x.n >> 8 & 255) || '.0/24', 'ua', ${at}::timestamptz - interval '1 hour'
  FROM (${servers}) s CROSS JOIN LATERAL (SELECT floor(random() * 65536)::int AS n) x`;

/**
 * One qualified referral per server with its credit and its click linked (from an address of its own), a day before
 * `at`: the referrals, referral_credits and linked referral_clicks of a list.
 */
export const linkedReferralOf: ListRowsOf = (servers, at) => Prisma.sql`
  WITH r AS (
    INSERT INTO referrals (id, server_id, referee_identity, referrer_identity, state, version, registered_at, qualified_at)
    SELECT gen_random_uuid(), s.id, 'list-referee', 'list-referrer', 'qualified', 2, ${at}::timestamptz - interval '1 day', ${at}::timestamptz - interval '1 day'
    FROM (${servers}) s
    RETURNING id, server_id, referrer_identity, registered_at
  ), c AS (
    INSERT INTO referral_credits (referral_id, server_id, referrer_identity, period, credited_at)
    SELECT id, server_id, referrer_identity, 'list', registered_at FROM r
  )
  INSERT INTO referral_clicks (id, server_id, referrer_identity, token, referral_id, ip, subnet, user_agent, created_at)
  SELECT gen_random_uuid(), server_id, referrer_identity, 'list-linked-' || id::text, id, '10.7.' || (x.n >> 8 & 255) || '.' || (x.n & 255),
         '10.7.' || (x.n >> 8 & 255) || '.0/24', 'ua', registered_at
  FROM r CROSS JOIN LATERAL (SELECT floor(random() * 65536)::int AS n) x`;

/** The `registered` dedup row of each server's linked clicks (ApplyEvent's referral_events): write after linkedReferralOf. */
export const referralEventOf: ListRowsOf = (servers) => Prisma.sql`
  INSERT INTO referral_events (token, type, server_event_id, server_id, referral_id, outcome, received_at)
  SELECT c.token, 'registered', 'list-' || c.token, c.server_id, c.referral_id, 'advanced', c.created_at
  FROM referral_clicks c WHERE c.server_id IN (${servers}) AND c.referral_id IS NOT NULL`;

/**
 * A live network goal of each server (its own owner) counting the server, with one counted heart and one voter of
 * round 1, and its round reached and paid a day before `at`: the network goals' tables of a list.
 */
export const networkGoalOf: ListRowsOf = (servers, at) => Prisma.sql`
  WITH g AS (
    INSERT INTO network_goals (id, owner_id, name, target, payees, rewards, counts_from, created_by, created_at, updated_at)
    SELECT gen_random_uuid(), 'list-owner-' || s.id::text, 'List goal', 100, 'voters', '[]'::jsonb, ${at}::timestamptz - interval '30 days', 'test',
           ${at}::timestamptz - interval '30 days', ${at}::timestamptz - interval '30 days'
    FROM (${servers}) s
    RETURNING id, substr(owner_id, 12)::uuid AS server_id
  ), gs AS (
    INSERT INTO network_goal_servers (server_id, goal_id) SELECT server_id, id FROM g
  ), gh AS (
    INSERT INTO network_goal_hearts (goal_id, heart_id, counted_at) SELECT id, gen_random_uuid(), ${at}::timestamptz - interval '1 day' FROM g
  ), gr AS (
    INSERT INTO network_goal_rounds (goal_id, round, reached_at, paid_at)
    SELECT id, 1, ${at}::timestamptz - interval '1 day', ${at}::timestamptz - interval '1 day' FROM g
  )
  INSERT INTO network_goal_voters (goal_id, round, voter_identity, server_id, username, last_counted_at)
  SELECT id, 1, 'list-voter', server_id, 'ListVoter', ${at}::timestamptz - interval '1 day' FROM g`;

/** One voter's tally of each server in the month of `at`'s previous month ('2027-01' style, from `at`). */
export const periodTallyOf: ListRowsOf = (servers, at) => Prisma.sql`
  INSERT INTO voter_period_tallies (server_id, period, voter_identity, votes, last_counted_at)
  SELECT s.id, to_char(${at}::timestamptz AT TIME ZONE 'UTC' - interval '1 month', 'YYYY-MM'), 'list-voter', 1, ${at}::timestamptz - interval '20 days'
  FROM (${servers}) s`;

/** A closed monthly reward period of each server, ended before `at`. */
export const closedRewardPeriodOf: ListRowsOf = (servers, at) => Prisma.sql`
  INSERT INTO reward_periods (server_id, kind, period, ends_at, closed_at)
  SELECT s.id, 'month', to_char(${at}::timestamptz AT TIME ZONE 'UTC' - interval '2 months', 'YYYY-MM'), ${at}::timestamptz - interval '40 days',
         ${at}::timestamptz - interval '40 days'
  FROM (${servers}) s`;

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

/** One voter's reward state per server (a voter rewarded once). */
export const voterRewardStateOf: ListRowsOf = (servers, at) => Prisma.sql`
  INSERT INTO voter_reward_states (server_id, voter_identity, last_counted_at, total, month, month_total, week, week_total, streak_last_day, streak_days)
  SELECT s.id, 'p', ${at}::timestamptz - interval '1 day', 1, to_char(${at}::timestamptz, 'YYYY-MM'), 1, to_char(${at}::timestamptz, 'IYYY-"W"IW'), 1,
         (${at}::timestamptz - interval '1 day')::date, 1
  FROM (${servers}) s`;
