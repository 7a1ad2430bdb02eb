import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  HeartDeliverySchema,
  HeartSummarySchema,
  HeartVerdict,
  ListHeartsResponseSchema,
  type ListHeartsRequest,
  type ListHeartsResponse,
} from "../../gen/proto/hearts/v1/hearts_pb.js";
import { Prisma } from "../../gen/prisma/client.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { DomainError } from "../shared/rpc/errors.js";
import { isUuid } from "../shared/values/ids.js";
import { requireServerId } from "../servers/server-exists.js";
import { choiceText, notNegativeText } from "../shared/values/contract.js";
import { boundField } from "../shared/values/field-rules.js";
import { normalizePlatformId } from "../shared/values/player-ids.js";
import { VERDICT_FROM_PROTO, VERDICT_TO_PROTO } from "../shared/values/proto-names.js";
import { heldReasonOf } from "../shared/values/held-reason.js";

/** Hearts per page when the caller gives no page size, and the most one page may hold. */
export const DEFAULT_HEARTS_PAGE = 50;
export const MAX_HEARTS_PAGE = 200;

/** The claim-ledger states ListHearts reports and filters by (an expired heart includes one held past its window). */
export const CLAIM_STATES = ["held", "claimed", "expired", "withdrawn"] as const;

/** Bounds that stand for "no bound": wider than any stored time or id. */
const EARLIEST = new Date(Date.UTC(1970, 0, 1));
const LATEST = new Date(Date.UTC(9999, 0, 1));
const LAST_UUID = "ffffffff-ffff-ffff-ffff-ffffffffffff";

/** Where a page ends: the (cast time, id) of its last heart; the next page starts below it. */
interface PageCursor {
  at: Date;
  id: string;
}

/** An opaque page token: base64url of `<ISO time>|<heart id>`. */
export function encodePageToken(cursor: PageCursor): string {
  return Buffer.from(`${cursor.at.toISOString()}|${cursor.id}`, "utf8").toString("base64url");
}

/** Reads a page token; InvalidArgument when it is not one this service made. */
export function decodePageToken(token: string): PageCursor {
  const [iso, id, extra] = Buffer.from(token, "base64url").toString("utf8").split("|");
  const at = iso === undefined ? new Date(Number.NaN) : new Date(iso);
  if (extra !== undefined || id === undefined || !isUuid(id) || Number.isNaN(at.getTime())) {
    throw new DomainError("invalid_argument", "page_token is invalid");
  }
  return { at, id };
}

/** `%text%` for ILIKE with the pattern characters of `text` escaped. */
function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

interface HeartRow {
  id: string;
  username: string;
  voter_identity: string;
  verdict: string;
  fraud_score: number;
  fraud_reasons: string[];
  streak_day: number | null;
  period: string;
  created_at: Date;
  steam_id: string | null;
  discord_id: string | null;
  minecraft_uuid: string | null;
  account_id: string | null;
  claim_state: string | null;
  claim_expired_reason: string | null;
  claim_expires_at: Date | null;
  claimed_at: Date | null;
}

interface DeliveryRow {
  id: string;
  heart_id: string;
  transport: string;
  status: string;
  attempts: number;
  last_status_code: number | null;
  delivered_at: Date | null;
  /** What decides whether a pending delivery is held (heldReasonOf): its endpoint (callback) and the server's Votifier. */
  endpoint_url: string | null;
  endpoint_disabled_at: Date | null;
  endpoint_deleted_at: Date | null;
  has_endpoint: boolean;
  votifier_set: boolean;
}

/**
 * ListHearts: one server's hearts, newest first, filtered by search text (a part of
 * the username, case-insensitive, or an exact voter identity or platform id), verdict and cast
 * time, each with the deliveries it produced (one per transport). Keyset pagination on
 * (created_at, id), so a page never repeats or skips a heart while new ones arrive.
 * Two set-based statements: the page of hearts, then every delivery of that page.
 */
export async function listHearts(deps: CoreDeps, req: ListHeartsRequest): Promise<ListHeartsResponse> {
  const serverId = await requireServerId(deps, req.serverId);
  // The one field table bounds the search text: too long or holding a NUL is invalid_argument naming `query`.
  const query = boundField("query", req.query.trim());
  const verdict = VERDICT_FROM_PROTO[req.verdict];
  if (verdict === undefined) throw new DomainError("invalid_argument", choiceText("verdict", Object.keys(VERDICT_TO_PROTO)));
  if (req.pageSize < 0) throw new DomainError("invalid_argument", notNegativeText("page_size"));
  const pageSize = Math.min(req.pageSize === 0 ? DEFAULT_HEARTS_PAGE : req.pageSize, MAX_HEARTS_PAGE);
  const since = req.since ? timestampDate(req.since) : EARLIEST;
  const until = req.until ? timestampDate(req.until) : LATEST;
  const cursor = req.pageToken === "" ? { at: LATEST, id: LAST_UUID } : decodePageToken(req.pageToken);
  const claimState = req.claimState.trim();
  if (claimState !== "" && !(CLAIM_STATES as readonly string[]).includes(claimState)) {
    throw new DomainError("invalid_argument", choiceText("claim_state", [...CLAIM_STATES]));
  }
  const now = deps.now();
  // A platform id matches exactly, in its normal form (a Minecraft UUID in any spelling); the account id as typed.
  const minecraftUuid = normalizePlatformId("minecraft_uuid", query) ?? query;

  const rows = await runSql<HeartRow>(
    deps.prisma,
    Prisma.sql`
      SELECT h.id::text AS id, h.username, h.voter_identity, h.verdict, h.fraud_score, h.fraud_reasons, h.streak_day,
             h.period, h.created_at, h.steam_id, h.discord_id, h.minecraft_uuid, h.account_id,
             c.claim_state, c.claim_expired_reason, c.expires_at AS claim_expires_at, c.claimed_at
      FROM hearts h
      -- The claim ledger: a held heart past its window is reported expired ("window") even before it is marked.
      LEFT JOIN LATERAL (
        SELECT CASE WHEN v.state = 'held' AND v.expires_at <= ${now}::timestamptz THEN 'expired' ELSE v.state::text END AS claim_state,
               CASE WHEN v.state = 'held' AND v.expires_at <= ${now}::timestamptz THEN 'window' ELSE v.expired_reason END AS claim_expired_reason,
               v.expires_at, v.claimed_at
        FROM vote_claims v WHERE v.heart_id = h.id
      ) c ON true
      WHERE h.server_id = ${serverId}::uuid
        AND (${verdict} = '' OR h.verdict = ${verdict})
        AND (${query} = '' OR h.username ILIKE ${containsPattern(query)} OR h.voter_identity = ${query}
             OR h.steam_id = ${query} OR h.discord_id = ${query} OR h.minecraft_uuid = ${minecraftUuid} OR h.account_id = ${query})
        AND (${claimState} = '' OR c.claim_state = ${claimState})
        AND h.created_at >= ${since}::timestamptz AND h.created_at < ${until}::timestamptz
        AND (h.created_at, h.id) < (${cursor.at}::timestamptz, ${cursor.id}::uuid)
      ORDER BY h.created_at DESC, h.id DESC
      LIMIT ${pageSize + 1}`,
  );

  const page = rows.slice(0, pageSize);
  const last = page[page.length - 1];
  const deliveries =
    page.length === 0
      ? []
      : await runSql<DeliveryRow>(
          deps.prisma,
          Prisma.sql`
            SELECT d.id::text AS id, d.heart_id::text AS heart_id, d.transport::text AS transport, d.status::text AS status, d.attempts,
                   d.last_status_code, d.delivered_at, e.url AS endpoint_url, e.disabled_at AS endpoint_disabled_at,
                   e.deleted_at AS endpoint_deleted_at, e.id IS NOT NULL AS has_endpoint,
                   s.votifier_host IS NOT NULL AND s.votifier_token IS NOT NULL AS votifier_set
            FROM deliveries d
            JOIN servers s ON s.id = d.server_id
            LEFT JOIN callback_endpoints e ON e.id = d.endpoint_id
            WHERE d.server_id = ${serverId}::uuid AND d.heart_id = ANY(${page.map((h) => h.id)}::uuid[])
            ORDER BY d.transport`,
        );
  const byHeart = new Map<string, DeliveryRow[]>();
  for (const d of deliveries) byHeart.set(d.heart_id, [...(byHeart.get(d.heart_id) ?? []), d]);
  return create(ListHeartsResponseSchema, {
    hearts: page.map((row) => toHeartSummary(row, byHeart.get(row.id) ?? [])),
    nextPageToken: rows.length > pageSize && last ? encodePageToken({ at: last.created_at, id: last.id }) : "",
  });
}

function toHeartSummary(row: HeartRow, deliveries: DeliveryRow[]) {
  return create(HeartSummarySchema, {
    heartId: row.id,
    username: row.username,
    voterIdentity: row.voter_identity,
    verdict: VERDICT_TO_PROTO[row.verdict] ?? HeartVerdict.UNSPECIFIED,
    fraudScore: row.fraud_score,
    fraudReasons: row.fraud_reasons,
    streakDay: row.streak_day ?? 0,
    period: row.period,
    castAt: timestampFromDate(row.created_at),
    steamId: row.steam_id ?? "",
    discordId: row.discord_id ?? "",
    minecraftUuid: row.minecraft_uuid ?? "",
    accountId: row.account_id ?? "",
    claimState: row.claim_state ?? "",
    claimExpiredReason: row.claim_expired_reason ?? "",
    claimExpiresAt: row.claim_expires_at ? timestampFromDate(row.claim_expires_at) : undefined,
    claimedAt: row.claimed_at ? timestampFromDate(row.claimed_at) : undefined,
    deliveries: deliveries.map((d) =>
      create(HeartDeliverySchema, {
        deliveryId: d.id,
        transport: d.transport,
        status: d.status,
        attempts: d.attempts,
        lastStatusCode: d.last_status_code ?? 0,
        deliveredAt: d.delivered_at ? timestampFromDate(d.delivered_at) : undefined,
        heldReason:
          heldReasonOf({
            status: d.status,
            transport: d.transport,
            endpoint: d.has_endpoint ? { url: d.endpoint_url, disabledAt: d.endpoint_disabled_at, deletedAt: d.endpoint_deleted_at } : null,
            votifierSet: d.votifier_set,
          }) ?? "",
      }),
    ),
  });
}
