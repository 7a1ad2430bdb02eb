import { Prisma } from "../../gen/prisma/client.js";
import { ageKeyDeleteRule, type RetentionRule } from "../shared/adapters/retention-rule.js";
import type { SqlTx } from "../shared/adapters/sql/executor.js";
import type { GoalPayees, NetworkGoalDefinition } from "./domain/network-goal.js";
import type { Reward } from "./domain/reward-rules.js";
import type { RewardPlayer } from "./reward-queue-store.js";

/**
 * THE writer of network_goals, network_goal_servers, network_goal_hearts, network_goal_voters and network_goal_rounds
 * (issue 31, network goals; test/unit/table-owners.test.ts): the goals, the hearts each counted (once), the voters of
 * each round, and the rounds reached. The delivery consumer's reward step counts here (count-goal-votes.ts), the goal
 * payer pays here (pay-reached-goals.ts), the RPCs define goals here (network-goal-routes.ts).
 */

/** A stored goal with its counter. */
export interface StoredGoal extends NetworkGoalDefinition {
  id: string;
  ownerId: string | null;
  round: number;
  progress: number;
  countsFrom: Date;
  createdAt: Date;
  /** When the owner deleted it; null while it counts. A deleted goal counts nothing, and its reached rounds are still paid. */
  deletedAt: Date | null;
}

interface GoalRow {
  id: string;
  owner_id: string | null;
  name: string;
  target: number;
  payees: GoalPayees;
  rewards: Reward[];
  round: number;
  progress: number;
  counts_from: Date;
  created_at: Date;
  deleted_at: Date | null;
  server_ids: string[] | null;
}

const toGoal = (r: GoalRow): StoredGoal => ({
  id: r.id,
  ownerId: r.owner_id,
  name: r.name,
  target: r.target,
  payees: r.payees,
  rewards: r.rewards,
  round: r.round,
  progress: r.progress,
  countsFrom: r.counts_from,
  createdAt: r.created_at,
  deletedAt: r.deleted_at,
  serverIds: r.server_ids ?? [],
});

/** A goal's columns and its servers (at most MAX_GOAL_SERVERS entries of network_goal_servers_goal_id_idx). */
const GOAL_COLUMNS = Prisma.sql`g.id, g.owner_id, g.name, g.target, g.payees, g.rewards, g.round, g.progress, g.counts_from, g.created_at, g.deleted_at,
  ARRAY(SELECT s.server_id::text FROM network_goal_servers s WHERE s.goal_id = g.id ORDER BY s.server_id) AS server_ids`;

/** Saves a new goal counting from `at`; returns its id. */
export async function insertNetworkGoal(tx: SqlTx, q: { goal: NetworkGoalDefinition; ownerId: string | null; by: string; at: Date }): Promise<string> {
  // Bounded: one row, and one row per chosen server (at most MAX_GOAL_SERVERS).
  const [row] = await tx.query<{ id: string }>(Prisma.sql`
    WITH goal AS (
      INSERT INTO network_goals (id, owner_id, name, target, payees, rewards, counts_from, created_by, created_at, updated_at)
      VALUES (gen_random_uuid(), ${q.ownerId}, ${q.goal.name}, ${q.goal.target}::int, ${q.goal.payees}, ${JSON.stringify(q.goal.rewards)}::jsonb,
              ${q.at}::timestamptz, ${q.by}, ${q.at}::timestamptz, ${q.at}::timestamptz)
      RETURNING id
    ), servers AS (
      INSERT INTO network_goal_servers (server_id, goal_id) SELECT s::uuid, goal.id FROM goal, unnest(${q.goal.serverIds}::text[]) AS s
    )
    SELECT id FROM goal`);
  return (row as { id: string }).id;
}

/** Replaces goal `id`'s definition (its round and progress carry on); false when there is no such goal (or it is deleted). */
export async function replaceNetworkGoal(tx: SqlTx, q: { id: string; goal: NetworkGoalDefinition; ownerId: string | null; at: Date }): Promise<boolean> {
  // Bounded: the goal's row by primary key (locked, so a count in progress finishes first), then its servers (at most
  // MAX_GOAL_SERVERS old and new rows by goal_id's index).
  const [row] = await tx.query<{ id: string }>(Prisma.sql`
    UPDATE network_goals SET owner_id = ${q.ownerId}, name = ${q.goal.name}, target = ${q.goal.target}::int, payees = ${q.goal.payees},
      rewards = ${JSON.stringify(q.goal.rewards)}::jsonb, updated_at = ${q.at}::timestamptz
    WHERE id = ${q.id}::uuid AND deleted_at IS NULL RETURNING id`);
  if (row === undefined) return false;
  await tx.execute(Prisma.sql`
    WITH gone AS (DELETE FROM network_goal_servers WHERE goal_id = ${q.id}::uuid AND NOT (server_id::text = ANY(${q.goal.serverIds}::text[])))
    INSERT INTO network_goal_servers (server_id, goal_id) SELECT s::uuid, ${q.id}::uuid FROM unnest(${q.goal.serverIds}::text[]) AS s
    ON CONFLICT DO NOTHING`);
  return true;
}

/** A goal with its rounds reached and the last reach, as Get and List answer it. */
export type ReadGoal = StoredGoal & { reached: number; lastReachedAt: Date | null };

/** A goal's columns, its servers and its newest reached round (the rounds' key, last entry), from `g`. */
const READ_GOAL_SQL = Prisma.sql`SELECT ${GOAL_COLUMNS}, r.round AS last_round, r.reached_at AS last_reached_at
    FROM network_goals g
    LEFT JOIN LATERAL (SELECT round, reached_at FROM network_goal_rounds WHERE goal_id = g.id ORDER BY round DESC LIMIT 1) r ON TRUE`;

type ReadGoalRow = GoalRow & { last_round: number | null; last_reached_at: Date | null };
const toReadGoal = (row: ReadGoalRow): ReadGoal => ({ ...toGoal(row), reached: row.last_round ?? 0, lastReachedAt: row.last_reached_at });

/** Goal `id` with its servers, its rounds reached and the last reach, or null; a deleted goal too (its payer needs it). */
export async function readNetworkGoal(tx: SqlTx, id: string): Promise<ReadGoal | null> {
  // Bounded: one goal by primary key, its servers (MAX_GOAL_SERVERS), and its newest reached round.
  const [row] = await tx.query<ReadGoalRow>(Prisma.sql`${READ_GOAL_SQL} WHERE g.id = ${id}::uuid`);
  return row === undefined ? null : toReadGoal(row);
}

/**
 * A page of an owner's live goals (null: the goals of servers no owner has), oldest first by (created_at, id), after
 * `after`; deleted goals are not listed.
 */
export async function listNetworkGoals(tx: SqlTx, q: { ownerId: string | null; after: { createdAt: Date; id: string }; limit: number }): Promise<ReadGoal[]> {
  const owner = q.ownerId === null ? Prisma.sql`g.owner_id IS NULL` : Prisma.sql`g.owner_id = ${q.ownerId}`;
  // Bounded: at most `limit` entries of network_goals_owner_live_idx (owner_id, created_at, id) WHERE deleted_at IS NULL,
  // whatever the owner deleted, and per goal its servers (MAX_GOAL_SERVERS) and its newest reached round.
  const rows = await tx.query<ReadGoalRow>(Prisma.sql`${READ_GOAL_SQL}
    WHERE ${owner} AND g.deleted_at IS NULL AND (g.created_at, g.id) > (${q.after.createdAt}::timestamptz, ${q.after.id}::uuid)
    ORDER BY g.created_at, g.id LIMIT ${q.limit}::int`);
  return rows.map(toReadGoal);
}

/**
 * Deletes goal `id` at `at`: it is marked deleted (its row is locked for this one statement, so a count in progress
 * finishes before and none counts after: findGoalsOfServers and lockNetworkGoals skip it); the rounds it reached stay to
 * be paid. Returns the round it was counting (whose voters the caller removes after this commits:
 * dropCountingRoundVoters) and its rounds reached but not paid; null when there is no such live goal.
 */
export async function deleteNetworkGoal(tx: SqlTx, q: { id: string; at: Date }): Promise<{ round: number; unpaidRounds: number } | null> {
  // Bounded: one goal by primary key.
  const [goal] = await tx.query<{ round: number }>(Prisma.sql`
    UPDATE network_goals SET deleted_at = ${q.at}::timestamptz, updated_at = ${q.at}::timestamptz
    WHERE id = ${q.id}::uuid AND deleted_at IS NULL RETURNING round`);
  if (goal === undefined) return null;
  // Bounded: the goal's rounds by the rounds' primary key range (one small row per round it ever reached).
  const [unpaid] = await tx.query<{ n: number }>(Prisma.sql`
    SELECT count(*)::int AS n FROM network_goal_rounds WHERE goal_id = ${q.id}::uuid AND paid_at IS NULL`);
  return { round: goal.round, unpaidRounds: unpaid?.n ?? 0 };
}

/**
 * Removes the voters of a deleted goal's round not reached (`round`, as deleteNetworkGoal returned it), `pageVoters`
 * per statement, each statement its own transaction: the goal is deleted, so no count adds to the round any more, and
 * no lock is held while a large round (up to its target's voters) goes. Returns how many were removed.
 */
export async function dropCountingRoundVoters(db: SqlTx, q: { goalId: string; round: number; pageVoters: number }): Promise<number> {
  let removed = 0;
  let taken: number;
  do {
    // Each page bounded as takeGoalVoters says; the round holds at most its target's voters (MAX_GOAL_TARGET).
    taken = (await takeGoalVoters(db, { goalId: q.goalId, round: q.round, limit: q.pageVoters })).length;
    removed += taken;
  } while (taken === q.pageVoters);
  return removed;
}

/**
 * The live goals that count any of `serverIds`: the reward step's one probe per batch. A batch of servers without a goal
 * costs this statement and nothing else; a deleted goal's servers are not returned.
 */
export async function findGoalsOfServers(tx: SqlTx, serverIds: readonly string[]): Promise<Array<{ goalId: string; serverId: string }>> {
  // Bounded: one probe of network_goal_servers' primary key (server_id first) per server of the batch, and the goals
  // of those servers (a few each), each goal's row by primary key.
  const rows = await tx.query<{ goal_id: string; server_id: string }>(Prisma.sql`
    SELECT s.goal_id, s.server_id FROM network_goal_servers s JOIN network_goals g ON g.id = s.goal_id AND g.deleted_at IS NULL
    WHERE s.server_id = ANY(${[...serverIds]}::uuid[])`);
  return rows.map((r) => ({ goalId: r.goal_id, serverId: r.server_id }));
}

/**
 * The live goals `ids`, locked for the transaction (in id order, so two consumers lock alike): what orders their
 * counting. A goal deleted meanwhile is not returned (its `deleted_at` is rechecked once its lock is held).
 */
export async function lockNetworkGoals(tx: SqlTx, ids: readonly string[]): Promise<StoredGoal[]> {
  // Bounded: ids.length goals by primary key, and each one's servers (MAX_GOAL_SERVERS).
  const rows = await tx.query<GoalRow>(Prisma.sql`
    SELECT ${GOAL_COLUMNS} FROM network_goals g WHERE g.id = ANY(${[...ids]}::uuid[]) AND g.deleted_at IS NULL ORDER BY g.id FOR UPDATE OF g`);
  return rows.map(toGoal);
}

/**
 * Records that goal g counted heart h, for each pair of `hearts` not recorded before; returns the pairs recorded now
 * (a heart counted already, by a redelivery or another consumer, is not returned: it counts once).
 */
export async function recordGoalHearts(
  tx: SqlTx,
  hearts: ReadonlyArray<{ goalId: string; heartId: string; countedAt: Date }>,
): Promise<Array<{ goalId: string; heartId: string }>> {
  if (hearts.length === 0) return [];
  // Bounded: one primary-key probe and insert per pair (the batch's hearts times their goals).
  const rows = await tx.query<{ goal_id: string; heart_id: string }>(Prisma.sql`
    INSERT INTO network_goal_hearts (goal_id, heart_id, counted_at)
    SELECT h.goal_id, h.heart_id, h.counted_at
    FROM jsonb_to_recordset(${JSON.stringify(hearts.map((h) => ({ goal_id: h.goalId, heart_id: h.heartId, counted_at: h.countedAt.toISOString() })))}::jsonb)
         AS h(goal_id uuid, heart_id uuid, counted_at timestamptz)
    ON CONFLICT (goal_id, heart_id) DO NOTHING
    RETURNING goal_id, heart_id`);
  return rows.map((r) => ({ goalId: r.goal_id, heartId: r.heart_id }));
}

/** One voter of a goal's round, as their latest vote in it named them. */
export interface GoalVoter {
  goalId: string;
  round: number;
  voterIdentity: string;
  serverId: string;
  player: RewardPlayer;
  lastCountedAt: Date;
}

/** Adds each of `voters` to their round (one row per goal, round and voter; the latest vote's player and server win). */
export async function recordGoalVoters(tx: SqlTx, voters: readonly GoalVoter[]): Promise<void> {
  if (voters.length === 0) return;
  const rows = voters.map((v) => ({
    goal_id: v.goalId,
    round: v.round,
    voter_identity: v.voterIdentity,
    server_id: v.serverId,
    username: v.player.username,
    steam_id: v.player.steamId,
    discord_id: v.player.discordId,
    minecraft_uuid: v.player.minecraftUuid,
    account_id: v.player.accountId,
    last_counted_at: v.lastCountedAt.toISOString(),
  }));
  // Bounded: one primary-key upsert per row (the caller gives each goal, round and voter once).
  await tx.execute(Prisma.sql`
    INSERT INTO network_goal_voters (goal_id, round, voter_identity, server_id, username, steam_id, discord_id, minecraft_uuid, account_id, last_counted_at)
    SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS v(goal_id uuid, round int, voter_identity text, server_id uuid, username text,
         steam_id text, discord_id text, minecraft_uuid text, account_id text, last_counted_at timestamptz)
    ON CONFLICT (goal_id, round, voter_identity) DO UPDATE SET
      server_id = excluded.server_id, username = excluded.username, steam_id = excluded.steam_id, discord_id = excluded.discord_id,
      minecraft_uuid = excluded.minecraft_uuid, account_id = excluded.account_id, last_counted_at = excluded.last_counted_at
    WHERE network_goal_voters.last_counted_at <= excluded.last_counted_at`);
}

/** Writes the goals' counters, and records each round reached (once: the rounds' primary key). */
export async function writeGoalCounters(
  tx: SqlTx,
  q: { counters: ReadonlyArray<{ goalId: string; round: number; progress: number }>; reached: ReadonlyArray<{ goalId: string; round: number; at: Date }> },
): Promise<void> {
  if (q.counters.length === 0) return;
  // Bounded: one goal by primary key per counter, one primary-key insert per round reached.
  await tx.execute(Prisma.sql`
    WITH c AS (SELECT * FROM jsonb_to_recordset(${JSON.stringify(q.counters.map((c) => ({ goal_id: c.goalId, round: c.round, progress: c.progress })))}::jsonb)
               AS c(goal_id uuid, round int, progress int)),
    reached AS (
      INSERT INTO network_goal_rounds (goal_id, round, reached_at)
      SELECT r.goal_id, r.round, r.at
      FROM jsonb_to_recordset(${JSON.stringify(q.reached.map((r) => ({ goal_id: r.goalId, round: r.round, at: r.at.toISOString() })))}::jsonb)
           AS r(goal_id uuid, round int, at timestamptz)
      ON CONFLICT (goal_id, round) DO NOTHING
    )
    UPDATE network_goals g SET round = c.round, progress = c.progress FROM c WHERE g.id = c.goal_id`);
}

/** A reached round not paid yet: the goal payer's unit of work. */
export interface UnpaidRound {
  goalId: string;
  round: number;
}

/** Claims the oldest reached round not paid yet, locked for the transaction; rounds another payer holds are skipped. */
export async function claimUnpaidRound(tx: SqlTx): Promise<UnpaidRound | null> {
  // Bounded: one entry of network_goal_rounds_unpaid_idx (reached_at) WHERE paid_at IS NULL, and its row; paid rounds
  // are not in the index, whatever the history.
  const [row] = await tx.query<{ goal_id: string; round: number }>(Prisma.sql`
    SELECT goal_id, round FROM network_goal_rounds WHERE paid_at IS NULL ORDER BY reached_at, goal_id, round LIMIT 1 FOR UPDATE SKIP LOCKED`);
  return row === undefined ? null : { goalId: row.goal_id, round: row.round };
}

/**
 * Takes (reads and removes) up to `limit` voters of the round, in identity order: the payer queues their entries in
 * the same transaction, so a voter is paid once (a crash rolls both back; a second payer waits for the round's lock).
 */
export async function takeGoalVoters(tx: SqlTx, q: { goalId: string; round: number; limit: number }): Promise<GoalVoter[]> {
  // Bounded: at most `limit` entries of network_goal_voters' primary key (goal_id, round, voter_identity), those rows by the
  // same key, and their deletion (three times the page, whatever the round holds).
  const rows = await tx.query<{
    voter_identity: string;
    server_id: string;
    username: string;
    steam_id: string | null;
    discord_id: string | null;
    minecraft_uuid: string | null;
    account_id: string | null;
    last_counted_at: Date;
  }>(Prisma.sql`
    DELETE FROM network_goal_voters WHERE (goal_id, round, voter_identity) IN (
      SELECT goal_id, round, voter_identity FROM network_goal_voters
      WHERE goal_id = ${q.goalId}::uuid AND round = ${q.round}::int ORDER BY voter_identity LIMIT ${q.limit}::int)
    RETURNING voter_identity, server_id, username, steam_id, discord_id, minecraft_uuid, account_id, last_counted_at`);
  return rows.map((r) => ({
    goalId: q.goalId,
    round: q.round,
    voterIdentity: r.voter_identity,
    serverId: r.server_id,
    player: { username: r.username, steamId: r.steam_id, discordId: r.discord_id, minecraftUuid: r.minecraft_uuid, accountId: r.account_id },
    lastCountedAt: r.last_counted_at,
  }));
}

/** Marks a round paid at `at` (every payee's entries are queued). */
export async function markRoundPaid(tx: SqlTx, q: UnpaidRound & { at: Date }): Promise<void> {
  // Bounded: one row by primary key.
  await tx.execute(Prisma.sql`
    UPDATE network_goal_rounds SET paid_at = ${q.at}::timestamptz WHERE goal_id = ${q.goalId}::uuid AND round = ${q.round}::int AND paid_at IS NULL`);
}

/**
 * A voter's erasure (services/voter-data/erase-voter-data.ts): the voter's rows in the rounds of the goals counting
 * `serverId` are deleted (their identity, name and ids), so no goal pays them after; the goals' counts stay (a number).
 */
export function eraseGoalVotersSql(q: { serverId: string; identities: readonly string[] }): Prisma.Sql {
  // Bounded: the server's goals (its network_goal_servers key range, a few), and per goal and identity a range of
  // network_goal_voters_goal_id_voter_identity_idx (a round or two each: rows leave when their round is paid).
  return Prisma.sql`DELETE FROM network_goal_voters v USING network_goal_servers s
    WHERE s.server_id = ${q.serverId}::uuid AND v.goal_id = s.goal_id AND v.voter_identity = ANY(${[...q.identities]}::text[])`;
}

/**
 * Retention of the hearts goals counted (services/retention): a row older than `keepSeconds` (RETENTION_REWARD_QUEUE_ACKED_DAYS,
 * longer than the Kafka topics keep a vote) is removed; by then no redelivery of its heart can come.
 */
export function networkGoalHeartsRetention(keepSeconds: number): RetentionRule {
  // Reads at most `limit` entries of network_goal_hearts_age_key_idx and their rows; deletes those.
  return ageKeyDeleteRule({
    name: "network_goal_hearts",
    table: "network_goal_hearts",
    key: Prisma.raw("goal_id, heart_id"),
    column: Prisma.raw("counted_at"),
    keepSeconds,
  });
}
