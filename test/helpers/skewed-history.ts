import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../../services/shared/adapters/db.js";
import type { ClaimRoom } from "../../services/delivery/pipeline/claim-deliveries.js";
import { executeSql, runSql } from "../../services/shared/adapters/sql/executor.js";

/**
 * Skewed histories for the bounded-reads and plan-shape tests: one key (an address, a referrer, a player, a server)
 * with thousands of rows behind it, written set-based in one statement each. The callers run ANALYZE afterwards, so
 * the planner sees the skew.
 */

/** Where and when an address's history lies: `rows` rows, the newest `ageSeconds` before `at`, spread over `spreadSeconds`. */
export interface AddressHistory {
  serverId: string;
  ip: string;
  subnet: string;
  rows: number;
  at: Date;
  ageSeconds?: number;
  spreadSeconds: number;
}

/** `rows` counted hearts from the address, each from its own voter (`voter-<n>`, username `player<n>`), in `period`. */
export async function insertAddressHearts(prisma: PrismaClient, a: AddressHistory, period: string): Promise<void> {
  await executeSql(
    prisma,
    Prisma.sql`
    INSERT INTO hearts (id, server_id, username, voter_identity, ip, subnet, user_agent, counted, verdict, fraud_score, fraud_reasons, period, created_at)
    SELECT gen_random_uuid(), ${a.serverId}::uuid, 'player' || g, 'voter-' || g, ${a.ip}, ${a.subnet}, 'ua', true, 'counted', 0, '{}', ${period},
           ${a.at}::timestamptz - (${a.ageSeconds ?? 0}::int + g % ${a.spreadSeconds}::int) * interval '1 second'
    FROM generate_series(1, ${a.rows}::int) AS g`,
  );
}

/** `rows` counted hearts of one player (voter_identity and username `player`), one a day back from `at`, each from its own address (10.x.y.z). */
export async function insertPlayerHearts(prisma: PrismaClient, serverId: string, player: string, rows: number, at: Date): Promise<void> {
  await executeSql(
    prisma,
    Prisma.sql`
    INSERT INTO hearts (id, server_id, username, voter_identity, ip, subnet, user_agent, counted, verdict, fraud_score, fraud_reasons, period, created_at)
    SELECT gen_random_uuid(), ${serverId}::uuid, ${player}, ${player}, '10.' || (g >> 16 & 255) || '.' || (g >> 8 & 255) || '.' || (g & 255),
           '10.' || (g >> 16 & 255) || '.' || (g >> 8 & 255) || '.0/24', 'ua', true, 'counted', 0, '{}', 'hist',
           ${at}::timestamptz - g * interval '1 day'
    FROM generate_series(1, ${rows}::int) AS g`,
  );
}

/** The (server, address, voter) rows CastHeart's write keeps beside the server's counted hearts (as the migration backfills them). */
export async function insertAddressVoters(prisma: PrismaClient, serverId: string): Promise<void> {
  await executeSql(
    prisma,
    Prisma.sql`
    INSERT INTO heart_address_voters (server_id, address, voter_identity, last_counted_at)
    SELECT server_id, a.address, voter_identity, max(created_at) FROM hearts CROSS JOIN LATERAL (VALUES (ip), (subnet)) AS a(address)
    WHERE server_id = ${serverId}::uuid AND counted GROUP BY server_id, a.address, voter_identity`,
  );
}

/** `rows` unlinked referral clicks from the address, by 50 referrers (`farm-<n>`). */
export async function insertAddressClicks(prisma: PrismaClient, a: AddressHistory): Promise<void> {
  await executeSql(
    prisma,
    Prisma.sql`
    INSERT INTO referral_clicks (id, server_id, referrer_identity, token, ip, subnet, user_agent, created_at)
    SELECT gen_random_uuid(), ${a.serverId}::uuid, 'farm-' || (g % 50), 'history-' || ${a.serverId}::text || '-' || g, ${a.ip}, ${a.subnet}, 'ua',
           ${a.at}::timestamptz - (${a.ageSeconds ?? 0}::int + g % ${a.spreadSeconds}::int) * interval '1 second'
    FROM generate_series(1, ${a.rows}::int) AS g`,
  );
}

/**
 * `rows` earlier referrals of `referrer` on the server, qualified with their credits, each with its click from the
 * address linked to it, one per second back from `at` (each click has a time of its own).
 */
export async function insertLinkedReferrals(prisma: PrismaClient, a: Omit<AddressHistory, "ageSeconds" | "spreadSeconds">, referrer: string): Promise<void> {
  await executeSql(
    prisma,
    Prisma.sql`
    WITH r AS (
      INSERT INTO referrals (id, server_id, referee_identity, referrer_identity, state, version, registered_at, qualified_at)
      SELECT gen_random_uuid(), ${a.serverId}::uuid, 'referee-' || g, ${referrer}, 'qualified', 2,
             ${a.at}::timestamptz - g * interval '1 second', ${a.at}::timestamptz - g * interval '1 second'
      FROM generate_series(1, ${a.rows}::int) AS g
      RETURNING id, server_id, referrer_identity, registered_at
    ), c AS (
      INSERT INTO referral_credits (referral_id, server_id, referrer_identity, period, credited_at)
      SELECT id, server_id, referrer_identity, 'hist', registered_at FROM r
    )
    INSERT INTO referral_clicks (id, server_id, referrer_identity, token, referral_id, ip, subnet, user_agent, created_at)
    SELECT gen_random_uuid(), server_id, referrer_identity, 'linked-' || id::text, id, ${a.ip}, ${a.subnet}, 'ua', registered_at FROM r`,
  );
}

/**
 * `rows` ledger rows of a Steam player on the server from before the longest hold window (counted over 91 days
 * before `at`, one an hour back from there), alternately claimed and expired.
 */
export async function insertOldLedgerRows(prisma: PrismaClient, serverId: string, steamId: string, rows: number, at: Date): Promise<void> {
  await executeSql(
    prisma,
    Prisma.sql`
    INSERT INTO vote_claims (heart_id, server_id, player_key, username_lower, steam_id, counted_at, expires_at, claimed_at, state, expired_reason, expired_at)
    SELECT gen_random_uuid(), ${serverId}::uuid, ${`steam:${steamId}`}, 'steve', ${steamId}, c.at, c.at + interval '30 days',
           CASE WHEN g % 2 = 0 THEN c.at + interval '1 hour' END, CASE WHEN g % 2 = 0 THEN 'claimed' ELSE 'expired' END::"VoteClaimState",
           CASE WHEN g % 2 = 1 THEN 'window' END, CASE WHEN g % 2 = 1 THEN c.at + interval '30 days' END
    FROM generate_series(1, ${rows}::int) AS g CROSS JOIN LATERAL (SELECT ${at}::timestamptz - interval '91 days' - g * interval '1 hour' AS at) c`,
  );
}

/** One held heart of the Steam player on the server, counted a day before `at` (29 days of its window left); returns its heart id. */
export async function insertHeldClaim(prisma: PrismaClient, serverId: string, steamId: string, at: Date): Promise<string> {
  const [held] = await runSql<{ heart_id: string }>(
    prisma,
    Prisma.sql`
    INSERT INTO vote_claims (heart_id, server_id, player_key, username_lower, steam_id, counted_at, expires_at)
    VALUES (gen_random_uuid(), ${serverId}::uuid, ${`steam:${steamId}`}, 'steve', ${steamId}, ${at}::timestamptz - interval '1 day', ${at}::timestamptz + interval '29 days')
    RETURNING heart_id::text`,
  );
  return held!.heart_id;
}

/** The room a dispatcher offers a claim at `at` (claimDueDeliveries, insertAndLeaseDeliveries): 10 rows, 10 per server, a minute's lease, nothing in flight. */
export function dispatcherRoomAt(at: Date): ClaimRoom {
  return { now: at, leaseUntil: new Date(at.getTime() + 60_000), limit: 10, perServerLimit: 10, inFlightByServer: new Map<string, number>() };
}

/**
 * `rows` delivered callback deliveries of the server to `endpointId`, one a minute back from `at`, each to its own voter
 * (`voter-<n>`), or all to `voterIdentity` when given.
 */
export async function insertDeliveredCallbacks(
  prisma: PrismaClient,
  serverId: string,
  endpointId: string,
  rows: number,
  at: Date,
  voterIdentity?: string,
): Promise<void> {
  await executeSql(
    prisma,
    Prisma.sql`
    INSERT INTO deliveries (id, server_id, heart_id, transport, endpoint_id, dedup_key, event_type, username, voter_identity, period, counted_at,
                            status, attempts, next_attempt_at, delivered_at, created_at)
    SELECT gen_random_uuid(), ${serverId}::uuid, x.heart_id, 'callback', ${endpointId}::uuid, x.heart_id::text, 'heart.counted',
           'player' || g, coalesce(${voterIdentity ?? null}::text, 'voter-' || g), '2026-05', x.at, 'delivered', 1, x.at, x.at, x.at
    FROM generate_series(1, ${rows}::int) AS g
    CROSS JOIN LATERAL (SELECT gen_random_uuid() AS heart_id, ${at}::timestamptz - g * interval '1 minute' AS at) x`,
  );
}

/** `rows` unclaimed pull deliveries of referral events (each its own uuid event id) of the server, three days old. */
export async function insertPendingPullEvents(prisma: PrismaClient, serverId: string, rows: number, at: Date): Promise<void> {
  await executeSql(
    prisma,
    Prisma.sql`
    INSERT INTO deliveries (id, server_id, heart_id, transport, dedup_key, event_type, event_id, username, voter_identity, period, counted_at, next_attempt_at, created_at)
    SELECT gen_random_uuid(), ${serverId}::uuid, gen_random_uuid(), 'pull', e.id, 'referral.registered', e.id, '', '', '2026-05',
           ${at}::timestamptz - interval '3 days', ${at}::timestamptz - interval '3 days', ${at}::timestamptz - interval '3 days' - g * interval '1 second'
    FROM generate_series(1, ${rows}::int) AS g CROSS JOIN LATERAL (SELECT gen_random_uuid()::text AS id, g AS n) e`,
  );
}

/** `rows` pending callback deliveries of the server to `endpointId`, due a second apart from a day before `at` back (held when the endpoint has no URL). */
export async function insertPendingCallbacks(prisma: PrismaClient, serverId: string, endpointId: string, rows: number, at: Date): Promise<void> {
  await executeSql(
    prisma,
    Prisma.sql`
    INSERT INTO deliveries (id, server_id, heart_id, transport, endpoint_id, dedup_key, event_type, username, voter_identity, period, counted_at, next_attempt_at, created_at)
    SELECT gen_random_uuid(), ${serverId}::uuid, x.heart_id, 'callback', ${endpointId}::uuid, x.heart_id::text, 'heart.counted', 'player' || g, 'voter-' || g, '2026-05',
           x.at, x.at, x.at
    FROM generate_series(1, ${rows}::int) AS g
    CROSS JOIN LATERAL (SELECT gen_random_uuid() AS heart_id, ${at}::timestamptz - interval '1 day' - g * interval '1 second' AS at) x`,
  );
}
