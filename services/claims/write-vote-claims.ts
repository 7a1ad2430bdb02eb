import { Prisma } from "../../gen/prisma/client.js";
import { statementRule, type RetentionRule } from "../shared/adapters/retention-rule.js";

/**
 * The claim ledger's writes: every INSERT and UPDATE of `vote_claims` is built here, as SQL fragments the
 * callers compose into their own statements (CTE chains), so each caller keeps its one round trip:
 * - CastHeart (services/hearts/store.ts) holds a counted heart (holdVoteClaimsSql) and expires the player's
 *   older held hearts past their window or beyond the cap (expireVoteClaimsSql);
 * - a claim (ledger-store.ts) marks the player's oldest held heart claimed (claimVoteClaimSql);
 * - pay-once mode (services/delivery/pipeline/withdraw-unpaid.ts) marks a heart another transport paid withdrawn (withdrawVoteClaimsSql).
 * Expired rows are removed by retention (expiredClaimRetention) once expired longer than its setting; any row goes with
 * its heart once the heart is older than RETENTION_HEART_DAYS (removeVoteClaimsSql, composed by the hearts' retention,
 * services/hearts/store.ts heartHistoryRetention); no other row is ever deleted.
 */

/**
 * Whom the per-player cap counts, over a row `d` with the heart's ids and username: the strongest id
 * given (SteamID64, Minecraft UUID, Discord id, account id), else the lower-cased username.
 */
export const PLAYER_KEY_SQL = Prisma.sql`COALESCE('steam:' || d.steam_id, 'mc:' || d.minecraft_uuid, 'discord:' || d.discord_id, 'account:' || d.account_id, 'name:' || lower(d.username))`;

/**
 * The INSERT of held ledger rows (a data-modifying CTE): `rows` names a relation with the columns of
 * a new row (heart_id, server_id, player_key, username_lower, the platform ids, counted_at, expires_at).
 */
export function holdVoteClaimsSql(rows: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO vote_claims (heart_id, server_id, player_key, username_lower, steam_id, discord_id, minecraft_uuid, account_id, counted_at, expires_at)
    SELECT heart_id, server_id, player_key, username_lower, steam_id, discord_id, minecraft_uuid, account_id, counted_at, expires_at
    FROM ${rows}
    RETURNING heart_id`;
}

/**
 * Expires the older held hearts of each player of `rows` (a relation of the new rows, as holdVoteClaimsSql
 * takes them, plus claim_max_held): past their window -> expired ("window"); beyond the cap counting the new
 * ones -> the oldest expired ("cap"). A SELECT, one row per player (its `expired` count), to be read by the
 * statement's final SELECT (a CTE no one reads is not run). Each player is expired by expire_vote_claims
 * (migration 20261130120000_vote_claims_cap_lock) under a per-player lock, reading what an overlapping
 * statement for the same player committed, so the cap holds under concurrent casts; players are taken in
 * (server, player) order, so two statements never wait on each other in a cycle.
 */
export function expireVoteClaimsSql(rows: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`
    SELECT expire_vote_claims(n.server_id, n.player_key, n.at, n.fresh, n.max_held, n.fresh_ids) AS expired
    FROM (
      SELECT server_id, player_key, count(*)::int AS fresh, max(counted_at) AS at, min(claim_max_held) AS max_held,
             array_agg(heart_id) AS fresh_ids
      FROM ${rows} GROUP BY server_id, player_key
      ORDER BY server_id, player_key
    ) n`;
}

/**
 * The claim of ledger rows (the statement's final UPDATE): each row of `target` (a relation with
 * heart_id) still held becomes `claimed` at `now`, when `also` holds for it (over `t`, the target row).
 * Returns the ledger's columns as the claim answers them, and `returning`.
 */
export function claimVoteClaimSql(target: Prisma.Sql, now: Date, also: Prisma.Sql, returning: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`
    UPDATE vote_claims v SET state = 'claimed', claimed_at = ${now}::timestamptz
    FROM ${target} t WHERE v.heart_id = t.heart_id AND v.state = 'held' AND ${also}
    RETURNING v.heart_id::text AS heart_id, v.state::text AS state, v.counted_at, v.expires_at, v.claimed_at, ${returning}`;
}

/**
 * Pay-once mode: the hearts' held ledger rows become `withdrawn` (another transport paid them), when
 * `enabled` (a data-modifying CTE; with `enabled` false it changes nothing). Returns heart_id.
 */
export function withdrawVoteClaimsSql(q: { serverId: string; heartIds: readonly string[]; enabled: boolean }): Prisma.Sql {
  return Prisma.sql`
    UPDATE vote_claims SET state = 'withdrawn'
    WHERE ${q.enabled} AND server_id = ${q.serverId}::uuid AND heart_id = ANY(${[...q.heartIds]}::uuid[]) AND state = 'held'
    RETURNING heart_id`;
}

/**
 * Retention of expired ledger rows (services/retention): a row `expired` more than `keepSeconds` ago is removed.
 * Why no claim or payout can depend on it: `expired` is final (every write above moves only `held` rows: the claim,
 * the withdrawal, expire_vote_claims), the claim and the standing read only held, claimed and withdrawn rows, a
 * heart's row is written once, by the statement that counts the heart (so a removed row never comes back held), and
 * the pay-once payouts (heart_payouts) never read the ledger. Held, claimed and withdrawn rows are kept: a claimed
 * or withdrawn row is the heart's paid state, and a held one may still be claimed.
 */
export function expiredClaimRetention(keepSeconds: number): RetentionRule {
  return statementRule({
    name: "expired_vote_claims",
    table: "vote_claims",
    keepSeconds,
    // Reads at most `limit` entries of the expired rows' partial index (expired_at) and their rows; deletes those.
    removeDue: (cut, limit) => Prisma.sql`DELETE FROM vote_claims WHERE state = 'expired' AND expired_at < ${cut}::timestamptz AND heart_id IN (
      SELECT heart_id FROM vote_claims WHERE state = 'expired' AND expired_at < ${cut}::timestamptz ORDER BY expired_at LIMIT ${limit}::int)`,
    // One entry of the expired rows' partial index.
    oldest: Prisma.sql`SELECT min(expired_at) AS oldest FROM vote_claims WHERE state = 'expired'`,
  });
}

/**
 * The hearts' retention (services/hearts/store.ts heartHistoryRetention): the ledger rows of the hearts `heartIds` (an
 * SQL uuid[] of hearts past RETENTION_HEART_DAYS that no delivery is left of), whatever their state, removed in the
 * statement that removes the hearts (a data-modifying CTE; by primary key). Why no claim can pay such a heart again:
 * a held row is claimable only within its hold window (at most CLAIM_HOLD_DAYS.max days, far shorter than the
 * horizon), and a heart's row is written once, by the statement that counts the heart, so a removed row never comes back.
 */
export function removeVoteClaimsSql(heartIds: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`DELETE FROM vote_claims WHERE heart_id = ANY(${heartIds}) RETURNING heart_id`;
}

/**
 * A voter's erasure (services/voter-data/erase-voter-data.ts): the hearts' ledger rows (by primary key) get `tombstone`
 * as player key and name, and lose their platform ids, so no check or claim by the old name or ids finds them. A
 * claimed, expired or withdrawn row keeps its state; a row still held is expired ("erased") at `now`, so nobody
 * claims an erased voter's reward later, by the old name or by the tombstone. Returns the rows changed.
 */
export function eraseVoteClaimsSql(q: { serverId: string; heartIds: readonly string[]; tombstone: string; now: Date }): Prisma.Sql {
  return Prisma.sql`
    UPDATE vote_claims SET player_key = ${q.tombstone}, username_lower = ${q.tombstone},
        steam_id = NULL, discord_id = NULL, minecraft_uuid = NULL, account_id = NULL,
        expired_reason = CASE WHEN state = 'held' THEN 'erased' ELSE expired_reason END,
        expired_at = CASE WHEN state = 'held' THEN ${q.now}::timestamptz ELSE expired_at END,
        state = CASE WHEN state = 'held' THEN 'expired'::"VoteClaimState" ELSE state END
    WHERE server_id = ${q.serverId}::uuid AND heart_id = ANY(${[...q.heartIds]}::uuid[])`;
}
