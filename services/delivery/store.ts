import { activeSecretWhere, activeSecretsNewestFirst } from "../servers/domain/secret-policy.js";
import { serverExists } from "../servers/server-exists.js";
import type { PrismaClient } from "../shared/db.js";
import type { SecretBox } from "../shared/secrets.js";
import { streakAtDelivery } from "../hearts/domain/streak.js";
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
 * each decided by the server's settings at this moment. The dedup_key of a counted heart's
 * delivery is its heart_id, and `INSERT ... ON CONFLICT DO NOTHING` makes a redelivered Kafka
 * message add nothing; selecting from servers makes a deleted server a no-op instead of a
 * foreign-key error.
 */
export async function insertDelivery(prisma: PrismaClient, d: NewDelivery): Promise<InsertOutcome> {
  const rows = await prisma.$queryRaw<{ id: string }[]>`
    INSERT INTO deliveries (id, server_id, heart_id, dedup_key, transport, event_type, username, voter_identity, period, streak_day, counted_at, next_attempt_at)
    SELECT gen_random_uuid(), s.id, ${d.heartId}::uuid, ${d.heartId}, t.transport, ${d.eventType}, ${d.username}, ${d.voterIdentity}, ${d.period},
           ${d.streakDay}::int, ${d.countedAt}::timestamptz, now()
    FROM servers s
    CROSS JOIN (VALUES ('callback'::"DeliveryTransport"), ('votifier'::"DeliveryTransport"), ('pull'::"DeliveryTransport")) AS t(transport)
    WHERE s.id = ${d.serverId}::uuid
      AND (t.transport = 'callback'
           OR (t.transport = 'votifier' AND s.votifier_host IS NOT NULL)
           OR (t.transport = 'pull' AND s.pull_enabled))
    ON CONFLICT (server_id, transport, dedup_key) DO NOTHING
    RETURNING id::text`;
  if (rows.length > 0) return "inserted";
  return (await serverExists(prisma, d.serverId)) ? "duplicate" : "unknown_server";
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
}

/**
 * Claims due deliveries for this dispatcher: pending, due, not leased, and sendable:
 * a callback delivery of a server with a callback URL, not disabled (410) and with
 * an active callback secret, or a Votifier delivery of a server with Votifier set
 * up (pull deliveries are claimed by the owner, never here). Rows
 * are locked with `FOR UPDATE OF d SKIP LOCKED`, so several dispatcher instances
 * never claim the same row. At most `limit` rows; per server at most
 * `perServerLimit` minus what this instance already has in flight for it.
 */
export async function claimDueDeliveries(
  prisma: PrismaClient,
  q: { now: Date; leaseUntil: Date; limit: number; perServerLimit: number; inFlightByServer: Map<string, number> },
): Promise<ClaimedDelivery[]> {
  const busyIds = [...q.inFlightByServer.keys()];
  const busyCounts = busyIds.map((id) => q.inFlightByServer.get(id) ?? 0);
  const saturated = busyIds.filter((id) => (q.inFlightByServer.get(id) ?? 0) >= q.perServerLimit);
  // Scan a few times the limit, so one server's backlog cannot hide other servers' rows in one claim.
  const scan = q.limit * 4;
  const rows = await prisma.$queryRaw<
    {
      id: string;
      server_id: string;
      heart_id: string;
      event_type: string;
      username: string;
      voter_identity: string;
      period: string;
      attempts: number;
      lease_until: Date;
      transport: SentTransport;
      counted_at: Date;
      callback_url: string | null;
      standard_webhooks: boolean;
      votifier_host: string | null;
      votifier_port: number | null;
      votifier_service_name: string | null;
      votifier_token: string | null;
    }[]
  >`
    WITH busy AS (
      SELECT * FROM unnest(${busyIds}::uuid[], ${busyCounts}::int[]) AS b(server_id, in_flight)
    ), candidates AS (
      SELECT d.id, d.server_id, d.next_attempt_at
      FROM deliveries d JOIN servers s ON s.id = d.server_id
      WHERE d.status = 'pending'
        AND d.next_attempt_at <= ${q.now}::timestamptz
        AND (d.lease_until IS NULL OR d.lease_until < ${q.now}::timestamptz)
        AND ((d.transport = 'callback'
              AND s.callback_url IS NOT NULL
              AND s.callback_disabled_at IS NULL
              AND EXISTS ( -- an active callback secret (servers/domain/secret-policy.ts#isSecretActive)
                SELECT 1 FROM server_secrets k
                WHERE k.server_id = s.id AND k.purpose = 'callback' AND k.revoked_at IS NULL
                  AND (k.expires_at IS NULL OR k.expires_at > ${q.now}::timestamptz)))
          OR (d.transport = 'votifier' AND s.votifier_host IS NOT NULL AND s.votifier_token IS NOT NULL))
        AND d.server_id <> ALL(${saturated}::uuid[])
      ORDER BY d.next_attempt_at
      LIMIT ${scan}
      FOR UPDATE OF d SKIP LOCKED
    ), chosen AS (
      SELECT c.id FROM (
        SELECT c.id, c.next_attempt_at,
               row_number() OVER (PARTITION BY c.server_id ORDER BY c.next_attempt_at, c.id) AS rn,
               ${q.perServerLimit}::int - coalesce(b.in_flight, 0) AS room
        FROM candidates c LEFT JOIN busy b ON b.server_id = c.server_id
      ) c
      WHERE c.rn <= c.room
      ORDER BY c.next_attempt_at
      LIMIT ${q.limit}
    )
    UPDATE deliveries d SET lease_until = ${q.leaseUntil}::timestamptz
    FROM chosen, servers s
    WHERE d.id = chosen.id AND s.id = d.server_id
    RETURNING d.id::text, d.server_id::text, d.heart_id::text, d.event_type, d.username, d.voter_identity, d.period,
              d.attempts, d.lease_until, d.transport, d.counted_at, s.callback_url, s.standard_webhooks,
              s.votifier_host, s.votifier_port, s.votifier_service_name, s.votifier_token`;
  return rows.map((r) => ({
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
  }));
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
export type AttemptResult =
  | { kind: "delivered" }
  | { kind: "retry"; nextAttemptAt: Date }
  | { kind: "failed" }
  | { kind: "held_gone"; reason: string };

/**
 * Records one attempt (always), with its exact exchange, and keeps the endpoint's health; then
 * applies its result to the delivery (only while this dispatcher still holds the lease), all in
 * one transaction. A 410, or a run of failures older than the auto-disable period, disables the
 * server's callback; that and a delivery failing for good write an owner notification to the
 * outbox in the same transaction. Returns false when the lease was lost.
 */
export async function recordAttempt(
  prisma: PrismaClient,
  a: {
    delivery: ClaimedDelivery;
    startedAt: Date;
    finishedAt: Date;
    exchange: AttemptExchange;
    result: AttemptResult;
    /** Overrides AUTO_DISABLE_AFTER_MS. */
    autoDisableAfterMs?: number;
  },
): Promise<boolean> {
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

/** Gives a claimed delivery back without an attempt (for example its secret was revoked meanwhile). */
export async function releaseLease(prisma: PrismaClient, delivery: ClaimedDelivery): Promise<void> {
  await prisma.delivery.updateMany({ where: { id: delivery.id, leaseUntil: delivery.leaseUntil }, data: { leaseUntil: null } });
}
