import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from "node:dns";
import type { IncomingHttpHeaders } from "node:http";
import { isIP, type LookupFunction } from "node:net";
import { Agent } from "undici";
import { isForbiddenAddress, specialRangeOf } from "../../shared/values/callback-url.js";
import type { KeyObject } from "node:crypto";
import {
  canonicalString,
  formatCallbackSignature,
  formatStandardWebhookAsymmetricSignature,
  formatStandardWebhookSignature,
} from "../../shared/values/signature.js";
import type { AttemptExchange } from "./attempt-exchange.js";
import type { EventPayload, RewardCountsPayload } from "./delivery-types.js";
import { buildEventBody } from "./referral-event.js";
import { parseRetryAfter } from "./retry-schedule.js";
import type { PlatformIds } from "../../shared/values/player-ids.js";

/** Total budget of one callback attempt: connect, send, status and (capped) body. */
export const CALLBACK_TIMEOUT_MS = 10_000;
/** How much of a receiver's response body is kept for the attempt log and test reports. */
export const MAX_RESPONSE_BODY_BYTES = 4096;
/** The error recorded for a 410 Gone: the server's callback is disabled and its deliveries held. */
export const GONE_ERROR = "receiver answered 410 Gone: callback disabled, deliveries held until re-enabled";
/** Sent as User-Agent so receivers can recognise (and allow-list) the service. */
export const CALLBACK_USER_AGENT = "referral-callbacks/1.0 (+reward-callback)";

/** The callback event kinds of the contract. */
export type HeartEventType = "heart.counted" | "heart.test";

/** The fields of a HeartEvent, minus `timestamp`, which is set per attempt. */
export interface HeartEventFields {
  event: HeartEventType;
  serverId: string;
  username: string;
  heartId: string;
  period: string;
  /** Omitted from the body when undefined: no streak info is not zero. */
  streakDay?: number;
  /** Payload version 2's additions (an endpoint that pinned version 2 or 3); absent: the contract's version-1 body. */
  v2?: HeartEventV2Fields;
  /** Payload version 3's additions after version 2's (an endpoint that pinned version 3; needs `v2`). */
  v3?: HeartEventV3Fields;
}

/** What payload version 3 adds after version 2's fields: what the reward rules counted, or null for each when the server has no saved rules. */
export interface HeartEventV3Fields {
  rewardCounts: RewardCountsPayload | null;
}

/** What payload version 2 adds to a HeartEvent. */
export interface HeartEventV2Fields {
  /** When the heart was cast (it counted then): `cast_at`. */
  castAt: Date;
  /** When the voter may count again: `next_eligible_at`; null: omitted. */
  nextEligibleAt: Date | null;
  /** The voter's platform ids and pass-through account id; each null one is omitted. */
  platformIds: PlatformIds;
}

/**
 * Serialises a HeartEvent with the contract's field names. `timestamp` is the
 * delivery time in unix seconds and equals the signature's `t`. With `fields.v2` (payload
 * version 2) every version-1 field comes first, unchanged, then `payload_version: 2`,
 * `cast_at` and, each only when known (omitted, never null), `next_eligible_at`, `steam_id`,
 * `discord_id`, `minecraft_uuid`, `account_id`. With `fields.v3` too (payload version 3) the same fields in the same
 * order, `payload_version` saying 3, then `weight`, `month_total`, `total` and `reward_streak`, each null when the
 * server has no saved reward rules. Without `v2` the body is the contract's, byte for byte.
 */
export function buildHeartEventBody(fields: HeartEventFields, timestamp: number): string {
  const body: Record<string, string | number | null> = {
    event: fields.event,
    server_id: fields.serverId,
    username: fields.username,
    heart_id: fields.heartId,
    period: fields.period,
    timestamp,
  };
  if (fields.streakDay !== undefined) body.streak_day = fields.streakDay;
  const v2 = fields.v2;
  if (v2) {
    body.payload_version = fields.v3 ? 3 : 2;
    body.cast_at = unixSeconds(v2.castAt);
    if (v2.nextEligibleAt) body.next_eligible_at = unixSeconds(v2.nextEligibleAt);
    const ids = v2.platformIds;
    if (ids.steamId !== null) body.steam_id = ids.steamId;
    if (ids.discordId !== null) body.discord_id = ids.discordId;
    if (ids.minecraftUuid !== null) body.minecraft_uuid = ids.minecraftUuid;
    if (ids.accountId !== null) body.account_id = ids.accountId;
    if (fields.v3) {
      const counts = fields.v3.rewardCounts;
      body.weight = counts?.weight ?? null;
      body.month_total = counts?.month_total ?? null;
      body.total = counts?.total ?? null;
      body.reward_streak = counts?.reward_streak ?? null;
    }
  }
  return JSON.stringify(body);
}

function unixSeconds(at: Date): number {
  return Math.floor(at.getTime() / 1000);
}

/** An event with a stored body to sign (a referral or progression event): its type and its body fields. */
export interface StoredEventFields {
  event: EventPayload["event"];
  payload: EventPayload;
}

/** What one callback carries: a heart event, or an event with a stored body. */
export type CallbackEventFields = HeartEventFields | StoredEventFields;

function isStoredEventFields(fields: CallbackEventFields): fields is StoredEventFields {
  return "payload" in fields;
}

/** A callback request, signed and ready to send. */
export interface SignedCallback {
  url: string;
  body: string;
  headers: Record<string, string>;
  /** The signed string "<t>.<body>", for test reports. */
  canonicalString: string;
  t: number;
}

/**
 * Builds and signs one callback attempt: the body with `timestamp = t` (a heart event, or a
 * referral or progression event's payload), the contract's headers (one `v1` per active callback secret, newest
 * first) and, when the endpoint opted in, the Standard Webhooks headers (`webhook-id` = heart_id,
 * or the stored event's event_id):
 * `webhook-signature` holds the `v1,` HMACs (standardWebhooks) and the `v1a,` ed25519
 * signature by the list's current key (signingKey), space-separated. The contract's
 * X-Service-Signature is always there and never changes with either opt-in.
 */
export function signCallback(opts: {
  url: string;
  fields: CallbackEventFields;
  /** Active callback secrets (whsec_...), newest first; at least one. */
  secretsNewestFirst: string[];
  standardWebhooks: boolean;
  /** The list's current ed25519 key, when the server opted in to `v1a` public-key signatures. */
  signingKey?: KeyObject;
  /** Unix seconds of this attempt. */
  t: number;
}): SignedCallback {
  if (opts.secretsNewestFirst.length === 0) throw new Error("signCallback needs at least one callback secret");
  const fields = opts.fields;
  const body = isStoredEventFields(fields) ? buildEventBody(fields.payload, opts.t) : buildHeartEventBody(fields, opts.t);
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    "User-Agent": CALLBACK_USER_AGENT,
    "X-Service-Event": opts.fields.event,
    "X-Service-Signature": formatCallbackSignature(opts.secretsNewestFirst, opts.t, body),
  };
  if (opts.standardWebhooks || opts.signingKey) {
    const id = isStoredEventFields(fields) ? fields.payload.event_id : fields.heartId;
    const signatures = [
      ...(opts.standardWebhooks ? [formatStandardWebhookSignature(opts.secretsNewestFirst, id, opts.t, body)] : []),
      ...(opts.signingKey ? [formatStandardWebhookAsymmetricSignature(opts.signingKey, id, opts.t, body)] : []),
    ];
    headers["webhook-id"] = id;
    headers["webhook-timestamp"] = String(opts.t);
    headers["webhook-signature"] = signatures.join(" ");
  }
  return { url: opts.url, body, headers, canonicalString: canonicalString(opts.t, body), t: opts.t };
}

/** What a receiver answered: its status, headers and the first MAX_RESPONSE_BODY_BYTES of its body. */
export interface ReceivedResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The receiver sent more than was kept. */
  bodyTruncated: boolean;
}

/** How one HTTP attempt ended. Expected I/O outcomes are values, never exceptions. */
export type DispatchOutcome =
  | { kind: "delivered"; status: number; latencyMs: number; responseBody: string; response: ReceivedResponse }
  /** 410 Gone: the receiver asks to stop; the server's callback is disabled and deliveries held. */
  | { kind: "gone"; status: 410; latencyMs: number; responseBody: string; response: ReceivedResponse }
  /** No `response` when none arrived (connection refused, timeout, refused address). */
  | { kind: "failed"; status?: number; error: string; retryAfterMs?: number; latencyMs: number; responseBody?: string; response?: ReceivedResponse };

/**
 * One HTTP attempt as an AttemptExchange: the request exactly as sent (with the
 * Content-Length the socket got) and the response, when one arrived.
 */
export function toHttpExchange(request: { url: string; body: string; headers: Record<string, string> }, outcome: DispatchOutcome): AttemptExchange {
  return {
    target: request.url,
    request: { headers: { ...request.headers, "Content-Length": String(Buffer.byteLength(request.body)) }, body: request.body },
    response: outcome.response ? { ...outcome.response } : null,
    latencyMs: outcome.latencyMs,
    error: outcome.kind === "failed" ? outcome.error : outcome.kind === "gone" ? GONE_ERROR : null,
    succeeded: outcome.kind === "delivered",
  };
}

/** How a refused destination's error text begins (ForbiddenAddressError). */
const FORBIDDEN_PREFIX = "refused to connect to ";

/** Thrown inside the lookup when a name resolves to a forbidden address. */
export class ForbiddenAddressError extends Error {
  readonly code = "ERR_FORBIDDEN_ADDRESS";
  constructor(readonly address: string) {
    const range = specialRangeOf(address)?.name ?? "special-purpose";
    super(`${FORBIDDEN_PREFIX}${address}: loopback, private, link-local, metadata and other special-purpose addresses are not allowed (${range})`);
    this.name = "ForbiddenAddressError";
  }
}

/** Resolves a name to all its addresses (dns.lookup with all: true); tests may replace it. */
export type Resolver = (
  hostname: string,
  options: LookupOptions & { all: true },
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * A `lookup` for http(s).request that resolves the name and refuses it when any
 * resolved address is forbidden (unless `allowInsecure`). The socket connects to
 * the addresses this function returns, so the check applies to the address
 * actually connected to and a DNS rebinding between check and connect is impossible.
 */
export function createGuardedLookup(opts: { allowInsecure: boolean; resolve?: Resolver }): LookupFunction {
  const resolve: Resolver = opts.resolve ?? ((hostname, options, callback) => dnsLookup(hostname, options, callback));
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, "", 0);
      const forbidden = opts.allowInsecure ? undefined : addresses.find((a) => isForbiddenAddress(a.address));
      if (forbidden) return callback(new ForbiddenAddressError(forbidden.address), "", 0);
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }), "", 0);
      callback(null, first.address, first.family);
    });
  };
}

/** An idle pooled socket is closed after this long (receivers commonly close theirs after 5 s). */
const IDLE_SOCKET_TIMEOUT_MS = 4_000;
/**
 * The pools' own bound on opening a connection: above the longest attempt budget
 * (CALLBACK_TIMEOUT_MS may be set up to 60 s), so each attempt's budget decides.
 */
const CONNECT_TIMEOUT_MS = 60_000;

/** Keep-alive connection pools, one per destination (scheme, host, port), for sendCallback. */
export interface CallbackAgents {
  /** undici's Agent: a keep-alive Pool per origin. */
  dispatcher: Agent;
  /** Whether the pools' connect-time address guard lets special-purpose addresses through (the development flag). */
  allowInsecure: boolean;
  /** Closes every pooled socket. */
  destroy(): Promise<void>;
}

/**
 * Keep-alive pools for callbacks (undici, one Pool per origin): per destination at most
 * `maxSocketsPerDestination` connections (more requests wait for one), so a slow receiver holds
 * its own sockets, never another's. Every connection is opened through the guarded lookup
 * (createGuardedLookup), so every pooled connection went to an address checked at connect time; a
 * reused one stays with that address. Redirects are never followed (undici follows none unless
 * asked); the attempt's own budget (sendCallback) bounds each exchange.
 */
export function createCallbackAgents(opts: { maxSocketsPerDestination: number; allowInsecure: boolean; resolve?: Resolver }): CallbackAgents {
  const dispatcher = new Agent({
    connections: opts.maxSocketsPerDestination,
    pipelining: 1,
    keepAliveTimeout: IDLE_SOCKET_TIMEOUT_MS,
    keepAliveMaxTimeout: IDLE_SOCKET_TIMEOUT_MS,
    // Failure policy: the attempt's total budget (sendCallback's timer) ends a slow exchange; undici's own timers would only cut it differently.
    headersTimeout: 0,
    bodyTimeout: 0,
    connect: {
      timeout: CONNECT_TIMEOUT_MS,
      lookup: createGuardedLookup({ allowInsecure: opts.allowInsecure, ...(opts.resolve ? { resolve: opts.resolve } : {}) }),
    },
  });
  return { dispatcher, allowInsecure: opts.allowInsecure, destroy: () => dispatcher.destroy() };
}

/** Options of one send. */
export interface SendOptions {
  timeoutMs: number;
  allowInsecure: boolean;
  /** For Retry-After dates. */
  now: () => Date;
  /** Replaces DNS resolution (tests); the forbidden-address check still applies. */
  resolve?: Resolver;
  maxResponseBytes?: number;
  /**
   * Keep-alive pools to send over (used when their guard matches `allowInsecure` and no `resolve`
   * is given); without them every attempt opens (and closes) its own connection.
   */
  agents?: CallbackAgents;
}

/**
 * POSTs a signed callback with undici over a connection opened through the connect-time address
 * check (createGuardedLookup; IP literals are checked here, as no lookup runs for them). Redirects
 * are not followed (a 3xx is a failure), the whole exchange (connect, send, status and capped
 * body) is bounded by `timeoutMs`, and the response body is read up to a small cap. Never throws
 * for I/O outcomes: returns a DispatchOutcome.
 */
export async function sendCallback(request: { url: string; body: string; headers: Record<string, string> }, opts: SendOptions): Promise<DispatchOutcome> {
  const started = performance.now();
  const latency = () => Math.round(performance.now() - started);
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    // Failure policy: a stored URL that no longer parses is a failed attempt, retried per schedule.
    return { kind: "failed", error: "callback URL is not a valid URL", latencyMs: 0 };
  }
  const isHttps = url.protocol === "https:";
  if (!isHttps && !(url.protocol === "http:" && opts.allowInsecure)) {
    return { kind: "failed", error: `callback URL scheme ${url.protocol} is not allowed`, latencyMs: 0 };
  }
  const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  // Node connects to IP literals without calling lookup, so they are checked here.
  if (isIP(hostname) !== 0 && !opts.allowInsecure && isForbiddenAddress(hostname)) {
    return { kind: "failed", error: new ForbiddenAddressError(hostname).message, latencyMs: 0 };
  }
  const maxBytes = opts.maxResponseBytes ?? MAX_RESPONSE_BODY_BYTES;
  const body = Buffer.from(request.body, "utf8");
  // The shared pools only when their guard is this send's; otherwise a connection of its own, guarded as asked.
  const pooled = opts.agents && opts.agents.allowInsecure === opts.allowInsecure && opts.resolve === undefined ? opts.agents : undefined;
  const own = pooled
    ? undefined
    : createCallbackAgents({ maxSocketsPerDestination: 1, allowInsecure: opts.allowInsecure, ...(opts.resolve ? { resolve: opts.resolve } : {}) });
  const agents = pooled ?? own!;
  const abort = new AbortController();
  let timedOut = false;
  // Failure policy: the total budget covers connect, send and the response; past it the attempt fails and is retried.
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort();
  }, opts.timeoutMs);
  try {
    const res = await agents.dispatcher.request({
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: "POST",
      headers: { ...request.headers, "Content-Length": String(body.length) },
      body,
      signal: abort.signal,
    });
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        chunks.push(chunk);
        size += chunk.length;
        // More than is kept has arrived; the rest is not worth waiting for (leaving the loop closes the connection).
        if (size > maxBytes) break;
      }
    } catch {
      // Failure policy: the status decides; a body cut short (or past the budget) only shortens what is logged.
    }
    const response: ReceivedResponse = {
      status: res.statusCode,
      headers: flattenHeaders(res.headers),
      body: Buffer.concat(chunks).subarray(0, maxBytes).toString("utf8"),
      bodyTruncated: size > maxBytes,
    };
    return toOutcome(response, res.headers, latency(), opts.now());
  } catch (error) {
    // Failure policy: connection errors, refused addresses and timeouts are failed attempts, never exceptions.
    return {
      kind: "failed",
      error: timedOut ? `timed out after ${opts.timeoutMs} ms` : describeError(error as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException }),
      latencyMs: latency(),
    };
  } finally {
    clearTimeout(timer);
    // Failure policy: closing a one-off connection cannot fail the attempt, which has its outcome already.
    if (own) own.destroy().catch(() => {});
  }
}

/** Response headers as one string per name (repeated headers joined with ", ", as HTTP allows). */
function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    flat[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return flat;
}

function toOutcome(response: ReceivedResponse, headers: IncomingHttpHeaders, latencyMs: number, now: Date): DispatchOutcome {
  const { status, body: responseBody } = response;
  if (status >= 200 && status < 300) return { kind: "delivered", status, latencyMs, responseBody, response };
  if (status === 410) return { kind: "gone", status: 410, latencyMs, responseBody, response };
  const retryAfter = headers["retry-after"];
  const retryAfterMs = parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, now);
  const error =
    status >= 300 && status < 400
      ? `redirect not followed: receiver answered ${status}${headers.location ? ` to ${truncate(headers.location, 200)}` : ""}`
      : `receiver answered ${status}`;
  return { kind: "failed", status, error, latencyMs, responseBody, response, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
}

function describeError(error: NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException }): string {
  if (error instanceof ForbiddenAddressError) return error.message;
  // undici wraps a socket's failure (UND_ERR_SOCKET); the socket's own code names it as node:http did.
  return describeConnectionFailure(error.cause?.code ?? error.code, error.message);
}

/** The error text of a socket that failed (both transports): `connection failed: <code>`, else the message, cut. */
export function describeConnectionFailure(code: string | undefined, message: string): string {
  return code ? `connection failed: ${code}` : `connection failed: ${truncate(message, 200)}`;
}

/** Socket error codes raised before anything was sent. */
const NOT_CONNECTED = ["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"];

/** Whether an attempt's error text (describeConnectionFailure, ForbiddenAddressError) says no connection was ever made. */
export function neverConnected(errorText: string): boolean {
  return NOT_CONNECTED.some((code) => errorText === describeConnectionFailure(code, "")) || errorText.startsWith(FORBIDDEN_PREFIX);
}

/** Cuts `text` to `max` characters, marking the cut with `...`. */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}...`;
}
