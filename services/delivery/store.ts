import { activeSecretWhere, activeSecretsNewestFirst } from "../servers/domain/secret-policy.js";
import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient, Tx } from "../shared/db.js";
import type { Logger } from "../shared/log.js";
import type { SecretBox } from "../shared/secrets.js";
import { streakAtDelivery, type StreakState } from "../hearts/domain/streak.js";
import { randomUUID } from "node:crypto";
import { toStoredExchange, type AttemptExchange } from "./attempt-exchange.js";
import { autoDisableIfFailingTooLong, recordEndpointHealth } from "./endpoint-health.js";
import { notifyDeliveryFailed, notifyEndpointDisabled } from "./owner-notifications.js";
import { NIL_UUID } from "../shared/ids.js";
import type { SentTransport } from "./transport.js";

/** A counted heart, as the consumer turns it into a delivery. */
export interface NewDelivery {
  heartId: string;
  serverId: string;
  eventType: string;
  username: string;
  voterIdentity: string;
  period: string;
  streakDay: number | null;
  countedAt: Date;
}

/** What inserting a delivery did. */
export type InsertOutcome = "inserted" | "duplicate" | "unknown_server";

/**
 * Inserts the deliveries of a counted heart, idempotently per (server_id, transport, heart_id):
 * always the HTTP callback (held while the server has no callback URL), plus a Votifier
 * delivery when the server has Votifier set up and a pull delivery when its pull API is on,
 * each decided by the server's settings at this moment. See insertDeliveries.
 */
export async function insertDelivery(prisma: PrismaClient, d: NewDelivery): Promise<InsertOutcome> {
  const [outcome] = await insertDeliveries(prisma, [d]);
  return outcome ?? "unknown_server";
}

/**
 * Inserts the deliveries of many counted hearts with ONE statement (the consumer's batch), with
 * an outcome per heart in input order. The dedup_key of a counted heart's delivery is its
 * heart_id, and `INSERT ... ON CONFLICT DO NOTHING` makes a redelivered Kafka message add
 * nothing (exactly once per receiver key, whatever the batch); joining servers makes a deleted
 * server a no-op instead of a foreign-key error. Rows go in (server, heart) order, so two
 * instances inserting overlapping batches lock in the same order. A delivery is due from when its
 * heart counted (never later than now): claims take the oldest hearts first, across servers,
 * however the batches that stored them were grouped.
 */
export async function insertDeliveries(prisma: PrismaClient, items: NewDelivery[]): Promise<InsertOutcome[]> {
  return (await insertAndLeaseDeliveries(prisma, items)).outcomes;
}

/** A lease offered with an insert: the dispatcher's room, as claimDueDeliveries takes it. */
export interface InsertLease {
  now: Date;
  leaseUntil: Date;
  /** Most rows leased; 0 leases none. */
  limit: number;
  perServerLimit: number;
  inFlightByServer: ReadonlyMap<string, number>;
}

/** What insertAndLeaseDeliveries did: an outcome per heart, the rows it leased, and whether sendable rows were left for a claim. */
export interface InsertedDeliveries {
  outcomes: InsertOutcome[];
  /** Rows inserted already leased to the caller (as claimDueDeliveries would have claimed them). */
  leased: ClaimedDelivery[];
  /** Sendable rows were inserted without a lease (beyond the room, or none offered): a claim should run. */
  leftForClaim: boolean;
}

/**
 * insertDeliveries, and in the same statement (one commit) the new rows a dispatcher would claim
 * next are inserted already leased to it, up to `lease.limit` rows and `lease.perServerLimit` per
 * server (minus what is in flight), with what sending needs, so a delivery stored at idle goes out
 * without a claim statement after it. Which rows are sendable is the claim's rule (SENDABLE_DELIVERY).
 * A leased row is durable with its lease, like a claimed one: if this process dies before the
 * attempt is recorded, the lease expires and any dispatcher claims it again.
 */
export async function insertAndLeaseDeliveries(prisma: PrismaClient, items: NewDelivery[], lease?: InsertLease): Promise<InsertedDeliveries> {
  if (items.length === 0) return { outcomes: [], leased: [], leftForClaim: false };
  // One row per (server, heart): a heart twice in one batch is a duplicate of itself.
  const byKey = new Map<string, number>();
  const unique: NewDelivery[] = [];
  const slot = items.map((d) => {
    const key = `${d.serverId}/${d.heartId}`;
    let i = byKey.get(key);
    if (i === undefined) {
      i = unique.push(d) - 1;
      byKey.set(key, i);
    }
    return i;
  });
  const order = unique.map((_, i) => i).sort((a, b) => compareKeys(unique[a]!, unique[b]!));
  const input = order.map((i) => {
    const d = unique[i]!;
    return {
      n: i,
      heart_id: d.heartId,
      server_id: d.serverId,
      event_type: d.eventType,
      username: d.username,
      voter_identity: d.voterIdentity,
      period: d.period,
      streak_day: d.streakDay,
      counted_at: d.countedAt.toISOString(),
    };
  });
  const room = lease ?? { now: new Date(), leaseUntil: new Date(0), limit: 0, perServerLimit: 0, inFlightByServer: new Map<string, number>() };
  const busyIds = [...room.inFlightByServer.keys()];
  const busyCounts = busyIds.map((id) => room.inFlightByServer.get(id) ?? 0);
  const rows = await prisma.$queryRaw<{ n: number; inserted: boolean; known: boolean; leased: LeasedRow[] | null; left_for_claim: boolean }[]>`
    WITH input AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
        AS i(n int, heart_id text, server_id uuid, event_type text, username text, voter_identity text, period text, streak_day int, counted_at timestamptz)
    ), busy AS (
      SELECT * FROM unnest(${busyIds}::uuid[], ${busyCounts}::int[]) AS b(server_id, in_flight)
    ), candidates AS (
      SELECT i.*, d.transport, ${SENDABLE_DELIVERY(room.now)} AS sendable
      FROM input i
      JOIN servers s ON s.id = i.server_id
      CROSS JOIN (VALUES ('callback'::"DeliveryTransport"), ('votifier'::"DeliveryTransport"), ('pull'::"DeliveryTransport")) AS d(transport)
      WHERE d.transport = 'callback'
         OR (d.transport = 'votifier' AND s.votifier_host IS NOT NULL)
         OR (d.transport = 'pull' AND s.pull_enabled)
    ), offered AS (
      -- The rows a claim would take first: per server at most its room, in all at most the limit (oldest hearts first).
      SELECT c.*, c.sendable
               AND row_number() OVER (PARTITION BY c.sendable, c.server_id ORDER BY c.counted_at, c.heart_id, c.transport)
                   <= ${room.perServerLimit}::int - coalesce(b.in_flight, 0)
               AND row_number() OVER (PARTITION BY c.sendable ORDER BY c.counted_at, c.heart_id, c.transport) <= ${room.limit}::int AS leased
      FROM candidates c LEFT JOIN busy b ON b.server_id = c.server_id
    ), added AS (
      INSERT INTO deliveries (id, server_id, heart_id, dedup_key, transport, event_type, username, voter_identity, period, streak_day, counted_at,
                              next_attempt_at, lease_until)
      SELECT gen_random_uuid(), o.server_id, o.heart_id::uuid, o.heart_id, o.transport, o.event_type, o.username, o.voter_identity, o.period,
             o.streak_day, o.counted_at, least(o.counted_at, now()), CASE WHEN o.leased THEN ${room.leaseUntil}::timestamptz END
      FROM offered o
      ORDER BY o.server_id, o.heart_id, o.transport
      ON CONFLICT (server_id, transport, dedup_key) DO NOTHING
      RETURNING *
    )
    SELECT i.n,
           EXISTS (SELECT 1 FROM added a WHERE a.server_id = i.server_id AND a.dedup_key = i.heart_id) AS inserted,
           EXISTS (SELECT 1 FROM servers s WHERE s.id = i.server_id) AS known,
           (SELECT json_agg(c) FROM (
              SELECT ${CLAIMED_COLUMNS}
              FROM added d
              JOIN servers s ON s.id = d.server_id
              LEFT JOIN voter_states v ON d.event_type = 'heart.counted' AND v.server_id = d.server_id AND v.voter_identity = d.voter_identity
              WHERE d.lease_until IS NOT NULL) c) AS leased,
           EXISTS (SELECT 1 FROM offered o WHERE o.sendable AND NOT o.leased) AS left_for_claim
    FROM input i`;
  const outcomes: InsertOutcome[] = unique.map(() => "unknown_server");
  for (const r of rows) outcomes[r.n] = r.inserted ? "inserted" : r.known ? "duplicate" : "unknown_server";
  // A repeat within the batch is a duplicate of its first copy (or, like it, of an unknown server).
  const firstSeen = new Set<number>();
  return {
    outcomes: slot.map((i) => {
      const outcome = outcomes[i] ?? "unknown_server";
      if (firstSeen.has(i)) return outcome === "unknown_server" ? outcome : "duplicate";
      firstSeen.add(i);
      return outcome;
    }),
    leased: (rows[0]?.leased ?? []).map((r) => toClaimedDelivery(r, room.now)),
    leftForClaim: rows.some((r) => r.left_for_claim),
  };
}

function compareKeys(a: NewDelivery, b: NewDelivery): number {
  return a.serverId < b.serverId ? -1 : a.serverId > b.serverId ? 1 : a.heartId < b.heartId ? -1 : a.heartId > b.heartId ? 1 : 0;
}

/**
 * Stores a `heart.test` delivery (nil heart_id; dedup_key = its own id, so every test is a
 * new delivery) already leased to the caller, who makes its first attempt at once; the
 * dispatcher retries it like any other when that attempt fails.
 */
export async function insertTestDelivery(
  prisma: PrismaClient,
  t: { serverId: string; username: string; period: string; now: Date; leaseUntil: Date; callbackUrl: string; standardWebhooks: boolean },
): Promise<ClaimedDelivery> {
  const id = randomUUID();
  await prisma.delivery.create({
    data: {
      id,
      serverId: t.serverId,
      heartId: NIL_UUID,
      dedupKey: id,
      transport: "callback",
      eventType: "heart.test",
      username: t.username,
      voterIdentity: "",
      period: t.period,
      countedAt: t.now,
      nextAttemptAt: t.now,
      leaseUntil: t.leaseUntil,
      createdAt: t.now,
    },
  });
  return {
    id,
    serverId: t.serverId,
    heartId: NIL_UUID,
    eventType: "heart.test",
    username: t.username,
    voterIdentity: "",
    period: t.period,
    attempts: 0,
    leaseUntil: t.leaseUntil,
    transport: "callback",
    countedAt: t.now,
    callbackUrl: t.callbackUrl,
    standardWebhooks: t.standardWebhooks,
    votifier: null,
  };
}

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
  /** When the heart counted. */
  countedAt: Date;
  /** Callback settings (callback deliveries); null when the server has no callback URL. */
  callbackUrl: string | null;
  standardWebhooks: boolean;
  /** Votifier settings (Votifier deliveries), with the token still sealed; null when not configured. */
  votifier: { host: string; port: number; serviceName: string; sealedToken: string } | null;
  /**
   * The server's active callback secrets, still sealed, newest first, as the claim read them
   * (so a rotation is seen by the next claim); absent when not read with the delivery, and the
   * transport reads them itself.
   */
  sealedCallbackSecrets?: string[];
  /** The voter's streak state as the claim read it (null: none); absent when not read with the delivery. */
  voterStreak?: StreakState | null;
}

/**
 * Claims due deliveries for this dispatcher: pending, due, not leased, and sendable:
 * a callback delivery of a server with a callback URL, not disabled (410) and with
 * an active callback secret, or a Votifier delivery of a server with Votifier set
 * up (pull deliveries are claimed by the owner, never here). Rows
 * are locked with `FOR UPDATE OF d SKIP LOCKED`, so several dispatcher instances
 * never claim the same row. At most `limit` rows; per server at most
 * `perServerLimit` minus what this instance already has in flight for it. The same statement
 * reads what sending needs: the server's active callback secrets (sealed) and the voter's
 * streak state, so an attempt costs no further reads.
 */
export async function claimDueDeliveries(
  prisma: PrismaClient,
  q: { now: Date; leaseUntil: Date; limit: number; perServerLimit: number; inFlightByServer: ReadonlyMap<string, number> },
): Promise<ClaimedDelivery[]> {
  const busyIds = [...q.inFlightByServer.keys()];
  const busyCounts = busyIds.map((id) => q.inFlightByServer.get(id) ?? 0);
  const saturated = busyIds.filter((id) => (q.inFlightByServer.get(id) ?? 0) >= q.perServerLimit);
  // Scan a few times the limit, so one server's backlog cannot hide other servers' rows in one claim.
  const scan = q.limit * 4;
  const rows = await prisma.$queryRaw<LeasedRow[]>`
    WITH busy AS (
      SELECT * FROM unnest(${busyIds}::uuid[], ${busyCounts}::int[]) AS b(server_id, in_flight)
    ), candidates AS (
      SELECT d.id, d.server_id, d.next_attempt_at, d.voter_identity, d.event_type
      FROM deliveries d JOIN servers s ON s.id = d.server_id
      WHERE d.status = 'pending'
        AND d.next_attempt_at <= ${q.now}::timestamptz
        AND (d.lease_until IS NULL OR d.lease_until < ${q.now}::timestamptz)
        AND ${SENDABLE_DELIVERY(q.now)}
        AND d.server_id <> ALL(${saturated}::uuid[])
      ORDER BY d.next_attempt_at
      LIMIT ${scan}
      FOR UPDATE OF d SKIP LOCKED
    ), chosen AS (
      SELECT c.id, v.last_day, v.streak_days FROM (
        SELECT c.id, c.server_id, c.voter_identity, c.event_type, c.next_attempt_at,
               row_number() OVER (PARTITION BY c.server_id ORDER BY c.next_attempt_at, c.id) AS rn,
               ${q.perServerLimit}::int - coalesce(b.in_flight, 0) AS room
        FROM candidates c LEFT JOIN busy b ON b.server_id = c.server_id
      ) c
      LEFT JOIN voter_states v ON c.event_type = 'heart.counted' AND v.server_id = c.server_id AND v.voter_identity = c.voter_identity
      WHERE c.rn <= c.room
      ORDER BY c.next_attempt_at
      LIMIT ${q.limit}
    )
    UPDATE deliveries d SET lease_until = ${q.leaseUntil}::timestamptz
    FROM chosen v, servers s
    WHERE d.id = v.id AND s.id = d.server_id
    RETURNING ${CLAIMED_COLUMNS}`;
  return rows.map((r) => toClaimedDelivery(r, q.now));
}

/**
 * Whether delivery `d` of server `s` can be sent by a dispatcher at `now`: a callback delivery of a
 * server with a callback URL, not disabled (410) and with an active callback secret, or a Votifier
 * delivery of a server with Votifier set up (pull deliveries are claimed by the owner, never here).
 * The one rule of the claim and of the lease taken with an insert.
 */
const SENDABLE_DELIVERY = (now: Date) => Prisma.sql`
  ((d.transport = 'callback'
    AND s.callback_url IS NOT NULL
    AND s.callback_disabled_at IS NULL
    AND EXISTS ( -- an active callback secret (servers/domain/secret-policy.ts#isSecretActive)
      SELECT 1 FROM server_secrets k
      WHERE k.server_id = s.id AND k.purpose = 'callback' AND k.revoked_at IS NULL
        AND (k.expires_at IS NULL OR k.expires_at > ${now}::timestamptz)))
   OR (d.transport = 'votifier' AND s.votifier_host IS NOT NULL AND s.votifier_token IS NOT NULL))`;

/**
 * What a dispatcher needs to send a leased delivery `d` of server `s`, with `v` the voter's streak
 * state (last_day, streak_days): the columns of LeasedRow.
 */
const CLAIMED_COLUMNS = Prisma.sql`
  d.id::text, d.server_id::text, d.heart_id::text, d.event_type, d.username, d.voter_identity, d.period,
  d.attempts, d.lease_until, d.transport, d.counted_at, s.callback_url, s.standard_webhooks,
  s.votifier_host, s.votifier_port, s.votifier_service_name, s.votifier_token,
  v.last_day, v.streak_days,
  CASE WHEN d.transport = 'callback' THEN (
    SELECT coalesce(json_agg(json_build_object('kid', k.kid, 'ciphertext', k.ciphertext, 'created_at', k.created_at,
                                               'expires_at', k.expires_at, 'revoked_at', k.revoked_at)), '[]'::json)
    FROM server_secrets k
    WHERE k.server_id = d.server_id AND k.purpose = 'callback' AND k.revoked_at IS NULL) END AS callback_secrets`;

/** A row of CLAIMED_COLUMNS (dates as Date from a statement's columns, as ISO text from JSON). */
interface LeasedRow {
  id: string;
  server_id: string;
  heart_id: string;
  event_type: string;
  username: string;
  voter_identity: string;
  period: string;
  attempts: number;
  lease_until: Date | string;
  transport: SentTransport;
  counted_at: Date | string;
  callback_url: string | null;
  standard_webhooks: boolean;
  votifier_host: string | null;
  votifier_port: number | null;
  votifier_service_name: string | null;
  votifier_token: string | null;
  callback_secrets: { kid: string; ciphertext: string; created_at: string; expires_at: string | null; revoked_at: string | null }[] | null;
  last_day: Date | string | null;
  streak_days: number | null;
}

function toClaimedDelivery(r: LeasedRow, now: Date): ClaimedDelivery {
  return {
    id: r.id,
    serverId: r.server_id,
    heartId: r.heart_id,
    eventType: r.event_type,
    username: r.username,
    voterIdentity: r.voter_identity,
    period: r.period,
    attempts: r.attempts,
    leaseUntil: new Date(r.lease_until),
    transport: r.transport,
    countedAt: new Date(r.counted_at),
    callbackUrl: r.callback_url,
    standardWebhooks: r.standard_webhooks,
    votifier:
      r.votifier_host !== null && r.votifier_token !== null
        ? { host: r.votifier_host, port: r.votifier_port ?? 0, serviceName: r.votifier_service_name ?? "", sealedToken: r.votifier_token }
        : null,
    ...(r.callback_secrets === null ? {} : { sealedCallbackSecrets: sealedActiveSecrets(r.callback_secrets, now) }),
    voterStreak: r.last_day === null || r.streak_days === null ? null : { lastDay: new Date(r.last_day), streakDays: r.streak_days },
  };
}

/** The claimed secret rows that are active at `now`, newest first (secret-policy's rule), still sealed. */
function sealedActiveSecrets(
  rows: { kid: string; ciphertext: string; created_at: string; expires_at: string | null; revoked_at: string | null }[],
  now: Date,
): string[] {
  const secrets = rows.map((k) => ({
    kid: k.kid,
    ciphertext: k.ciphertext,
    createdAt: new Date(k.created_at),
    expiresAt: k.expires_at === null ? null : new Date(k.expires_at),
    revokedAt: k.revoked_at === null ? null : new Date(k.revoked_at),
  }));
  return activeSecretsNewestFirst(secrets, now).map((k) => k.ciphertext);
}

/**
 * The server's active callback secrets, decrypted, newest first: not revoked and
 * not past the end of their rotation overlap.
 */
export async function loadCallbackSecrets(prisma: PrismaClient, secretBox: SecretBox, serverId: string, now: Date): Promise<string[]> {
  const rows = await prisma.serverSecret.findMany({ where: { serverId, purpose: "callback", ...activeSecretWhere(now) } });
  return activeSecretsNewestFirst(rows, now).map((r) => secretBox.open(r.ciphertext));
}

/** The newest active referral secret with its kid, or null. */
export async function loadNewestReferralSecret(
  prisma: PrismaClient,
  secretBox: SecretBox,
  serverId: string,
  now: Date,
): Promise<{ kid: string; secret: string } | null> {
  const [row] = activeSecretsNewestFirst(await prisma.serverSecret.findMany({ where: { serverId, purpose: "referral", ...activeSecretWhere(now) } }), now);
  return row ? { kid: row.kid, secret: secretBox.open(row.ciphertext) } : null;
}

/**
 * The voter's streak at delivery time `at` (see streakAtDelivery): today or
 * yesterday keeps `streak_days`, older is 0, no row is undefined (omitted).
 */
export async function readStreakAtDelivery(prisma: PrismaClient, serverId: string, voterIdentity: string, at: Date): Promise<number | undefined> {
  const state = await prisma.voterState.findUnique({
    where: { serverId_voterIdentity: { serverId, voterIdentity } },
    select: { lastDay: true, streakDays: true },
  });
  return streakAtDelivery(state, at);
}

/** What the dispatcher decided after one attempt. */
export type AttemptResult = { kind: "delivered" } | { kind: "retry"; nextAttemptAt: Date } | { kind: "failed" } | { kind: "held_gone"; reason: string };

/**
 * Records one attempt (always), with its exact exchange, and keeps the endpoint's health; then
 * applies its result to the delivery (only while this dispatcher still holds the lease), all in
 * one transaction. A 410, or a run of failures older than the auto-disable period, disables the
 * server's callback; that and a delivery failing for good write an owner notification to the
 * outbox in the same transaction. Returns false when the lease was lost.
 */
export async function recordAttempt(prisma: PrismaClient, a: AttemptRecord): Promise<boolean> {
  const { delivery: d, result } = a;
  const x = toStoredExchange(a.exchange);
  const statusCode = x.response && x.response.status > 0 ? x.response.status : null;
  return prisma.$transaction(async (tx) => {
    await tx.$executeRaw`
      INSERT INTO delivery_attempts (delivery_id, server_id, attempt, url, started_at, status_code, latency_ms, error, succeeded,
                                     request_headers, request_body, response_headers, response_body, response_body_truncated)
      VALUES (${d.id}::uuid, ${d.serverId}::uuid, (SELECT count(*)::int + 1 FROM delivery_attempts WHERE delivery_id = ${d.id}::uuid), ${x.target},
              ${a.startedAt}::timestamptz, ${statusCode}::int, ${x.latencyMs}::int, ${x.error}, ${x.succeeded},
              ${JSON.stringify(x.request.headers)}::jsonb, ${x.request.body},
              ${x.response ? JSON.stringify(x.response.headers) : null}::jsonb, ${x.response?.body ?? null}, ${x.response?.bodyTruncated ?? false})`;
    // Endpoint health and its auto-disable are about the callback endpoint; other transports only log attempts.
    const failingSince = d.transport === "callback" ? await recordEndpointHealth(tx, d.serverId, x, a.startedAt) : null;
    const owned = { id: d.id, status: "pending" as const, leaseUntil: d.leaseUntil };
    const common = { attempts: { increment: 1 }, leaseUntil: null, lastStatusCode: statusCode, lastError: x.error };
    let changed: { count: number };
    switch (result.kind) {
      case "delivered":
        changed = await tx.delivery.updateMany({ where: owned, data: { ...common, status: "delivered", deliveredAt: a.finishedAt } });
        break;
      case "retry":
        changed = await tx.delivery.updateMany({ where: owned, data: { ...common, nextAttemptAt: result.nextAttemptAt } });
        break;
      case "failed":
        changed = await tx.delivery.updateMany({ where: owned, data: { ...common, status: "failed", failedAt: a.finishedAt } });
        if (changed.count === 1) {
          const server = await tx.server.findUniqueOrThrow({ where: { id: d.serverId }, select: { id: true, name: true, callbackUrl: true } });
          const failed = { ...d, attempts: d.attempts + 1, lastStatusCode: statusCode, lastError: x.error ?? "", target: x.target };
          await notifyDeliveryFailed(tx, server, failed, a.finishedAt);
        }
        break;
      case "held_gone": {
        const disabled = await tx.$queryRaw<{ name: string; callback_url: string | null }[]>`
          UPDATE servers SET callback_disabled_at = ${a.finishedAt}::timestamptz, callback_disabled_reason = ${result.reason}
          WHERE id = ${d.serverId}::uuid AND callback_disabled_at IS NULL
          RETURNING name, callback_url`;
        const server = disabled[0];
        if (server) await notifyEndpointDisabled(tx, { id: d.serverId, name: server.name, callbackUrl: server.callback_url }, result.reason, a.finishedAt);
        // Stays pending and due: the claim skips it while the callback is disabled, and sends it once re-enabled.
        changed = await tx.delivery.updateMany({ where: owned, data: { ...common, nextAttemptAt: a.finishedAt } });
        break;
      }
    }
    if (failingSince && result.kind !== "held_gone") {
      await autoDisableIfFailingTooLong(tx, {
        serverId: d.serverId,
        failingSince,
        lastError: x.error ?? "attempt failed",
        at: a.finishedAt,
        ...(a.autoDisableAfterMs === undefined ? {} : { afterMs: a.autoDisableAfterMs }),
      });
    }
    return changed.count === 1;
  });
}

/** One attempt to record, as recordAttempt takes it. */
export interface AttemptRecord {
  delivery: ClaimedDelivery;
  startedAt: Date;
  finishedAt: Date;
  exchange: AttemptExchange;
  result: AttemptResult;
  /** Overrides AUTO_DISABLE_AFTER_MS. */
  autoDisableAfterMs?: number;
}

/** How recording one attempt of a batch went: whether the lease was still held, or why it could not be recorded. */
export type RecordOutcome = { kind: "recorded"; owned: boolean } | { kind: "error"; error: unknown };

/**
 * Records many attempts with what recordAttempt does for each, in as few statements as it can:
 * every delivered or retried attempt of the batch with ONE statement (attempt rows with their
 * exchanges, the deliveries' results under their leases, and each server's endpoint health,
 * folded in recording order), and the rare ones (failed for good, 410 Gone) one transaction
 * each, as they write owner notifications. Per record, in input order: whether the lease was
 * still held (false: the attempt is logged only), or the error that kept it from being recorded;
 * one record's error never fails the others.
 */
export async function recordAttempts(prisma: PrismaClient, records: AttemptRecord[], log?: Logger): Promise<RecordOutcome[]> {
  const outcomes: RecordOutcome[] = records.map(() => ({ kind: "recorded", owned: false }));
  const bulk: number[] = [];
  const single: number[] = [];
  records.forEach((r, i) => (r.result.kind === "delivered" || r.result.kind === "retry" ? bulk : single).push(i));
  if (bulk.length > 0) {
    try {
      const changed = await recordRoutineAttempts(
        prisma,
        bulk.map((i) => records[i]!),
      );
      bulk.forEach((i, j) => (outcomes[i] = { kind: "recorded", owned: changed[j] ?? false }));
    } catch (error) {
      // Failure policy: one bad item (say a byte the database refuses) must not fail its neighbours: record them one by one.
      log?.warn({ err: error, attempts: bulk.length }, "recording attempts in bulk failed; recording them one by one");
      single.push(...bulk);
    }
  }
  for (const i of single.sort((a, b) => a - b)) {
    try {
      outcomes[i] = { kind: "recorded", owned: await recordAttempt(prisma, records[i]!) };
    } catch (error) {
      // Failure policy: reported for this record alone (its caller logs it; the lease expires and it is attempted again).
      outcomes[i] = { kind: "error", error };
    }
  }
  return outcomes;
}

/** The bulk statement of recordAttempts (delivered and retry results only), then any auto-disable it calls for. */
async function recordRoutineAttempts(prisma: PrismaClient, records: AttemptRecord[]): Promise<boolean[]> {
  const stored = records.map((r) => toStoredExchange(r.exchange));
  const input = records.map((r, n) => {
    const x = stored[n]!;
    const statusCode = x.response && x.response.status > 0 ? x.response.status : null;
    return {
      n,
      id: r.delivery.id,
      server_id: r.delivery.serverId,
      lease_until: r.delivery.leaseUntil.toISOString(),
      result: r.result.kind,
      next_attempt_at: r.result.kind === "retry" ? r.result.nextAttemptAt.toISOString() : null,
      finished_at: r.finishedAt.toISOString(),
      url: x.target,
      started_at: r.startedAt.toISOString(),
      status_code: statusCode,
      latency_ms: x.latencyMs,
      error: x.error,
      succeeded: x.succeeded,
      request_headers: x.request.headers,
      request_body: x.request.body,
      response_headers: x.response ? x.response.headers : null,
      response_body: x.response?.body ?? null,
      response_body_truncated: x.response?.bodyTruncated ?? false,
    };
  });
  const health = foldEndpointHealth(records, stored);
  const write = (db: PrismaClient | Tx) => db.$queryRaw<{ owned: string[]; health: { server_id: string; failing_since: string | null }[] }[]>`
    WITH input AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
        AS i(n int, id uuid, server_id uuid, lease_until timestamptz, result text, next_attempt_at timestamptz, finished_at timestamptz,
             url text, started_at timestamptz, status_code int, latency_ms int, error text, succeeded boolean,
             request_headers jsonb, request_body text, response_headers jsonb, response_body text, response_body_truncated boolean)
    ), changed AS (
      UPDATE deliveries d
      SET attempts = d.attempts + 1, lease_until = NULL, last_status_code = i.status_code, last_error = i.error,
          status = CASE WHEN i.result = 'delivered' THEN 'delivered'::"DeliveryStatus" ELSE d.status END,
          delivered_at = CASE WHEN i.result = 'delivered' THEN i.finished_at ELSE d.delivered_at END,
          next_attempt_at = CASE WHEN i.result = 'retry' THEN i.next_attempt_at ELSE d.next_attempt_at END
      FROM input i
      WHERE d.id = i.id AND d.status = 'pending' AND d.lease_until = i.lease_until
      RETURNING d.id
    ), logged AS (
      INSERT INTO delivery_attempts (delivery_id, server_id, attempt, url, started_at, status_code, latency_ms, error, succeeded,
                                     request_headers, request_body, response_headers, response_body, response_body_truncated)
      SELECT i.id, i.server_id,
             (SELECT count(*)::int FROM delivery_attempts a WHERE a.delivery_id = i.id) + (row_number() OVER (PARTITION BY i.id ORDER BY i.n))::int,
             i.url, i.started_at, i.status_code, i.latency_ms, i.error, i.succeeded,
             i.request_headers, i.request_body, i.response_headers, i.response_body, i.response_body_truncated
      FROM input i ORDER BY i.n
    ), health AS (
      INSERT INTO callback_health (server_id, last_success_at, failing_since, last_failure_at, last_failure_reason)
      SELECT h.server_id, h.last_success_at, h.failing_since, h.last_failure_at, h.last_failure_reason
      FROM jsonb_to_recordset(${JSON.stringify(health)}::jsonb)
        AS h(server_id uuid, last_success_at timestamptz, failing_since timestamptz, last_failure_at timestamptz, last_failure_reason text)
      ORDER BY h.server_id
      ON CONFLICT (server_id) DO UPDATE
      SET last_success_at = greatest(callback_health.last_success_at, EXCLUDED.last_success_at),
          -- A success in the batch ends the run (the batch's own failures after it start the next one).
          failing_since = CASE WHEN EXCLUDED.last_success_at IS NOT NULL THEN EXCLUDED.failing_since
                               ELSE coalesce(callback_health.failing_since, EXCLUDED.failing_since) END,
          last_failure_at = coalesce(EXCLUDED.last_failure_at, callback_health.last_failure_at),
          last_failure_reason = CASE WHEN EXCLUDED.last_failure_at IS NOT NULL THEN EXCLUDED.last_failure_reason
                                     ELSE callback_health.last_failure_reason END
      RETURNING server_id, failing_since
    )
    SELECT ARRAY(SELECT id::text FROM changed) AS owned,
           coalesce((SELECT json_agg(json_build_object('server_id', server_id, 'failing_since', failing_since)) FROM health), '[]'::json) AS health`;
  const ownedOf = (rows: { owned: string[] }[]) => {
    const ownedIds = new Set(rows[0]?.owned ?? []);
    return records.map((r) => ownedIds.has(r.delivery.id));
  };
  // Only successes (the hot path): one statement, nothing can call for an auto-disable.
  if (records.every((r, n) => r.delivery.transport !== "callback" || stored[n]!.succeeded)) return ownedOf(await write(prisma));
  // A callback failed: the statement and any auto-disable it calls for commit together, as recordAttempt's do.
  return prisma.$transaction(async (tx) => {
    const rows = await write(tx);
    for (const h of rows[0]?.health ?? []) {
      const last = lastFailureOf(records, stored, h.server_id);
      if (h.failing_since === null || !last) continue;
      await autoDisableIfFailingTooLong(tx, {
        serverId: h.server_id,
        failingSince: new Date(h.failing_since),
        lastError: last.error,
        at: last.record.finishedAt,
        ...(last.record.autoDisableAfterMs === undefined ? {} : { afterMs: last.record.autoDisableAfterMs }),
      });
    }
    return ownedOf(rows);
  });
}

/** The batch's effect on each server's callback_health row, folded in recording order (callback attempts only). */
function foldEndpointHealth(records: AttemptRecord[], stored: AttemptExchange[]) {
  const byServer = new Map<
    string,
    { server_id: string; last_success_at: string | null; failing_since: string | null; last_failure_at: string | null; last_failure_reason: string | null }
  >();
  records.forEach((r, n) => {
    if (r.delivery.transport !== "callback") return;
    const x = stored[n]!;
    let h = byServer.get(r.delivery.serverId);
    if (!h) {
      h = { server_id: r.delivery.serverId, last_success_at: null, failing_since: null, last_failure_at: null, last_failure_reason: null };
      byServer.set(r.delivery.serverId, h);
    }
    const at = r.startedAt.toISOString();
    if (x.succeeded) {
      if (h.last_success_at === null || at > h.last_success_at) h.last_success_at = at;
      h.failing_since = null;
    } else {
      h.failing_since ??= at;
      h.last_failure_at = at;
      h.last_failure_reason = x.error ?? "attempt failed";
    }
  });
  return [...byServer.values()];
}

/** The last callback attempt of `serverId` in the batch, when it failed. */
function lastFailureOf(records: AttemptRecord[], stored: AttemptExchange[], serverId: string): { record: AttemptRecord; error: string } | undefined {
  for (let n = records.length - 1; n >= 0; n--) {
    const r = records[n]!;
    if (r.delivery.serverId !== serverId || r.delivery.transport !== "callback") continue;
    const x = stored[n]!;
    return x.succeeded ? undefined : { record: r, error: x.error ?? "attempt failed" };
  }
  return undefined;
}

/** Gives a claimed delivery back without an attempt (for example its secret was revoked meanwhile). */
export async function releaseLease(prisma: PrismaClient, delivery: ClaimedDelivery): Promise<void> {
  await prisma.delivery.updateMany({ where: { id: delivery.id, leaseUntil: delivery.leaseUntil }, data: { leaseUntil: null } });
}
