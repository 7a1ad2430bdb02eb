import type { SigningKeyMaterial } from "./verify-signature.js";
import { ERROR_TEXT, errorReply, type HttpReply } from "./http-errors.js";
import { forwardEvent, lookupSigningKeys, type IngestRpcs, type KeyLookup } from "./forward.js";
import { parseJsonObject, readServerId, validateEvent, type JsonObject } from "./validate-event.js";
import { parseSignatureHeader, verifySignature } from "./verify-signature.js";

/** What one ingest request carries once its body has been read within the size limit (step 1). */
export interface IngestInput {
  /** The X-Service-Signature header value as received (undefined when absent). */
  signatureHeader: string | undefined;
  /** The exact raw body bytes. */
  rawBody: Buffer;
}

/** The answer plus what the request log line records about it (never secrets or bodies). */
export interface IngestResult {
  reply: HttpReply;
  /** Short label of how the request ended, for logs and debugging. */
  outcome: string;
  serverId?: string;
  /** The kid of the key that verified the MAC. */
  kid?: string;
  /** Set for 500s: the cause, logged with the request id, never sent. */
  cause?: unknown;
}

/**
 * POST /api/referral/events, steps 2-10 of the contract's order of checks (step 1,
 * the 64 KiB limit, happens while reading the body). Each step only runs when the
 * previous ones passed, so the first failing step decides the answer:
 *
 *  2. X-Service-Signature missing/malformed -> 400
 *  3. body not valid UTF-8 JSON, or not an object -> 400 `body is not valid JSON`
 *  4. `server_id` missing/empty/not a string -> 400 (the only field read before the MAC)
 *  5. unknown server / referrals disabled or no active secret -> 404
 *  6. MAC (by `kid`, or against every active key; constant-time) -> 401 bad_signature
 *  7. |now - t| > 300 s -> 401 stale (after the MAC, so a forged `t` learns nothing)
 *  8. field validation -> 400
 *  9. `test: true` -> 200 `{ok: true, test: true}`, nothing looked up or written
 * 10. ApplyEvent (token lookup, dedup, state machine) -> 200 / 404 / 422 / 500
 */
export async function handleIngest(input: IngestInput, rpcs: IngestRpcs, now: () => Date): Promise<IngestResult> {
  const signed = await verifySignedRequest(input, { lookup: (serverId) => lookupSigningKeys(rpcs, serverId), forget: rpcs.forgetSigningKeys }, now);
  if (signed.kind === "rejected") return signed.result;
  const { body, serverId, kid } = signed;

  const validated = validateEvent(body);
  if (validated.kind === "invalid") return { reply: errorReply(400, validated.error), outcome: "invalid_field", serverId, kid };
  const event = validated.value;

  if (event.test) return { reply: { status: 200, body: { ok: true, test: true } }, outcome: "test", serverId, kid };

  return { ...(await forwardEvent(rpcs, event, kid)), serverId, kid };
}

/** Where a signed request's keys come from (step 5). */
export interface SignedRequestKeys {
  lookup(serverId: string): Promise<KeyLookup>;
  /** Drops cached keys; true when some were cached, so a failed MAC is checked once more against fresh keys. */
  forget?(serverId: string): boolean;
}

/** Steps 2-7 passed: the parsed body, its server and the kid that verified it; or the answer that ends the request. */
export type SignedRequest = { kind: "verified"; body: JsonObject; serverId: string; kid: string } | { kind: "rejected"; result: IngestResult };

/**
 * Steps 2-7, shared by every endpoint signed with the ingest scheme (the ingest
 * endpoint and the pull API): signature header, JSON object body, `server_id`,
 * the server's keys, the MAC (constant-time), then the clock.
 */
export async function verifySignedRequest(input: IngestInput, keys: SignedRequestKeys, now: () => Date): Promise<SignedRequest> {
  const rejected = (result: IngestResult): SignedRequest => ({ kind: "rejected", result });
  const signature = parseSignatureHeader(input.signatureHeader);
  if (signature === null) return rejected({ reply: errorReply(400, ERROR_TEXT.badSignatureHeader), outcome: "malformed_signature_header" });

  const body = parseJsonObject(input.rawBody);
  if (body === null) return rejected({ reply: errorReply(400, ERROR_TEXT.invalidJson), outcome: "invalid_json" });

  const serverIdField = readServerId(body);
  if (serverIdField.kind === "invalid") return rejected({ reply: errorReply(400, serverIdField.error), outcome: "invalid_server_id" });
  const serverId = serverIdField.value;

  let lookup = await keys.lookup(serverId);
  if (lookup.kind === "rejected") return rejected({ ...lookup.result, serverId });

  const verifyWith = (material: SigningKeyMaterial[]) =>
    verifySignature({ signature, keys: material, rawBody: input.rawBody, nowSeconds: Math.floor(now().getTime() / 1000) });
  let verdict = verifyWith(lookup.keys);
  if (verdict.kind === "bad_signature" && keys.forget?.(serverId)) {
    // The keys came from the gateway's short cache: ask once more, so a just-created secret verifies at once.
    lookup = await keys.lookup(serverId);
    if (lookup.kind === "rejected") return rejected({ ...lookup.result, serverId });
    verdict = verifyWith(lookup.keys);
  }
  if (verdict.kind === "bad_signature") return rejected({ reply: errorReply(401, ERROR_TEXT.badSignature), outcome: "bad_signature", serverId });
  if (verdict.kind === "stale") return rejected({ reply: errorReply(401, ERROR_TEXT.stale), outcome: "stale", serverId });
  return { kind: "verified", body, serverId, kid: verdict.kid };
}
