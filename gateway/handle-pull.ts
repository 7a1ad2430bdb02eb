import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type {
  ClaimPullHeartsRequestSchema,
  ClaimPullHeartsResponse,
  ListPullHeartsRequestSchema,
  ListPullHeartsResponse,
} from "../gen/proto/delivery/v1/delivery_pb.js";
import { PullKeyStatus, type ResolvePullKeysRequestSchema, type ResolvePullKeysResponse } from "../gen/proto/servers/v1/servers_pb.js";
import { isServerIdShape, type KeyLookup } from "./forward.js";
import { readCachedKeys, verifySignedRequest, type IngestInput, type IngestResult, type SignedRequestKeys } from "./handle-ingest.js";
import type { CachedKeyAnswer, KeyAnswer, KeyAnswerKind } from "./signing-key-cache.js";
import type { FailureLimiter } from "./failure-limiter.js";
import { errorReply, fromRpcError } from "./http-errors.js";
import type { JsonObject } from "./validate-event.js";
import { MAX_PULL_CLAIM, MAX_PULL_PAGE } from "../services/delivery/pull-store.js";
import { integerBetweenText, notStringText } from "../services/shared/contract.js";
import { PULL_CLAIM_STATUS_NAMES } from "../services/shared/proto-names.js";

/** Lists a server's unclaimed counted hearts (signed POST). */
export const PULL_HEARTS_PATH = "/api/pull/hearts";
/** Claims hearts by heart_id (signed POST). */
export const PULL_CLAIMS_PATH = "/api/pull/claims";

/** The referral-service RPCs the pull API calls; they throw ConnectError. */
export interface PullRpcs {
  resolvePullKeys(request: MessageInitShape<typeof ResolvePullKeysRequestSchema>): Promise<ResolvePullKeysResponse>;
  listPullHearts(request: MessageInitShape<typeof ListPullHeartsRequestSchema>): Promise<ListPullHeartsResponse>;
  claimPullHearts(request: MessageInitShape<typeof ClaimPullHeartsRequestSchema>): Promise<ClaimPullHeartsResponse>;
  /** After a MAC failed: drops the server's cached pull keys when a refresh is allowed (gateway/signing-key-cache.ts#invalidate). */
  invalidatePullKeys?(serverId: string): boolean;
  /** The pull key cache's answer without a lookup (gateway/signing-key-cache.ts#peek). */
  peekPullKeys?(serverId: string): CachedKeyAnswer<ResolvePullKeysResponse> | undefined;
}

/** The pull keys' classification for the key cache (ResolvePullKeys's statuses). */
export function classifyPullKeys(answer: KeyAnswer): KeyAnswerKind {
  if (answer.status === PullKeyStatus.OK) return "ok";
  return answer.status === PullKeyStatus.UNKNOWN_SERVER ? "unknown_server" : "other";
}

/** Where a pull request's keys come from: the RPC (through the gateway's pull key cache when wired), the cache's peek, the limiter. */
function pullKeys(rpcs: PullRpcs, limiter: FailureLimiter | undefined): SignedRequestKeys {
  const keys: SignedRequestKeys = { lookup: (serverId) => lookupPullKeys(rpcs, serverId) };
  if (rpcs.invalidatePullKeys) keys.invalidate = (serverId) => rpcs.invalidatePullKeys?.(serverId) ?? false;
  const peek = rpcs.peekPullKeys;
  if (peek) keys.cached = (serverId) => readCachedKeys(peek(serverId), classifyPullKeys);
  if (limiter) keys.limiter = limiter;
  return keys;
}

/**
 * POST /api/pull/hearts, for servers that cannot accept connections: the same
 * signature scheme and order of checks as the ingest endpoint (the server's pull
 * secret instead of its referral secret), then `cursor` (optional string) and
 * `limit` (optional integer 1-500, default 100). Answers
 * `{"hearts":[{heart_id, username, period, counted_at, streak_day?}], "next_cursor"}`.
 */
export async function handlePullList(input: IngestInput, rpcs: PullRpcs, now: () => Date, limiter?: FailureLimiter): Promise<IngestResult> {
  const signed = await verifySignedRequest(input, pullKeys(rpcs, limiter), now);
  if (signed.kind === "rejected") return signed.result;
  const { body, serverId, kid } = signed;
  const fields = readListFields(body);
  if (fields.kind === "invalid") return { reply: errorReply("invalidField", fields.error), outcome: "invalid_field", serverId, kid };
  try {
    const page = await rpcs.listPullHearts({ serverId, cursor: fields.cursor, limit: fields.limit });
    const hearts = page.hearts.map((h) => ({
      heart_id: h.heartId,
      username: h.username,
      period: h.period,
      counted_at: h.countedAt ? timestampDate(h.countedAt).toISOString() : null,
      ...(h.streakDay > 0 ? { streak_day: h.streakDay } : {}),
    }));
    return { reply: { status: 200, body: { hearts, next_cursor: page.nextCursor === "" ? null : page.nextCursor } }, outcome: "listed", serverId, kid };
  } catch (error) {
    return { ...rpcFailure(error), serverId, kid };
  }
}

/**
 * POST /api/pull/claims: claims hearts by `heart_ids` (1-500 strings), idempotently.
 * Answers `{"results":[{heart_id, status}]}`, one per id in request order, with
 * status `claimed`, `already_claimed` (a retried claim) or `unknown`.
 */
export async function handlePullClaim(input: IngestInput, rpcs: PullRpcs, now: () => Date, limiter?: FailureLimiter): Promise<IngestResult> {
  const signed = await verifySignedRequest(input, pullKeys(rpcs, limiter), now);
  if (signed.kind === "rejected") return signed.result;
  const { body, serverId, kid } = signed;
  const ids = body.heart_ids;
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_PULL_CLAIM || !ids.every((id) => typeof id === "string")) {
    return { reply: errorReply("invalidField", `heart_ids must be an array of 1-${MAX_PULL_CLAIM} strings`), outcome: "invalid_field", serverId, kid };
  }
  try {
    const { results } = await rpcs.claimPullHearts({ serverId, heartIds: ids as string[] });
    const body = { results: results.map((r) => ({ heart_id: r.heartId, status: PULL_CLAIM_STATUS_NAMES[r.status] ?? "unknown" })) };
    return { reply: { status: 200, body }, outcome: "claimed", serverId, kid };
  } catch (error) {
    return { ...rpcFailure(error), serverId, kid };
  }
}

/** Step 5 for the pull API: the server's active pull secrets. */
async function lookupPullKeys(rpcs: PullRpcs, serverId: string): Promise<KeyLookup> {
  const rejected = (kind: "unknownServer" | "pullDisabled" | "internal", outcome: string, cause?: unknown): KeyLookup => ({
    kind: "rejected",
    result: cause === undefined ? { reply: errorReply(kind), outcome } : { reply: errorReply(kind), outcome, cause },
  });
  if (!isServerIdShape(serverId)) return rejected("unknownServer", "unknown_server");
  let response: ResolvePullKeysResponse;
  try {
    response = await rpcs.resolvePullKeys({ serverId });
  } catch (error) {
    // Failure policy: the table decides; an unexpected failure is a retryable 500 with its cause logged.
    const mapped = fromRpcError(error);
    return {
      kind: "rejected",
      result: {
        reply: mapped.reply,
        outcome: mapped.cause === undefined ? "rejected_by_service" : "internal_error",
        ...(mapped.cause === undefined ? {} : { cause: mapped.cause }),
      },
    };
  }
  switch (response.status) {
    case PullKeyStatus.OK:
      if (response.keys.length === 0) return rejected("pullDisabled", "no_active_secret");
      return { kind: "keys", keys: response.keys.map((k) => ({ kid: k.kid, secret: k.secret })) };
    case PullKeyStatus.UNKNOWN_SERVER:
      return rejected("unknownServer", "unknown_server");
    case PullKeyStatus.PULL_DISABLED:
      return rejected("pullDisabled", "pull_disabled");
    default:
      // Failure policy: fail closed - an unspecified status is a service bug, answered 500.
      return rejected("internal", "internal_error", new Error(`unexpected pull key status ${response.status}`));
  }
}

type ListFields = { kind: "ok"; cursor: string; limit: number } | { kind: "invalid"; error: string };

function readListFields(body: JsonObject): ListFields {
  const cursor = body.cursor ?? "";
  if (typeof cursor !== "string") return { kind: "invalid", error: notStringText("cursor") };
  const limit = body.limit ?? 0;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 0 || limit > MAX_PULL_PAGE) {
    return { kind: "invalid", error: integerBetweenText("limit", 1, MAX_PULL_PAGE) };
  }
  return { kind: "ok", cursor, limit };
}

function rpcFailure(error: unknown): Pick<IngestResult, "reply" | "outcome" | "cause"> {
  // Failure policy: the table decides (400 for a bad cursor); an unexpected failure is a retryable 500 with its cause logged.
  const mapped = fromRpcError(error);
  return mapped.cause === undefined
    ? { reply: mapped.reply, outcome: `rejected_${mapped.reply.status}` }
    : { reply: mapped.reply, outcome: "internal_error", cause: mapped.cause };
}
