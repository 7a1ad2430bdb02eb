import { Prisma } from "../../../gen/prisma/client.js";
import type { PrismaClient } from "../../shared/adapters/db.js";
import { runSqlTransaction, sqlOf, type SqlTx } from "../../shared/adapters/sql/executor.js";
import { windowRule, type RetentionRule } from "../../shared/adapters/retention-rule.js";
import type { Logger } from "../../shared/runtime/log.js";
import { toStoredExchange, type AttemptExchange } from "./attempt-exchange.js";
import type { ClaimedDelivery } from "./claim-deliveries.js";
import {
  autoDisableIfFailingTooLong,
  disableCallback,
  foldEndpointHealth,
  lastFailureOf,
  upsertEndpointHealthSql,
  type HealthAttempt,
} from "./endpoint-health.js";
import { notifyDeliveryFailed, type NotifiedServer } from "./owner-notifications.js";
import { recordAttemptResultsSql } from "./write-deliveries.js";
import { raiseAlerts, recoverEndpointsCtes } from "../../alerts/alert-store.js";
import { votifierFailingAlert } from "../../alerts/alert-kinds.js";

/**
 * The attempt log: every attempt of every transport (HTTP callback, Votifier, the owner's pull
 * claim) is written as a `delivery_attempts` row through ONE column list (EXCHANGE_COLUMNS, with its
 * exact exchange, secrets masked) and ONE statement builder (insertAttemptsSql), for one attempt or
 * many. For the dispatcher's attempts, writeAttemptsSql applies the results to the deliveries and
 * keeps the callback endpoint's health (endpoint-health.ts) in the same statement.
 */

/** What the dispatcher decided after one attempt. */
export type AttemptResult = { kind: "delivered" } | { kind: "retry"; nextAttemptAt: Date } | { kind: "failed" } | { kind: "held_gone"; reason: string };

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
 * The exchange columns of `delivery_attempts` with their SQL types: the one column list of an
 * attempt row (its delivery_id, server_id and attempt number come from the delivery it belongs to).
 */
const EXCHANGE_COLUMNS = [
  ["url", "text"],
  ["started_at", "timestamptz"],
  ["status_code", "int"],
  ["latency_ms", "int"],
  ["error", "text"],
  ["succeeded", "boolean"],
  ["request_headers", "jsonb"],
  ["request_body", "text"],
  ["response_headers", "jsonb"],
  ["response_body", "text"],
  ["response_body_truncated", "boolean"],
] as const;

type ExchangeColumn = (typeof EXCHANGE_COLUMNS)[number][0];

/** An attempt row as written (secrets masked): a value per EXCHANGE_COLUMNS, and `key`, which names its delivery. */
export interface AttemptRow extends Record<ExchangeColumn, unknown> {
  /** Order of the rows (attempt numbers of one delivery follow it). */
  n: number;
  key: string;
  url: string;
  started_at: string;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
  succeeded: boolean;
  request_headers: Record<string, string>;
  request_body: string;
  response_headers: Record<string, string> | null;
  response_body: string | null;
  response_body_truncated: boolean;
}

/** The status code an exchange is stored with: the response's, null when none came back or the transport has none (0). */
function storedStatusCode(exchange: AttemptExchange): number | null {
  return exchange.response && exchange.response.status > 0 ? exchange.response.status : null;
}

/**
 * An attempt as its row: the exchange with secrets and receiver credentials masked
 * (toStoredExchange), `key` naming its delivery for insertAttemptsSql, `n` its order.
 */
export function toAttemptRow(n: number, key: string, startedAt: Date, exchange: AttemptExchange): AttemptRow {
  const x = toStoredExchange(exchange);
  return {
    n,
    key,
    url: x.target,
    started_at: startedAt.toISOString(),
    status_code: storedStatusCode(x),
    latency_ms: x.latencyMs,
    error: x.error,
    succeeded: x.succeeded,
    request_headers: x.request.headers,
    request_body: x.request.body,
    response_headers: x.response ? x.response.headers : null,
    response_body: x.response?.body ?? null,
    response_body_truncated: x.response?.bodyTruncated ?? false,
  };
}

const COLUMN_LIST = Prisma.raw(EXCHANGE_COLUMNS.map(([name]) => name).join(", "));
const ROW_COLUMNS = Prisma.raw(EXCHANGE_COLUMNS.map(([name]) => `r.${name}`).join(", "));
const ROW_TYPES = Prisma.raw(["n int", "key text", ...EXCHANGE_COLUMNS.map(([name, type]) => `${name} ${type}`)].join(", "));

/**
 * The one INSERT of attempt rows (usable as a CTE). Each row joins its delivery through
 * `deliveries`, a parenthesised relation with columns (key text, delivery_id uuid, server_id uuid):
 * a row whose key is not there is not written (a pull claim logs only the hearts it claimed).
 * Attempt numbers continue each delivery's log, in row order.
 */
export function insertAttemptsSql(rows: readonly AttemptRow[], deliveries: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO delivery_attempts (delivery_id, server_id, attempt, ${COLUMN_LIST})
    SELECT d.delivery_id, d.server_id,
           -- The delivery's last number: one entry of the (delivery_id, attempt) index, however long its log (a count
           -- read every earlier attempt of a delivery redelivered again and again).
           coalesce((SELECT max(a.attempt) FROM delivery_attempts a WHERE a.delivery_id = d.delivery_id), 0)
             + (row_number() OVER (PARTITION BY d.delivery_id ORDER BY r.n))::int,
           ${ROW_COLUMNS}
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS r(${ROW_TYPES})
    JOIN ${deliveries} AS d ON d.key = r.key
    ORDER BY r.n`;
}

/**
 * Records one attempt (always), with its exact exchange, and keeps the endpoint's health; then
 * applies its result to the delivery (only while this dispatcher still holds the lease), all in
 * one transaction: recordAttempts' statement for a batch of one, with what its result calls for.
 * A 410, or a run of failures older than the auto-disable period, disables the server's callback;
 * that and a delivery failing for good write an owner notification to the outbox in the same
 * transaction. Returns false when the lease was lost.
 */
export async function recordAttempt(prisma: PrismaClient, a: AttemptRecord): Promise<boolean> {
  return runSqlTransaction(prisma, async (tx) => (await writeAttempts(tx, [a]))[0] ?? false, RECORD_TRANSACTION);
}

/** The bounds of a recording transaction: a pooled connection within 2 s, committed within 5 s (else rolled back, and the lease expires). */
const RECORD_TRANSACTION = { timeoutMs: 5_000, maxWaitMs: 2_000 };

/**
 * Records many attempts with what recordAttempt does for each, in as few statements as it can:
 * every delivered or retried attempt of the batch with ONE statement (writeAttemptsSql), and the
 * rare ones (failed for good, 410 Gone) one transaction each, as they write owner notifications.
 * Per record, in input order: whether the lease was still held (false: the attempt is logged
 * only), or the error that kept it from being recorded; one record's error never fails the others.
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

/** Delivered and retry results: without a failed callback or Discord attempt nothing can call for an auto-disable, and the statement runs alone (the hot path). */
async function recordRoutineAttempts(prisma: PrismaClient, records: AttemptRecord[]): Promise<boolean[]> {
  const rows = records.map((r, n) => toAttemptRow(n, String(n), r.startedAt, r.exchange));
  if (records.every((r, n) => !hasEndpointHealth(r.delivery.transport) || rows[n]!.succeeded)) {
    // Nothing can follow the statement (no failed callback, so no auto-disable): it runs alone, with no transaction around it.
    return writeAttempts(sqlOf(prisma), records, rows);
  }
  // A callback failed: the statement and any auto-disable it calls for commit together.
  return runSqlTransaction(prisma, (tx) => writeAttempts(tx, records, rows), RECORD_TRANSACTION);
}

/** What writeAttemptsSql returns: the deliveries whose lease was still held, and each endpoint's current run of failures (JSON: failing_since as ISO text). */
interface WrittenAttempts {
  owned: string[];
  health: { endpoint_id: string; failing_since: string | null }[];
}

/**
 * writeAttemptsSql, then what the results call for, in the caller's transaction: a 410 disables the
 * server's callback (and notifies its owner), a delivery failed for good notifies its owner, and a
 * run of failures older than the auto-disable period disables the callback. Per record: owned.
 */
async function writeAttempts(
  tx: SqlTx,
  records: AttemptRecord[],
  rows = records.map((r, n) => toAttemptRow(n, String(n), r.startedAt, r.exchange)),
): Promise<boolean[]> {
  const written = await tx.query<WrittenAttempts>(writeAttemptsSql(records, rows));
  const owned = ownedOf(records, written);
  for (const [n, r] of records.entries()) {
    const row = rows[n]!;
    if (r.result.kind === "held_gone") {
      // Stays pending and due: the claim skips it while the endpoint is disabled, and sends it once re-enabled.
      if (r.delivery.endpointId !== null) await disableCallback(tx, r.delivery.endpointId, r.result.reason, r.finishedAt);
    } else if (r.result.kind === "failed" && owned[n]) {
      const [server] = await tx.query<NotifiedServer>(Prisma.sql`
        SELECT s.id::text AS id, s.name, e.url AS "callbackUrl"
        FROM servers s LEFT JOIN callback_endpoints e ON e.id = ${r.delivery.endpointId}::uuid
        WHERE s.id = ${r.delivery.serverId}::uuid`);
      // Failure policy: fail loudly - the delivery's server is gone (its deliveries are deleted with it); the transaction rolls back.
      if (server === undefined) throw new Error(`server ${r.delivery.serverId} of delivery ${r.delivery.id} not found`);
      const failed = { ...r.delivery, attempts: r.delivery.attempts + 1, lastStatusCode: row.status_code, lastError: row.error ?? "", target: row.url };
      await notifyDeliveryFailed(tx, server, failed, r.finishedAt);
      if (r.delivery.transport === "votifier") {
        const alert = votifierFailingAlert({
          serverId: server.id,
          serverName: server.name,
          deliveryId: r.delivery.id,
          target: row.url,
          attempts: failed.attempts,
          error: failed.lastError,
          at: r.finishedAt,
        });
        await raiseAlerts(tx, [alert]);
      }
    }
  }
  const attempts = callbackHealthAttempts(records, rows);
  for (const h of written[0]?.health ?? []) {
    const last = lastFailureOf(attempts, h.endpoint_id);
    // A 410 has disabled the endpoint already.
    if (h.failing_since === null || !last || last.attempt.record.result.kind === "held_gone") continue;
    await autoDisableIfFailingTooLong(tx, {
      endpointId: h.endpoint_id,
      failingSince: new Date(h.failing_since),
      lastError: last.error,
      at: last.attempt.record.finishedAt,
      ...(last.attempt.record.autoDisableAfterMs === undefined ? {} : { afterMs: last.attempt.record.autoDisableAfterMs }),
    });
  }
  return owned;
}

/**
 * ONE statement for a batch of the dispatcher's attempts: the deliveries' results under their
 * leases (delivered, retry, failed for good, or held after a 410: pending and due at once), every
 * attempt row (insertAttemptsSql; logged even when the lease was lost), and each endpoint's health
 * folded in recording order (callback attempts only: other transports are not an endpoint), and an
 * owner alert for each endpoint whose run of failures this ended after a failing or disabled alert
 * (services/alerts/alert-store.ts).
 */
function writeAttemptsSql(records: readonly AttemptRecord[], rows: readonly AttemptRow[]): Prisma.Sql {
  const input = records.map((r, n) => ({
    n,
    id: r.delivery.id,
    server_id: r.delivery.serverId,
    lease_until: r.delivery.leaseUntil.toISOString(),
    result: r.result.kind,
    next_attempt_at: r.result.kind === "retry" ? r.result.nextAttemptAt.toISOString() : null,
    finished_at: r.finishedAt.toISOString(),
    status_code: rows[n]!.status_code,
    error: rows[n]!.error,
  }));
  const health = foldEndpointHealth(callbackHealthAttempts(records, rows));
  return Prisma.sql`
    WITH input AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
        AS i(n int, id uuid, server_id uuid, lease_until timestamptz, result text, next_attempt_at timestamptz, finished_at timestamptz,
             status_code int, error text)
    ), changed AS (
      ${recordAttemptResultsSql(Prisma.sql`input i`)}
    ), logged AS (
      ${insertAttemptsSql(rows, Prisma.sql`(SELECT i.n::text AS key, i.id AS delivery_id, i.server_id FROM input i)`)}
    ), health AS (
      ${upsertEndpointHealthSql(health)}
    ), ${recoverEndpointsCtes(Prisma.sql`(SELECT endpoint_id FROM health WHERE failing_since IS NULL)`, lastFinishedAt(records))}
    SELECT ARRAY(SELECT id::text FROM changed) AS owned,
           coalesce((SELECT json_agg(json_build_object('endpoint_id', endpoint_id, 'failing_since', failing_since)) FROM health), '[]'::json) AS health`;
}

/** The latest finish of a batch's attempts: the time of the recoveries it records. */
function lastFinishedAt(records: readonly AttemptRecord[]): Date {
  return new Date(Math.max(...records.map((r) => r.finishedAt.getTime())));
}

/**
 * Whether a transport's attempts feed its endpoint's health (failing since, the auto-disable, the failing and recovered
 * alerts): a callback's and a Discord endpoint's (a callback endpoint of its own kind, docs/discord.md); Votifier and
 * pull have no endpoint row.
 */
function hasEndpointHealth(transport: string): boolean {
  return transport === "callback" || transport === "discord";
}

/** The attempts of a batch to endpoints with health (callback, Discord), in recording order, as the health transition takes them. */
function callbackHealthAttempts(records: readonly AttemptRecord[], rows: readonly AttemptRow[]): (HealthAttempt & { record: AttemptRecord })[] {
  return records.flatMap((r, n) =>
    hasEndpointHealth(r.delivery.transport) && r.delivery.endpointId !== null
      ? [
          {
            serverId: r.delivery.serverId,
            endpointId: r.delivery.endpointId,
            startedAt: r.startedAt,
            succeeded: rows[n]!.succeeded,
            error: rows[n]!.error,
            record: r,
          },
        ]
      : [],
  );
}

function ownedOf(records: readonly AttemptRecord[], written: WrittenAttempts[]): boolean[] {
  const ownedIds = new Set(written[0]?.owned ?? []);
  return records.map((r) => ownedIds.has(r.delivery.id));
}

/**
 * An attempt that still holds its exchange: the predicate of the partial index retention reads
 * (delivery_attempts_exchange_started_at_idx, migration 20261201100000_retention_indexes), written as there.
 */
const HOLDS_EXCHANGE_SQL = Prisma.sql`(a.request_headers IS NOT NULL OR a.request_body IS NOT NULL OR a.response_headers IS NOT NULL OR a.response_body IS NOT NULL)`;

/**
 * Retention of attempts' exchanges (services/retention): the request and response headers and bodies of an
 * attempt are dropped once its delivery was delivered, or failed, more than `keepSeconds` ago; the row keeps
 * its url, timing, status code, error and outcome. A delivery still pending (retried, or held: parked until
 * its endpoint can take it) keeps every attempt's exchange until it ends, and a failed delivery the owner
 * sends again is pending again (its failed_at cleared), so it keeps them too.
 *
 * Attempts are read in (started_at, id) windows from a cursor (windowRule), so attempts of deliveries still pending
 * (which stay in the index) are stepped over, never read again and again by every batch.
 */
export function attemptExchangeRetention(keepSeconds: number): RetentionRule {
  return windowRule<bigint>({
    name: "delivery_attempt_exchanges",
    table: "delivery_attempts",
    keepSeconds,
    start: { at: new Date(0), id: 0n },
    // Reads at most `limit` entries of the partial index of attempts holding an exchange (from the cursor, before the
    // cut), their rows, and one delivery each by primary key; updates at most those.
    removeWindow: (cut, from, limit) => Prisma.sql`
      WITH win AS (
        SELECT a.id, a.started_at, a.delivery_id FROM delivery_attempts a
        WHERE ${HOLDS_EXCHANGE_SQL} AND a.started_at < ${cut}::timestamptz
          AND (a.started_at, a.id) > (${from.at}::timestamptz, ${from.id}::bigint)
        ORDER BY a.started_at, a.id LIMIT ${limit}::int
      ), dropped AS (
        UPDATE delivery_attempts a SET request_headers = NULL, request_body = NULL, response_headers = NULL, response_body = NULL
        FROM win w JOIN deliveries d ON d.id = w.delivery_id
        WHERE a.id = w.id
          AND ((d.status = 'delivered' AND d.delivered_at < ${cut}::timestamptz) OR (d.status = 'failed' AND d.failed_at < ${cut}::timestamptz))
        RETURNING a.id
      ), last AS (SELECT started_at, id FROM win ORDER BY started_at DESC, id DESC LIMIT 1)
      SELECT (SELECT count(*) FROM dropped) AS removed, (SELECT count(*) FROM win) AS seen,
             (SELECT started_at FROM last) AS last_at, (SELECT id FROM last) AS last_id`,
    // One entry of the partial index of attempts holding an exchange.
    oldest: Prisma.sql`SELECT min(a.started_at) AS oldest FROM delivery_attempts a WHERE ${HOLDS_EXCHANGE_SQL}`,
  });
}

/**
 * A voter's erasure (services/voter-data/erase-voter-data.ts): the exchanges of the deliveries' attempts (request and
 * response headers and bodies, which carry the voter's name) are dropped; the attempt rows keep their number, time,
 * status code, latency and error, so the endpoint's health and the delivery's history stay readable. By the
 * (delivery_id, attempt) index: at most the deliveries' attempts. Returns the rows changed.
 */
export function dropAttemptExchangesSql(deliveryIds: readonly string[]): Prisma.Sql {
  return Prisma.sql`
    UPDATE delivery_attempts SET request_headers = NULL, request_body = NULL, response_headers = NULL, response_body = NULL
    WHERE delivery_id = ANY(${[...deliveryIds]}::uuid[]) AND (request_body IS NOT NULL OR request_headers IS NOT NULL OR response_body IS NOT NULL OR response_headers IS NOT NULL)`;
}
