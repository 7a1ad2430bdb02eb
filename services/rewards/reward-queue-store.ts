import { Prisma } from "../../gen/prisma/client.js";
import { ageKeyDeleteRule, type RetentionRule } from "../shared/adapters/retention-rule.js";
import type { SqlTx } from "../shared/adapters/sql/executor.js";
import type { GraceStreak } from "./domain/grace-streak.js";
import type { RewardEntry } from "./domain/rewards-for-vote.js";
import { payoutHeldByOtherSql } from "../payouts/write-payouts.js";

/**
 * THE writer of reward_queue_entries and voter_reward_states (issue 31; test/unit/table-owners.test.ts): the per-player
 * reward queue a game plugin pays from, and what the reward rules count per voter. Callers compose these in their own
 * transactions (the step that queues a counted vote's rewards; the plugin's acknowledgement).
 */

/** What the reward rules count for one voter on one server (a voter_reward_states row). */
export interface VoterRewardState {
  /** The newest counted heart applied: a heart counted at or before it is a replay, applied already. */
  lastCountedAt: Date;
  total: number;
  /** "YYYY-MM" and the voter's counted votes in it. */
  month: string;
  monthTotal: number;
  /** ISO week "YYYY-Www" and the voter's counted votes in it. */
  week: string;
  weekTotal: number;
  streak: GraceStreak;
}

/** The player an entry is for, as the vote named them. */
export interface RewardPlayer {
  username: string;
  steamId: string | null;
  discordId: string | null;
  minecraftUuid: string | null;
  accountId: string | null;
}

/** A voter on a server: the key of voter_reward_states. */
export interface VoterKey {
  serverId: string;
  voterIdentity: string;
}

/** The map key of a voter's state in lockVoterRewardStates' answer. */
export function voterKeyOf(v: VoterKey): string {
  return `${v.serverId.toLowerCase()}|${v.voterIdentity}`;
}

/**
 * The reward states of `voters`, locked for the rest of the transaction (FOR UPDATE) in (server, voter) order, so two
 * transactions locking overlapping voters wait for each other instead of deadlocking; keyed by voterKeyOf. A voter
 * without a state yet is absent. Two batches of one voter's votes queue one after the other, so the counts never skip
 * or repeat.
 */
export async function lockVoterRewardStates(tx: SqlTx, voters: readonly VoterKey[]): Promise<Map<string, VoterRewardState>> {
  const states = new Map<string, VoterRewardState>();
  // In one order for every caller (by voterKeyOf), so two transactions lock overlapping voters in the same order.
  const unique = [...new Map(voters.map((v) => [voterKeyOf(v), v])).entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
  if (unique.length === 0) return states;
  // Bounded: one primary-key probe per voter given (a consumer batch's voters: a few hundred at most). The probe is a
  // LATERAL per key, locking as it goes in the keys' order: a join of the keys with the table may instead be planned
  // as a hash join over every state of the list (seen: 20,091 rows read for 91 voters).
  const rows = await tx.query<{
    server_id: string;
    voter_identity: string;
    last_counted_at: Date;
    total: number;
    month: string;
    month_total: number;
    week: string;
    week_total: number;
    streak_last_day: Date;
    streak_days: number;
  }>(Prisma.sql`
    SELECT s.* FROM unnest(${unique.map((v) => v.serverId)}::uuid[], ${unique.map((v) => v.voterIdentity)}::text[]) WITH ORDINALITY AS k(server_id, voter_identity, n)
    CROSS JOIN LATERAL (
      SELECT r.server_id::text AS server_id, r.voter_identity, r.last_counted_at, r.total, r.month, r.month_total, r.week, r.week_total,
             r.streak_last_day, r.streak_days
      FROM voter_reward_states r WHERE r.server_id = k.server_id AND r.voter_identity = k.voter_identity
      FOR UPDATE
    ) s
    ORDER BY k.n`);
  for (const row of rows) {
    states.set(voterKeyOf({ serverId: row.server_id, voterIdentity: row.voter_identity }), {
      lastCountedAt: row.last_counted_at,
      total: row.total,
      month: row.month,
      monthTotal: row.month_total,
      week: row.week,
      weekTotal: row.week_total,
      streak: { lastDay: row.streak_last_day, days: row.streak_days },
    });
  }
  return states;
}

/** The voter's reward state, locked for the rest of the transaction (lockVoterRewardStates for one voter), or null when the voter has none yet. */
export async function lockVoterRewardState(tx: SqlTx, serverId: string, voterIdentity: string): Promise<VoterRewardState | null> {
  const states = await lockVoterRewardStates(tx, [{ serverId, voterIdentity }]);
  return states.get(voterKeyOf({ serverId, voterIdentity })) ?? null;
}

/** A voter's new reward state, for writeVoterRewardStates. */
export interface VoterRewardStateWrite extends VoterKey {
  state: VoterRewardState;
}

/** Writes the voters' reward states (insert or replace), one statement; each voter at most once in `writes`. */
export async function writeVoterRewardStates(tx: SqlTx, writes: readonly VoterRewardStateWrite[]): Promise<void> {
  if (writes.length === 0) return;
  const rows = writes.map((w) => ({
    server_id: w.serverId,
    voter_identity: w.voterIdentity,
    last_counted_at: w.state.lastCountedAt.toISOString(),
    total: w.state.total,
    month: w.state.month,
    month_total: w.state.monthTotal,
    week: w.state.week,
    week_total: w.state.weekTotal,
    streak_last_day: w.state.streak.lastDay.toISOString().slice(0, 10),
    streak_days: w.state.streak.days,
  }));
  // Bounded: one primary-key upsert per voter given (a consumer batch's voters: a few hundred at most).
  await tx.execute(Prisma.sql`
    INSERT INTO voter_reward_states (server_id, voter_identity, last_counted_at, total, month, month_total, week, week_total, streak_last_day, streak_days)
    SELECT w.server_id, w.voter_identity, w.last_counted_at, w.total, w.month, w.month_total, w.week, w.week_total, w.streak_last_day, w.streak_days
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS w(server_id uuid, voter_identity text, last_counted_at timestamptz, total int, month text,
         month_total int, week text, week_total int, streak_last_day date, streak_days int)
    ON CONFLICT (server_id, voter_identity) DO UPDATE SET
      last_counted_at = excluded.last_counted_at, total = excluded.total, month = excluded.month, month_total = excluded.month_total,
      week = excluded.week, week_total = excluded.week_total, streak_last_day = excluded.streak_last_day, streak_days = excluded.streak_days`);
}

/** Writes the voter's reward state (insert or replace): writeVoterRewardStates for one voter. */
export async function writeVoterRewardState(tx: SqlTx, serverId: string, voterIdentity: string, s: VoterRewardState): Promise<void> {
  await writeVoterRewardStates(tx, [{ serverId, voterIdentity, state: s }]);
}

/** One player's entries to queue on a server, for queueRewardEntriesOf. */
export interface QueuedRewards {
  serverId: string;
  heartId: string | null;
  player: RewardPlayer;
  rulesVersion: number;
  entries: readonly RewardEntry[];
}

/**
 * Queues every group's `entries` for its player on its server, one statement; an entry whose key the server's queue
 * already holds is skipped (a replay queues nothing twice). Returns the ids of the entries queued now, in no order.
 */
export async function queueRewardEntriesOf(tx: SqlTx, groups: readonly QueuedRewards[]): Promise<string[]> {
  const rows = groups.flatMap((g) =>
    g.entries.map((e) => ({
      server_id: g.serverId,
      key: e.key,
      reason: e.reason,
      heart_id: g.heartId,
      username: g.player.username,
      steam_id: g.player.steamId,
      discord_id: g.player.discordId,
      minecraft_uuid: g.player.minecraftUuid,
      account_id: g.player.accountId,
      commands: e.commands,
      online_only: e.onlineOnly,
      rules_version: g.rulesVersion,
    })),
  );
  if (rows.length === 0) return [];
  // Bounded: one row inserted per entry given (a vote's rules give at most a few hundred; a batch, that per vote), each
  // one unique-index probe.
  const inserted = await tx.query<{ id: string }>(Prisma.sql`
    INSERT INTO reward_queue_entries (server_id, entry_key, reason, heart_id, username, username_lower, steam_id, discord_id, minecraft_uuid, account_id,
                                      commands, online_only, rules_version)
    SELECT e.server_id, e.key, e.reason, e.heart_id, e.username, lower(e.username), e.steam_id, e.discord_id, e.minecraft_uuid, e.account_id,
           ARRAY(SELECT jsonb_array_elements_text(e.commands)), e.online_only, e.rules_version
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
         AS e(server_id uuid, key text, reason text, heart_id uuid, username text, steam_id text, discord_id text, minecraft_uuid text,
              account_id text, commands jsonb, online_only boolean, rules_version int)
    ON CONFLICT (server_id, entry_key) DO NOTHING
    RETURNING id`);
  return inserted.map((r) => r.id);
}

/**
 * Queues `entries` for `player` on `serverId` (queueRewardEntriesOf for one group); an entry whose key the server's
 * queue already holds is skipped. Returns the ids of the entries queued now.
 */
export async function queueRewardEntries(tx: SqlTx, q: QueuedRewards): Promise<string[]> {
  return queueRewardEntriesOf(tx, [q]);
}

/**
 * Acknowledges the server's entries `ids` at `at` (the plugin ran them). Idempotent: an entry acknowledged before, or
 * not the server's, is left as it is. Returns the ids acknowledged now.
 */
export async function ackRewardEntries(tx: SqlTx, q: { serverId: string; ids: readonly string[]; at: Date }): Promise<string[]> {
  // Bounded: at most ids.length rows, by primary key, read twice (the lookup, the write).
  // Named by id alone first (a materialized primary-key lookup that names neither server nor acked_at), then the write
  // takes them by primary key: a statement naming the server and acked_at IS NULL with the ids let the generic plan of a
  // list (one server's share of thousands looks tiny) walk the server's whole reward_queue_entries_pending_idx and
  // filter by id (20,512 rows for 5 ids in the bounded-reads test).
  const rows = await tx.query<{ id: string }>(Prisma.sql`
    WITH named AS MATERIALIZED (SELECT id, server_id FROM reward_queue_entries WHERE id = ANY(${[...q.ids]}::uuid[]))
    UPDATE reward_queue_entries e SET acked_at = ${q.at}::timestamptz
    WHERE e.id IN (SELECT id FROM named WHERE server_id = ${q.serverId}::uuid) AND e.acked_at IS NULL
    RETURNING e.id`);
  return rows.map((r) => r.id);
}

/**
 * A voter's erasure (services/voter-data/erase-voter-data.ts): the server's reward entries given by the hearts
 * `heartIds` are deleted, pending or acknowledged: their commands carry the voter's name or ids, and a pending one can
 * no longer be paid to a voter whose identity is gone (as their unsent deliveries are withdrawn).
 */
export function eraseRewardEntriesSql(q: { serverId: string; heartIds: readonly string[] }): Prisma.Sql {
  // Bounded: the hearts' entries by the (server_id, heart_id) index, a vote's few entries each.
  return Prisma.sql`DELETE FROM reward_queue_entries WHERE server_id = ${q.serverId}::uuid AND heart_id = ANY(${[...q.heartIds]}::uuid[])`;
}

/** A voter's erasure: the reward rules' counts of the voter's identities `identities` on the server are deleted. */
export function eraseVoterRewardStatesSql(q: { serverId: string; identities: readonly string[] }): Prisma.Sql {
  // Bounded: at most identities.length rows, by primary key.
  return Prisma.sql`DELETE FROM voter_reward_states WHERE server_id = ${q.serverId}::uuid AND voter_identity = ANY(${[...q.identities]}::text[])`;
}

/**
 * Retention of the reward rules' counts (services/retention): a voter_reward_states row whose voter last counted on the
 * server more than `keepSeconds` (RETENTION_HEART_DAYS, as voter_states) ago is removed; the voter's next vote there
 * counts from 1 (totals and the reward streak start over), as their cooldown and streak do.
 */
export function voterRewardStatesRetention(keepSeconds: number): RetentionRule {
  return ageKeyDeleteRule({
    name: "voter_reward_states",
    table: "voter_reward_states",
    key: Prisma.raw("server_id, voter_identity"),
    column: Prisma.raw("last_counted_at"),
    keepSeconds,
  });
}

/** One pending entry as the plugin's list shows it. */
export interface PendingRewardEntry {
  id: string;
  reason: string;
  player: RewardPlayer;
  commands: string[];
  onlineOnly: boolean;
  createdAt: Date;
}

/** Entries one online player contributes to a list at most (the per-player index range read for each named player). */
export const ONLINE_PLAYER_ENTRIES_MAX = 20;

/** The columns of a listed entry. */
const PENDING_COLUMNS = Prisma.sql`id, reason, username, steam_id, discord_id, minecraft_uuid, account_id, commands, online_only, created_at`;

interface PendingRow {
  id: string;
  reason: string;
  username: string;
  steam_id: string | null;
  discord_id: string | null;
  minecraft_uuid: string | null;
  account_id: string | null;
  commands: string[] | null;
  online_only: boolean;
  created_at: Date;
}

const toPending = (r: PendingRow): PendingRewardEntry => ({
  id: r.id,
  reason: r.reason,
  player: { username: r.username, steamId: r.steam_id, discordId: r.discord_id, minecraftUuid: r.minecraft_uuid, accountId: r.account_id },
  commands: r.commands ?? [],
  onlineOnly: r.online_only,
  createdAt: r.created_at,
});

/**
 * A page of the server's pending entries, oldest first, or with `online` (the lower-cased names of every player on the
 * game server now, maybe none) the entries that are not online-only plus each named player's entries: an online-only
 * entry of a player not named is withheld. An entry stays listed until it is acknowledged.
 */
export async function listPendingRewardEntries(tx: SqlTx, q: { serverId: string; limit: number; online?: readonly string[] }): Promise<PendingRewardEntry[]> {
  if (q.online === undefined) {
    // Bounded: at most `limit` entries of reward_queue_entries_pending_idx (server_id, created_at, id) WHERE acked_at IS NULL,
    // and their rows; acknowledged entries are not in the index, whatever the server's history.
    const rows = await tx.query<PendingRow>(Prisma.sql`
      SELECT ${PENDING_COLUMNS} FROM reward_queue_entries
      WHERE server_id = ${q.serverId}::uuid AND acked_at IS NULL
      ORDER BY created_at, id LIMIT ${q.limit}::int`);
    return rows.map(toPending);
  }
  // Bounded: at most `limit` entries of reward_queue_entries_pending_anytime_idx (pending, not online-only), plus per named
  // player (the caller bounds them) at most ONLINE_PLAYER_ENTRIES_MAX entries of reward_queue_entries_pending_player_idx;
  // then those rows by primary key, sorted, `limit` kept. Offline players' online-only entries are never read.
  // The page is picked first (a materialized CTE: each branch walks its own index range), then read by primary key
  // alone: the final read named the server and acked_at IS NULL as well, and its generic plan on a list's statistics
  // walked the server's whole reward_queue_entries_pending_idx filtering by the picked ids (20,014 rows for 7 in the
  // bounded-reads test). The picked rows are the server's pending ones in this statement's snapshot already.
  const rows = await tx.query<PendingRow>(Prisma.sql`
    WITH picked AS MATERIALIZED (
      (SELECT id FROM reward_queue_entries
       WHERE server_id = ${q.serverId}::uuid AND acked_at IS NULL AND NOT online_only
       ORDER BY created_at, id LIMIT ${q.limit}::int)
      UNION
      SELECT p.id FROM unnest(${[...q.online]}::text[]) AS n(name)
      CROSS JOIN LATERAL (
        SELECT id FROM reward_queue_entries
        WHERE server_id = ${q.serverId}::uuid AND username_lower = n.name AND acked_at IS NULL
        ORDER BY created_at LIMIT ${Math.min(q.limit, ONLINE_PLAYER_ENTRIES_MAX)}::int) p
    )
    SELECT ${PENDING_COLUMNS} FROM reward_queue_entries
    WHERE id IN (SELECT id FROM picked)
    ORDER BY created_at, id LIMIT ${q.limit}::int`);
  return rows.map(toPending);
}

/**
 * Of `ids`, those that are entries of the server (acknowledged or not): what an acknowledgement reports as acked; the
 * others are unknown to the server.
 */
export async function findServerRewardEntries(tx: SqlTx, q: { serverId: string; ids: readonly string[] }): Promise<string[]> {
  // Bounded: at most ids.length rows, by primary key. Looked up by id alone (a materialized lookup), the server checked
  // on them: naming the server with the ids, the generic plan on a list's statistics walked the server's whole
  // (server_id, ...) index filtering by id (40,512 rows for 5 ids in the bounded-reads test).
  const rows = await tx.query<{ id: string }>(Prisma.sql`
    WITH named AS MATERIALIZED (SELECT id, server_id FROM reward_queue_entries WHERE id = ANY(${[...q.ids]}::uuid[]))
    SELECT id FROM named WHERE server_id = ${q.serverId}::uuid`);
  return rows.map((r) => r.id);
}

/**
 * Retention of the reward queue (services/retention): an entry acknowledged longer than `keepSeconds` ago is removed (the
 * plugin ran it; its key no longer has to refuse a replayed vote, which Kafka forgot by then). Pending entries stay.
 */
export function ackedRewardEntryRetention(keepSeconds: number): RetentionRule {
  // Reads at most `limit` entries of reward_queue_entries_acked_age_key_idx (acked rows only) and their rows; deletes those.
  return ageKeyDeleteRule({
    name: "acked_reward_entries",
    table: "reward_queue_entries",
    key: Prisma.raw("id"),
    column: Prisma.raw("acked_at"),
    due: Prisma.sql`acked_at IS NOT NULL`,
    keepSeconds,
  });
}

/** Acknowledged entries one bulk re-queue call looks at, at most. */
export const REQUEUE_PAGE_ENTRIES = 500;

/** Where a re-queue page stopped: the last entry it looked at (its acknowledgement time and id). */
export interface RequeueCursor {
  ackedAt: Date;
  id: string;
}

/**
 * An owner's bulk re-queue (they lost a game server): the server's entries acknowledged in [from, to), after `after`,
 * oldest acknowledgement first, at most `limit` of them, are queued again as new pending entries (new ids, created at
 * `at`, the same reason, player and commands). A copy's key is `<original key>:requeue:<original id>`, so a second call
 * over the same range skips the entries it re-queued before; a copy acknowledged later is an entry like any other and a
 * later range that holds its acknowledgement re-queues it (a second lost server).
 */
export async function requeueAckedRewardEntries(
  tx: SqlTx,
  q: { serverId: string; from: Date; to: Date; after: RequeueCursor | null; limit: number; at: Date },
): Promise<{ requeued: number; scanned: number; last: RequeueCursor | null }> {
  const afterAt = q.after?.ackedAt ?? new Date(0);
  const afterId = q.after?.id ?? "00000000-0000-0000-0000-000000000000";
  // Bounded: at most `limit` entries of reward_queue_entries_acked_idx (server_id, acked_at, id), acknowledged entries
  // only, from the cursor on; those rows by primary key, one unique-index probe per copy inserted.
  const [row] = await tx.query<{ requeued: number; scanned: number; last_acked_at: Date | null; last_id: string | null }>(Prisma.sql`
    WITH page AS MATERIALIZED (
      SELECT id, acked_at FROM reward_queue_entries
      WHERE server_id = ${q.serverId}::uuid AND acked_at IS NOT NULL
        AND acked_at >= ${q.from}::timestamptz AND acked_at < ${q.to}::timestamptz
        AND (acked_at, id) > (${afterAt}::timestamptz, ${afterId}::uuid)
      ORDER BY acked_at, id LIMIT ${q.limit}::int
    ), copied AS (
      INSERT INTO reward_queue_entries (server_id, entry_key, reason, heart_id, username, username_lower, steam_id, discord_id, minecraft_uuid,
                                        account_id, commands, online_only, rules_version, created_at)
      SELECT e.server_id, e.entry_key || ':requeue:' || e.id, e.reason, e.heart_id, e.username, e.username_lower, e.steam_id, e.discord_id,
             e.minecraft_uuid, e.account_id, e.commands, e.online_only, e.rules_version, ${q.at}::timestamptz
      FROM page p JOIN reward_queue_entries e ON e.id = p.id
      ORDER BY p.acked_at, p.id
      ON CONFLICT (server_id, entry_key) DO NOTHING
      RETURNING 1
    ), last AS (SELECT acked_at, id FROM page ORDER BY acked_at DESC, id DESC LIMIT 1)
    SELECT (SELECT count(*) FROM copied)::int AS requeued, (SELECT count(*) FROM page)::int AS scanned,
           (SELECT acked_at FROM last) AS last_acked_at, (SELECT id FROM last) AS last_id`);
  const last = row?.last_acked_at && row.last_id ? { ackedAt: row.last_acked_at, id: row.last_id } : null;
  return { requeued: row?.requeued ?? 0, scanned: row?.scanned ?? 0, last };
}

/**
 * Of `keys`, those the server's queue holds (pending or acknowledged): whether a referral's rewards were queued, before
 * its clawback queues their reversal.
 */
export async function findRewardEntryKeys(tx: SqlTx, q: { serverId: string; keys: readonly string[] }): Promise<string[]> {
  if (q.keys.length === 0) return [];
  // Bounded: at most keys.length probes of the (server_id, entry_key) unique index.
  const rows = await tx.query<{ entry_key: string }>(Prisma.sql`
    SELECT entry_key FROM reward_queue_entries WHERE server_id = ${q.serverId}::uuid AND entry_key = ANY(${[...q.keys]}::text[])`);
  return rows.map((r) => r.entry_key);
}

/**
 * Pay-once (servers.pay_once): of the server's pending entries `ids`, the `vote` entries whose heart another transport
 * holds (a callback, Votifier, pull or the check/claim API paid it, or a push has it in flight or in doubt), each with
 * that payout's state (`paid`, `reserved`, `in_doubt`). Empty on a server not in pay-once mode.
 */
export async function findVoteEntriesPaidElsewhere(tx: SqlTx, q: { serverId: string; ids: readonly string[] }): Promise<Array<{ id: string; state: string }>> {
  if (q.ids.length === 0) return [];
  // Bounded: the server's row, at most ids.length entries by primary key, and one payout probe (primary key) per entry.
  // Its generic plan on a list's statistics reads the entries by primary key (5 rows for 5 ids in the bounded-reads test,
  // whose pay-once test measures it), unlike the close's UPDATE below did.
  return tx.query<{ id: string; state: string }>(Prisma.sql`
    SELECT e.id, h.state
    FROM reward_queue_entries e JOIN servers s ON s.id = e.server_id AND s.pay_once
    CROSS JOIN LATERAL (SELECT ${payoutHeldByOtherSql(Prisma.sql`e.heart_id`)} AS state) h
    WHERE e.id = ANY(${[...q.ids]}::uuid[]) AND e.server_id = ${q.serverId}::uuid AND e.reason = 'vote' AND e.acked_at IS NULL
      AND h.state IS NOT NULL`);
}

/**
 * Pay-once: closes the server's pending `vote` entries `ids` whose heart another transport has paid (acked_at = `at`
 * without a plugin running them), so they are never listed again and leave the pending index. Returns the ids closed.
 */
export async function closeRewardEntriesPaidElsewhere(tx: SqlTx, q: { serverId: string; ids: readonly string[]; at: Date }): Promise<string[]> {
  if (q.ids.length === 0) return [];
  // Bounded: at most ids.length rows, by primary key, read twice (the lookup, the write). As ackRewardEntries: named
  // by id alone first, so no generic plan walks the server's pending partial index filtering by id.
  const rows = await tx.query<{ id: string }>(Prisma.sql`
    WITH named AS MATERIALIZED (SELECT id, server_id, reason FROM reward_queue_entries WHERE id = ANY(${[...q.ids]}::uuid[]))
    UPDATE reward_queue_entries e SET acked_at = ${q.at}::timestamptz
    WHERE e.id IN (SELECT id FROM named WHERE server_id = ${q.serverId}::uuid AND reason = 'vote') AND e.acked_at IS NULL
    RETURNING e.id`);
  return rows.map((r) => r.id);
}

/**
 * A voter's erasure (services/voter-data/erase-voter-data.ts): the server's referral and reversal entries with the keys
 * `keys` (the keys the erased voter's side of their referrals can have: referralSideEntryKeys) are deleted, pending or
 * acknowledged: their player and commands are the voter's identity. The other player's entries stay.
 */
export function eraseReferralRewardEntriesSql(q: { serverId: string; keys: readonly string[] }): Prisma.Sql {
  // Bounded: at most keys.length probes of the (server_id, entry_key) unique index.
  return Prisma.sql`DELETE FROM reward_queue_entries WHERE server_id = ${q.serverId}::uuid AND entry_key = ANY(${[...q.keys]}::text[]) AND heart_id IS NULL`;
}

/**
 * Queues many players' entries in ONE statement (a network goal's page of payees: services/rewards/pay-reached-goals.ts),
 * each on its own server, not tied to a heart; an entry whose key its server's queue already holds is skipped (a page
 * paid twice queues nothing twice). Returns how many were queued now.
 */
export async function queuePlayersRewardEntries(
  tx: SqlTx,
  items: ReadonlyArray<{ serverId: string; player: RewardPlayer; entries: readonly RewardEntry[] }>,
): Promise<number> {
  const rows = items.flatMap((item) =>
    item.entries.map((e) => ({
      server_id: item.serverId,
      key: e.key,
      reason: e.reason,
      username: item.player.username,
      steam_id: item.player.steamId,
      discord_id: item.player.discordId,
      minecraft_uuid: item.player.minecraftUuid,
      account_id: item.player.accountId,
      commands: e.commands,
      online_only: e.onlineOnly,
    })),
  );
  if (rows.length === 0) return 0;
  // Bounded: one row inserted per entry (a page of payees times the goal's few rewards), each one unique-index probe.
  const inserted = await tx.query<{ id: string }>(Prisma.sql`
    INSERT INTO reward_queue_entries (server_id, entry_key, reason, heart_id, username, username_lower, steam_id, discord_id, minecraft_uuid, account_id,
                                      commands, online_only, rules_version)
    SELECT e.server_id, e.key, e.reason, NULL, e.username, lower(e.username), e.steam_id, e.discord_id, e.minecraft_uuid, e.account_id,
           ARRAY(SELECT jsonb_array_elements_text(e.commands)), e.online_only, 0
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
         AS e(server_id uuid, key text, reason text, username text, steam_id text, discord_id text, minecraft_uuid text, account_id text,
              commands jsonb, online_only boolean)
    ON CONFLICT (server_id, entry_key) DO NOTHING
    RETURNING id`);
  return inserted.length;
}
