import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  GetReceiptResponseSchema,
  ReceiptClaimSchema,
  ReceiptClaimState,
  ReceiptDeliverySchema,
  ReceiptDeliveryState,
  ReceiptOutcome,
  ReceiptSchema,
  type GetReceiptRequest,
  type GetReceiptResponse,
} from "../../gen/proto/hearts/v1/hearts_pb.js";
import { Prisma } from "../../gen/prisma/client.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { DomainError } from "../shared/rpc/errors.js";
import { HEART_COOLDOWN_MS } from "./domain/streak.js";
import type { ReceiptLinks } from "./receipt-token.js";

/** The one answer for a token that names no receipt (wrong, tampered, truncated, or its heart is gone): no hint which. */
export const UNKNOWN_RECEIPT_TEXT = "unknown receipt";

interface ReceiptRow {
  server_name: string;
  /** The heart's voter was erased (its username is a tombstone the erasure audit recorded). */
  erased: boolean;
  username: string;
  verdict: string;
  /** The heart carries a discord_id (a Discord DM reminder can be offered); never the id itself. */
  has_discord_id: boolean;
  period: string;
  created_at: Date;
  /** The counted heart the cooldown runs from: this heart when counted, the voter's last counted one before it on cooldown. */
  anchor: Date | null;
  deliveries: Array<{ transport: string; status: string; delivered_at: string | null }>;
  /** The heart's claim-ledger row (vote_claims), when it has one. */
  claim: LedgerRow | null;
  /** Pay-once mode: the transport that paid the heart and when (heart_payouts, state paid); null while none has. */
  payout: { transport: string; paid_at: string } | null;
}

/** The claim ledger's columns the voter may see (no player ids, no reason), as json_build_object writes them. */
export interface LedgerRow {
  state: string;
  expires_at: string;
  claimed_at: string | null;
  expired_at: string | null;
}

const OUTCOME: Record<string, ReceiptOutcome> = {
  counted: ReceiptOutcome.COUNTED,
  cooldown: ReceiptOutcome.COOLDOWN,
};

const DELIVERY_STATE: Record<string, ReceiptDeliveryState> = {
  delivered: ReceiptDeliveryState.DELIVERED,
  pending: ReceiptDeliveryState.WAITING,
  failed: ReceiptDeliveryState.FAILED,
};

/**
 * The voter's view of a claim-ledger row at `now`. A held row past its window is expired at its window's end, whether or
 * not the ledger has marked it yet (the ledger's own rule: services/claims/ledger-store.ts reads `expires_at > now` as held).
 */
export function toReceiptClaim(row: LedgerRow, now: Date) {
  const expiresAt = new Date(row.expires_at);
  const at = (iso: string | null) => (iso ? timestampFromDate(new Date(iso)) : undefined);
  const heldUntil = timestampFromDate(expiresAt);
  if (row.state === "claimed") return create(ReceiptClaimSchema, { state: ReceiptClaimState.CLAIMED, heldUntil, claimedAt: at(row.claimed_at) });
  if (row.state === "withdrawn") return create(ReceiptClaimSchema, { state: ReceiptClaimState.WITHDRAWN, heldUntil });
  if (row.state === "held" && expiresAt > now) return create(ReceiptClaimSchema, { state: ReceiptClaimState.HELD, heldUntil });
  // Expired: marked (by the window or the per-player cap), or held past its window and not marked yet.
  return create(ReceiptClaimSchema, { state: ReceiptClaimState.EXPIRED, heldUntil, expiredAt: at(row.expired_at) ?? heldUntil });
}

/**
 * GetReceipt: the heart a receipt token names, as its voter may see it (hearts.v1.Receipt). The token is
 * checked first (receipt-token.ts; constant-time, no database round trip for a forged one); then ONE
 * statement reads the heart, its server's display name, the counted heart its cooldown runs from, its
 * heart.counted deliveries (a callback one only while the server has a callback URL) and its claim-ledger row. Only the fields the voter may see are selected: never the voter identity, IP,
 * user agent, fraud score or reasons, the callback URL, or a receiver's answer or error. Any verdict other
 * than counted or cooldown is "not counted", with no reason. A heart whose voter was erased answers ERASED, with the
 * server's name and the heart's time only. A heart the hearts' retention removed (RETENTION_HEART_DAYS) answers as an
 * unknown receipt: nothing of it is left to show.
 */
export async function getReceipt(deps: CoreDeps, receipts: ReceiptLinks, req: GetReceiptRequest): Promise<GetReceiptResponse> {
  const heartId = receipts.heartIdOf(req.token);
  if (heartId === undefined) throw new DomainError("not_found", UNKNOWN_RECEIPT_TEXT);
  const [row] = await runSql<ReceiptRow>(
    deps.prisma,
    Prisma.sql`
      SELECT s.name AS server_name, h.username, h.verdict, h.discord_id IS NOT NULL AS has_discord_id,
             -- A voter's erasure wrote a tombstone here (services/voter-data/erase-voter-data.ts): one entry of its unique index.
             EXISTS (SELECT 1 FROM voter_data_audit a WHERE a.tombstone = h.username) AS erased, h.period, h.created_at,
             CASE
               WHEN h.verdict = 'counted' THEN h.created_at
               -- One entry of the counted hearts' partial index (hearts_counted_voter_idx), however many hearts the
               -- voter had refused since.
               WHEN h.verdict = 'cooldown' THEN (
                 SELECT p.created_at FROM hearts p
                 WHERE p.server_id = h.server_id AND p.voter_identity = h.voter_identity AND p.counted AND p.created_at <= h.created_at
                 ORDER BY p.created_at DESC LIMIT 1)
             END AS anchor,
             COALESCE((
               SELECT json_agg(json_build_object('transport', t.transport::text, 'status', t.status::text, 'delivered_at', t.delivered_at)
                               ORDER BY t.transport)
               FROM (
                 -- One line per transport: a server may have several callback endpoints; the voter sees the best of them.
                 SELECT DISTINCT ON (d.transport) d.transport, d.status, d.delivered_at
                 FROM deliveries d LEFT JOIN callback_endpoints e ON e.id = d.endpoint_id
                 WHERE d.heart_id = h.id AND d.server_id = h.server_id AND d.event_type = 'heart.counted'
                   -- An endpoint without a URL (for example on a server that only uses the claim ledger) holds its callback
                   -- rows until it gets one, and a deleted endpoint never sends: not deliveries the voter waits for.
                   AND (d.transport <> 'callback' OR (e.url IS NOT NULL AND e.deleted_at IS NULL))
                   -- Pay-once mode: a delivery withdrawn because another transport paid is not one the voter waits for (paid_by says who paid).
                   AND d.status <> 'withdrawn'
                 ORDER BY d.transport, CASE d.status WHEN 'delivered' THEN 0 WHEN 'pending' THEN 1 ELSE 2 END, d.delivered_at
               ) t), '[]'::json) AS deliveries,
             (SELECT json_build_object('state', c.state::text, 'expires_at', c.expires_at, 'claimed_at', c.claimed_at, 'expired_at', c.expired_at)
              FROM vote_claims c WHERE c.heart_id = h.id) AS claim,
             (SELECT json_build_object('transport', p.transport, 'paid_at', p.paid_at)
              FROM heart_payouts p WHERE p.heart_id = h.id AND p.state = 'paid') AS payout
      FROM hearts h JOIN servers s ON s.id = h.server_id
      WHERE h.id = ${heartId}::uuid`,
  );
  if (row === undefined) throw new DomainError("not_found", UNKNOWN_RECEIPT_TEXT);
  if (row.erased) {
    // The voter's data was erased: the server and the time only, no name, delivery, claim or payout.
    return create(GetReceiptResponseSchema, {
      receipt: create(ReceiptSchema, {
        serverName: row.server_name,
        castAt: timestampFromDate(row.created_at),
        outcome: ReceiptOutcome.ERASED,
        period: row.period,
      }),
    });
  }
  return create(GetReceiptResponseSchema, {
    receipt: create(ReceiptSchema, {
      serverName: row.server_name,
      username: row.username,
      castAt: timestampFromDate(row.created_at),
      outcome: OUTCOME[row.verdict] ?? ReceiptOutcome.NOT_COUNTED,
      nextVoteAt: row.anchor ? timestampFromDate(new Date(row.anchor.getTime() + HEART_COOLDOWN_MS)) : undefined,
      period: row.period,
      deliveries: row.deliveries.map((d) =>
        create(ReceiptDeliverySchema, {
          transport: d.transport,
          state: DELIVERY_STATE[d.status] ?? ReceiptDeliveryState.WAITING,
          deliveredAt: d.status === "delivered" && d.delivered_at ? timestampFromDate(new Date(d.delivered_at)) : undefined,
        }),
      ),
      claim: row.claim ? toReceiptClaim(row.claim, deps.now()) : undefined,
      paidBy: row.payout?.transport ?? "",
      paidAt: row.payout ? timestampFromDate(new Date(row.payout.paid_at)) : undefined,
      hasDiscordId: row.has_discord_id,
    }),
  });
}
