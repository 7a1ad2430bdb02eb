import { isUuid } from "../services/shared/values/ids.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ApplyEventRequestSchema, ApplyEventResponse } from "../gen/proto/referral/v1/referral_pb.js";
import type { ResolveSigningKeysRequestSchema, ResolveSigningKeysResponse } from "../gen/proto/servers/v1/servers_pb.js";
import { errorReply, fromRpcError, type HttpReply } from "./http-errors.js";
import type { ValidEvent } from "./validate-event.js";
import type { CachedKeyAnswer } from "./signing-key-cache.js";
import { ANCHOR_STATE_NAMES, REFERRAL_EVENT_TO_PROTO } from "../services/shared/values/proto-names.js";

/**
 * The two referral-service RPCs the ingest endpoint calls. In production they are
 * the Connect clients' methods bound to the request id; they throw ConnectError.
 */
export interface IngestRpcs {
  resolveSigningKeys(request: MessageInitShape<typeof ResolveSigningKeysRequestSchema>): Promise<ResolveSigningKeysResponse>;
  applyEvent(request: MessageInitShape<typeof ApplyEventRequestSchema>): Promise<ApplyEventResponse>;
  /**
   * After a MAC failed: the answer of a key lookup started at or after `since` (ms), bounded and shared per
   * server (gateway/signing-key-cache.ts#refresh); undefined without a key cache.
   */
  refreshSigningKeys?(serverId: string, since: number): Promise<ResolveSigningKeysResponse> | undefined;
  /** The key cache's answer for the server without a lookup (gateway/signing-key-cache.ts#peek); MACs verified against it skip the failure limiter. */
  peekSigningKeys?(serverId: string): CachedKeyAnswer<ResolveSigningKeysResponse> | undefined;
}

/** A forwarded call's HTTP answer; `cause` is set for 500s and is logged, never sent. */
export interface ForwardResult {
  reply: HttpReply;
  /** A short label of the outcome for the request log (no secrets). */
  outcome: string;
  cause?: unknown;
}

/** True when `value` has the shape of a server id (a uuid); anything else cannot name a server. */
export function isServerIdShape(value: string): boolean {
  return isUuid(value);
}

/** Builds the ApplyEvent request from a validated event and the kid that verified it. */
export function toApplyEventRequest(event: ValidEvent, kid: string): MessageInitShape<typeof ApplyEventRequestSchema> {
  return {
    serverId: event.serverId,
    event: REFERRAL_EVENT_TO_PROTO[event.event],
    token: event.token,
    refereeIdentity: event.refereeIdentity,
    serverEventId: event.serverEventId,
    ts: event.ts ?? 0n,
    kid,
    reason: event.reason ?? "",
  };
}

/**
 * Maps ApplyEvent's outcome to the contract's 200 OkResponse: applied ->
 * `{ok, referral_id, state}`, duplicate -> `{ok, duplicate: true}`, first-touch
 * conflict -> `{ok, ignored: "first_touch_conflict"}`. Returns null for an outcome
 * the contract cannot express (no case, or a state other than the three).
 */
export function toOkReply(response: ApplyEventResponse): { reply: HttpReply; outcome: string } | null {
  const { outcome } = response;
  switch (outcome.case) {
    case "applied": {
      const state = ANCHOR_STATE_NAMES[outcome.value.state];
      if (state === undefined || outcome.value.referralId === "") return null;
      return {
        reply: { status: 200, body: { ok: true, referral_id: outcome.value.referralId, state } },
        outcome: outcome.value.advanced ? `advanced_${state}` : `idempotent_${state}`,
      };
    }
    case "duplicate":
      return { reply: { status: 200, body: { ok: true, duplicate: true } }, outcome: "duplicate" };
    case "firstTouchConflict":
      return { reply: { status: 200, body: { ok: true, ignored: "first_touch_conflict" } }, outcome: "first_touch_conflict" };
    default:
      return null;
  }
}

/**
 * Step 10: forwards a verified, validated event to `ReferralService.ApplyEvent`
 * (token lookup, dedup and the state machine live there) and maps the answer:
 * 200 outcomes via `toOkReply`, errors via the one table in http-errors.ts.
 */
export async function forwardEvent(rpcs: IngestRpcs, event: ValidEvent, kid: string): Promise<ForwardResult> {
  let response: ApplyEventResponse;
  try {
    response = await rpcs.applyEvent(toApplyEventRequest(event, kid));
  } catch (error) {
    // Failure policy: the table decides (the ingest contract's texts); a dependency down is a 503, anything unexpected a
    // retryable 500; either way the cause is logged.
    const mapped = fromRpcError(error, "ingest");
    if (mapped.cause !== undefined) return { reply: mapped.reply, outcome: mapped.failure ?? "internal_error", cause: mapped.cause };
    return { reply: mapped.reply, outcome: `rejected_${mapped.reply.status}` };
  }
  const ok = toOkReply(response);
  // Failure policy: fail closed - an outcome the contract cannot express is a service bug, answered 500.
  return ok ?? { reply: errorReply("internal"), outcome: "internal_error", cause: new Error("ApplyEvent returned no usable outcome") };
}
