import { randomUUID } from "node:crypto";
import { Prisma } from "../../../gen/prisma/client.js";
import type { PrismaClient } from "../../shared/adapters/db.js";
import { executeSql, runSql, runSqlTransaction } from "../../shared/adapters/sql/executor.js";
import type { StreakState } from "../../hearts/domain/streak.js";
import type { PlatformIds } from "../../shared/values/player-ids.js";
import type { EventPayload, RewardCountsPayload } from "./delivery-types.js";
import { deliveryGuardSql, leaseDeliveriesSql, parkDeliveriesSql, releaseLeaseSql } from "./write-deliveries.js";
import { hasActiveSecretSql, sealedActiveSecretsJsonSql, toSealedNewestFirst, type SealedSecretJson } from "../../servers/active-secrets.js";

/**
 * The dispatcher's claims: which stored deliveries are sendable, the claim that leases due ones
 * (with what sending them needs), and giving a lease back. The consumer's insert leases with the
 * same rule and the same columns (insert-deliveries.ts).
 */

/** The transports the dispatcher sends over (pull deliveries are claimed by the owner, never sent). */
export type SentTransport = "callback" | "votifier" | "discord";

/** A delivery claimed by a dispatcher, with what is needed to send it. */
export interface ClaimedDelivery {
  id: string;
  serverId: string;
  heartId: string;
  eventType: string;
  username: string;
  voterIdentity: string;
  period: string;
  /** Attempts made in the current retry cycle, before this one. */
  attempts: number;
  /** The lease this claim holds; the result is recorded only while it is still ours. */
  leaseUntil: Date;
  /** Which transport sends it. */
  transport: SentTransport;
  /** The callback endpoint of a callback delivery (null for Votifier). */
  endpointId: string | null;
  /** When the heart counted: its cast time (a referral event: when the transition happened). */
  countedAt: Date;
  /** An event's stored body fields (a referral or progression event); null for a heart. */
  event: EventPayload | null;
  /** A heart's reward counts (payload version 3), as stored with it; null when its server had no saved rules, and for events. */
  rewardCounts: RewardCountsPayload | null;
  /** The heart's platform ids and account id as stored with the delivery (all null on heart.test and referral events). */
  platformIds: PlatformIds;
  /** When the voter may count again; null when unknown. */
  nextEligibleAt: Date | null;
  /** The endpoint's payload version (callback deliveries; 1 otherwise). */
  payloadVersion: number;
  /** Its endpoint's callback settings (callback deliveries); null when the endpoint has no URL. */
  callbackUrl: string | null;
  standardWebhooks: boolean;
  /** The endpoint opted in to the asymmetric `v1a` signature by the list's key. */
  publicKeySignatures: boolean;
  /** Votifier settings (Votifier deliveries), with the token still sealed; null when not configured. */
  votifier: { host: string; port: number; serviceName: string; sealedToken: string } | null;
  /** A Discord delivery's endpoint: its webhook (the token still sealed), its templates and the server's name; null otherwise. */
  discord?: { webhookId: string; sealedToken: string; templates: Record<string, string>; serverName: string; embed: boolean } | null;
  /**
   * The endpoint's active callback secrets, still sealed, newest first, as the claim read them
   * (so a rotation is seen by the next claim); absent when not read with the delivery, and the
   * transport reads them itself.
   */
  sealedCallbackSecrets?: string[];
  /** The voter's streak state as the claim read it (null: none); absent when not read with the delivery. */
  voterStreak?: StreakState | null;
  /** The server is in pay-once mode (servers.pay_once): the push reserves the heart's payout first (pay-once.ts). */
  payOnce?: boolean;
  /** Claimed after an earlier lease ran out with its attempt unrecorded (the process holding it stopped). */
  takenOver?: boolean;
}

/** The room a claim (or an insert's lease) has: how many rows in all and per server, given what is in flight. */
export interface ClaimRoom {
  now: Date;
  leaseUntil: Date;
  /** Most rows leased; 0 leases none. */
  limit: number;
  /** Most rows in flight per server, for a server not in `capByServer`. */
  perServerLimit: number;
  inFlightByServer: ReadonlyMap<string, number>;
  /** Servers whose cap is not `perServerLimit` (adaptive caps, server-caps.ts), by server id. */
  capByServer?: ReadonlyMap<string, number>;
  /** The leasing dispatcher's liveness id (worker-liveness.ts); absent: the lease lasts until `leaseUntil`. */
  workerId?: string;
}

/** The busy servers of a room as the claim and the insert's lease take them: parallel arrays for `unnest`, and the saturated ones. */
export interface BusyServers {
  ids: string[];
  inFlight: number[];
  caps: number[];
  /** Servers with no room left (in flight at or over their cap). */
  saturated: string[];
}

/** Every server of `room` that has rows in flight or a cap of its own, with its count and cap (the `busy` relation of the claim and the insert). */
export function busyServersOf(room: Omit<ClaimRoom, "limit" | "now" | "leaseUntil">): BusyServers {
  const ids = [...new Set([...room.inFlightByServer.keys(), ...(room.capByServer?.keys() ?? [])])];
  const inFlight = ids.map((id) => room.inFlightByServer.get(id) ?? 0);
  const caps = ids.map((id) => room.capByServer?.get(id) ?? room.perServerLimit);
  return { ids, inFlight, caps, saturated: ids.filter((_, i) => inFlight[i]! >= caps[i]!) };
}

/**
 * Claims due deliveries for this dispatcher: pending, unparked, due, not leased (or leased by a worker that stopped
 * beating: leaseFreeSql), and sendable (sendableDeliverySql), among the `limit * 4` oldest such rows whatever their
 * sendability or their server's room: the rows read are bounded by that scan, however many held rows are stored and
 * however large a saturated server's backlog. Only when the scan met a held row does the poll's park pass
 * (parkHeldDeliveries) run after it, so later polls scan past it no more: an idle poll or a backlog drain costs no
 * park pass. Only when the scan was full, met a server with no room left, and leased less than `limit` does a second
 * statement claim past it, server by server (claimPastSaturatedSql): a slow receiver's backlog ahead in the due order
 * neither hides other servers' rows nor is read through. Rows are locked with `FOR UPDATE OF d SKIP LOCKED`, so
 * several dispatcher instances never claim the same row. At most `limit` rows; per server at most its cap
 * (`capByServer`, else `perServerLimit`) minus what this instance already has in flight for it. The same statement
 * reads what sending needs (claimedColumnsSql): the endpoint's active callback secrets (sealed) and the voter's streak
 * state, so an attempt costs no further reads. A row whose lease ran out unrecorded (its process stopped mid-attempt)
 * comes back with `takenOver` (the caller records that attempt as in doubt: pay-once.ts).
 */
export async function claimDueDeliveries(prisma: PrismaClient, q: ClaimRoom): Promise<ClaimedDelivery[]> {
  // Scan a few times the limit, so one server's backlog cannot hide other servers' rows in one claim.
  const scan = q.limit * 4;
  const first = await leaseCandidates(prisma, q, busyServersOf(q), oldestDueSql(q.now, scan), scan);
  if (first.heldSeen) await parkHeldDeliveries(prisma, q.now);
  if (!(first.scanFull && first.saturatedSeen && first.claimed.length < q.limit)) return first.claimed;
  // The scan was all due rows it could see, some of them a saturated server's: what lies past them is reached server
  // by server, with this instance's room as the first statement left it.
  const inFlight = new Map(q.inFlightByServer);
  for (const row of first.claimed) inFlight.set(row.serverId, (inFlight.get(row.serverId) ?? 0) + 1);
  const rest: ClaimRoom = { ...q, limit: q.limit - first.claimed.length, inFlightByServer: inFlight };
  const busy = busyServersOf(rest);
  const second = await leaseCandidates(prisma, rest, busy, claimPastSaturatedSql(rest, randomUUID(), scan), scan);
  if (second.heldSeen) await parkHeldDeliveries(prisma, q.now);
  return [...first.claimed, ...second.claimed];
}

/** What one claim statement leased, and what its candidates showed. */
interface LeaseOutcome {
  claimed: ClaimedDelivery[];
  /** A candidate was held (not sendable now): the park pass should run. */
  heldSeen: boolean;
  /** A candidate was a server's with no room left. */
  saturatedSeen: boolean;
  /** The candidates were as many as the scan allows (more due rows may lie past them). */
  scanFull: boolean;
}

/**
 * The columns a candidate of the claim has (`d` a deliveries row, `s` its server, `e` its endpoint): the lease
 * statement chooses among them by each server's room.
 */
function candidateColumnsSql(now: Date): Prisma.Sql {
  return Prisma.sql`d.id, d.server_id, d.endpoint_id, d.next_attempt_at, d.voter_identity, d.event_type, d.lease_until AS previous_lease,
             ${sendableDeliverySql(now)} AS sendable`;
}

/** The claim's own rows among the claimable index's (pending, pushed, unparked), due at `now` and free to lease. */
function claimableDueSql(now: Date): Prisma.Sql {
  return Prisma.sql`${deliveryGuardSql("lease", { now })}
        AND d.transport <> 'pull'
        AND d.parked_at IS NULL
        AND d.next_attempt_at <= ${now}::timestamptz`;
}

/**
 * The first claim's candidates: the `scan` oldest due rows through the claimable index, whatever their server's room
 * or sendability (both are columns the lease statement chooses by, never filters the scan reads through). Reads at
 * most `scan` deliveries rows (and their servers and endpoints by key).
 */
function oldestDueSql(now: Date, scan: number): Prisma.Sql {
  return Prisma.sql`
      SELECT ${candidateColumnsSql(now)}
      FROM deliveries d JOIN servers s ON s.id = d.server_id LEFT JOIN callback_endpoints e ON e.id = d.endpoint_id
      -- Through the partial index of the pending rows a dispatcher sends (pull ones are the owner's, parked ones are
      -- held: never read here), from the oldest due, at most the scan.
      WHERE ${claimableDueSql(now)}
      ORDER BY d.next_attempt_at
      LIMIT ${scan}
      FOR UPDATE OF d SKIP LOCKED`;
}

/** The uuid below every other: where the server walk wraps around to. */
const LOWEST_UUID = "00000000-0000-0000-0000-000000000000";

/**
 * The second claim's candidates: server by server, from `start` (a random server id, so polls share the servers out)
 * up the server-keyed claimable index and round to below `start`, at most `visits` servers that have claimable rows,
 * skipping the saturated ones (one index entry each: a walk step finds the next server's first entry, it never reads
 * a server's rows to get past it); of each other server, its oldest due rows up to its room. Reads at most `visits`
 * index entries for the walk and, per server visited, its room in rows plus the rows other instances hold leased
 * (bounded by their caps): never a server's backlog.
 */
export function claimPastSaturatedSql(q: ClaimRoom, start: string, visits: number): Prisma.Sql {
  const claimable = Prisma.sql`d.status = 'pending' AND d.transport <> 'pull' AND d.parked_at IS NULL`;
  const walk = (name: string, from: string, below: string | null) => Prisma.sql`${Prisma.raw(name)}(server_id, n) AS (
        (SELECT d.server_id, 1 FROM deliveries d
         WHERE ${claimable} AND d.server_id > ${from}::uuid ${below === null ? Prisma.empty : Prisma.sql`AND d.server_id <= ${below}::uuid`}
         ORDER BY d.server_id LIMIT 1)
        UNION ALL
        SELECT next.server_id, w.n + 1 FROM ${Prisma.raw(name)} w CROSS JOIN LATERAL (
          SELECT d.server_id FROM deliveries d
          WHERE ${claimable} AND d.server_id > w.server_id ${below === null ? Prisma.empty : Prisma.sql`AND d.server_id <= ${below}::uuid`}
          ORDER BY d.server_id LIMIT 1
        ) AS next
        WHERE w.n < ${visits}::int
      )`;
  return Prisma.sql`
      WITH RECURSIVE ${walk("above", start, null)}, ${walk("below", LOWEST_UUID, start)},
      visited AS (
        SELECT server_id FROM (SELECT server_id, n FROM above UNION ALL SELECT server_id, ${visits}::int + n FROM below) AS v
        ORDER BY n LIMIT ${visits}::int
      ), room AS (
        SELECT v.server_id, coalesce(b.cap, ${q.perServerLimit}::int) - coalesce(b.in_flight, 0) AS room
        -- busy: the lease statement's own relation of this room (leaseCandidates), which this statement is a part of.
        FROM visited v LEFT JOIN busy b ON b.server_id = v.server_id
      )
      SELECT c.* FROM room r CROSS JOIN LATERAL (
        SELECT ${candidateColumnsSql(q.now)}
        FROM deliveries d JOIN servers s ON s.id = d.server_id LEFT JOIN callback_endpoints e ON e.id = d.endpoint_id
        WHERE d.server_id = r.server_id AND ${claimableDueSql(q.now)}
        ORDER BY d.next_attempt_at
        LIMIT greatest(r.room, 0)
        FOR UPDATE OF d SKIP LOCKED
      ) AS c
      WHERE r.room > 0`;
}

/**
 * Leases, among `candidates` (a statement returning candidateColumnsSql's columns, at most `scan` rows, locked),
 * the sendable ones by each server's room, oldest due first, at most `q.limit`: one statement.
 */
async function leaseCandidates(prisma: PrismaClient, q: ClaimRoom, busy: BusyServers, candidates: Prisma.Sql, scan: number): Promise<LeaseOutcome> {
  const rows = await runSql<(LeasedRow | { id: null }) & { held_seen: boolean; saturated_seen: boolean; scan_full: boolean }>(
    prisma,
    Prisma.sql`
    WITH busy AS (
      SELECT * FROM unnest(${busy.ids}::uuid[], ${busy.inFlight}::int[], ${busy.caps}::int[]) AS b(server_id, in_flight, cap)
    ), candidates AS (${candidates}
    ), chosen AS (
      SELECT c.id, c.server_id, c.endpoint_id, c.previous_lease, v.last_day, v.streak_days FROM (
        SELECT c.id, c.server_id, c.endpoint_id, c.voter_identity, c.event_type, c.next_attempt_at, c.previous_lease,
               row_number() OVER (PARTITION BY c.server_id ORDER BY c.next_attempt_at, c.id) AS rn,
               coalesce(b.cap, ${q.perServerLimit}::int) - coalesce(b.in_flight, 0) AS room
        FROM candidates c LEFT JOIN busy b ON b.server_id = c.server_id
        WHERE c.sendable
      ) c
      LEFT JOIN voter_states v ON c.event_type = 'heart.counted' AND v.server_id = c.server_id AND v.voter_identity = c.voter_identity
      WHERE c.rn <= c.room
      ORDER BY c.next_attempt_at
      LIMIT ${q.limit}
    ), leased AS (
      ${leaseDeliveriesSql({
        chosen: Prisma.sql`chosen v JOIN servers s ON s.id = v.server_id LEFT JOIN callback_endpoints e ON e.id = v.endpoint_id`,
        leaseUntil: q.leaseUntil,
        workerId: q.workerId ?? null,
        returning: Prisma.sql`${claimedColumnsSql(q.now)}, v.previous_lease IS NOT NULL AS taken_over`,
      })}
    )
    -- Every leased row carries what the candidates showed; when none was leased, one row with a null id does.
    SELECT leased.*, seen.held_seen, seen.saturated_seen, seen.scan_full FROM (
      SELECT EXISTS (SELECT 1 FROM candidates WHERE NOT sendable) AS held_seen,
             EXISTS (SELECT 1 FROM candidates WHERE server_id = ANY(${busy.saturated}::uuid[])) AS saturated_seen,
             (SELECT count(*) FROM candidates) >= ${scan}::int AS scan_full
    ) seen
    LEFT JOIN leased ON true`,
  );
  const [first] = rows;
  return {
    claimed: rows
      .filter((r): r is LeasedRow & { held_seen: boolean; saturated_seen: boolean; scan_full: boolean } => r.id !== null)
      .map((r) => toClaimedDelivery(r, q.now)),
    heldSeen: first?.held_seen ?? false,
    saturatedSeen: first?.saturated_seen ?? false,
    scanFull: first?.scan_full ?? false,
  };
}

/** Most unparked due rows one poll's parkHeldDeliveries reads: what it parks per poll at most, and what it costs when none are held. */
export const PARK_SCAN_ROWS = 200;

/**
 * Parks the held rows among the PARK_SCAN_ROWS oldest unparked due rows a dispatcher sends (the claim's index; not
 * sendable now: sendableDeliverySql), so the claim that follows, and every later poll, reads them no more. The
 * writes that make a held row sendable (a URL set, an endpoint re-enabled, a callback secret minted, Votifier set up)
 * unpark it in their own transaction under the server row lock (unparkDeliveries), so a parked row is never left
 * behind once sendable: this transaction takes the held rows' servers FOR SHARE before it parks, and the parking
 * statement, started after those locks were granted, re-reads the settings as committed by then; a settings write
 * that starts later waits for this commit and unparks what it parked. Reads at most PARK_SCAN_ROWS deliveries rows
 * (and their servers and endpoints) per poll. Returns how many it parked.
 */
export async function parkHeldDeliveries(prisma: PrismaClient, now: Date, scanRows = PARK_SCAN_ROWS): Promise<number> {
  return runSqlTransaction(
    prisma,
    async (tx) => {
      // Under this statement's snapshot: the held rows among the scanned ones, their servers locked FOR SHARE (the
      // settings writes' server row lock conflicts), which may wait for a settings write in progress.
      const held = await tx.query<{ id: string }>(Prisma.sql`
        WITH scanned AS (
          SELECT d.id, d.server_id, d.endpoint_id, d.transport FROM deliveries d
          WHERE ${deliveryGuardSql("park", { now })} AND d.transport <> 'pull' AND d.parked_at IS NULL AND d.next_attempt_at <= ${now}::timestamptz
          ORDER BY d.next_attempt_at
          LIMIT ${scanRows}
        ), held AS (
          SELECT d.id, d.server_id FROM scanned d JOIN servers s ON s.id = d.server_id LEFT JOIN callback_endpoints e ON e.id = d.endpoint_id
          WHERE NOT ${sendableDeliverySql(now)}
        )
        SELECT h.id::text FROM held h JOIN servers locked ON locked.id = h.server_id
        ORDER BY locked.id
        FOR SHARE OF locked`);
      if (held.length === 0) return 0;
      // A new statement, so a new snapshot: sendability re-read as committed once the locks were granted.
      const parked = await tx.query<{ id: string }>(parkDeliveriesSql({ ids: held.map((r) => r.id), now, held: Prisma.sql`NOT ${sendableDeliverySql(now)}` }));
      return parked.length;
    },
    { timeoutMs: PARK_TIMEOUT_MS },
  );
}

/** How long one poll's parking transaction may stay open (it waits at most for a settings write's transaction). */
const PARK_TIMEOUT_MS = 30_000;

/**
 * Whether delivery `d` of server `s` to endpoint `e` (null for other transports) can be sent by a
 * dispatcher at `now`: a callback delivery to a live endpoint with a URL, not disabled (410) and
 * with an active callback secret, or a Votifier delivery of a server with Votifier set up (pull
 * deliveries are claimed by the owner, never here). The one rule of the claim, of the lease
 * taken with an insert, and of the park pass (parkHeldDeliveries).
 */
export function sendableDeliverySql(now: Date): Prisma.Sql {
  // A CASE, not an OR of per-transport conditions: the planner turned that OR into "transport = 'callback' OR
  // transport = 'votifier'" and ANDed in a scan of every such row's unique-index entry (the delivered history), where
  // the claim's partial index alone holds the few pending ones. A CASE gives it no index condition to take.
  return Prisma.sql`
  (CASE d.transport
     WHEN 'callback' THEN e.url IS NOT NULL
       AND e.disabled_at IS NULL
       AND e.deleted_at IS NULL
       AND ${hasActiveSecretSql(Prisma.sql`e.id`, "callback", now, "endpoint")}
     WHEN 'votifier' THEN s.votifier_host IS NOT NULL AND s.votifier_token IS NOT NULL
     WHEN 'discord' THEN e.discord_webhook_token IS NOT NULL AND e.disabled_at IS NULL AND e.deleted_at IS NULL
     ELSE false
   END)`;
}

/**
 * What a dispatcher needs to send a leased delivery `d` of server `s` to endpoint `e` (left-joined:
 * null for other transports) at `now`, with `v` the voter's streak state (last_day, streak_days):
 * the columns of LeasedRow.
 */
export function claimedColumnsSql(now: Date): Prisma.Sql {
  return Prisma.sql`
  d.id::text, d.server_id::text, d.endpoint_id::text, d.heart_id::text, d.event_type, d.username, d.voter_identity, d.period,
  d.attempts, d.lease_until, d.transport, d.counted_at, d.payload, d.steam_id, d.discord_id, d.minecraft_uuid, d.account_id, d.next_eligible_at,
  coalesce(e.payload_version, 1) AS payload_version, e.url AS callback_url,
  coalesce(e.standard_webhooks, false) AS standard_webhooks, coalesce(e.public_key_signatures, false) AS public_key_signatures,
  s.votifier_host, s.votifier_port, s.votifier_service_name, s.votifier_token,
  v.last_day, v.streak_days, s.pay_once,
  CASE WHEN d.transport = 'discord' THEN e.discord_webhook_id END AS discord_webhook_id,
  CASE WHEN d.transport = 'discord' THEN e.discord_webhook_token END AS discord_webhook_token,
  CASE WHEN d.transport = 'discord' THEN e.discord_templates END AS discord_templates,
  CASE WHEN d.transport = 'discord' THEN e.discord_embed END AS discord_embed,
  CASE WHEN d.transport = 'discord' THEN s.name END AS server_name,
  CASE WHEN d.transport = 'callback' THEN ${sealedActiveSecretsJsonSql(Prisma.sql`d.endpoint_id`, "callback", now, "endpoint")} END AS callback_secrets`;
}

/** A row of claimedColumnsSql as a statement returns it (timestamps and dates decoded to Date by the executor). */
export interface LeasedRow {
  id: string;
  server_id: string;
  endpoint_id: string | null;
  heart_id: string;
  event_type: string;
  username: string;
  voter_identity: string;
  period: string;
  attempts: number;
  lease_until: Date;
  transport: SentTransport;
  counted_at: Date;
  /** An event's body, or a heart's reward counts (by event_type). */
  payload: EventPayload | RewardCountsPayload | null;
  steam_id: string | null;
  discord_id: string | null;
  minecraft_uuid: string | null;
  account_id: string | null;
  next_eligible_at: Date | null;
  payload_version: number;
  callback_url: string | null;
  standard_webhooks: boolean;
  public_key_signatures: boolean;
  votifier_host: string | null;
  votifier_port: number | null;
  votifier_service_name: string | null;
  votifier_token: string | null;
  callback_secrets: SealedSecretJson[] | null;
  last_day: Date | null;
  streak_days: number | null;
  pay_once: boolean;
  discord_webhook_id: string | null;
  discord_webhook_token: string | null;
  discord_templates: Record<string, string> | null;
  discord_embed: boolean | null;
  server_name: string | null;
  /** The claim's rows only: an earlier lease had run out unrecorded. */
  taken_over?: boolean;
}

/** The timestamp columns of a LeasedRow. */
type LeasedTimes = "lease_until" | "counted_at" | "next_eligible_at" | "last_day";

/** A LeasedRow inside JSON (json_agg of claimedColumnsSql: the insert's leased rows), where timestamps and dates are ISO text. */
export type LeasedJson = Omit<LeasedRow, LeasedTimes> & { lease_until: string; counted_at: string; next_eligible_at: string | null; last_day: string | null };

/** The one decoding of LeasedJson's timestamps. */
export function fromLeasedJson(j: LeasedJson): LeasedRow {
  const at = (text: string | null) => (text === null ? null : new Date(text));
  return { ...j, lease_until: new Date(j.lease_until), counted_at: new Date(j.counted_at), next_eligible_at: at(j.next_eligible_at), last_day: at(j.last_day) };
}

/** A delivery's `payload` column read by its event type: a heart's (or test's) reward counts, else an event's body. */
function storedPayloadOf(
  eventType: string,
  payload: EventPayload | RewardCountsPayload | null,
): { event: EventPayload | null; rewardCounts: RewardCountsPayload | null } {
  const heart = eventType === "heart.counted" || eventType === "heart.test";
  return { event: heart ? null : (payload as EventPayload | null), rewardCounts: heart ? (payload as RewardCountsPayload | null) : null };
}

/** A leased row as the dispatcher sends it; the secrets active at `now`, newest first. */
export function toClaimedDelivery(r: LeasedRow, now: Date): ClaimedDelivery {
  return {
    id: r.id,
    serverId: r.server_id,
    heartId: r.heart_id,
    eventType: r.event_type,
    username: r.username,
    voterIdentity: r.voter_identity,
    period: r.period,
    attempts: r.attempts,
    leaseUntil: r.lease_until,
    transport: r.transport,
    endpointId: r.endpoint_id,
    countedAt: r.counted_at,
    ...storedPayloadOf(r.event_type, r.payload),
    platformIds: { steamId: r.steam_id, discordId: r.discord_id, minecraftUuid: r.minecraft_uuid, accountId: r.account_id },
    nextEligibleAt: r.next_eligible_at,
    payloadVersion: r.payload_version,
    callbackUrl: r.callback_url,
    standardWebhooks: r.standard_webhooks,
    publicKeySignatures: r.public_key_signatures,
    votifier:
      r.votifier_host !== null && r.votifier_token !== null
        ? { host: r.votifier_host, port: r.votifier_port ?? 0, serviceName: r.votifier_service_name ?? "", sealedToken: r.votifier_token }
        : null,
    ...(r.callback_secrets === null ? {} : { sealedCallbackSecrets: toSealedNewestFirst(r.callback_secrets, now) }),
    voterStreak: r.last_day === null || r.streak_days === null ? null : { lastDay: r.last_day, streakDays: r.streak_days },
    payOnce: r.pay_once,
    discord:
      r.discord_webhook_id !== null && r.discord_webhook_token !== null
        ? {
            webhookId: r.discord_webhook_id,
            sealedToken: r.discord_webhook_token,
            templates: r.discord_templates ?? {},
            serverName: r.server_name ?? "",
            embed: r.discord_embed === true,
          }
        : null,
    ...(r.taken_over === true ? { takenOver: true } : {}),
  };
}

/** Gives a claimed delivery back without an attempt (for example its secret was revoked meanwhile). */
export async function releaseLease(prisma: PrismaClient, delivery: ClaimedDelivery): Promise<void> {
  await executeSql(prisma, releaseLeaseSql(delivery));
}
