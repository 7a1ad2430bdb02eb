import { Prisma } from "../../gen/prisma/client.js";
import { executeSql, runSql } from "../shared/adapters/sql/executor.js";

/**
 * THE owner of voter_role_settings' and voter_role_grants' writes (test/unit/table-owners.test.ts). A server's settings
 * row holds its bot token sealed with SECRETS_KEY, its guild, role and duration, and the last Discord failure. A grant
 * row is a (server, Discord user) whose role is to be added (due at once after a counted vote) or removed (due when it
 * lapses); it is deleted once the role is removed, so the table holds live roles only.
 */

/** A server's settings as the store reads them (the token still sealed). */
export interface VoterRoleSettingsRow {
  server_id: string;
  bot_token_sealed: string;
  guild_id: string;
  role_id: string;
  duration_seconds: number;
  last_error: string | null;
  last_error_at: Date | null;
  last_ok_at: Date | null;
}

/**
 * Saves a server's settings. `botTokenSealed` null keeps the stored token (nothing is written, and undefined returned,
 * when none is stored). A change clears the last failure (it was about the old settings).
 */
export async function saveVoterRoleSettings(
  db: object,
  q: { serverId: string; botTokenSealed: string | null; guildId: string; roleId: string; durationSeconds: number; now: Date },
): Promise<VoterRoleSettingsRow | undefined> {
  if (q.botTokenSealed === null) {
    // Bounded: one row by primary key.
    const [row] = await runSql<VoterRoleSettingsRow>(
      db,
      Prisma.sql`UPDATE voter_role_settings SET guild_id = ${q.guildId}, role_id = ${q.roleId}, duration_seconds = ${q.durationSeconds},
          last_error = NULL, last_error_at = NULL, updated_at = ${q.now}
        WHERE server_id = ${q.serverId}::uuid RETURNING *`,
    );
    return row;
  }
  // Bounded: one row by primary key.
  const [row] = await runSql<VoterRoleSettingsRow>(
    db,
    Prisma.sql`INSERT INTO voter_role_settings (server_id, bot_token_sealed, guild_id, role_id, duration_seconds, created_at, updated_at)
      VALUES (${q.serverId}::uuid, ${q.botTokenSealed}, ${q.guildId}, ${q.roleId}, ${q.durationSeconds}, ${q.now}, ${q.now})
      ON CONFLICT (server_id) DO UPDATE SET bot_token_sealed = EXCLUDED.bot_token_sealed, guild_id = EXCLUDED.guild_id,
        role_id = EXCLUDED.role_id, duration_seconds = EXCLUDED.duration_seconds, last_error = NULL, last_error_at = NULL,
        updated_at = EXCLUDED.updated_at
      RETURNING *`,
  );
  return row;
}

/** A server's settings, if it has voter roles. */
export async function readVoterRoleSettings(db: object, serverId: string): Promise<VoterRoleSettingsRow | undefined> {
  // Bounded: one row by primary key.
  const [row] = await runSql<VoterRoleSettingsRow>(db, Prisma.sql`SELECT * FROM voter_role_settings WHERE server_id = ${serverId}::uuid`);
  return row;
}

/** Turns a server's voter roles off: its settings go; its grants are removed by the role job (they find no settings). */
export async function deleteVoterRoleSettings(db: object, serverId: string, now: Date): Promise<void> {
  // Bounded: one row by primary key; the server's grants by the (server_id, voter_identity) index's prefix (its live roles).
  await executeSql(
    db,
    Prisma.sql`WITH gone AS (DELETE FROM voter_role_settings WHERE server_id = ${serverId}::uuid RETURNING server_id)
      UPDATE voter_role_grants g SET expires_at = ${now}, due_at = ${now}, updated_at = ${now} FROM gone WHERE g.server_id = gone.server_id`,
  );
}

/** Records the outcome of a Discord call for a server: a failure (its text, never a token) and when, or a success. */
export async function recordVoterRoleOutcome(db: object, q: { serverId: string; error: string | null; now: Date }): Promise<void> {
  // Bounded: one row by primary key.
  await executeSql(
    db,
    q.error === null
      ? Prisma.sql`UPDATE voter_role_settings SET last_ok_at = ${q.now}, last_error = NULL, last_error_at = NULL WHERE server_id = ${q.serverId}::uuid`
      : Prisma.sql`UPDATE voter_role_settings SET last_error = ${q.error}, last_error_at = ${q.now} WHERE server_id = ${q.serverId}::uuid`,
  );
}

/** A counted vote that carries a Discord user id. */
export interface VoterRoleVote {
  serverId: string;
  discordId: string;
  voterIdentity: string;
  countedAt: Date;
}

/**
 * Records a batch of counted votes with a Discord id (one statement): on a server with voter roles, the voter's grant
 * lasts until the vote + the duration (the latest vote's, if later) and is due at `now`, so the role job adds the role
 * (again: Discord's add is idempotent, and a role removed by hand comes back with the next vote). A vote whose role
 * would already have lapsed adds nothing. Returns the grants written.
 */
export async function recordVoterRoleVotes(db: object, votes: readonly VoterRoleVote[], now: Date): Promise<number> {
  if (votes.length === 0) return 0;
  const input = votes.map((v) => ({ server_id: v.serverId, discord_id: v.discordId, voter_identity: v.voterIdentity, counted_at: v.countedAt.toISOString() }));
  // Bounded: per vote its server's settings by primary key (a server without voter roles: nothing more), and one grant
  // by primary key. Rows go in (server, discord id) order, so two batches lock in the same order.
  return executeSql(
    db,
    Prisma.sql`INSERT INTO voter_role_grants (server_id, discord_id, voter_identity, expires_at, given, due_at, attempts, updated_at)
      SELECT DISTINCT ON (i.server_id, i.discord_id) i.server_id, i.discord_id, i.voter_identity,
             i.counted_at + make_interval(secs => s.duration_seconds), false, ${now}::timestamptz, 0, ${now}::timestamptz
      FROM (SELECT * FROM jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
              AS i(server_id uuid, discord_id text, voter_identity text, counted_at timestamptz)
            LIMIT ${input.length}::int) i
      JOIN voter_role_settings s ON s.server_id = i.server_id
      WHERE i.counted_at + make_interval(secs => s.duration_seconds) > ${now}::timestamptz
      ORDER BY i.server_id, i.discord_id, i.counted_at DESC
      ON CONFLICT (server_id, discord_id) DO UPDATE SET voter_identity = EXCLUDED.voter_identity,
        expires_at = greatest(voter_role_grants.expires_at, EXCLUDED.expires_at), due_at = EXCLUDED.due_at, attempts = 0,
        updated_at = EXCLUDED.updated_at`,
  );
}

/** A due grant as the role job claims it, with its server's settings (null: voter roles were turned off). */
export interface DueGrant {
  server_id: string;
  discord_id: string;
  expires_at: Date;
  given: boolean;
  attempts: number;
  bot_token_sealed: string | null;
  guild_id: string | null;
  role_id: string | null;
}

/**
 * Claims up to `limit` grants due at `now` (due_at <= now), oldest first, and leases them until `leaseUntil` so another
 * instance skips them meanwhile (SKIP LOCKED).
 */
export async function claimDueGrants(db: object, q: { now: Date; leaseUntil: Date; limit: number }): Promise<DueGrant[]> {
  // Bounded: at most `limit` rows by the due_at index, each joined to its server's settings by primary key.
  return runSql<DueGrant>(
    db,
    Prisma.sql`WITH due AS (
        SELECT server_id, discord_id FROM voter_role_grants WHERE due_at <= ${q.now}
        ORDER BY due_at LIMIT ${q.limit} FOR UPDATE SKIP LOCKED
      ), claimed AS (
        UPDATE voter_role_grants g SET due_at = ${q.leaseUntil} FROM due WHERE g.server_id = due.server_id AND g.discord_id = due.discord_id
        RETURNING g.server_id, g.discord_id, g.expires_at, g.given, g.attempts
      )
      SELECT c.*, s.bot_token_sealed, s.guild_id, s.role_id
      FROM claimed c LEFT JOIN voter_role_settings s ON s.server_id = c.server_id`,
  );
}

/**
 * After a claimed grant's step: the next look at `dueAt`, with `given` and `attempts` as they now are. `claimedDueAt` is
 * the due time the claim set (its lease end): a grant whose due time is another one now had a vote recorded meanwhile
 * (due again at once, attempts 0), which keeps that due time and its fresh attempts instead of this step's backoff.
 */
export async function rescheduleGrant(
  db: object,
  q: { serverId: string; discordId: string; dueAt: Date; given: boolean; attempts: number; now: Date; claimedDueAt: Date },
): Promise<void> {
  // Bounded: one row by primary key.
  await executeSql(
    db,
    Prisma.sql`UPDATE voter_role_grants
      SET due_at = CASE WHEN due_at <> ${q.claimedDueAt}::timestamptz THEN due_at ELSE ${q.dueAt}::timestamptz END,
          attempts = CASE WHEN due_at <> ${q.claimedDueAt}::timestamptz THEN 0 ELSE ${q.attempts}::int END,
          given = ${q.given}, updated_at = ${q.now}
      WHERE server_id = ${q.serverId}::uuid AND discord_id = ${q.discordId}`,
  );
}

/** Deletes a grant whose role was removed (or never given), unless a vote extended it past `now` meanwhile. */
export async function deleteLapsedGrant(db: object, q: { serverId: string; discordId: string; now: Date }): Promise<void> {
  // Bounded: one row by primary key.
  await executeSql(
    db,
    Prisma.sql`DELETE FROM voter_role_grants WHERE server_id = ${q.serverId}::uuid AND discord_id = ${q.discordId} AND expires_at <= ${q.now}`,
  );
}

/**
 * A voter's erasure (services/voter-data/erase-voter-data.ts): their grants on the server lapse now and carry the
 * tombstone, so the role job removes the role at once and then deletes the row with the Discord id.
 */
export function eraseVoterRoleGrantsSql(q: { serverId: string; identities: readonly string[]; tombstone: string; now: Date }): Prisma.Sql {
  // Bounded: the identities' grants by the (server_id, voter_identity) index (a voter has one or a few Discord ids).
  return Prisma.sql`UPDATE voter_role_grants SET voter_identity = ${q.tombstone}, expires_at = ${q.now}, due_at = ${q.now}, updated_at = ${q.now}
    WHERE server_id = ${q.serverId}::uuid AND voter_identity = ANY(${[...q.identities]}::text[])`;
}
