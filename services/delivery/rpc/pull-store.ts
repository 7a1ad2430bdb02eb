import { Prisma } from "../../../gen/prisma/client.js";
import { decodePageCursor, encodePageCursor } from "../../shared/values/page-cursor.js";
import type { PrismaClient } from "../../shared/adapters/db.js";
import { runSql } from "../../shared/adapters/sql/executor.js";
import { payableSql } from "../../payouts/write-payouts.js";
import { DomainError } from "../../shared/rpc/errors.js";
import { betweenText } from "../../shared/values/contract.js";
import { MAX_PULL_PAGE } from "../../shared/values/wire.js";
import type { PlatformIds } from "../../shared/values/player-ids.js";
import type { EventPayload } from "../pipeline/delivery-types.js";

/**
 * The pull transport: counted hearts of a server whose pull API is on are stored
 * as `pull` deliveries (by the consumer, like every delivery) and wait, pending,
 * until the owner claims them by heart_id through the gateway's signed pull API; a
 * server opted in to referral events on pull (servers.pull_event_types) gets a pull
 * delivery per `referral.*` event too, listed and claimed (by event_id) on their own.
 * This module lists them (and holds the API's limits); claim-pull-hearts.ts claims them.
 */

/** Hearts per page when the caller gives no limit, and the most one page may hold. */
export const DEFAULT_PULL_PAGE = 100;
/** The most one page may hold and the most ids one claim may carry (services/shared/values/wire.ts is their home: the gateway checks them too). */
export { MAX_PULL_CLAIM, MAX_PULL_PAGE } from "../../shared/values/wire.js";

/** One heart waiting to be claimed. */
export interface PullHeartRow {
  heartId: string;
  username: string;
  period: string;
  /** When the heart counted, which is when it was cast. */
  countedAt: Date;
  streakDay: number | null;
  /** The voter's platform ids and account id (null: not given). */
  platformIds: PlatformIds;
  /** When the voter may count again; null when unknown. */
  nextEligibleAt: Date | null;
}

/** The page size: 0 means the default; 1..MAX_PULL_PAGE otherwise. */
export function toPullLimit(limit: number): number {
  if (limit === 0) return DEFAULT_PULL_PAGE;
  if (!Number.isInteger(limit) || limit < 0 || limit > MAX_PULL_PAGE) throw new DomainError("invalid_argument", betweenText("limit", 1, MAX_PULL_PAGE));
  return limit;
}

/** One referral or progression event waiting to be claimed: its callback body's fields, and when it happened (the referral changed state; the vote counted). */
export interface PullEventRow {
  payload: EventPayload;
  occurredAt: Date;
}

/**
 * What a pull list reads: the server's pending pull deliveries of one kind, oldest first (by when the
 * delivery was stored, then id), after `cursor`; one row more than the page tells whether one follows.
 * `hearts` are the `heart.counted` ones, `events` the referral and progression events (a server opted in to them:
 * servers.pull_event_types); each list has its own cursor. `also`: a further condition of the list (its text fixed).
 */
async function pullPage<R extends { id: string; created_at: Date }>(
  prisma: PrismaClient,
  q: { serverId: string; cursor: string; limit: number },
  kind: "hearts" | "events",
  columns: Prisma.Sql,
  also: Prisma.Sql = Prisma.empty,
): Promise<{ rows: R[]; nextCursor: string | null }> {
  const after = q.cursor === "" ? null : decodePageCursor(q.cursor);
  const rows = await runSql<R>(
    prisma,
    Prisma.sql`
    SELECT id::text, created_at, ${columns}
    FROM deliveries
    -- Through the kind's own partial index (the predicate is written as the index's is), in its order: at most the
    -- page + 1 rows, in every plan. The ORDER BY names the table's columns (a bare "id" would be the text column of the
    -- select list, an order the index cannot give: a plan then reads and sorts every pending row of the server), and
    -- the optional conditions are left out of the text rather than switched off by a parameter ("$n OR ..."), which a
    -- cached generic plan cannot simplify.
    WHERE server_id = ${q.serverId}::uuid AND transport = 'pull' AND status = 'pending'
      AND ${kind === "hearts" ? Prisma.sql`event_type = 'heart.counted'` : Prisma.sql`event_type <> 'heart.counted'`}
      -- Pay-once mode: a heart no longer payable (another transport paid or holds it) is not offered.
      ${kind === "hearts" ? Prisma.sql`AND ${payableSql(Prisma.sql`deliveries.heart_id`)}` : Prisma.empty}
      ${also}
      ${after === null ? Prisma.empty : Prisma.sql`AND (deliveries.created_at, deliveries.id) > (${after.createdAt}::timestamptz, ${after.id}::uuid)`}
    ORDER BY deliveries.created_at, deliveries.id
    LIMIT ${q.limit + 1}`,
  );
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  return { rows: page, nextCursor: rows.length > q.limit && last ? encodePageCursor({ createdAt: last.created_at, id: last.id }) : null };
}

/**
 * A page of the server's unclaimed hearts, oldest first, after `cursor`. `nextCursor` is null on the
 * last page. Claiming removes hearts from later listings; the cursor stays valid across claims.
 */
export async function listPullHearts(
  prisma: PrismaClient,
  q: { serverId: string; cursor: string; limit: number },
): Promise<{ hearts: PullHeartRow[]; nextCursor: string | null }> {
  const page = await pullPage<{
    id: string;
    created_at: Date;
    heart_id: string;
    username: string;
    period: string;
    counted_at: Date;
    streak_day: number | null;
    steam_id: string | null;
    discord_id: string | null;
    minecraft_uuid: string | null;
    account_id: string | null;
    next_eligible_at: Date | null;
  }>(
    prisma,
    q,
    "hearts",
    Prisma.sql`heart_id::text, username, period, counted_at, streak_day, steam_id, discord_id, minecraft_uuid, account_id, next_eligible_at`,
  );
  return {
    hearts: page.rows.map((r) => ({
      heartId: r.heart_id,
      username: r.username,
      period: r.period,
      countedAt: new Date(r.counted_at),
      streakDay: r.streak_day,
      platformIds: { steamId: r.steam_id, discordId: r.discord_id, minecraftUuid: r.minecraft_uuid, accountId: r.account_id },
      nextEligibleAt: r.next_eligible_at === null ? null : new Date(r.next_eligible_at),
    })),
    nextCursor: page.nextCursor,
  };
}

/**
 * A page of the server's unclaimed referral and progression events (their pull deliveries), oldest first,
 * after `cursor`, with the same paging as listPullHearts; a heart.eligible only once due at `now`. Each is its callback body without
 * `timestamp` (the delivery's payload) and when the referral changed state or the vote counted.
 */
export async function listPullEvents(
  prisma: PrismaClient,
  q: { serverId: string; cursor: string; limit: number; now: Date },
): Promise<{ events: PullEventRow[]; nextCursor: string | null }> {
  // An event due later (heart.eligible) is stored with its due time as created_at: not listed before then. A range on
  // the index's own column, so the rows not due yet (the newest) are never read.
  const page = await pullPage<{ id: string; created_at: Date; payload: EventPayload; counted_at: Date }>(
    prisma,
    q,
    "events",
    Prisma.sql`payload, counted_at`,
    Prisma.sql`AND deliveries.created_at <= ${q.now}::timestamptz`,
  );
  return { events: page.rows.map((r) => ({ payload: r.payload, occurredAt: new Date(r.counted_at) })), nextCursor: page.nextCursor };
}
