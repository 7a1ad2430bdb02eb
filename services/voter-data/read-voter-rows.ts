import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { NIL_UUID } from "../shared/values/ids.js";
import type { PlatformIdField } from "../shared/values/player-ids.js";
import type { VoterKey } from "./voter-key.js";

/**
 * The reads of a voter's export and erasure: which rows of one server are the voter's. No table has an index on a
 * voter's name or platform id across its history (one would cost every vote), so the server's hearts, referrals and
 * clicks are walked in pages along their (server_id, time, id) indexes and matched here: every statement reads at most
 * SCAN_PAGE rows (plus the rows that share the page's last time), whatever the server's history; a whole walk is as
 * long as the server's history, one bounded statement after another. What hangs off the voter's hearts (ledger rows,
 * payouts, deliveries, attempts) is read by heart id, ID_BATCH hearts at a time.
 */

/** The heart column each platform id kind is stored in. */
const HEART_COLUMN: Record<PlatformIdField, Prisma.Sql> = {
  steam_id: Prisma.raw("steam_id"),
  discord_id: Prisma.raw("discord_id"),
  minecraft_uuid: Prisma.raw("minecraft_uuid"),
  account_id: Prisma.raw("account_id"),
};

/** The condition "heart `h` is the voter's": its username, case-insensitively (PostgreSQL's lower()), or the platform id. */
function heartMatchSql(key: VoterKey): Prisma.Sql {
  if (key.kind === "username") return Prisma.sql`lower(h.username) = lower(${key.value})`;
  return Prisma.sql`h.${HEART_COLUMN[key.kind]} = ${key.value}`;
}

/** Rows one page of a walk reads. */
export const SCAN_PAGE = 1_000;
/** Heart (or delivery) ids per statement of the reads and writes by id. */
export const ID_BATCH = 500;
/** Referral reward entry keys per statement (a referral side has 2 x MAX_ENTRIES possible keys: rewards-for-referral.ts). */
export const REFERRAL_ENTRY_KEYS_BATCH = 4_000;
/** Server ids per page of a walk over the whole list. */
export const SERVER_PAGE = 500;

/** A heart of the voter, as the export shows it and the erasure needs it. */
export interface VoterHeart {
  id: string;
  server_id: string;
  username: string;
  voter_identity: string;
  ip: string | null;
  subnet: string | null;
  user_agent: string | null;
  counted: boolean;
  verdict: string;
  fraud_score: number;
  fraud_reasons: string[];
  period: string;
  streak_day: number | null;
  created_at: Date;
  steam_id: string | null;
  discord_id: string | null;
  minecraft_uuid: string | null;
  account_id: string | null;
}

/** The server ids of a request: the one asked for, or every server of the list, a page at a time. */
export async function* readServerIds(prisma: PrismaClient, serverId: string | null): AsyncGenerator<string> {
  if (serverId !== null) {
    yield serverId;
    return;
  }
  let after = NIL_UUID;
  for (;;) {
    // Bounded: at most SERVER_PAGE rows, a range of the servers primary key.
    const rows = await runSql<{ id: string }>(prisma, Prisma.sql`SELECT id FROM servers WHERE id > ${after}::uuid ORDER BY id LIMIT ${SERVER_PAGE}`);
    for (const r of rows) yield r.id;
    if (rows.length < SERVER_PAGE) return;
    after = rows[rows.length - 1]!.id;
  }
}

/** A walk's position: the (time, id) of the last row read. */
interface Cursor {
  at: Date;
  id: string;
}

/** One page of a walk: how many rows it read, the last one's cursor, and the voter's rows among them. */
interface WalkPage<T> {
  read: number;
  last: Cursor | null;
  mine: T[];
}

/** The cursor of a page's last row. */
function lastOf<R extends { id: string }>(rows: readonly R[], at: (r: R) => Date): Cursor | null {
  const last = rows[rows.length - 1];
  return last === undefined ? null : { at: at(last), id: last.id };
}

/** THE keyset walk: `page` reads at most SCAN_PAGE rows after the cursor; yields the voter's rows of each page, until a page is short. */
async function* walkPages<T>(page: (after: Cursor) => Promise<WalkPage<T>>): AsyncGenerator<T[]> {
  let after: Cursor = { at: new Date(0), id: NIL_UUID };
  for (;;) {
    const p = await page(after);
    if (p.mine.length > 0) yield p.mine;
    if (p.read < SCAN_PAGE || p.last === null) return;
    after = p.last;
  }
}

/** The voter's hearts on one server, oldest first: a walk of the server's hearts in pages of SCAN_PAGE. */
export function readVoterHearts(prisma: PrismaClient, serverId: string, key: VoterKey): AsyncGenerator<VoterHeart[]> {
  return walkPages(async (after) => {
    // Bounded: at most SCAN_PAGE rows, a range of the (server_id, created_at, id) index; `mine` is computed per row.
    const rows = await runSql<VoterHeart & { mine: boolean }>(
      prisma,
      Prisma.sql`
        SELECT h.id, h.server_id, h.username, h.voter_identity, h.ip, h.subnet, h.user_agent, h.counted, h.verdict, h.fraud_score,
               h.fraud_reasons, h.period, h.streak_day, h.created_at, h.steam_id, h.discord_id, h.minecraft_uuid, h.account_id,
               (${heartMatchSql(key)}) AS mine
        FROM hearts h
        WHERE h.server_id = ${serverId}::uuid AND (h.created_at, h.id) > (${after.at}::timestamptz, ${after.id}::uuid)
        ORDER BY h.created_at, h.id LIMIT ${SCAN_PAGE}`,
    );
    return { read: rows.length, last: lastOf(rows, (r) => r.created_at), mine: rows.filter((r) => r.mine).map(({ mine: _, ...heart }) => heart) };
  });
}

/** A referral where the voter is the referee or the referrer. */
export interface VoterReferral {
  id: string;
  referee_identity: string;
  referrer_identity: string;
  state: string;
  registered_at: Date;
  qualified_at: Date | null;
  reversed_at: Date | null;
  review: string;
  signals: string[];
}

/**
 * The server's referrals whose referee or referrer is one of `identities` (lower-cased, compared with lower()): a
 * walk in pages of SCAN_PAGE along the (server_id, registered_at, id) index.
 */
export function readVoterReferrals(prisma: PrismaClient, serverId: string, identities: readonly string[]): AsyncGenerator<VoterReferral[]> {
  return walkPages(async (after) => {
    // Bounded: at most SCAN_PAGE rows, a range of the (server_id, registered_at, id) index.
    const rows = await runSql<VoterReferral & { mine: boolean }>(
      prisma,
      Prisma.sql`
        SELECT r.id, r.referee_identity, r.referrer_identity, r.state::text AS state, r.registered_at, r.qualified_at, r.reversed_at,
               r.review::text AS review, r.signals,
               (lower(r.referee_identity) = ANY(${[...identities]}::text[]) OR lower(r.referrer_identity) = ANY(${[...identities]}::text[])) AS mine
        FROM referrals r
        WHERE r.server_id = ${serverId}::uuid AND (r.registered_at, r.id) > (${after.at}::timestamptz, ${after.id}::uuid)
        ORDER BY r.registered_at, r.id LIMIT ${SCAN_PAGE}`,
    );
    return { read: rows.length, last: lastOf(rows, (r) => r.registered_at), mine: rows.filter((r) => r.mine).map(({ mine: _, ...referral }) => referral) };
  });
}

/** A referral click the voter made (its referral is the voter's as referee) or referred (as referrer). */
export interface VoterClick {
  id: string;
  referrer_identity: string;
  referral_id: string | null;
  ip: string | null;
  subnet: string | null;
  user_agent: string | null;
  created_at: Date;
  as_referrer: boolean;
}

/**
 * The server's clicks whose referrer is one of `identities` (lower-cased) or whose referral is one of
 * `refereeReferrals` (the voter clicked them): a walk in pages of SCAN_PAGE along the (server_id, created_at) index.
 */
export function readVoterClicks(
  prisma: PrismaClient,
  serverId: string,
  identities: readonly string[],
  refereeReferrals: readonly string[],
): AsyncGenerator<VoterClick[]> {
  return walkPages(async (after) => {
    // Bounded: SCAN_PAGE rows, plus the rows sharing the page's last created_at, a range of the (server_id, created_at) index.
    const rows = await runSql<VoterClick & { by_referral: boolean }>(
      prisma,
      Prisma.sql`
        SELECT k.id, k.referrer_identity, k.referral_id, k.ip, k.subnet, k.user_agent, k.created_at,
               lower(k.referrer_identity) = ANY(${[...identities]}::text[]) AS as_referrer,
               coalesce(k.referral_id = ANY(${[...refereeReferrals]}::uuid[]), false) AS by_referral
        FROM referral_clicks k
        WHERE k.server_id = ${serverId}::uuid AND (k.created_at, k.id) > (${after.at}::timestamptz, ${after.id}::uuid)
        ORDER BY k.created_at, k.id LIMIT ${SCAN_PAGE}`,
    );
    const mine = rows.filter((r) => r.as_referrer || r.by_referral).map(({ by_referral: _, ...click }) => click);
    return { read: rows.length, last: lastOf(rows, (r) => r.created_at), mine };
  });
}

/** `items` in slices of at most `size`. */
export function inBatches<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** The lower-cased identities the voter is known by on a server: the key (a username), and the hearts' usernames and voter identities. */
export function voterIdentities(key: VoterKey, hearts: readonly VoterHeart[]): string[] {
  const ids = new Set<string>();
  if (key.kind === "username") ids.add(key.value.toLowerCase());
  for (const h of hearts) {
    ids.add(h.username.toLowerCase());
    ids.add(h.voter_identity.toLowerCase());
  }
  return [...ids];
}

/** Everything of one server found to be the voter's by the walks. */
export interface VoterRows {
  hearts: VoterHeart[];
  /** Lower-cased: the key, the hearts' usernames and voter identities. */
  identities: string[];
  asReferee: VoterReferral[];
  asReferrer: VoterReferral[];
  clicks: VoterClick[];
}

/** The voter's rows of one server: hearts, then referrals by the identities the hearts gave, then clicks. */
export async function findVoterRows(prisma: PrismaClient, serverId: string, key: VoterKey): Promise<VoterRows> {
  const hearts: VoterHeart[] = [];
  for await (const page of readVoterHearts(prisma, serverId, key)) hearts.push(...page);
  const identities = voterIdentities(key, hearts);
  const referrals: VoterReferral[] = [];
  for await (const page of readVoterReferrals(prisma, serverId, identities)) referrals.push(...page);
  const asReferee = referrals.filter((r) => identities.includes(r.referee_identity.toLowerCase()));
  const asReferrer = referrals.filter((r) => identities.includes(r.referrer_identity.toLowerCase()));
  const clicks: VoterClick[] = [];
  for await (const page of readVoterClicks(
    prisma,
    serverId,
    identities,
    asReferee.map((r) => r.id),
  ))
    clicks.push(...page);
  return { hearts, identities, asReferee, asReferrer, clicks };
}

/** The delivery statuses, each a range of the (server_id, status, created_at) index. */
const DELIVERY_STATUSES = ["pending", "delivered", "failed", "withdrawn"] as const;

/**
 * The server's referral-event deliveries (`referral.*`) of the referrals `referralIds`: their payloads carry the
 * referee and referrer identities. A walk of the server's deliveries in pages of SCAN_PAGE, one status at a time
 * along the (server_id, status, created_at) index (plus the rows sharing a page's last created_at).
 */
export async function* readReferralDeliveries(prisma: PrismaClient, serverId: string, referralIds: readonly string[]): AsyncGenerator<string[]> {
  if (referralIds.length === 0) return;
  for (const status of DELIVERY_STATUSES) {
    yield* walkPages(async (after) => {
      // Bounded: SCAN_PAGE rows (plus ties on created_at), a range of the (server_id, status, created_at) index.
      const rows = await runSql<{ id: string; created_at: Date; mine: boolean }>(
        prisma,
        Prisma.sql`
          SELECT d.id, d.created_at, (d.event_type LIKE 'referral.%' AND d.payload->>'referral_id' = ANY(${[...referralIds]}::text[])) AS mine
          FROM deliveries d
          WHERE d.server_id = ${serverId}::uuid AND d.status = ${Prisma.raw(`'${status}'::"DeliveryStatus"`)}
            AND (d.created_at, d.id) > (${after.at}::timestamptz, ${after.id}::uuid)
          ORDER BY d.created_at, d.id LIMIT ${SCAN_PAGE}`,
      );
      return { read: rows.length, last: lastOf(rows, (r) => r.created_at), mine: rows.filter((r) => r.mine).map((r) => r.id) };
    });
  }
}
