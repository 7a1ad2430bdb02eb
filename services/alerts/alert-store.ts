import { Prisma } from "../../gen/prisma/client.js";
import { type PlannerSettings, restorePlannerCte } from "../shared/adapters/sql/planner-fence.js";
import type { SqlTx } from "../shared/adapters/sql/executor.js";
import { ageKeyDeleteRule, type RetentionRule } from "../shared/adapters/retention-rule.js";
import { RECOVERABLE_KINDS, RECOVERED_DETAIL, RECOVERED_KEY_PREFIX, RECOVERED_TITLE_SUFFIX, type NewAlert } from "./alert-kinds.js";

/**
 * The owner module of `owner_alerts` and `owner_alert_channels` (docs/owner-alerts.md): every write of either table is
 * here, as statements or SQL fragments the writers of a cause compose into their own transaction.
 */

/**
 * "No alert for this cause yet", for a scan: the cause key `<kind>:<id>:<time>` as alert-kinds.ts writes it (the time
 * as Date.toISOString(): UTC, milliseconds, `Z`), probed in the cause_key index. `id` and `time` are the scan's columns.
 */
function notAlertedSql(kind: string, id: string, time: string): Prisma.Sql {
  return Prisma.sql`NOT EXISTS (
    SELECT 1 FROM owner_alerts o
    WHERE o.cause_key = ${`${kind}:`} || ${Prisma.raw(id)}::text || ':' || ${Prisma.raw(`to_char(${time} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`)})`;
}

/**
 * The one INSERT of alerts: one row per cause key (a key already there is dropped, so a cause fires once), for
 * servers that have an owner (an unowned server's alerts have nobody to reach). Due for the digest sender at once
 * (`send_after` = its time; the sender waits the digest window itself). Reads one servers row per alert.
 */
export function insertAlertsSql(alerts: readonly NewAlert[]): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO owner_alerts (id, owner_id, server_id, kind, cause_key, endpoint_id, title, detail, link, created_at, send_after)
    SELECT gen_random_uuid(), s.owner_id, a.server_id, a.kind, a.cause_key, a.endpoint_id, a.title, a.detail, a.link, a.at, a.at
    FROM jsonb_to_recordset(${JSON.stringify(alerts)}::jsonb)
      AS a(server_id uuid, kind text, cause_key text, endpoint_id uuid, title text, detail text, link text, at timestamptz)
    JOIN servers s ON s.id = a.server_id AND s.owner_id IS NOT NULL
    ORDER BY a.cause_key
    ON CONFLICT (cause_key) DO NOTHING
    RETURNING id`;
}

/** Writes alerts in the caller's transaction (the one that made their transition); returns how many were new. */
export async function raiseAlerts(tx: SqlTx, alerts: readonly NewAlert[]): Promise<number> {
  if (alerts.length === 0) return 0;
  return tx.execute(insertAlertsSql(alerts));
}

/**
 * CTEs (named alert_open, alert_resolved, alert_recovered; spliced after a comma into the top-level WITH of the
 * statement that records callback attempts, as data-modifying CTEs must be) for the endpoints in `recovered` (a
 * relation with an `endpoint_id uuid` column: the endpoints whose run of failures the statement just ended): their open
 * failing or disabled alerts are resolved and ONE recovered alert is written, keyed by the newest of them (so a
 * recovery fires once, however many statements see the success). Reads the endpoint's alert rows by the endpoint_id
 * index: its alerts within their retention (a handful), for each endpoint of the batch.
 */
export function recoverEndpointsCtes(recovered: Prisma.Sql, at: Date): Prisma.Sql {
  return Prisma.sql`
    alert_open AS (
      SELECT o.id, o.owner_id, o.server_id, o.endpoint_id, o.link, o.created_at
      FROM owner_alerts o
      WHERE o.endpoint_id IN (SELECT rec.endpoint_id FROM ${recovered} AS rec)
        AND o.resolved_at IS NULL AND o.kind = ANY(${[...RECOVERABLE_KINDS]}::text[])
    ), alert_resolved AS (
      UPDATE owner_alerts o SET resolved_at = ${at}::timestamptz FROM alert_open WHERE o.id = alert_open.id RETURNING o.id
    ), alert_recovered AS (
      INSERT INTO owner_alerts (id, owner_id, server_id, kind, cause_key, endpoint_id, title, detail, link, created_at, send_after)
      SELECT DISTINCT ON (a.endpoint_id) gen_random_uuid(), a.owner_id, a.server_id, 'endpoint_recovered',
             ${RECOVERED_KEY_PREFIX} || a.id::text, a.endpoint_id, s.name || ${RECOVERED_TITLE_SUFFIX}, ${RECOVERED_DETAIL},
             a.link, ${at}::timestamptz, ${at}::timestamptz
      FROM alert_open a JOIN servers s ON s.id = a.server_id
      ORDER BY a.endpoint_id, a.created_at DESC
      ON CONFLICT (cause_key) DO NOTHING
      RETURNING id
    )`;
}

/** An alert's row as every reader takes it. */
export interface AlertRow {
  id: string;
  server_id: string;
  kind: string;
  title: string;
  detail: string;
  link: string;
  created_at: Date;
}

/** An alert as the dashboard list shows it. */
export interface ListedAlert extends AlertRow {
  read_at: Date | null;
  resolved_at: Date | null;
}

/**
 * One page of an owner's (or of one server's) alerts, newest first, optionally unread only: at most `limit` rows read
 * by the (owner_id, created_at) or (server_id, created_at) index, plus read ones skipped on the way when unread only
 * (bounded by the owner's alerts within their retention).
 */
export function listAlertsSql(q: { by: { ownerId: string } | { serverId: string }; unreadOnly: boolean; before: Date | null; limit: number }): Prisma.Sql {
  const scope = "ownerId" in q.by ? Prisma.sql`owner_id = ${q.by.ownerId}` : Prisma.sql`server_id = ${q.by.serverId}::uuid`;
  return Prisma.sql`
    SELECT id::text, server_id::text, kind, title, detail, link, created_at, read_at, resolved_at
    FROM owner_alerts
    WHERE ${scope}
      AND (NOT ${q.unreadOnly} OR read_at IS NULL)
      AND (${q.before}::timestamptz IS NULL OR created_at < ${q.before}::timestamptz)
    ORDER BY created_at DESC, id DESC
    LIMIT ${q.limit}`;
}

/** Marks the owner's alerts `ids` read (another owner's ids change nothing): at most ids.length rows, by primary key. */
export function markAlertsReadSql(ownerId: string, ids: readonly string[], at: Date): Prisma.Sql {
  return Prisma.sql`
    UPDATE owner_alerts SET read_at = ${at}::timestamptz
    WHERE id = ANY(${[...ids]}::uuid[]) AND owner_id = ${ownerId} AND read_at IS NULL`;
}

/** An owner's chosen channels as stored (the webhook sealed). */
export interface StoredChannels {
  email: string | null;
  discord_webhook: string | null;
}

/** The owner's channels: one row by primary key. */
export function readChannelsSql(ownerId: string): Prisma.Sql {
  return Prisma.sql`SELECT email, discord_webhook FROM owner_alert_channels WHERE owner_id = ${ownerId}`;
}

/**
 * Sets the owner's channels: `email` (null: none); `discordWebhook` sealed, null to remove, undefined to keep the
 * stored one. One row by primary key.
 */
export function upsertChannelsSql(ownerId: string, email: string | null, discordWebhook: string | null | undefined, at: Date): Prisma.Sql {
  const keep = discordWebhook === undefined;
  return Prisma.sql`
    INSERT INTO owner_alert_channels (owner_id, email, discord_webhook, updated_at)
    VALUES (${ownerId}, ${email}, ${keep ? null : discordWebhook}, ${at}::timestamptz)
    ON CONFLICT (owner_id) DO UPDATE
    SET email = EXCLUDED.email,
        discord_webhook = CASE WHEN ${keep} THEN owner_alert_channels.discord_webhook ELSE EXCLUDED.discord_webhook END,
        updated_at = EXCLUDED.updated_at
    RETURNING email, discord_webhook`;
}

/**
 * Owners with an alert waiting for its digest since `cutoff` or earlier (the digest window has passed): at most
 * `limit` entries of the send_after index, the oldest first (several of one owner count once).
 */
export function dueOwnersSql(cutoff: Date, limit: number): Prisma.Sql {
  return Prisma.sql`
    SELECT DISTINCT owner_id FROM (
      SELECT owner_id FROM owner_alerts WHERE send_after <= ${cutoff}::timestamptz ORDER BY send_after LIMIT ${limit}
    ) due`;
}

/** An alert taken into a digest. */
export interface DigestAlert extends AlertRow {
  email_sent: boolean;
  discord_sent: boolean;
  attempts: number;
}

/**
 * Takes one owner's waiting alerts (at most `limit`, the oldest first, skipping rows another sender holds) for a
 * digest, moving their send_after to `leaseUntil` so no other pass takes them meanwhile. Runs right after
 * fenceIndexLedPlans in its transaction (`planner`: the settings to put back): the owner's waiting alerts are a walk of
 * the partial index (owner_id, send_after, id) WHERE send_after IS NOT NULL, each then updated by primary key. Without
 * the fence the planner, which cannot tell an owner's waiting alerts from their sent ones, walked every owner's waiting
 * alerts by send_after (and joined the update by a sequential scan): 60,006 rows read for an owner's 3 beside 20,000
 * others waiting. Reads at most `limit` rows (plus the ones another sender holds, skipped).
 */
export function claimDigestSql(ownerId: string, now: Date, leaseUntil: Date, limit: number, planner: PlannerSettings): Prisma.Sql {
  return Prisma.sql`
    WITH ${restorePlannerCte(planner)}
    UPDATE owner_alerts o SET send_after = ${leaseUntil}::timestamptz
    FROM (
      SELECT id FROM owner_alerts
      WHERE owner_id = ${ownerId} AND send_after <= ${now}::timestamptz
      ORDER BY send_after, id LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    ) c CROSS JOIN planner_restored
    WHERE o.id = c.id
    RETURNING o.id::text, o.server_id::text, o.kind, o.title, o.detail, o.link, o.created_at, o.email_sent, o.discord_sent, o.attempts`;
}

/** Marks a channel done for the alerts `ids` (its digest went out, or was given up): ids.length rows by primary key. */
export function markChannelSentSql(ids: readonly string[], channel: "email" | "discord"): Prisma.Sql {
  const column = Prisma.raw(channel === "email" ? "email_sent" : "discord_sent");
  return Prisma.sql`UPDATE owner_alerts SET ${column} = true WHERE id = ANY(${[...ids]}::uuid[])`;
}

/**
 * Ends the digest work of alerts `ids` (every chosen channel has them, or they were given up): send_after null, so the
 * sender never takes them again. ids.length rows by primary key.
 */
export function finishDigestSql(ids: readonly string[]): Prisma.Sql {
  return Prisma.sql`UPDATE owner_alerts SET send_after = NULL WHERE id = ANY(${[...ids]}::uuid[])`;
}

/** Retries alerts `ids` at `at` after a temporary failure (attempts + 1). ids.length rows by primary key. */
export function retryDigestSql(ids: readonly string[], at: Date): Prisma.Sql {
  return Prisma.sql`UPDATE owner_alerts SET send_after = ${at}::timestamptz, attempts = attempts + 1 WHERE id = ANY(${[...ids]}::uuid[])`;
}

/**
 * Endpoints whose run of failures began between `from` and `to` (failing for 24 hours, not yet for the auto-disable
 * period) and that have no alert for that run yet: a range of the callback_health failing_since index (the endpoints
 * failing for 1 to 5 days, each checked against the cause_key index), at most `limit` returned, oldest run first.
 * Each returned endpoint also gets its last failed delivery (null once its attempts are gone): the attempt the health
 * row's last_failure_at was recorded from (the same instant, services/delivery/pipeline/attempt-log.ts), found by
 * equality in the delivery_attempts (server_id, started_at) index, LIMIT 1 - at most the server's attempts started in
 * that millisecond (one dispatch batch), each with its delivery's endpoint by primary key; run for the `limit` rows only.
 */
export function failingEndpointsSql(from: Date, to: Date, limit: number): Prisma.Sql {
  return Prisma.sql`
    WITH failing AS (
      SELECT h.endpoint_id, h.server_id, s.name AS server_name, e.url, h.failing_since, h.last_failure_at, h.last_failure_reason
      FROM callback_health h
      JOIN callback_endpoints e ON e.id = h.endpoint_id AND e.disabled_at IS NULL AND e.deleted_at IS NULL
      JOIN servers s ON s.id = h.server_id AND s.owner_id IS NOT NULL
      WHERE h.failing_since > ${from}::timestamptz AND h.failing_since <= ${to}::timestamptz
        AND ${notAlertedSql("endpoint_failing", "h.endpoint_id", "h.failing_since")}
      ORDER BY h.failing_since, h.endpoint_id
      LIMIT ${limit}
    )
    SELECT f.endpoint_id::text, f.server_id::text, f.server_name, f.url, f.failing_since, f.last_failure_reason,
      -- The delivery's endpoint as a per-attempt subquery, not a join: the planner cannot lead with deliveries.
      (SELECT a.delivery_id::text
       FROM delivery_attempts a
       WHERE a.server_id = f.server_id AND a.started_at = f.last_failure_at AND NOT a.succeeded
         AND (SELECT d.endpoint_id FROM deliveries d WHERE d.id = a.delivery_id) = f.endpoint_id
       ORDER BY a.id DESC LIMIT 1) AS last_failed_delivery_id
    FROM failing f
    ORDER BY f.failing_since, f.endpoint_id`;
}

/**
 * Old secrets whose rotation overlap ends between `now` and `until` (not revoked), with no alert for that overlap yet:
 * a range of the server_secrets expires_at index (the overlaps ending within the window), each checked against the
 * cause_key index; at most `limit` returned, the soonest first; servers with an owner only.
 */
export function endingOverlapsSql(now: Date, until: Date, limit: number): Prisma.Sql {
  return Prisma.sql`
    SELECT k.id::text AS secret_id, k.server_id::text, s.name AS server_name, k.purpose::text, k.kid, k.endpoint_id::text, k.expires_at
    FROM server_secrets k
    JOIN servers s ON s.id = k.server_id AND s.owner_id IS NOT NULL
    WHERE k.expires_at > ${now}::timestamptz AND k.expires_at <= ${until}::timestamptz AND k.revoked_at IS NULL
      AND ${notAlertedSql("secret_overlap_ending", "k.id", "k.expires_at")}
    ORDER BY k.expires_at, k.id
    LIMIT ${limit}`;
}

/**
 * Servers whose reward plugin's last call (their newest plugin_activity row) was between `from` and `to`, with no
 * alert for that silence yet: a range of the plugin_activity last_at index (rows whose last call is in the window,
 * within the 30 days the rows live), each checked for a newer row of its server (the primary key's server_id prefix)
 * and against the cause_key index; at most `limit` returned; servers with an owner only.
 */
export function silentPluginsSql(from: Date, to: Date, limit: number): Prisma.Sql {
  return Prisma.sql`
    SELECT DISTINCT ON (p.server_id) p.server_id::text, s.name AS server_name, p.last_at
    FROM plugin_activity p
    JOIN servers s ON s.id = p.server_id AND s.owner_id IS NOT NULL
    WHERE p.last_at > ${from}::timestamptz AND p.last_at <= ${to}::timestamptz
      AND NOT EXISTS (SELECT 1 FROM plugin_activity n WHERE n.server_id = p.server_id AND n.last_at > p.last_at)
      AND ${notAlertedSql("plugin_silent", "p.server_id", "p.last_at")}
    ORDER BY p.server_id, p.last_at DESC
    LIMIT ${limit}`;
}

/**
 * Old alerts' age limit (RETENTION_OWNER_ALERT_DAYS): alerts older than it are deleted, in the runner's LIMITed
 * batches by the created_at index, sent or not (the dashboard list shows recent alerts only).
 */
export function oldAlertRetention(keepSeconds: number): RetentionRule {
  return ageKeyDeleteRule({
    name: "old_owner_alerts",
    table: "owner_alerts",
    key: Prisma.raw("id"),
    column: Prisma.raw("created_at"),
    keepSeconds,
  });
}
