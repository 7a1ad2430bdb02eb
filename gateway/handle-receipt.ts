import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  ReceiptClaimState,
  ReceiptDeliveryState,
  ReceiptOutcome,
  type GetReceiptRequestSchema,
  type GetReceiptResponse,
  type Receipt,
} from "../gen/proto/hearts/v1/hearts_pb.js";
import { RECEIPT_JSON_SUFFIX, RECEIPT_PATH_PREFIX, REMINDER_OPT_IN_SUFFIX } from "../services/shared/values/wire.js";
import { errorReply, fromRpcError, type HttpReply } from "./http-errors.js";
import type { RawReply } from "./http-errors.js";
import { RECEIPT_ANSWER_HEADERS, RECEIPT_PAGE_HEADERS, REMINDER_PAGE_HEADERS, receiptPage, receiptProblemPage, type ReceiptJson } from "./receipt-page.js";

/** The route's name in logs and metrics; also the path logged for it, so no token reaches a log line. */
export const RECEIPT_ROUTE_NAME = `${RECEIPT_PATH_PREFIX}:token`;
/** Longer path segments are no receipt token (they are 44 characters): answered 404 without asking the referral service. */
const MAX_SEGMENT_CHARS = 128;

/** The RPC a receipt needs; in production the bound Connect client method. */
export interface ReceiptRpcs {
  getReceipt(request: MessageInitShape<typeof GetReceiptRequestSchema>): Promise<GetReceiptResponse>;
}

/** The answer plus log fields. */
export interface ReceiptResult {
  reply: RawReply;
  outcome: string;
  cause?: unknown;
}

const JSON_HEADERS = {
  "content-type": "application/json",
  "x-content-type-options": "nosniff",
  ...RECEIPT_ANSWER_HEADERS,
} as const;

const OUTCOME: Record<ReceiptOutcome, ReceiptJson["outcome"]> = {
  [ReceiptOutcome.UNSPECIFIED]: "not_counted",
  [ReceiptOutcome.COUNTED]: "counted",
  [ReceiptOutcome.COOLDOWN]: "cooldown",
  [ReceiptOutcome.NOT_COUNTED]: "not_counted",
  [ReceiptOutcome.ERASED]: "erased",
};

const DELIVERY_STATUS: Record<ReceiptDeliveryState, ReceiptJson["deliveries"][number]["status"]> = {
  [ReceiptDeliveryState.UNSPECIFIED]: "waiting",
  [ReceiptDeliveryState.DELIVERED]: "delivered",
  [ReceiptDeliveryState.WAITING]: "waiting",
  [ReceiptDeliveryState.FAILED]: "failed",
};

const CLAIM_STATE: Partial<Record<ReceiptClaimState, NonNullable<ReceiptJson["claim"]>["state"]>> = {
  [ReceiptClaimState.HELD]: "held",
  [ReceiptClaimState.CLAIMED]: "claimed",
  [ReceiptClaimState.EXPIRED]: "expired",
  [ReceiptClaimState.WITHDRAWN]: "withdrawn",
};

const isoOf = (at: Timestamp | undefined): string | null => (at ? timestampDate(at).toISOString() : null);

/** hearts.v1.Receipt -> the published JSON (snake_case, ISO times, null when unset). */
export function toReceiptJson(r: Receipt): ReceiptJson {
  const outcome = OUTCOME[r.outcome] ?? "not_counted";
  return {
    server_name: r.serverName,
    username: r.username,
    cast_at: isoOf(r.castAt) ?? new Date(0).toISOString(),
    counted: outcome === "counted",
    outcome,
    next_vote_at: isoOf(r.nextVoteAt),
    period: r.period,
    deliveries: r.deliveries.map((d) => ({ transport: d.transport, status: DELIVERY_STATUS[d.state] ?? "waiting", delivered_at: isoOf(d.deliveredAt) })),
    claim: toClaimJson(r),
    // Pay-once servers only, once a transport paid: which one and when (absent otherwise, so other receipts are unchanged).
    ...(r.paidBy === "" ? {} : { paid_by: r.paidBy, paid_at: isoOf(r.paidAt) ?? isoOf(r.castAt) ?? "" }),
  };
}

/** The claim ledger's state, or null when the heart is not in the ledger. */
function toClaimJson(r: Receipt): ReceiptJson["claim"] {
  const state = r.claim ? CLAIM_STATE[r.claim.state] : undefined;
  if (r.claim === undefined || state === undefined) return null;
  return { state, held_until: isoOf(r.claim.heldUntil), claimed_at: isoOf(r.claim.claimedAt), expired_at: isoOf(r.claim.expiredAt) };
}

/** An error answer: `reply` (the public table's status, text and headers) as JSON, or as the receipt's problem page. */
function problem(reply: HttpReply, json: boolean, outcome: string, cause?: unknown): ReceiptResult {
  const raw: RawReply = json
    ? { status: reply.status, headers: { ...JSON_HEADERS, ...reply.headers }, body: JSON.stringify(reply.body) }
    : { status: reply.status, headers: { ...RECEIPT_PAGE_HEADERS, ...reply.headers }, body: receiptProblemPage(reply.status) };
  return cause === undefined ? { reply: raw, outcome } : { reply: raw, outcome, cause };
}

/**
 * `GET /receipts/<token>` (an HTML page) and `GET /receipts/<token>.json` (the same receipt as JSON): one heart's
 * receipt for its voter (HeartService.GetReceipt; the token is the credential, checked by the referral service, which
 * alone holds the key). Any token that names no receipt is 404 (a page, or `{"error":"not found"}`), the same answer
 * whatever was wrong with it; the referral service unreachable is 503 with Retry-After; anything else 500. Every answer
 * carries RECEIPT_ANSWER_HEADERS (`no-store`, `no-referrer`).
 */
export async function handleReceipt(
  rawPath: string,
  rpcs: ReceiptRpcs,
  opts: { reminders?: boolean; discordReminders?: boolean } = {},
): Promise<ReceiptResult> {
  const rest = rawPath.slice(RECEIPT_PATH_PREFIX.length);
  const json = rest.endsWith(RECEIPT_JSON_SUFFIX);
  const token = json ? rest.slice(0, -RECEIPT_JSON_SUFFIX.length) : rest;
  if (token === "" || token.length > MAX_SEGMENT_CHARS || token.includes("/")) return problem(errorReply("notFound"), json, "not_found");
  let response: GetReceiptResponse;
  try {
    response = await rpcs.getReceipt({ token });
  } catch (error) {
    // Failure policy: a token that names no receipt is 404, the same answer whatever was wrong with it.
    if (error instanceof ConnectError && error.code === Code.NotFound) return problem(errorReply("notFound"), json, "not_found");
    // Otherwise the public table decides: unreachable -> 503 with Retry-After, anything else 500; the cause is logged.
    const mapped = fromRpcError(error);
    return problem(mapped.reply, json, mapped.reply.status === 503 ? "service_unavailable" : "internal_error", mapped.cause ?? error);
  }
  if (response.receipt === undefined) return problem(errorReply("notFound"), json, "not_found");
  const receipt = toReceiptJson(response.receipt);
  if (json) return { reply: { status: 200, headers: { ...JSON_HEADERS }, body: JSON.stringify(receipt) }, outcome: receipt.outcome };
  const jsonHref = `${RECEIPT_PATH_PREFIX}${token}${RECEIPT_JSON_SUFFIX}`;
  // Discord DM reminders: only with the list's bot AND a Discord user id on this heart (the id itself never reaches the gateway).
  const discord = opts.discordReminders === true && response.receipt.hasDiscordId;
  if (opts.reminders !== true && !discord) {
    return { reply: { status: 200, headers: { ...RECEIPT_PAGE_HEADERS }, body: receiptPage(receipt, jsonHref) }, outcome: receipt.outcome };
  }
  // With reminders on, the page carries the opt-in forms, and its policy lets them post to the gateway.
  const action = `${RECEIPT_PATH_PREFIX}${token}${REMINDER_OPT_IN_SUFFIX}`;
  return {
    reply: { status: 200, headers: { ...REMINDER_PAGE_HEADERS }, body: receiptPage(receipt, jsonHref, { action, email: opts.reminders === true, discord }) },
    outcome: receipt.outcome,
  };
}
