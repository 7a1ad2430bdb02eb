import { Prisma } from "../../gen/prisma/client.js";
import { ageKeyDeleteRule, type RetentionRule } from "../shared/adapters/retention-rule.js";
import { rankByCountSql } from "../shared/adapters/sql/rank-by-count.js";
import type { SqlTx } from "../shared/adapters/sql/executor.js";
import type { PeriodKind, PeriodStanding, RewardPeriod } from "./domain/period-awards.js";
import type { RewardPlayer } from "./reward-queue-store.js";

/**
 * THE writer of voter_period_tallies and reward_periods (issue 31, period awards; test/unit/table-owners.test.ts): the
 * counted votes per voter, server and period that a period's standings are read from, and which periods of a server
 * are open or closed. The step that queues a counted vote's rewards counts the vote here; the period closer
 * (close-periods.ts) claims due periods, reads their standings and closes them.
 */

/** One counted vote to count in its periods, for countPeriodVotes. */
export interface PeriodVote {
  serverId: string;
  voterIdentity: string;
  countedAt: Date;
  periods: readonly RewardPeriod[];
}

/**
 * Counts each counted vote of `votes` in each of its periods (its week and month), and opens each period for its
 * server (a reward_periods row, once): two statements whatever the number of votes (several votes of one voter in one
 * period add up before the upsert, which may touch a row once). The caller skips replays (the voter's reward state),
 * so a vote is counted once.
 */
export async function countPeriodVotes(tx: SqlTx, votes: readonly PeriodVote[]): Promise<void> {
  const rows = votes.flatMap((v) =>
    v.periods.map((p) => ({
      server_id: v.serverId,
      voter_identity: v.voterIdentity,
      counted_at: v.countedAt.toISOString(),
      kind: p.kind,
      period: p.period,
      ends_at: p.end.toISOString(),
    })),
  );
  if (rows.length === 0) return;
  // Bounded: per vote and period (two) one primary-key upsert of a tally and one primary-key insert of the period's row.
  await tx.execute(Prisma.sql`
    WITH v AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
        AS v(server_id uuid, voter_identity text, counted_at timestamptz, kind text, period text, ends_at timestamptz)),
    tallied AS (
      INSERT INTO voter_period_tallies (server_id, period, voter_identity, votes, last_counted_at)
      SELECT server_id, period, voter_identity, count(*)::int, max(counted_at) FROM v GROUP BY server_id, period, voter_identity
      ON CONFLICT (server_id, voter_identity, period) DO UPDATE SET
        votes = voter_period_tallies.votes + excluded.votes, last_counted_at = GREATEST(voter_period_tallies.last_counted_at, excluded.last_counted_at))
    INSERT INTO reward_periods (server_id, kind, period, ends_at)
    SELECT DISTINCT server_id, kind, period, ends_at FROM v
    ON CONFLICT (server_id, kind, period) DO NOTHING`);
}

/** Counts one counted vote in each of its periods (countPeriodVotes for one vote). */
export async function countPeriodVote(tx: SqlTx, q: PeriodVote): Promise<void> {
  await countPeriodVotes(tx, [q]);
}

/** An open period of a server that has ended: the closer's unit of work. */
export interface DuePeriod {
  serverId: string;
  kind: PeriodKind;
  period: string;
}

/**
 * Claims up to `limit` open periods that ended at or before `due`, oldest end first, locked for the caller's
 * transaction; periods another closer holds are skipped (it closes them), so two closers never wait on each other nor
 * close one period twice.
 */
export async function claimDuePeriods(tx: SqlTx, q: { due: Date; limit: number }): Promise<DuePeriod[]> {
  // Bounded: at most `limit` entries of reward_periods_open_idx (ends_at) WHERE closed_at IS NULL, and their rows;
  // closed periods are not in the index, whatever the history.
  const rows = await tx.query<{ server_id: string; kind: PeriodKind; period: string }>(Prisma.sql`
    SELECT server_id, kind, period FROM reward_periods
    WHERE closed_at IS NULL AND ends_at <= ${q.due}::timestamptz
    ORDER BY ends_at, server_id, kind LIMIT ${q.limit}::int
    FOR UPDATE SKIP LOCKED`);
  return rows.map((r) => ({ serverId: r.server_id, kind: r.kind, period: r.period }));
}

/**
 * Marks the period closed at `at`, only if it is still open: true when this call closed it. The caller writes the
 * period's awards and event in the same transaction, and writes nothing when this answers false.
 */
export async function closeRewardPeriod(tx: SqlTx, p: DuePeriod, at: Date): Promise<boolean> {
  // Bounded: one row by primary key.
  const changed = await tx.execute(Prisma.sql`
    UPDATE reward_periods SET closed_at = ${at}::timestamptz
    WHERE server_id = ${p.serverId}::uuid AND kind = ${p.kind} AND period = ${p.period} AND closed_at IS NULL`);
  return changed === 1;
}

/** One standing with the player its award is queued for (as their latest counted vote of the period named them). */
export interface PeriodStandingRow extends Omit<PeriodStanding, "ids"> {
  player: RewardPlayer;
  /** That vote: an award entry carries it, so the voter's erasure removes the award with the vote's other entries. */
  heartId: string | null;
}

/**
 * The server's standings in `period`, top `top`: voters by counted votes in the period, most first, placed by the
 * ranking's rule (rankByCountSql: equal counts share a place, 1, 2, 2, 4); among equal counts, who reached the count
 * first (the earlier last counted vote) comes first, then by voter identity. Each with the name and ids of their latest
 * counted vote of the period (a voter erased since: the tombstone the erasure left).
 */
export async function readPeriodStandings(tx: SqlTx, q: { serverId: string; period: RewardPeriod; top: number }): Promise<PeriodStandingRow[]> {
  // Bounded: `top` entries of voter_period_tallies_standings_idx (server_id, period, votes DESC, last_counted_at,
  // voter_identity), and per voter one entry of the counted hearts' (server_id, voter_identity, created_at) index.
  // RANK() over the top rows equals the rank among all: every voter with more votes sorts before them.
  const rows = await tx.query<{
    voter_identity: string;
    votes: number;
    place: bigint;
    position: bigint;
    heart_id: string | null;
    username: string | null;
    steam_id: string | null;
    discord_id: string | null;
    minecraft_uuid: string | null;
    account_id: string | null;
  }>(Prisma.sql`
    SELECT t.voter_identity, t.votes, t.place, t.position, h.id AS heart_id, h.username, h.steam_id, h.discord_id, h.minecraft_uuid, h.account_id
    FROM (
      SELECT voter_identity, votes, ${rankByCountSql(Prisma.sql`votes`)} AS place,
             row_number() OVER (ORDER BY votes DESC, last_counted_at, voter_identity) AS position
      FROM (SELECT voter_identity, votes, last_counted_at FROM voter_period_tallies
            WHERE server_id = ${q.serverId}::uuid AND period = ${q.period.period}
            ORDER BY votes DESC, last_counted_at, voter_identity LIMIT ${q.top}::int) top
    ) t
    LEFT JOIN LATERAL (
      SELECT id, username, steam_id, discord_id, minecraft_uuid, account_id FROM hearts
      WHERE server_id = ${q.serverId}::uuid AND voter_identity = t.voter_identity AND counted
        AND created_at >= ${q.period.start}::timestamptz AND created_at < ${q.period.end}::timestamptz
      ORDER BY created_at DESC LIMIT 1) h ON TRUE
    ORDER BY t.position`);
  return rows.map((r) => ({
    place: Number(r.place),
    position: Number(r.position),
    voterIdentity: r.voter_identity,
    votes: r.votes,
    player: { username: r.username ?? "", steamId: r.steam_id, discordId: r.discord_id, minecraftUuid: r.minecraft_uuid, accountId: r.account_id },
    heartId: r.heart_id,
  }));
}

/** A voter's erasure: the period tallies of the voter's identities `identities` on the server are deleted. */
export function eraseVoterPeriodTalliesSql(q: { serverId: string; identities: readonly string[] }): Prisma.Sql {
  // Bounded: the identities' rows, each a range of the primary key (server_id, voter_identity, period): one row per
  // week and month the voter counted in within the retention horizon.
  return Prisma.sql`DELETE FROM voter_period_tallies WHERE server_id = ${q.serverId}::uuid AND voter_identity = ANY(${[...q.identities]}::text[])`;
}

/**
 * Retention of the period tallies (services/retention): a row whose voter last counted in it more than `keepSeconds`
 * (RETENTION_HEART_DAYS) ago is removed; its period closed long before and is never read again.
 */
export function voterPeriodTalliesRetention(keepSeconds: number): RetentionRule {
  return ageKeyDeleteRule({
    name: "voter_period_tallies",
    table: "voter_period_tallies",
    key: Prisma.raw("server_id, voter_identity, period"),
    column: Prisma.raw("last_counted_at"),
    keepSeconds,
  });
}
