import type { PrismaClient } from "../shared/adapters/db.js";
import { rankByCountSql } from "../shared/adapters/sql/rank-by-count.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import {
  ageKeyDeleteRule,
  ageKeyOf,
  ageKeySql,
  oldestDueRowsSql,
  oldestOfAgeKey,
  statementRule,
  windowRule,
  type RetentionRule,
  type WindowCursor,
} from "../shared/adapters/retention-rule.js";
import { Prisma } from "../../gen/prisma/client.js";
import { ADDRESS_HELD } from "../shared/adapters/voter-address-erasure.js";
import { insertOutboxRows, type OutboxRow } from "../shared/adapters/outbox.js";
import type { FraudCounts, FraudReadLimits, FraudWindows } from "./domain/score-heart.js";
import type { StreakState } from "./domain/streak.js";
import type { PlatformIds } from "../shared/values/player-ids.js";
import { expireVoteClaimsSql, holdVoteClaimsSql, PLAYER_KEY_SQL, removeVoteClaimsSql } from "../claims/write-vote-claims.js";
import { removePayoutsSql } from "../payouts/write-payouts.js";

/** The age columns retention rules key by (ageKeySql). */
const LAST_COUNTED_AT = Prisma.raw("last_counted_at");
const CREATED_AT = Prisma.raw("created_at");

/** Everything stored about one cast heart. */
export interface HeartRecord {
  id: string;
  serverId: string;
  username: string;
  voterIdentity: string;
  ip: string;
  subnet: string;
  /** Keyed pseudonyms of the IP and the subnet (services/shared/values/address-key.ts), kept after the address is erased. */
  ipKey: string | null;
  subnetKey: string | null;
  userAgent: string;
  /** The voter's platform ids (normal form; null when not given). */
  ids: PlatformIds;
  fraudScore: number;
  fraudReasons: string[];
  period: string;
  /** The cast time; also the cooldown anchor when it counts. */
  at: Date;
}

/** What the batch read needs of one heart. */
export interface HeartContextQuery {
  serverId: string;
  voterIdentity: string;
  ip: string;
  subnet: string;
  windows: FraudWindows;
}

/** What the database says about one heart before it is decided. */
export interface HeartContext {
  serverExists: boolean;
  /** The fraud signals (see FraudCounts); each count includes the heart being cast. */
  counts: FraudCounts;
  /** The voter's cooldown anchor and streak for this server; null when the voter never counted here. */
  state: (StreakState & { lastCountedAt: Date }) | null;
}

/**
 * Reads, for many hearts in ONE statement, whether each server exists, each heart's
 * fraud signal counts (identity rules look at its server only; velocity at every server)
 * and the voter's state row. Every server id must be a uuid (the caller checks).
 *
 * Bounded work: each count reads at most its limit (fraudReadLimits) of rows, whatever the address's history
 * (a carrier-grade NAT address may have thousands of voters in the window); the bound is stated beside each read.
 */
export async function readHeartContexts(prisma: PrismaClient, queries: readonly HeartContextQuery[], limits: FraudReadLimits): Promise<HeartContext[]> {
  if (queries.length === 0) return [];
  const iso = (pick: (w: FraudWindows) => Date) => queries.map((q) => pick(q.windows).toISOString());
  const rows = await runSql<{
    server_exists: boolean;
    ip_identities: bigint;
    subnet_identities: bigint;
    ip_hearts: bigint;
    last_counted_at: Date | null;
    last_day: Date | null;
    streak_days: number | null;
  }>(
    prisma,
    Prisma.sql`
    SELECT
      EXISTS (SELECT 1 FROM servers s WHERE s.id = q.server_id) AS server_exists,
      -- The identity rules read the maintained set (heart_address_voters: one row per voter of a (server, address),
      -- written with each counted heart), through its (server_id, address, last_counted_at) index from the window's
      -- start: at most the limit's rows, + 1 for the voter's own row that the filter skips. Each read is ordered as
      -- its index is, so no plan can stop early except that index's (a scan of the table filtered, which statistics
      -- skewed by one crowded address can make look cheap under a LIMIT, would have to sort every match first).
      (SELECT count(*) FROM (
        SELECT 1 FROM heart_address_voters a
        WHERE a.server_id = q.server_id AND a.address = q.ip AND a.last_counted_at >= q.ip_since AND a.voter_identity <> q.voter
        ORDER BY a.last_counted_at DESC LIMIT ${limits.ipIdentities}::int
      ) ip_voters) AS ip_identities,
      (SELECT count(*) FROM (
        SELECT 1 FROM heart_address_voters a
        WHERE a.server_id = q.server_id AND a.address = q.subnet AND a.last_counted_at >= q.subnet_since AND a.voter_identity <> q.voter
        ORDER BY a.last_counted_at DESC LIMIT ${limits.subnetIdentities}::int
      ) subnet_voters) AS subnet_identities,
      -- Velocity: at most the limit's hearts of the (ip, created_at) index (ordered as it is, as above).
      (SELECT count(*) FROM (
        SELECT 1 FROM hearts WHERE ip = q.ip AND created_at >= q.velocity_since ORDER BY created_at DESC LIMIT ${limits.ipVelocity}::int
      ) recent) AS ip_hearts,
      v.last_counted_at, v.last_day, v.streak_days
    FROM (
      SELECT * FROM unnest(
        ${queries.map((q) => q.serverId)}::uuid[], ${queries.map((q) => q.voterIdentity)}::text[],
        ${queries.map((q) => q.ip)}::text[], ${queries.map((q) => q.subnet)}::text[],
        ${iso((w) => w.ipIdentitiesSince)}::timestamptz[], ${iso((w) => w.subnetIdentitiesSince)}::timestamptz[],
        ${iso((w) => w.velocitySince)}::timestamptz[]
      ) WITH ORDINALITY AS q(server_id, voter, ip, subnet, ip_since, subnet_since, velocity_since, ord)
      -- The batch's size, so server_exists probes the servers' key per row rather than hashing every server of the
      -- list (the planner took the input for more rows than a batch has; as in insert-deliveries.ts).
      LIMIT ${queries.length}::int
    ) q
    LEFT JOIN voter_states v ON v.server_id = q.server_id AND v.voter_identity = q.voter
    ORDER BY q.ord`,
  );
  return rows.map((row) => ({
    serverExists: row.server_exists,
    counts: {
      identitiesOnIp: Number(row.ip_identities) + 1,
      identitiesOnSubnet: Number(row.subnet_identities) + 1,
      heartsFromIp: Number(row.ip_hearts) + 1,
    },
    state:
      row.last_counted_at === null || row.last_day === null || row.streak_days === null
        ? null
        : { lastCountedAt: row.last_counted_at, lastDay: row.last_day, streakDays: row.streak_days },
  }));
}

/** One heart to write: recorded as blocked or cooldown, or an attempt to count it. */
export type HeartWrite =
  | { kind: "fraud" | "cooldown"; heart: HeartRecord }
  /** Counts only if the conditional upsert lets it: `streakDay` is what the voter's current row implies, `outbox` its heart.counted row. */
  | { kind: "count"; heart: HeartRecord; streakDay: number; outbox: OutboxRow };

/**
 * Writes many hearts in ONE statement (so they commit together, with one WAL flush).
 * No two writes may share a (server, voter identity).
 *
 * Counting is decided by the database: each `count` write upserts the voter's row
 * ON CONFLICT ... WHERE the last counted heart is at least 24 h older than this one AND
 * the stored streak leads to exactly `streakDay` (the state the caller read is still the
 * row's state), so concurrent casts (other batches, other instances) serialise on the row
 * lock and at most one of them counts. A count write that wins inserts its counted heart,
 * its heart.counted outbox row, its voter's rows of the identity rules' set (heart_address_voters),
 * its share of ONE ranking increment per (server, period)
 * of the batch and, when its server has claims on, its held row in the claim ledger (expiring the
 * player's hearts past their window or beyond the server's cap); one that loses writes nothing and is
 * returned, for the caller to decide again from a fresh read. `fraud` and `cooldown` writes insert their uncounted heart.
 *
 * Returns the indexes (into `writes`) of the count writes that won.
 */
export async function writeHearts(prisma: PrismaClient, writes: readonly HeartWrite[]): Promise<Set<number>> {
  if (writes.length === 0) return new Set();
  const col = <T>(pick: (w: HeartWrite, i: number) => T) => writes.map((w, i) => pick(w, i));
  const count = (w: HeartWrite) => (w.kind === "count" ? w : null);
  const outbox = writes.flatMap((w, idx) => (w.kind === "count" ? [{ idx, row: w.outbox }] : []));
  const rows = await runSql<{ idx: number }>(
    prisma,
    Prisma.sql`
    WITH w AS (
      SELECT * FROM unnest(
        ${col((_, i) => i)}::int[], ${col((w) => w.kind)}::text[], ${col((w) => w.heart.id)}::uuid[], ${col((w) => w.heart.serverId)}::uuid[],
        ${col((w) => w.heart.username)}::text[], ${col((w) => w.heart.voterIdentity)}::text[], ${col((w) => w.heart.ip)}::text[],
        ${col((w) => w.heart.subnet)}::text[], ${col((w) => w.heart.userAgent)}::text[], ${col((w) => w.heart.fraudScore)}::int[],
        ${col((w) => JSON.stringify(w.heart.fraudReasons))}::text[], ${col((w) => w.heart.period)}::text[],
        ${col((w) => w.heart.at.toISOString())}::timestamptz[], ${col((w) => count(w)?.streakDay ?? null)}::int[],
        ${col((w) => w.heart.ids.steamId)}::text[], ${col((w) => w.heart.ids.discordId)}::text[],
        ${col((w) => w.heart.ids.minecraftUuid)}::text[], ${col((w) => w.heart.ids.accountId)}::text[],
        ${col((w) => w.heart.ipKey)}::text[], ${col((w) => w.heart.subnetKey)}::text[]
      ) AS t(idx, kind, id, server_id, username, voter_identity, ip, subnet, user_agent, fraud_score, fraud_reasons, period, at, streak_day,
             steam_id, discord_id, minecraft_uuid, account_id, ip_key, subnet_key)
      -- The batch's size, so the planner looks its servers up by key rather than hashing every server of the list
      -- (as in insert-deliveries.ts).
      LIMIT ${writes.length}::int
    ), won AS (
      INSERT INTO voter_states AS s (server_id, voter_identity, last_counted_at, last_day, streak_days)
      SELECT server_id, voter_identity, at, (at AT TIME ZONE 'UTC')::date, streak_day FROM w
      WHERE kind = 'count' ORDER BY server_id, voter_identity
      ON CONFLICT (server_id, voter_identity) DO UPDATE SET
        last_counted_at = EXCLUDED.last_counted_at, last_day = EXCLUDED.last_day, streak_days = EXCLUDED.streak_days
      WHERE s.last_counted_at <= EXCLUDED.last_counted_at - interval '24 hours'
        AND EXCLUDED.streak_days = CASE
          WHEN s.last_day = EXCLUDED.last_day - 1 THEN s.streak_days + 1
          WHEN s.last_day = EXCLUDED.last_day THEN s.streak_days
          ELSE 1
        END
      RETURNING s.server_id, s.voter_identity
    ), done AS (
      SELECT w.* FROM w LEFT JOIN won ON won.server_id = w.server_id AND won.voter_identity = w.voter_identity
      WHERE w.kind <> 'count' OR won.server_id IS NOT NULL
    ), address_voters AS (
      -- The identity rules' set (heart_address_voters, read by readHeartContexts): each counted heart's voter from its
      -- IP and from its subnet, with the time of its latest counted heart there. One row per key in this batch (no two
      -- writes share a voter of a server, and an IP never equals a subnet); taken in key order.
      INSERT INTO heart_address_voters AS a (server_id, address, voter_identity, last_counted_at)
      SELECT d.server_id, x.address, d.voter_identity, d.at FROM done d CROSS JOIN LATERAL (VALUES (d.ip), (d.subnet)) AS x(address)
      WHERE d.kind = 'count' ORDER BY 1, 2, 3
      ON CONFLICT (server_id, address, voter_identity) DO UPDATE SET last_counted_at = GREATEST(a.last_counted_at, EXCLUDED.last_counted_at)
    ), hearts_written AS (
      INSERT INTO hearts (id, server_id, username, voter_identity, ip, subnet, user_agent, counted, verdict, fraud_score, fraud_reasons,
                          period, streak_day, created_at, steam_id, discord_id, minecraft_uuid, account_id, ip_key, subnet_key)
      SELECT id, server_id, username, voter_identity, ip, subnet, user_agent, kind = 'count', CASE WHEN kind = 'count' THEN 'counted' ELSE kind END,
             fraud_score, ARRAY(SELECT jsonb_array_elements_text(fraud_reasons::jsonb)), period, streak_day, at,
             steam_id, discord_id, minecraft_uuid, account_id, ip_key, subnet_key
      FROM done ORDER BY idx
      RETURNING id
    ), claim_rows AS (
      -- The claim ledger: a counted heart of a server with claims on is held for its plugins (services/claims/).
      SELECT d.id AS heart_id, d.server_id, lower(d.username) AS username_lower, d.steam_id, d.discord_id, d.minecraft_uuid, d.account_id,
             ${PLAYER_KEY_SQL} AS player_key, d.at AS counted_at, d.at + make_interval(days => s.claim_hold_days) AS expires_at,
             s.claim_max_held
      FROM done d JOIN servers s ON s.id = d.server_id AND s.claims_enabled
      WHERE d.kind = 'count'
    ), claims_held AS (
      ${holdVoteClaimsSql(Prisma.sql`claim_rows`)}
    ), claims_expired AS MATERIALIZED (
      -- The same player's older held hearts past their window or beyond the cap (services/claims/write-vote-claims.ts),
      -- under a per-player lock: read by the final SELECT, so it runs before the writes that follow it in this list.
      ${expireVoteClaimsSql(Prisma.sql`claim_rows`)}
    ), ranked AS (
      -- One increment per (server, period) of the batch; taken in key order, so two batches never wait on each other in a cycle.
      INSERT INTO server_rankings AS r (server_id, period, hearts)
      SELECT server_id, period, count(*)::int FROM done WHERE kind = 'count' GROUP BY server_id, period ORDER BY server_id, period
      ON CONFLICT (server_id, period) DO UPDATE SET hearts = r.hearts + EXCLUDED.hearts
      RETURNING r.server_id
    ), queued AS (${insertOutboxRows(outbox, Prisma.sql`SELECT idx FROM done WHERE kind = 'count'`)})
    -- Every data-modifying CTE above runs to completion whether or not this SELECT reads it; claims_expired is read here so that it runs.
    SELECT idx, (SELECT count(*) FROM claims_expired) AS players FROM done WHERE kind = 'count'`,
  );
  return new Set(rows.map((r) => r.idx));
}

/** One ranking row. */
export interface RankingRow {
  serverId: string;
  hearts: number;
  rank: number;
}

/**
 * Servers by counted hearts in `period`, most first; ties share a rank (1, 2, 2, 4).
 * With `ownerId`, only that owner's servers, each keeping its overall rank.
 */
export async function readRanking(prisma: PrismaClient, period: string, limit: number, ownerId?: string): Promise<RankingRow[]> {
  const rows = await runSql<{ server_id: string; hearts: number; rank: bigint }>(
    prisma,
    Prisma.sql`
    SELECT r.server_id::text AS server_id, r.hearts, r.rank FROM (
      SELECT server_id, hearts, ${rankByCountSql(Prisma.sql`hearts`)} AS rank
      FROM server_rankings WHERE period = ${period} AND hearts > 0
    ) r
    WHERE ${ownerId ?? null}::text IS NULL OR r.server_id IN (SELECT id FROM servers WHERE owner_id = ${ownerId ?? null}::text)
    ORDER BY r.hearts DESC, r.server_id ASC
    LIMIT ${limit}`,
  );
  return rows.map((r) => ({ serverId: r.server_id, hearts: Number(r.hearts), rank: Number(r.rank) }));
}

/**
 * Retention of the identity rules' set (services/retention): a heart_address_voters row whose voter last counted
 * from the address more than `keepSeconds` ago is removed; `keepSeconds` is the longest identity window plus a
 * margin, so no rule's window still reaches it. A cast that counts the voter again meanwhile moves
 * last_counted_at forward, and the DELETE's own condition, checked again on the row it waited for, then keeps it.
 */
export function addressVotersRetention(keepSeconds: number): RetentionRule {
  return lastCountedRetention("heart_address_voters", Prisma.raw("server_id, address, voter_identity"), keepSeconds);
}

/**
 * Retention of voter states (services/retention): a voter_states row whose voter last counted on the server more than
 * `keepSeconds` (RETENTION_HEART_DAYS) ago is removed: its cooldown and streak ended long before (the settings refuse a
 * horizon shorter than every window a heart matters to). The voter's next vote there counts as a first one: no
 * cooldown, a streak of 1. A cast that counts the voter meanwhile moves last_counted_at forward, and the DELETE's own
 * condition, checked again on the row it waited for, then keeps it.
 */
export function voterStatesRetention(keepSeconds: number): RetentionRule {
  return lastCountedRetention("voter_states", Prisma.raw("server_id, voter_identity"), keepSeconds);
}

/** A rule removing the rows of `table` (primary key `key`) whose last_counted_at is past `keepSeconds`, oldest first. */
function lastCountedRetention(table: "heart_address_voters" | "voter_states", key: Prisma.Sql, keepSeconds: number): RetentionRule {
  return ageKeyDeleteRule({ name: table, table, key, column: LAST_COUNTED_AT, keepSeconds });
}

/**
 * Retention of hearts (services/retention, issue 30): a heart cast more than `keepSeconds` (RETENTION_HEART_DAYS) ago is
 * removed together with its claim-ledger row (any state) and its pay-once payout, in ONE statement composed from the
 * owners' fragments (removeVoteClaimsSql, removePayoutsSql), so the three go together or not at all and no reader ever
 * sees a ledger row or a payout without its heart, or a heart without its payout.
 *
 * Pay-once: a heart is removed only when NO delivery of it is left (deliveries(heart_id), checked in the same
 * statement): a pending pull or push delivery of an old heart keeps the heart, its ledger row and its payout until the
 * delivery ends and ages out itself. Once removed, nothing can pay it again: a claim finds no ledger row (and a held row
 * is past its hold window long before the horizon), a pull claim and a push need a delivery, and none is left.
 * server_rankings (counted hearts per month) is an aggregate and is not touched: rankings stay as they were.
 *
 * Hearts are read in (age key, id) windows from a cursor (windowRule), so old hearts kept by a delivery are stepped
 * over, never read again by every batch. Counts the hearts removed.
 */
export function heartHistoryRetention(keepSeconds: number): RetentionRule {
  return windowRule({
    name: "hearts",
    table: "hearts",
    keepSeconds,
    start: { at: new Date(0), id: "00000000-0000-0000-0000-000000000000" },
    removeWindow: removeHeartsSql,
    // One entry of hearts_age_key_idx.
    oldest: Prisma.sql`SELECT ${oldestOfAgeKey(CREATED_AT)} AS oldest FROM hearts`,
  });
}

/**
 * One batch of heartHistoryRetention: the window of at most `limit` hearts after `from` cast before `cut` (entries of
 * hearts_age_key_idx, an age-key index no hot read can take, and their rows), each with one deliveries(heart_id) probe;
 * then the due ones' ledger rows, payouts and hearts by primary key (= ANY of an array: index probes, never a hash join
 * over the table). Worst case: `limit` hearts rows and `limit` delivery probes, whatever the table holds. Columns:
 * removed, seen (the window's size) and the window's last heart (the cursor's next start).
 *
 * The delivery check and the deletes share one snapshot; a delivery can only be stored for a heart from its heart.counted
 * message, which the hearts topic keeps far shorter than RETENTION_HEART_DAYS, so none appears for a heart this old.
 */
function removeHeartsSql(cut: Date, from: WindowCursor<string>, limit: number): Prisma.Sql {
  const key = ageKeySql(Prisma.raw("h.created_at"));
  const dueIds = Prisma.sql`ARRAY(SELECT id FROM win WHERE due)`;
  return Prisma.sql`
    WITH win AS (
      SELECT h.id, h.created_at, ${HEART_UNDELIVERED} AS due FROM hearts h
      WHERE ${key} < ${ageKeyOf(cut)} AND (${key}, h.id) > (${ageKeyOf(from.at)}, ${from.id}::uuid)
      ORDER BY ${key}, h.id LIMIT ${limit}::int
    ), claims AS (${removeVoteClaimsSql(dueIds)}
    ), payouts AS (${removePayoutsSql(dueIds)}
    ), gone AS (
      DELETE FROM hearts WHERE id = ANY(${dueIds}) RETURNING id
    ), last AS (SELECT created_at, id FROM win ORDER BY ${ageKeySql(CREATED_AT)} DESC, id DESC LIMIT 1)
    SELECT (SELECT count(*) FROM gone) AS removed, (SELECT count(*) FROM win) AS seen,
           (SELECT created_at FROM last) AS last_at, (SELECT id::text FROM last) AS last_id`;
}

/**
 * A heart `h` no delivery is left of: the only hearts retention may remove. One probe of deliveries(heart_id) per heart,
 * written as a scalar subquery: an EXISTS there may be planned as one hashed read of every delivery.
 */
const HEART_UNDELIVERED = Prisma.sql`(SELECT d.id FROM deliveries d WHERE d.heart_id = h.id LIMIT 1) IS NULL`;

/**
 * The address erasure of hearts (issue 30), as a retention rule (services/retention/): each batch erases (sets to null)
 * the IP, subnet and user agent of at most `limit` hearts made more than `keepSeconds` before `now`, oldest first, in ONE
 * short statement, and returns how many it erased (0: none is due). The keyed pseudonyms (ip_key, subnet_key) stay.
 * Rows locked by another writer are skipped (the next pass takes them), so the pass never waits on the hot path.
 * `keepSeconds` is ADDRESS_RETENTION_HOURS (services/shared/runtime/address-settings.ts).
 */
export function heartAddressesRetention(keepSeconds: number): RetentionRule {
  return statementRule({
    name: "heart_addresses",
    table: "hearts",
    keepSeconds,
    // Bounded: reads at most `limit` entries of hearts_address_held_idx (only the hearts still holding an address, oldest first;
    // never the table) and writes those rows by primary key (= ANY of the array: an index scan of the keys; an IN
    // subquery is planned as a hash join that reads the whole table); rows another writer holds are skipped.
    removeDue: (cutoff, limit) => Prisma.sql`
      UPDATE hearts h SET ip = NULL, subnet = NULL, user_agent = NULL
      WHERE h.id = ANY(ARRAY(${oldestDueRowsSql({ table: "hearts", columns: Prisma.raw("id"), due: ADDRESS_HELD, column: CREATED_AT, cut: cutoff, limit })}))`,
    // One entry of hearts_address_held_idx (an age-key index: CastHeart's velocity read can never take it).
    oldest: Prisma.sql`SELECT ${oldestOfAgeKey(CREATED_AT)} AS oldest FROM hearts WHERE ${ADDRESS_HELD}`,
  });
}

/**
 * A voter's erasure (services/voter-data/erase-voter-data.ts), as one statement: the server's hearts `heartIds` (at
 * most ERASE_BATCH, by primary key) get `tombstone` as username and voter identity; their platform ids, address,
 * subnet and user agent are dropped. Verdict, count, period and time are kept, so rankings and counts stay as they
 * were. Its keyed pseudonyms (ip_key, subnet_key) are dropped too. Returns the rows
 * changed.
 */
export function eraseHeartsSql(q: { serverId: string; heartIds: readonly string[]; tombstone: string }): Prisma.Sql {
  return Prisma.sql`
    UPDATE hearts SET username = ${q.tombstone}, voter_identity = ${q.tombstone}, ip = NULL, subnet = NULL, user_agent = NULL, ip_key = NULL, subnet_key = NULL,
        steam_id = NULL, discord_id = NULL, minecraft_uuid = NULL, account_id = NULL
    WHERE server_id = ${q.serverId}::uuid AND id = ANY(${[...q.heartIds]}::uuid[])`;
}

/**
 * A voter's erasure: the voter's cooldown and streak rows (voter_states, by primary key: at most one per identity)
 * and their rows of the identity rules' set (heart_address_voters, by primary key: addresses x identities) are
 * deleted. A voter who votes again after the erasure starts without a streak or cooldown.
 */
export function eraseVoterStatesSql(q: { serverId: string; identities: readonly string[] }): Prisma.Sql {
  return Prisma.sql`DELETE FROM voter_states WHERE server_id = ${q.serverId}::uuid AND voter_identity = ANY(${[...q.identities]}::text[])`;
}

/** See eraseVoterStatesSql: the voter's rows of heart_address_voters, by primary key. */
export function eraseAddressVotersSql(q: { serverId: string; addresses: readonly string[]; identities: readonly string[] }): Prisma.Sql {
  return Prisma.sql`
    DELETE FROM heart_address_voters
    WHERE server_id = ${q.serverId}::uuid AND address = ANY(${[...q.addresses]}::text[]) AND voter_identity = ANY(${[...q.identities]}::text[])`;
}
