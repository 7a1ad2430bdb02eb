import type { SigningKeyMaterial } from "./verify-signature.js";
import { errorReply, type HttpReply } from "./http-errors.js";
import type { FailureLimiter } from "./failure-limiter.js";
import { classifySigningKeys, type CachedKeyAnswer, type KeyAnswerKind } from "./signing-key-cache.js";
import { forwardEvent, isServerIdShape, lookupSigningKeys, type IngestRpcs, type KeyLookup } from "./forward.js";
import { parseJsonObject, readServerId, validateEvent, type JsonObject } from "./validate-event.js";
import { parseSignatureHeader, verifySignature, type ParsedSignatureHeader } from "./verify-signature.js";

/** Outcomes of steps 5-6 that count against the failed-signature limits (each may have cost a lookup). */
const FAILED_AUTHENTICATION_OUTCOMES = new Set(["unknown_server", "referrals_disabled", "no_active_secret", "pull_disabled", "bad_signature"]);

/** What one ingest request carries once its body has been read within the size limit (step 1). */
export interface IngestInput {
  /** The X-Service-Signature header value as received (undefined when absent). */
  signatureHeader: string | undefined;
  /** The exact raw body bytes. */
  rawBody: Buffer;
  /** The client's address (the failure limiter's per-source budget); undefined is counted only per server and overall. */
  source?: string;
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
 *     then: a MAC that verifies against the gateway's cached keys goes on without the limiter;
 *     otherwise, with a `limiter`: too many failed signatures for this server, this source or
 *     overall -> 429 with Retry-After, before any lookup (failures of steps 5 and 6 are counted)
 *  5. unknown server / referrals disabled or no active secret -> 404
 *  6. MAC (by `kid`, or against every active key; constant-time) -> 401 bad_signature
 *  7. |now - t| > 300 s -> 401 stale (after the MAC, so a forged `t` learns nothing)
 *  8. field validation -> 400
 *  9. `test: true` -> 200 `{ok: true, test: true}`, nothing looked up or written
 * 10. ApplyEvent (token lookup, dedup, state machine) -> 200 / 404 / 422 / 500
 */
export async function handleIngest(input: IngestInput, rpcs: IngestRpcs, now: () => Date, limiter?: FailureLimiter): Promise<IngestResult> {
  const keys: SignedRequestKeys = { lookup: (serverId) => lookupSigningKeys(rpcs, serverId) };
  if (rpcs.invalidateSigningKeys) keys.invalidate = (serverId) => rpcs.invalidateSigningKeys?.(serverId) ?? false;
  const peek = rpcs.peekSigningKeys;
  if (peek) keys.cached = (serverId) => readCachedKeys(peek(serverId), classifySigningKeys);
  if (limiter) keys.limiter = limiter;
  const signed = await verifySignedRequest(input, keys, now);
  if (signed.kind === "rejected") return signed.result;
  const { body, serverId, kid } = signed;

  const validated = validateEvent(body);
  if (validated.kind === "invalid") return { reply: errorReply("invalidField", validated.error), outcome: "invalid_field", serverId, kid };
  const event = validated.value;

  if (event.test) return { reply: { status: 200, body: { ok: true, test: true } }, outcome: "test", serverId, kid };

  return { ...(await forwardEvent(rpcs, event, kid)), serverId, kid };
}

/** Where a signed request's keys come from (step 5). */
export interface SignedRequestKeys {
  lookup(serverId: string): Promise<KeyLookup>;
  /**
   * After a MAC failed: drops the server's cached keys when a refresh is allowed (bounded per
   * server, gateway/signing-key-cache.ts); true when the MAC may be checked once more against fresh keys.
   */
  invalidate?(serverId: string): boolean;
  /**
   * The keys the gateway's key cache holds for the server, without a lookup (gateway/signing-key-cache.ts#peek).
   * A MAC that verifies against fresh cached keys is accepted without the limiter; one that verifies against
   * stale cached keys earns a lookup the limiter does not charge.
   */
  cached?(serverId: string): CachedKeys | undefined;
  /** Limits the lookups of requests not verified by cached keys, per server, per source and overall (gateway/failure-limiter.ts): 429 past a limit. */
  limiter?: FailureLimiter;
}

/** What a key cache holds for a server: its keys (fresh, or stale: they only vouch for a lookup), or a fresh unknown-server answer. */
export type CachedKeys = { kind: "keys"; keys: SigningKeyMaterial[]; fresh: boolean } | { kind: "unknown_server" };

/** Reads a key cache's peek (gateway/signing-key-cache.ts) as verifySignedRequest needs it. */
export function readCachedKeys<A extends { status: number; keys: ReadonlyArray<SigningKeyMaterial> }>(
  peeked: CachedKeyAnswer<A> | undefined,
  classify: (answer: A) => KeyAnswerKind,
): CachedKeys | undefined {
  if (peeked === undefined) return undefined;
  const kind = classify(peeked.answer);
  if (kind === "unknown_server" && peeked.fresh) return { kind: "unknown_server" };
  if (kind !== "ok" || peeked.answer.keys.length === 0) return undefined;
  return { kind: "keys", keys: peeked.answer.keys.map((k) => ({ kid: k.kid, secret: k.secret })), fresh: peeked.fresh };
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
  if (signature === null) return rejected({ reply: errorReply("badSignatureHeader"), outcome: "malformed_signature_header" });

  const body = parseJsonObject(input.rawBody);
  if (body === null) return rejected({ reply: errorReply("invalidJson"), outcome: "invalid_json" });

  const serverIdField = readServerId(body);
  if (serverIdField.kind === "invalid") return rejected({ reply: errorReply("invalidField", serverIdField.error), outcome: "invalid_server_id" });
  const serverId = serverIdField.value;

  // Only ids that could name a server cost a lookup, so only they are limited and counted.
  if (!isServerIdShape(serverId)) return verifyWithServerKeys(input, keys, now, signature, serverId).then((v) => withBody(v, body, serverId));

  // Cached keys first: they cost nothing, so a request they verify is never refused by the limiter.
  const cached = keys.cached?.(serverId);
  if (cached?.kind === "unknown_server") return rejected({ reply: errorReply("unknownServer"), outcome: "unknown_server", serverId });
  const cachedVerdict = cached?.kind === "keys" ? verifyMac(input, now, signature, cached.keys) : undefined;
  if (cached?.kind === "keys" && cachedVerdict !== undefined && cachedVerdict.kind !== "bad_signature") {
    // Fresh keys decide at once (verified, or 401 stale for the clock). Stale keys only vouch for the
    // sender - it holds a secret that was active recently - so its lookup is not charged to the limiter,
    // and the fresh keys decide (a revoked secret or disabled referrals still take effect).
    if (cached.fresh) return withBody(macVerdict(cachedVerdict, serverId), body, serverId);
    return withBody(await verifyWithServerKeys(input, keys, now, signature, serverId), body, serverId);
  }

  // Everything else may cost a lookup or a refresh (an unknown id, a MAC the cached keys refuse): charged
  // per server, per source and overall, and refused with 429 past a limit, before any lookup.
  const admission = keys.limiter?.admit(serverId, input.source);
  if (admission?.kind === "limited") {
    const headers = { "retry-after": String(admission.retryAfterSeconds) };
    return rejected({ reply: errorReply("tooManyFailedSignatures", { headers }), outcome: "failed_signature_limit", serverId });
  }
  let failed = false;
  try {
    const verified = await verifyWithServerKeys(input, keys, now, signature, serverId);
    failed = verified.kind === "rejected" && FAILED_AUTHENTICATION_OUTCOMES.has(verified.result.outcome);
    return withBody(verified, body, serverId);
  } finally {
    admission?.done(failed);
  }
}

type KeysVerdict = { kind: "verified"; kid: string } | { kind: "rejected"; result: IngestResult };

function withBody(verdict: KeysVerdict, body: JsonObject, serverId: string): SignedRequest {
  return verdict.kind === "rejected" ? verdict : { kind: "verified", body, serverId, kid: verdict.kid };
}

/** Step 6-7 against one key set (constant-time MAC, then the clock). */
function verifyMac(input: IngestInput, now: () => Date, signature: ParsedSignatureHeader, material: SigningKeyMaterial[]) {
  return verifySignature({ signature, keys: material, rawBody: input.rawBody, nowSeconds: Math.floor(now().getTime() / 1000) });
}

/** The answer of a MAC verdict: verified, or 401 bad_signature / stale. */
function macVerdict(verdict: ReturnType<typeof verifyMac>, serverId: string): KeysVerdict {
  if (verdict.kind === "bad_signature") return { kind: "rejected", result: { reply: errorReply("badSignature"), outcome: "bad_signature", serverId } };
  if (verdict.kind === "stale") return { kind: "rejected", result: { reply: errorReply("stale"), outcome: "stale", serverId } };
  return { kind: "verified", kid: verdict.kid };
}

/** Steps 5-7: the server's keys, the MAC (once more against fresh keys when the cache allows), the clock. */
async function verifyWithServerKeys(
  input: IngestInput,
  keys: SignedRequestKeys,
  now: () => Date,
  signature: ParsedSignatureHeader,
  serverId: string,
): Promise<KeysVerdict> {
  const rejected = (result: IngestResult) => ({ kind: "rejected" as const, result });
  let lookup = await keys.lookup(serverId);
  if (lookup.kind === "rejected") return rejected({ ...lookup.result, serverId });

  const verifyWith = (material: SigningKeyMaterial[]) => verifyMac(input, now, signature, material);
  let verdict = verifyWith(lookup.keys);
  if (verdict.kind === "bad_signature" && keys.invalidate?.(serverId)) {
    // The keys came from the gateway's short cache: ask once more (at most once per server per
    // refresh interval), so a just-created secret verifies at once and a flood of forgeries costs no lookups.
    lookup = await keys.lookup(serverId);
    if (lookup.kind === "rejected") return rejected({ ...lookup.result, serverId });
    verdict = verifyWith(lookup.keys);
  }
  return macVerdict(verdict, serverId);
}
