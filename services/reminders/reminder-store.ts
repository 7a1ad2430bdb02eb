import { Prisma } from "../../gen/prisma/client.js";
import { executeSql, runSql } from "../shared/adapters/sql/executor.js";
import { ageKeyDeleteRule, type RetentionRule } from "../shared/adapters/retention-rule.js";

/**
 * THE owner of vote_reminders' writes (test/unit/table-owners.test.ts): every INSERT, UPDATE and DELETE of the table
 * is here. States: pending (opted in, waiting for the confirm link) -> active (confirmed) -> unsubscribed or bounced
 * (ended: never mailed again). A Discord DM row (channel 'discord') has no address and starts active (the receipt
 * token proved its voter); a Discord 50007 ends it as bounced. A second opt-in of the same (server, voter) replaces the address and starts over at
 * pending. Only active rows have a next_send_at.
 */

/** A subscription as the use cases read it. */
export interface ReminderRow {
  id: string;
  server_id: string;
  voter_identity: string;
  email: string | null;
  state: "pending" | "active" | "unsubscribed" | "bounced";
  confirm_token_hash: Buffer | null;
  unsubscribe_nonce: Buffer;
}

/**
 * Opt-in: the (server, voter)'s one subscription becomes pending with this address, a new confirm hash and unsubscribe
 * nonce (earlier links stop working), whatever state it had, unless it changed after `notChangedSince` (then nothing
 * is written and undefined is returned: opt-ins are throttled per voter). Returns the row's id.
 */
export async function upsertPendingReminder(
  db: object,
  q: { id: string; serverId: string; voterIdentity: string; email: string; confirmHash: Buffer; nonce: Buffer; now: Date; notChangedSince: Date },
): Promise<string | undefined> {
  // Bounded: one row by the (server_id, voter_identity) unique index.
  const [row] = await runSql<{ id: string }>(
    db,
    Prisma.sql`INSERT INTO vote_reminders (id, server_id, voter_identity, email, state, confirm_token_hash, unsubscribe_nonce, created_at, updated_at)
      VALUES (${q.id}::uuid, ${q.serverId}::uuid, ${q.voterIdentity}, ${q.email}, 'pending', ${q.confirmHash}, ${q.nonce}, ${q.now}, ${q.now})
      ON CONFLICT (server_id, voter_identity) DO UPDATE SET email = EXCLUDED.email, state = 'pending', channel = 'email', discord_id = NULL, discord_channel_id = NULL,
        confirm_token_hash = EXCLUDED.confirm_token_hash, unsubscribe_nonce = EXCLUDED.unsubscribe_nonce,
        next_send_at = NULL, attempts = 0, ended_at = NULL, updated_at = EXCLUDED.updated_at
      WHERE vote_reminders.updated_at <= ${q.notChangedSince}
      RETURNING id`,
  );
  return row?.id;
}

/**
 * Discord DM opt-in: the (server, voter)'s one subscription becomes an active DM reminder to `discordId` (no address,
 * no confirm hash; a new unsubscribe nonce), looked at by the sender right away, unless it changed after
 * `notChangedSince` (then nothing is written and undefined is returned). Returns the row's id.
 */
export async function upsertDiscordReminder(
  db: object,
  q: { id: string; serverId: string; voterIdentity: string; discordId: string; nonce: Buffer; now: Date; notChangedSince: Date },
): Promise<string | undefined> {
  // Bounded: one row by the (server_id, voter_identity) unique index.
  const [row] = await runSql<{ id: string }>(
    db,
    Prisma.sql`INSERT INTO vote_reminders (id, server_id, voter_identity, email, channel, discord_id, state, unsubscribe_nonce, next_send_at, created_at, updated_at)
      VALUES (${q.id}::uuid, ${q.serverId}::uuid, ${q.voterIdentity}, NULL, 'discord', ${q.discordId}, 'active', ${q.nonce}, ${q.now}, ${q.now}, ${q.now})
      ON CONFLICT (server_id, voter_identity) DO UPDATE SET email = NULL, channel = 'discord', discord_id = EXCLUDED.discord_id, discord_channel_id = NULL, state = 'active',
        confirm_token_hash = NULL, unsubscribe_nonce = EXCLUDED.unsubscribe_nonce, next_send_at = EXCLUDED.next_send_at, attempts = 0,
        ended_at = NULL, updated_at = EXCLUDED.updated_at
      WHERE vote_reminders.updated_at <= ${q.notChangedSince}
      RETURNING id`,
  );
  return row?.id;
}

/** The id of the (server, voter)'s subscription, if there is one. */
export async function readReminderId(db: object, serverId: string, voterIdentity: string): Promise<string | undefined> {
  // Bounded: one row by the (server_id, voter_identity) unique index.
  const [row] = await runSql<{ id: string }>(
    db,
    Prisma.sql`SELECT id FROM vote_reminders WHERE server_id = ${serverId}::uuid AND voter_identity = ${voterIdentity}`,
  );
  return row?.id;
}

/** One subscription by id, with its server's display name. */
export async function readReminder(db: object, id: string): Promise<(ReminderRow & { server_name: string }) | undefined> {
  // Bounded: one row by primary key, and its server by primary key.
  const [row] = await runSql<ReminderRow & { server_name: string }>(
    db,
    Prisma.sql`SELECT r.id, r.server_id, r.voter_identity, r.email, r.state, r.confirm_token_hash, r.unsubscribe_nonce, s.name AS server_name
      FROM vote_reminders r JOIN servers s ON s.id = r.server_id WHERE r.id = ${id}::uuid`,
  );
  return row;
}

/** Confirm: pending -> active with this confirm hash (re-asserted), looked at by the sender right away. True when it changed. */
export async function activateReminder(db: object, q: { id: string; confirmHash: Buffer; now: Date }): Promise<boolean> {
  // Bounded: one row by primary key.
  const n = await executeSql(
    db,
    Prisma.sql`UPDATE vote_reminders SET state = 'active', confirm_token_hash = NULL, next_send_at = ${q.now}, attempts = 0, updated_at = ${q.now}
      WHERE id = ${q.id}::uuid AND state = 'pending' AND confirm_token_hash = ${q.confirmHash}`,
  );
  return n === 1;
}

/** Ends a subscription (unsubscribed or bounced) if it has not ended: never mailed again. */
export async function endReminder(db: object, q: { id: string; state: "unsubscribed" | "bounced"; now: Date }): Promise<void> {
  // Bounded: one row by primary key.
  await executeSql(
    db,
    Prisma.sql`UPDATE vote_reminders SET state = ${q.state}, next_send_at = NULL, confirm_token_hash = NULL, ended_at = ${q.now}, updated_at = ${q.now}
      WHERE id = ${q.id}::uuid AND state IN ('pending', 'active')`,
  );
}

/** A due subscription as the sender claims it, with its voter's last counted heart and its server's name. */
export interface DueReminder {
  id: string;
  server_id: string;
  /** 'email' (to `email`) or 'discord' (a DM to `discord_id`). */
  channel: "email" | "discord";
  email: string | null;
  discord_id: string | null;
  /** The bot's DM channel with discord_id, once learnt. */
  discord_channel_id: string | null;
  unsubscribe_nonce: Buffer;
  reminded_heart_at: Date | null;
  attempts: number;
  last_counted_at: Date | null;
  server_name: string;
}

/**
 * Claims up to `limit` active subscriptions due at `now` (next_send_at <= now), oldest first, and leases them until
 * `leaseUntil` so another sender skips them meanwhile (SKIP LOCKED: instances never wait on each other).
 */
export async function claimDueReminders(db: object, q: { now: Date; leaseUntil: Date; limit: number }): Promise<DueReminder[]> {
  // Bounded: at most `limit` rows by the next_send_at index (only active rows have one), each joined by primary key to
  // voter_states and servers.
  return runSql<DueReminder>(
    db,
    Prisma.sql`WITH due AS (
        SELECT id FROM vote_reminders WHERE next_send_at <= ${q.now} AND state = 'active'
        ORDER BY next_send_at LIMIT ${q.limit} FOR UPDATE SKIP LOCKED
      ), claimed AS (
        UPDATE vote_reminders r SET next_send_at = ${q.leaseUntil} FROM due WHERE r.id = due.id
        RETURNING r.id, r.server_id, r.voter_identity, r.channel, r.email, r.discord_id, r.discord_channel_id, r.unsubscribe_nonce, r.reminded_heart_at, r.attempts
      )
      SELECT c.id, c.server_id, c.channel, c.email, c.discord_id, c.discord_channel_id, c.unsubscribe_nonce, c.reminded_heart_at, c.attempts, v.last_counted_at, s.name AS server_name
      FROM claimed c JOIN servers s ON s.id = c.server_id
      LEFT JOIN voter_states v ON v.server_id = c.server_id AND v.voter_identity = c.voter_identity`,
  );
}

/**
 * Records what the sender did with a claimed row, if it is still active: the next look at `nextSendAt`; with
 * `remindedHeartAt` the heart is done (sent or given up) and the attempts start over; with `attempts` a failure counted.
 */
export async function recordReminderPass(db: object, q: { id: string; nextSendAt: Date; remindedHeartAt?: Date; attempts: number; now: Date }): Promise<void> {
  // Bounded: one row by primary key.
  await executeSql(
    db,
    Prisma.sql`UPDATE vote_reminders SET next_send_at = ${q.nextSendAt}, attempts = ${q.attempts}, updated_at = ${q.now},
        reminded_heart_at = COALESCE(${q.remindedHeartAt ?? null}::timestamptz, reminded_heart_at)
      WHERE id = ${q.id}::uuid AND state = 'active'`,
  );
}

/** Keeps (or with null forgets) the bot's DM channel of a Discord row, so Create DM is called once per subscription. */
export async function recordDmChannel(db: object, q: { id: string; channelId: string | null }): Promise<void> {
  // Bounded: one row by primary key.
  await executeSql(db, Prisma.sql`UPDATE vote_reminders SET discord_channel_id = ${q.channelId} WHERE id = ${q.id}::uuid AND channel = 'discord'`);
}

/** The erasure of a voter's subscriptions on one server (services/voter-data/erase-voter-data.ts). */
export function eraseVoteRemindersSql(q: { serverId: string; identities: readonly string[] }): Prisma.Sql {
  // Bounded: at most identities.length rows, by the (server_id, voter_identity) unique index.
  return Prisma.sql`DELETE FROM vote_reminders WHERE server_id = ${q.serverId}::uuid AND voter_identity = ANY(${[...q.identities]}::text[])`;
}

/**
 * Retention of ended subscriptions (services/retention): an unsubscribed or bounced row (with its address) is removed
 * `keepSeconds` (RETENTION_REMINDER_DAYS) after it ended; until then its unsubscribe link still answers. Active and
 * pending rows are never removed by age (a pending row is replaced by the next opt-in; erasure deletes any).
 */
export function endedReminderRetention(keepSeconds: number): RetentionRule {
  return ageKeyDeleteRule({
    name: "ended_vote_reminders",
    table: "vote_reminders",
    key: Prisma.raw("id"),
    column: Prisma.raw("ended_at"),
    due: Prisma.sql`ended_at IS NOT NULL`,
    keepSeconds,
  });
}
