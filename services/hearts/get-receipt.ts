import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  GetReceiptResponseSchema,
  ReceiptDeliverySchema,
  ReceiptDeliveryState,
  ReceiptOutcome,
  ReceiptSchema,
  type GetReceiptRequest,
  type GetReceiptResponse,
} from "../../gen/proto/hearts/v1/hearts_pb.js";
import type { CoreDeps } from "../shared/deps.js";
import { DomainError } from "../shared/errors.js";
import { HEART_COOLDOWN_MS } from "./domain/streak.js";
import type { ReceiptLinks } from "./receipt-token.js";

/** The one answer for a token that names no receipt (wrong, tampered, truncated, or its heart is gone): no hint which. */
export const UNKNOWN_RECEIPT_TEXT = "unknown receipt";

interface ReceiptRow {
  server_name: string;
  username: string;
  verdict: string;
  period: string;
  created_at: Date;
  /** The counted heart the cooldown runs from: this heart when counted, the voter's last counted one before it on cooldown. */
  anchor: Date | null;
  deliveries: Array<{ transport: string; status: string; delivered_at: string | null }>;
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
 * GetReceipt: the heart a receipt token names, as its voter may see it (hearts.v1.Receipt). The token is
 * checked first (receipt-token.ts; constant-time, no database round trip for a forged one); then ONE
 * statement reads the heart, its server's display name, the counted heart its cooldown runs from, and its
 * heart.counted deliveries. Only the fields the voter may see are selected: never the voter identity, IP,
 * user agent, fraud score or reasons, the callback URL, or a receiver's answer or error. Any verdict other
 * than counted or cooldown is "not counted", with no reason.
 */
export async function getReceipt(deps: CoreDeps, receipts: ReceiptLinks, req: GetReceiptRequest): Promise<GetReceiptResponse> {
  const heartId = receipts.heartIdOf(req.token);
  if (heartId === undefined) throw new DomainError("not_found", UNKNOWN_RECEIPT_TEXT);
  const [row] = await deps.prisma.$queryRaw<ReceiptRow[]>`
    SELECT s.name AS server_name, h.username, h.verdict, h.period, h.created_at,
           CASE
             WHEN h.verdict = 'counted' THEN h.created_at
             WHEN h.verdict = 'cooldown' THEN (
               SELECT max(p.created_at) FROM hearts p
               WHERE p.server_id = h.server_id AND p.voter_identity = h.voter_identity AND p.counted AND p.created_at <= h.created_at)
           END AS anchor,
           COALESCE((
             SELECT json_agg(json_build_object('transport', d.transport::text, 'status', d.status::text, 'delivered_at', d.delivered_at)
                             ORDER BY d.transport)
             FROM deliveries d
             WHERE d.heart_id = h.id AND d.server_id = h.server_id AND d.event_type = 'heart.counted'), '[]'::json) AS deliveries
    FROM hearts h JOIN servers s ON s.id = h.server_id
    WHERE h.id = ${heartId}::uuid`;
  if (row === undefined) throw new DomainError("not_found", UNKNOWN_RECEIPT_TEXT);
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
    }),
  });
}
