import { errorReply, fromRpcError, type ErrorSurface, type HttpReply } from "./http-errors.js";
import type { FailureLimiter } from "./failure-limiter.js";
import type { CachedKeyAnswer, KeyAnswerKind } from "./signing-key-cache.js";
import { isServerIdShape } from "./forward.js";
import { parseJsonObject, readServerId, type JsonObject } from "./validate-event.js";
import { parseSignatureHeader, verifySignature, type ParsedSignatureHeader, type SigningKeyMaterial } from "./verify-signature.js";

/**
 * THE verification of a request signed with the ingest scheme (`X-Service-Signature` over the raw
 * body), for every endpoint that takes one: the ingest endpoint (the server's referral secrets) and
 * the pull API (its pull secrets). Steps 2-7 of the contract's order of checks, the key lookup of
 * both purposes, the failed-signature limits (gateway/failure-limiter.ts) and the short key cache
 * (gateway/signing-key-cache.ts) are wired here once; the handlers only say which keys.
 */

/** What a signed request carries once its body has been read within the size limit (step 1). */
export interface SignedInput {
  /** The X-Service-Signature header value as received (undefined when absent). */
  signatureHeader: string | undefined;
  /** The exact raw body bytes. */
  rawBody: Buffer;
  /** The client's address (the failure limiter's per-source budget); undefined is counted only per server and overall. */
  source?: string;
}

/** The answer plus what the request log line records about it (never secrets or bodies). */
export interface SignedResult {
  reply: HttpReply;
  /** Short label of how the request ended, for logs and debugging. */
  outcome: string;
  serverId?: string;
  /** The kid of the key that verified the MAC. */
  kid?: string;
  /** Set for 500s and the 503 of a dependency that is down: the cause, logged with the request id, never sent. */
  cause?: unknown;
}

/** Step 5's outcome: the server's active keys, or the answer that ends the request. */
export type KeyLookup = { kind: "keys"; keys: SigningKeyMaterial[] } | { kind: "rejected"; result: SignedResult };

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
export type SignedRequest = { kind: "verified"; body: JsonObject; serverId: string; kid: string } | { kind: "rejected"; result: SignedResult };

/** Outcomes of steps 5-6 that count against the failed-signature limits (each may have cost a lookup). */
const FAILED_AUTHENTICATION_OUTCOMES = new Set(["unknown_server", "referrals_disabled", "no_active_secret", "pull_disabled", "bad_signature"]);

/**
 * Steps 2-7, shared by every endpoint signed with the ingest scheme (the ingest
 * endpoint and the pull API): signature header, JSON object body, `server_id`,
 * the server's keys, the MAC (constant-time), then the clock.
 */
export async function verifySignedRequest(input: SignedInput, keys: SignedRequestKeys, now: () => Date): Promise<SignedRequest> {
  const rejected = (result: SignedResult): SignedRequest => ({ kind: "rejected", result });
  const signature = parseSignatureHeader(input.signatureHeader);
  if (signature === null) return rejected({ reply: errorReply("badSignatureHeader"), outcome: "malformed_signature_header" });

  const body = parseJsonObject(input.rawBody);
  if (body === null) return rejected({ reply: errorReply("invalidJson"), outcome: "invalid_json" });

  const serverIdField = readServerId(body);
  if (serverIdField.kind === "invalid") return rejected({ reply: errorReply("invalidField", serverIdField.error), outcome: "invalid_server_id" });
  const serverId = serverIdField.value;

  // Only ids that could name a server cost a lookup, so only they are limited and counted.
  if (!isServerIdShape(serverId)) return withBody(await verifyWithServerKeys(input, keys, now, signature, serverId), body, serverId);

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

type KeysVerdict = { kind: "verified"; kid: string } | { kind: "rejected"; result: SignedResult };

function withBody(verdict: KeysVerdict, body: JsonObject, serverId: string): SignedRequest {
  return verdict.kind === "rejected" ? verdict : { kind: "verified", body, serverId, kid: verdict.kid };
}

/** Steps 6-7 against one key set (constant-time MAC, then the clock). */
function verifyMac(input: SignedInput, now: () => Date, signature: ParsedSignatureHeader, material: SigningKeyMaterial[]) {
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
  input: SignedInput,
  keys: SignedRequestKeys,
  now: () => Date,
  signature: ParsedSignatureHeader,
  serverId: string,
): Promise<KeysVerdict> {
  const rejected = (result: SignedResult) => ({ kind: "rejected" as const, result });
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

/** A key RPC's answer (ResolveSigningKeys, ResolvePullKeys): a status and the active keys. */
export interface KeyAnswer {
  status: number;
  keys: ReadonlyArray<{ kid: string; secret: Uint8Array }>;
}

/** One purpose of signing keys: its RPC, the statuses of its answer and what "turned off" is called. */
export interface KeyPurpose {
  /** For the message of an unexpected status ("signing key", "pull key"). */
  name: string;
  resolve(serverId: string): Promise<KeyAnswer>;
  status: { ok: number; unknownServer: number; disabled: number };
  /** The answer when the purpose is off for the server, or on with no active secret. */
  disabled: { kind: "referralsDisabled" | "pullDisabled"; outcome: string };
  /** Whose texts a failed lookup answers with (gateway/http-errors.ts): the ingest contract's, or the other public endpoints'. */
  surface: ErrorSurface;
}

/**
 * Step 5 for any purpose: the server's active secrets. A `server_id` that is not a uuid cannot name a
 * server and is answered without a call. Unknown server -> 404 `unknown server`; the purpose off, or on
 * with no active secret -> its 404; RPC failure -> the error table (500 for the unexpected).
 */
export async function lookupKeys(purpose: KeyPurpose, serverId: string): Promise<KeyLookup> {
  const rejected = (reply: HttpReply, outcome: string, cause?: unknown): KeyLookup => ({
    kind: "rejected",
    result: cause === undefined ? { reply, outcome } : { reply, outcome, cause },
  });
  if (!isServerIdShape(serverId)) return rejected(errorReply("unknownServer"), "unknown_server");
  let response: KeyAnswer;
  try {
    response = await purpose.resolve(serverId);
  } catch (error) {
    // Failure policy: the table decides; a dependency down is a 503, anything unexpected a retryable 500; the cause is logged.
    const mapped = fromRpcError(error, purpose.surface);
    return rejected(mapped.reply, mapped.cause === undefined ? "rejected_by_service" : (mapped.failure ?? "internal_error"), mapped.cause);
  }
  switch (response.status) {
    case purpose.status.ok:
      if (response.keys.length === 0) return rejected(errorReply(purpose.disabled.kind), "no_active_secret");
      return { kind: "keys", keys: response.keys.map((k) => ({ kid: k.kid, secret: k.secret })) };
    case purpose.status.unknownServer:
      return rejected(errorReply("unknownServer"), "unknown_server");
    case purpose.status.disabled:
      return rejected(errorReply(purpose.disabled.kind), purpose.disabled.outcome);
    default:
      // Failure policy: fail closed - an unspecified status is a service bug, answered 500.
      return rejected(errorReply("internal"), "internal_error", new Error(`unexpected ${purpose.name} status ${response.status}`));
  }
}

/**
 * The keys of one purpose as verifySignedRequest takes them. `invalidate` is the short key cache's
 * bounded refresh after a failed MAC (gateway/signing-key-cache.ts; when the purpose's `resolve` reads
 * through it), `limiter` the failed-signature limits (gateway/failure-limiter.ts).
 */
export function keysOf(
  purpose: KeyPurpose,
  opts: {
    invalidate?: ((serverId: string) => boolean) | undefined;
    cached?: ((serverId: string) => CachedKeys | undefined) | undefined;
    limiter?: FailureLimiter | undefined;
  } = {},
): SignedRequestKeys {
  const keys: SignedRequestKeys = { lookup: (serverId) => lookupKeys(purpose, serverId) };
  if (opts.invalidate) keys.invalidate = opts.invalidate;
  if (opts.cached) keys.cached = opts.cached;
  if (opts.limiter) keys.limiter = opts.limiter;
  return keys;
}
