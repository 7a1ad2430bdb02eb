import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../shared/db.js";
import { DomainError } from "../shared/errors.js";
import { isUuid } from "../shared/ids.js";
import type { AttemptExchange } from "./attempt-exchange.js";
import { insertAttemptsSql, toAttemptRow } from "./attempt-log.js";
import { MAX_PULL_CLAIM } from "./pull-store.js";

/** What the attempt log shows as the target of a claim. */
export const PULL_CLAIM_TARGET = "pull API claim";
/** The HTTP status the pull API answers a claim with (the claim's attempt row carries it, as a callback's carries the receiver's). */
const PULL_CLAIM_ANSWER_STATUS = 200;

/** What claiming one heart_id did. */
export type PullClaimStatus = "claimed" | "already_claimed" | "unknown";

/**
 * The exchange a claimed heart's attempt row records: the claim as it concerned this heart. The
 * request is the signed body's fields for it (`server_id`, `heart_ids`: this heart; the gateway
 * checked the signature headers and passes none on, and the body holds no secret), the answer is
 * the pull API's 200 with this heart's result (`claimed`). No receiver is involved: latency 0.
 */
export function toPullClaimExchange(serverId: string, heartId: string): AttemptExchange {
  return {
    target: PULL_CLAIM_TARGET,
    request: { headers: {}, body: JSON.stringify({ server_id: serverId, heart_ids: [heartId] }) },
    response: {
      status: PULL_CLAIM_ANSWER_STATUS,
      headers: {},
      body: JSON.stringify({ results: [{ heart_id: heartId, status: "claimed" satisfies PullClaimStatus }] }),
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
  if (q.heartIds.length > MAX_PULL_CLAIM) throw new DomainError("invalid_argument", `heart_ids must hold at most ${MAX_PULL_CLAIM} ids`);
  // Each id once, lower case (as the database prints a uuid), with its spelling in the claim.
  const sent = new Map<string, string>();
  for (const heartId of q.heartIds) if (isUuid(heartId) && !sent.has(heartId.toLowerCase())) sent.set(heartId.toLowerCase(), heartId);
  const ids = [...sent.keys()];
  const claimed = new Set<string>();
  const delivered = new Set<string>();
  if (ids.length > 0) {
    // One attempt row per id, keyed by heart_id; only the claimed ones join a delivery and are written.
    const attempts = ids.map((id, n) => toAttemptRow(n, id, q.now, toPullClaimExchange(q.serverId, sent.get(id) ?? id)));
    const rows = await prisma.$queryRaw<Array<{ heart_id: string; claimed: boolean }>>`
      WITH claimed AS (
        UPDATE deliveries
        SET status = 'delivered', delivered_at = ${q.now}::timestamptz, attempts = attempts + 1, lease_until = NULL,
            last_status_code = ${PULL_CLAIM_ANSWER_STATUS}::int, last_error = NULL
        WHERE server_id = ${q.serverId}::uuid AND transport = 'pull' AND status = 'pending' AND heart_id = ANY(${ids}::uuid[])
        RETURNING id, server_id, heart_id
      ), logged AS (
        ${insertAttemptsSql(attempts, Prisma.sql`(SELECT c.heart_id::text AS key, c.id AS delivery_id, c.server_id FROM claimed c)`)}
      )
      SELECT heart_id::text, true AS claimed FROM claimed
      UNION ALL
      SELECT heart_id::text, false AS claimed FROM deliveries
      WHERE server_id = ${q.serverId}::uuid AND transport = 'pull' AND status = 'delivered' AND heart_id = ANY(${ids}::uuid[])
        AND heart_id NOT IN (SELECT heart_id FROM claimed)`;
    for (const row of rows) (row.claimed ? claimed : delivered).add(row.heart_id);
    // A claim that waited for a concurrent claim's row lock skips the row once that commits, but its
    // statement still reads the row as pending (its snapshot predates the commit): the ids it could
    // not place are read again by a statement of its own, which sees that commit.
    const unplaced = ids.filter((id) => !claimed.has(id) && !delivered.has(id));
    if (unplaced.length > 0) {
      const late = await prisma.$queryRaw<Array<{ heart_id: string }>>`
        SELECT heart_id::text FROM deliveries
        WHERE server_id = ${q.serverId}::uuid AND transport = 'pull' AND status = 'delivered' AND heart_id = ANY(${unplaced}::uuid[])`;
      for (const row of late) delivered.add(row.heart_id);
    }
  }
  return q.heartIds.map((heartId) => {
    const id = heartId.toLowerCase();
    return { heartId, status: claimed.has(id) ? "claimed" : delivered.has(id) ? "already_claimed" : "unknown" };
  });
}
