import { Prisma } from "../../../gen/prisma/client.js";
import type { PrismaClient } from "../../shared/adapters/db.js";
import { runSql } from "../../shared/adapters/sql/executor.js";
import { payableSql, takePullPayoutsSql } from "../../payouts/write-payouts.js";
import { withdrawOthers } from "../pipeline/withdraw-unpaid.js";
import { DomainError } from "../../shared/rpc/errors.js";
import { isUuid } from "../../shared/values/ids.js";
import type { AttemptExchange } from "../pipeline/attempt-exchange.js";
import { insertAttemptsSql, toAttemptRow } from "../pipeline/attempt-log.js";
import { MAX_PULL_CLAIM } from "./pull-store.js";
import { claimPullDeliveriesSql } from "../pipeline/write-deliveries.js";

/** What the attempt log shows as the target of a claim. */
export const PULL_CLAIM_TARGET = "pull API claim";
/** The HTTP status the pull API answers a claim with (the claim's attempt row carries it, as a callback's carries the receiver's). */
const PULL_CLAIM_ANSWER_STATUS = 200;

/** What claiming one heart_id did. */
export type PullClaimStatus = "claimed" | "already_claimed" | "unknown";

/** What a claim names: hearts by heart_id (POST /api/pull/claims) or referral events by event_id (POST /api/pull/events/claims). */
type PullClaimKind = "heart" | "event";

/** Per kind: the request field, the answer's id field, the key column and which pull deliveries of the server it names. */
const CLAIM_KINDS = {
  heart: {
    ids: "heart_ids",
    id: "heart_id",
    key: Prisma.sql`heart_id::text`,
    // A heart's pull delivery has no endpoint and its heart id as dedup_key: matched by heart_id, the planner ANDed the
    // heart_id index with the server's pending pull index and read every pending pull heart of the server.
    kind: (_ids: string[]) => Prisma.sql`d.event_type = 'heart.counted'`,
  },
  event: {
    ids: "event_ids",
    id: "event_id",
    key: Prisma.sql`event_id`,
    // A referral event's pull delivery has no endpoint and its event id as dedup_key (insert-deliveries.ts, dedupKeyOf);
    // event_id has no index of its own, and matched alone it read every pull delivery of the server.
    kind: (ids: string[]) => Prisma.sql`d.event_type <> 'heart.counted' AND d.event_id = ANY(${ids}::text[])`,
  },
} as const;

/**
 * The pull deliveries of server `serverId` that a claim of `ids` names, as a set of delivery ids: each id is one probe
 * of the unique (server_id, transport, endpoint_id, dedup_key) index, so at most MAX_PULL_CLAIM rows are read whatever
 * the server's backlog or history. It names no status, so the server's pending partial indexes cannot serve it; the
 * statements that pay, claim and answer take their rows from it by primary key (claimPullDeliveriesSql says why).
 *
 * Each id is probed on its own (a lateral lookup per id, LIMIT 1: the unique key holds at most one row, and the limit
 * keeps the lookup from being flattened into a join): with `dedup_key = ANY($ids)`, the generic plan on a list's
 * statistics (one server's pull deliveries look like a handful) probed the index by server, transport and endpoint
 * only and filtered by dedup_key, reading the server's whole pull history (20,004 rows to claim one heart in
 * delivery-bounded-reads.test.ts); an equality on one id is always an index condition.
 */
function namedSql(serverId: string, kind: PullClaimKind, ids: string[]): Prisma.Sql {
  return Prisma.sql`
    SELECT d.id FROM unnest(${ids}::text[]) AS k(key)
    CROSS JOIN LATERAL (
      SELECT d.id FROM deliveries d
      WHERE d.server_id = ${serverId}::uuid AND d.transport = 'pull' AND d.endpoint_id IS NULL AND d.dedup_key = k.key
        AND ${CLAIM_KINDS[kind].kind(ids)}
      LIMIT 1) d`;
}

/**
 * The exchange a claimed heart's (or referral event's) attempt row records: the claim as it concerned
 * this one. The request is the signed body's fields for it (`server_id`, `heart_ids` or `event_ids`:
 * this id; the gateway checked the signature headers and passes none on, and the body holds no
 * secret), the answer is the pull API's 200 with this id's result (`claimed`). No receiver is involved: latency 0.
 */
export function toPullClaimExchange(serverId: string, id: string, kind: PullClaimKind = "heart"): AttemptExchange {
  const k = CLAIM_KINDS[kind];
  return {
    target: PULL_CLAIM_TARGET,
    request: { headers: {}, body: JSON.stringify({ server_id: serverId, [k.ids]: [id] }) },
    response: {
      status: PULL_CLAIM_ANSWER_STATUS,
      headers: {},
      body: JSON.stringify({ results: [{ [k.id]: id, status: "claimed" satisfies PullClaimStatus }] }),
      bodyTruncated: false,
    },
    latencyMs: 0,
    error: null,
    succeeded: true,
  };
}

/**
 * Claims hearts by heart_id, idempotently: a pending pull delivery of this server becomes
 * delivered, with its attempt written in the same statement through the attempt log's one writer
 * (insertAttemptsSql: server_id, succeeded, the claim's exchange); one already delivered is
 * `already_claimed`; anything else (another server's heart, not a uuid, no pull delivery) is
 * `unknown`. Concurrent claims of the same heart: the conditional update lets exactly one of them claim it.
 */
export async function claimPullHearts(
  prisma: PrismaClient,
  q: { serverId: string; heartIds: string[]; now: Date },
): Promise<Array<{ heartId: string; status: PullClaimStatus }>> {
  const results = await claimPulled(prisma, { serverId: q.serverId, ids: q.heartIds, now: q.now }, "heart");
  return results.map((r) => ({ heartId: r.id, status: r.status }));
}

/**
 * Claims referral events by event_id, exactly as claimPullHearts claims hearts (idempotent,
 * `already_claimed`, `unknown`, an attempt row per claimed event): only this server's referral
 * pull deliveries are claimable here, never a heart.
 */
export async function claimPullEvents(
  prisma: PrismaClient,
  q: { serverId: string; eventIds: string[]; now: Date },
): Promise<Array<{ eventId: string; status: PullClaimStatus }>> {
  const results = await claimPulled(prisma, { serverId: q.serverId, ids: q.eventIds, now: q.now }, "event");
  return results.map((r) => ({ eventId: r.id, status: r.status }));
}

/**
 * A pull delivery a claim answers `already_claimed`: delivered, or (pay-once mode, hearts) its heart no
 * longer payable (services/payouts/write-payouts.ts: another transport took its payout), so it is never paid twice.
 */
function alreadyClaimedSql(kind: PullClaimKind): Prisma.Sql {
  if (kind !== "heart") return Prisma.sql`status = 'delivered'`;
  return Prisma.sql`(status = 'delivered' OR (status IN ('pending', 'withdrawn') AND NOT ${payableSql(Prisma.sql`deliveries.heart_id`)}))`;
}

/** The one claim of both kinds (see claimPullHearts). */
async function claimPulled(
  prisma: PrismaClient,
  q: { serverId: string; ids: string[]; now: Date },
  kind: PullClaimKind,
): Promise<Array<{ id: string; status: PullClaimStatus }>> {
  const k = CLAIM_KINDS[kind];
  if (q.ids.length > MAX_PULL_CLAIM) throw new DomainError("invalid_argument", `${k.ids} must hold at most ${MAX_PULL_CLAIM} ids`);
  // Each id once, lower case (as the database prints a uuid), with its spelling in the claim.
  const sent = new Map<string, string>();
  for (const id of q.ids) if (isUuid(id) && !sent.has(id.toLowerCase())) sent.set(id.toLowerCase(), id);
  const ids = [...sent.keys()];
  const claimed = new Set<string>();
  const delivered = new Set<string>();
  if (ids.length > 0) {
    // One attempt row per id, keyed by it; only the claimed ones join a delivery and are written.
    const attempts = ids.map((id, n) => toAttemptRow(n, id, q.now, toPullClaimExchange(q.serverId, sent.get(id) ?? id, kind)));
    // Pay-once mode (hearts only): the heart's payout is taken first, in the same statement (services/payouts/write-payouts.ts).
    const rows = await runSql<{ key: string; claimed: boolean; pay_once: boolean }>(
      prisma,
      Prisma.sql`
      WITH named AS MATERIALIZED (
        ${namedSql(q.serverId, kind, ids)}
      ), paid AS (
        ${takePullPayoutsSql(Prisma.sql`SELECT id FROM named WHERE ${kind === "heart"}`, q.now)}
      ), claimed AS (
        ${claimPullDeliveriesSql({
          named: Prisma.sql`SELECT id FROM named`,
          also: Prisma.sql`(${kind !== "heart"} OR NOT (SELECT pay_once FROM servers WHERE id = ${q.serverId}::uuid) OR d.id IN (SELECT delivery_id FROM paid))`,
          now: q.now,
          statusCode: PULL_CLAIM_ANSWER_STATUS,
          key: k.key,
        })}
      ), logged AS (
        ${insertAttemptsSql(attempts, Prisma.sql`(SELECT c.key, c.id AS delivery_id, c.server_id FROM claimed c)`)}
      )
      SELECT key, true AS claimed, (SELECT count(*) FROM paid) > 0 AS pay_once FROM claimed
      UNION ALL
      SELECT ${k.key} AS key, false AS claimed, false AS pay_once FROM deliveries
      WHERE id IN (SELECT id FROM named) AND ${alreadyClaimedSql(kind)} AND ${k.key} NOT IN (SELECT key FROM claimed)`,
    );
    for (const row of rows) (row.claimed ? claimed : delivered).add(row.key);
    const paidOnce = rows.some((row) => row.pay_once);
    // A claim that waited for a concurrent claim's row lock skips the row once that commits, but its
    // statement still reads the row as pending (its snapshot predates the commit): the ids it could
    // not place are read again by a statement of its own, which sees that commit.
    const unplaced = ids.filter((id) => !claimed.has(id) && !delivered.has(id));
    if (unplaced.length > 0) {
      const late = await runSql<{ key: string }>(
        prisma,
        Prisma.sql`SELECT ${k.key} AS key FROM deliveries WHERE id IN (${namedSql(q.serverId, kind, unplaced)}) AND ${alreadyClaimedSql(kind)}`,
      );
      for (const row of late) delivered.add(row.key);
    }
    if (paidOnce) await withdrawOthers(prisma, { serverId: q.serverId, heartIds: [...claimed], paidBy: "pull", now: q.now });
  }
  return q.ids.map((raw) => {
    const id = raw.toLowerCase();
    return { id: raw, status: claimed.has(id) ? "claimed" : delivered.has(id) ? "already_claimed" : "unknown" };
  });
}
