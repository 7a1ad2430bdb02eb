import { errorReply, fromRpcError, type ErrorSurface, type HttpReply } from "./http-errors.js";
import type { Admission, FailureLimiter } from "./failure-limiter.js";
import type { ServerDirectory } from "./server-directory.js";
import type { CachedKeyAnswer, KeyAnswerKind } from "./signing-key-cache.js";
import { isServerIdShape } from "./forward.js";
import { parseJsonObject, readServerId, type JsonObject } from "./validate-event.js";
import { parseSignatureHeader, verifySignature, type ParsedSignatureHeader, type SigningKeyMaterial } from "./verify-signature.js";

/**
 * THE verification of a request signed with the ingest scheme (`X-Service-Signature` over the raw
 * body), for every endpoint that takes one: the ingest endpoint (the server's referral secrets) and
 * the pull API (its pull secrets). Steps 2-7 of the contract's order of checks, the key lookup of
 * both purposes, the failed-signature limits (gateway/failure-limiter.ts), the short key cache
 * (gateway/signing-key-cache.ts) and the known server ids (gateway/server-directory.ts) are wired here
 * once; the handlers only say which keys.
 */

/** What a signed request carries once its body has been read within the size limit (step 1). */
export interface SignedInput {
  /** The X-Service-Signature header value as received (undefined when absent). */
  signatureHeader: string | undefined;
  /** The exact raw body bytes. */
  rawBody: Buffer;
  /** The client's address (the failure limiter's per-source budget); undefined is counted only globally. */
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
   * After a MAC failed: the server's keys as a lookup that started at or after `since` (ms) found them -
   * bounded and shared per server (gateway/signing-key-cache.ts#refresh) - so a secret created before
   * the request verifies; undefined when the keys it failed against were already the request's own lookup.
   */
  refresh?(serverId: string, since: number): Promise<KeyLookup> | undefined;
  /**
   * The keys the gateway's key cache holds for the server, without a lookup (gateway/signing-key-cache.ts#peek).
   * A MAC that verifies against fresh cached keys is accepted without the limiter; one that verifies against
   * stale cached keys earns a lookup the limiter does not charge.
   */
  cached?(serverId: string): CachedKeys | undefined;
  /** Limits the lookups of requests not verified by cached keys, per source and, for unknown server ids, overall (gateway/failure-limiter.ts): 429 past a limit. */
  limiter?: FailureLimiter;
  /**
   * The server ids the gateway knows to exist (gateway/server-directory.ts): their lookups are bounded per
   * server by the key cache, so the global limit never refuses them. Without it every id meets the global limit.
   */
  servers?: Pick<ServerDirectory, "has" | "learn" | "catchUp">;
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
/** Step 5's refusals that still show the server exists. */
const EXISTING_SERVER_OUTCOMES = new Set(["referrals_disabled", "no_active_secret", "pull_disabled"]);

/**
 * Steps 2-7, shared by every endpoint signed with the ingest scheme (the ingest
 * endpoint and the pull API): signature header, JSON object body, `server_id`,
 * the server's keys, the MAC (constant-time), then the clock.
 */
export async function verifySignedRequest(input: SignedInput, keys: SignedRequestKeys, now: () => Date): Promise<SignedRequest> {
  const rejected = (result: SignedResult): SignedRequest => ({ kind: "rejected", result });
  /** When the request arrived (ms): a refresh or a read of new servers it needs must start no earlier. */
  const arrived = now().getTime();
  const signature = parseSignatureHeader(input.signatureHeader);
  if (signature === null) return rejected({ reply: errorReply("badSignatureHeader"), outcome: "malformed_signature_header" });

  const body = parseJsonObject(input.rawBody);
  if (body === null) return rejected({ reply: errorReply("invalidJson"), outcome: "invalid_json" });

  const serverIdField = readServerId(body);
  if (serverIdField.kind === "invalid") return rejected({ reply: errorReply("invalidField", serverIdField.error), outcome: "invalid_server_id" });
  const serverId = serverIdField.value;

  // Only ids that could name a server cost a lookup, so only they are limited and counted.
  if (!isServerIdShape(serverId)) return withBody(await verifyWithServerKeys(input, keys, now, signature, serverId, arrived), body, serverId);

  // Cached keys first: they cost nothing, so a request they verify is never refused by the limiter.
  const cached = keys.cached?.(serverId);
  if (cached?.kind === "unknown_server") return rejected({ reply: errorReply("unknownServer"), outcome: "unknown_server", serverId });
  const cachedVerdict = cached?.kind === "keys" ? verifyMac(input, now, signature, cached.keys) : undefined;
  if (cached?.kind === "keys" && cachedVerdict !== undefined && cachedVerdict.kind !== "bad_signature") {
    // Fresh keys decide at once (verified, or 401 stale for the clock). Stale keys only vouch for the
    // sender - it holds a secret that was active recently - so its lookup is not charged to the limiter,
    // and the fresh keys decide (a revoked secret or disabled referrals still take effect).
    if (cached.fresh) return withBody(macVerdict(cachedVerdict, serverId), body, serverId);
    return withBody(await verifyWithServerKeys(input, keys, now, signature, serverId, arrived), body, serverId);
  }

  // Everything else may cost a lookup or a refresh (an unknown id, a MAC the cached keys refuse): charged
  // to its source, and for an id not known to exist also to the global budget; refused with 429 past a
  // limit, before any lookup.
  const admission = await admitLookup(keys, serverId, input.source, arrived);
  if (admission?.kind === "limited") {
    const headers = { "retry-after": String(admission.retryAfterSeconds) };
    return rejected({ reply: errorReply("tooManyFailedSignatures", { headers }), outcome: "failed_signature_limit", serverId });
  }
  let failed = false;
  try {
    const verified = await verifyWithServerKeys(input, keys, now, signature, serverId, arrived);
    failed = verified.kind === "rejected" && FAILED_AUTHENTICATION_OUTCOMES.has(verified.result.outcome);
    return withBody(verified, body, serverId);
  } finally {
    admission?.done(failed);
  }
}

/**
 * The limiter's admission of a lookup for `serverId` from `source`. A server the gateway knows to exist
 * meets only the source's limit (its lookups are bounded per server by the key cache); any other id meets
 * the global limit too - and before that refuses it, the gateway reads the servers created since its last
 * read (shared, at most one per interval), so a server created a moment ago is not taken for a made-up id.
 */
async function admitLookup(keys: SignedRequestKeys, serverId: string, source: string | undefined, arrived: number): Promise<Admission | undefined> {
  const { limiter, servers } = keys;
  if (limiter === undefined) return undefined;
  const admission = limiter.admit(source, { global: servers?.has(serverId) !== true });
  if (admission.kind === "admitted" || admission.by === "source" || servers === undefined) return admission;
  await servers.catchUp(arrived);
  return servers.has(serverId) ? limiter.admit(source) : admission;
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

/** Steps 5-7: the server's keys, the MAC (once more against fresher keys when the cache allows), the clock. */
async function verifyWithServerKeys(
  input: SignedInput,
  keys: SignedRequestKeys,
  now: () => Date,
  signature: ParsedSignatureHeader,
  serverId: string,
  arrived: number,
): Promise<KeysVerdict> {
  let lookup = learnFrom(keys, serverId, await keys.lookup(serverId));
  if (lookup.kind === "rejected") return { kind: "rejected", result: { ...lookup.result, serverId } };

  const verifyWith = (material: SigningKeyMaterial[]) => verifyMac(input, now, signature, material);
  let verdict = verifyWith(lookup.keys);
  const refreshed = verdict.kind === "bad_signature" ? keys.refresh?.(serverId, arrived) : undefined;
  if (refreshed !== undefined) {
    // The keys may be older than the request (the gateway's short cache): ask for keys looked up since it
    // arrived - one lookup per server per refresh interval, shared by every request that asks - so a
    // just-created secret verifies and a flood of forgeries costs no more lookups.
    lookup = learnFrom(keys, serverId, await refreshed);
    if (lookup.kind === "rejected") return { kind: "rejected", result: { ...lookup.result, serverId } };
    verdict = verifyWith(lookup.keys);
  }
  return macVerdict(verdict, serverId);
}

/** A lookup that found the server (keys, or the purpose off) tells the known server ids. */
function learnFrom(keys: SignedRequestKeys, serverId: string, lookup: KeyLookup): KeyLookup {
  if (lookup.kind === "keys" || EXISTING_SERVER_OUTCOMES.has(lookup.result.outcome)) keys.servers?.learn(serverId);
  return lookup;
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
  /** The answer of a lookup started at or after `since` (gateway/signing-key-cache.ts#refresh); undefined without a key cache. */
  refresh?(serverId: string, since: number): Promise<KeyAnswer> | undefined;
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
  if (!isServerIdShape(serverId)) return { kind: "rejected", result: { reply: errorReply("unknownServer"), outcome: "unknown_server" } };
  return readKeyAnswer(purpose, () => purpose.resolve(serverId));
}

/** A key RPC's answer (or failure) as step 5's outcome. */
async function readKeyAnswer(purpose: KeyPurpose, answer: () => Promise<KeyAnswer>): Promise<KeyLookup> {
  const rejected = (reply: HttpReply, outcome: string, cause?: unknown): KeyLookup => ({
    kind: "rejected",
    result: cause === undefined ? { reply, outcome } : { reply, outcome, cause },
  });
  let response: KeyAnswer;
  try {
    response = await answer();
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
 * The keys of one purpose as verifySignedRequest takes them: `cached` and the purpose's `refresh` come
 * from the gateway's key cache (gateway/signing-key-cache.ts; when the purpose's `resolve` reads through
 * it), `limiter` the failed-signature limits (gateway/failure-limiter.ts), `servers` the known server ids
 * (gateway/server-directory.ts).
 */
export function keysOf(
  purpose: KeyPurpose,
  opts: LookupGuards & { cached?: ((serverId: string) => CachedKeys | undefined) | undefined } = {},
): SignedRequestKeys {
  const keys: SignedRequestKeys = { lookup: (serverId) => lookupKeys(purpose, serverId) };
  const refresh = purpose.refresh;
  if (refresh) {
    keys.refresh = (serverId, since) => {
      const answer = refresh(serverId, since);
      return answer === undefined ? undefined : readKeyAnswer(purpose, () => answer);
    };
  }
  if (opts.cached) keys.cached = opts.cached;
  if (opts.limiter) keys.limiter = opts.limiter;
  if (opts.servers) keys.servers = opts.servers;
  return keys;
}

/** What bounds the key lookups of a signed endpoint: the failed-signature limits and the known server ids (both optional). */
export interface LookupGuards {
  limiter?: FailureLimiter | undefined;
  servers?: SignedRequestKeys["servers"] | undefined;
}
