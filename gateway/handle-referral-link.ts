import type { MessageInitShape } from "@bufbuild/protobuf";
import type { RecordClickRequestSchema, RecordClickResponse } from "../gen/proto/referral/v1/referral_pb.js";
import { errorReply, fromRpcError, type HttpReply } from "./http-errors.js";
import { isServerIdShape } from "./forward.js";
import { fieldProblem } from "../services/shared/values/field-rules.js";
import { requiredText } from "../services/shared/values/contract.js";

/** Path prefix of the public referral link: `GET /r/<server_id>?referrer=<identity>`. */
export const REFERRAL_LINK_PREFIX = "/r/";

/** The 429 text of a referral link from an address past its click limit (REFERRAL_LINK_CLICKS_PER_IP per window). */
export const TOO_MANY_CLICKS_TEXT = "too many referral clicks from this address; retry after the Retry-After delay";

/** The RPC the referral link calls; in production the bound Connect client method. */
export interface ReferralLinkRpcs {
  recordClick(request: MessageInitShape<typeof RecordClickRequestSchema>): Promise<RecordClickResponse>;
}

/** A referral-link request, already split out of the HTTP request. */
export interface ReferralLinkInput {
  /** The path segment after `/r/`, percent-decoded. */
  serverId: string;
  /** The `referrer` query parameter (null when absent). */
  referrer: string | null;
  /** The client address recorded with the click (for fraud analysis, never shown). */
  ip: string;
  userAgent: string;
}

/** The answer plus log fields. */
export interface ReferralLinkResult {
  reply: HttpReply;
  outcome: string;
  cause?: unknown;
}

/**
 * `GET /r/<server_id>?referrer=<identity>`: records a click (`ReferralService.RecordClick`)
 * and sends the visitor on to the server's registration URL with the token appended
 * (302, built by the referral service). Without a registration URL the token is
 * returned as `200 {"token": ...}` so the server's own page can carry it.
 * Missing/empty `referrer`, or one over its bound or holding a NUL -> 400; unknown server -> 404 `unknown server`; referrals
 * disabled -> 404 `referrals not enabled for this server`; anything else -> 500.
 */
export async function handleReferralLink(input: ReferralLinkInput, rpcs: ReferralLinkRpcs): Promise<ReferralLinkResult> {
  const referrer = input.referrer?.trim() ?? "";
  if (referrer === "") return { reply: errorReply("invalidField", requiredText("referrer")), outcome: "missing_referrer" };
  const referrerProblem = fieldProblem("referrer", referrer);
  if (referrerProblem !== null) return { reply: errorReply("invalidField", referrerProblem), outcome: "invalid_referrer" };
  const serverId = input.serverId.trim();
  if (!isServerIdShape(serverId)) return { reply: errorReply("unknownServer"), outcome: "unknown_server" };

  let response: RecordClickResponse;
  try {
    response = await rpcs.recordClick({ serverId, referrerIdentity: referrer, ip: input.ip, userAgent: input.userAgent });
  } catch (error) {
    // Failure policy: the table decides; a dependency down is a 503, anything unexpected a 500; the cause is logged.
    const mapped = fromRpcError(error);
    if (mapped.cause !== undefined) return { reply: mapped.reply, outcome: mapped.failure ?? "internal_error", cause: mapped.cause };
    return { reply: mapped.reply, outcome: `rejected_${mapped.reply.status}` };
  }
  if (response.redirectUrl !== "") {
    return {
      // no-store: every visit is a new click with a new token, so a cached redirect would be wrong.
      reply: { status: 302, body: undefined, headers: { location: response.redirectUrl, "cache-control": "no-store" } },
      outcome: "redirected",
    };
  }
  return { reply: { status: 200, body: { token: response.token }, headers: { "cache-control": "no-store" } }, outcome: "token" };
}
