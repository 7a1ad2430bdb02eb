import { Agent, type Dispatcher } from "undici";
import type { EnvReader } from "../runtime/config.js";

/**
 * The one Discord HTTP API client of the service: the Discord destination, voter roles and DM reminders all call
 * Discord through it, so Discord's rate limits are obeyed in one place, as Discord documents them
 * (developers/topics/rate-limits):
 *
 * - a route's bucket is learnt from `X-RateLimit-Bucket` and kept per route and top-level resource (webhook id and
 *   token, guild id, channel id); its `X-RateLimit-Remaining` and `X-RateLimit-Reset-After` are remembered, and no
 *   request goes into a bucket whose Remaining is 0 before it resets;
 * - a 429 is honoured by its `retry_after`: nothing more goes into that bucket (for `global: true` or
 *   `X-RateLimit-Scope: global`, nothing more with that bot token, or without a token from this client) before it
 *   passes; the global limit of 50 requests a second is also kept proactively;
 * - requests of one route and resource go one at a time, so a burst learns each answer's headers before the next.
 *
 * A call either waits (up to `maxWaitMs`) or answers `{ kind: "rateLimited", retryAt }` for a caller that would
 * rather reschedule. Discord's errors come back with their JSON code (10015 Unknown Webhook, 50013 Missing
 * Permissions, ...). Tokens (the bot token, a webhook's token in its path) never appear in an answer or an error text.
 * Time and waiting are injected (`now`, `sleep`) so tests do not wait for real.
 */

/** Discord's API base URL: the only one used in production. */
export const DISCORD_API_BASE_URL = "https://discord.com/api/v10";
/** Total budget of one request to Discord: connect, send, status and body. */
export const DISCORD_TIMEOUT_MS = 10_000;
/** Discord's global limit per bot token (or per address without one): requests a second. */
export const DISCORD_GLOBAL_LIMIT_PER_SECOND = 50;
/** How long a call waits for a rate limit by default before answering rateLimited. */
export const DEFAULT_DISCORD_MAX_WAIT_MS = 60_000;
/** Most of a response body kept (Discord's answers are small JSON). */
const MAX_RESPONSE_BYTES = 64 * 1024;

/** JSON error codes of Discord the service acts on. */
export const DiscordErrorCode = {
  unknownChannel: 10003,
  unknownGuild: 10004,
  unknownMember: 10007,
  unknownMessage: 10008,
  unknownRole: 10011,
  unknownUser: 10013,
  unknownWebhook: 10015,
  cannotSendEmptyMessage: 50006,
  cannotSendToUser: 50007,
  missingPermissions: 50013,
  invalidFormBody: 50035,
} as const;

/** A request to Discord: `path` below the base URL (`/webhooks/{id}/{token}`), its JSON body and query. */
export interface DiscordCall {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  body?: unknown;
  query?: Record<string, string>;
  /** Sent as `Authorization: Bot <token>`; webhooks need none (their token is in the path). */
  botToken?: string;
  /** The longest this call waits for a rate limit; past it the call answers rateLimited (0: never wait). */
  maxWaitMs?: number;
  /** Sent as X-Audit-Log-Reason (guild actions). */
  auditLogReason?: string;
}

/** What a call to Discord came to. */
export type DiscordAnswer =
  | { kind: "ok"; ok: true; status: number; body: unknown }
  /** Discord refused the request: its status, JSON code (0 when none) and message, described without tokens. */
  | { kind: "error"; ok: false; status: number; code: number; message: string; error: string }
  /** A rate limit would make the call wait past its `maxWaitMs`: try again at `retryAt` (epoch ms). */
  | { kind: "rateLimited"; ok: false; rateLimited: true; retryAt: number; scope: "user" | "shared" | "global" | "bucket"; error: string }
  /** No answer (connection failure, timeout, a body that is not JSON). */
  | { kind: "failed"; ok: false; error: string };

/** A Discord client. One per process: its rate-limit state is shared by every caller. */
export interface DiscordRest {
  /** Sends `call`, obeying Discord's rate limits; never throws for an outcome of the request. */
  request(call: DiscordCall): Promise<DiscordAnswer>;
  /**
   * When a request to `call`'s route could be sent as far as the limits known now say (epoch ms), or undefined when it
   * could be sent now: a caller that composes its request late (a batch) waits for this first.
   */
  readyAt(call: Pick<DiscordCall, "path" | "botToken">): number | undefined;
  /** Closes the connections (once; again: nothing). */
  close(): Promise<void>;
}

export interface DiscordRestOptions {
  /** The API base URL (DISCORD_API_BASE_URL; production: always Discord's). */
  baseUrl?: string;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  timeoutMs?: number;
  /** The global limit kept proactively per token (Discord's 50 a second). */
  globalLimitPerSecond?: number;
  /** A dispatcher of the caller's (tests); otherwise a pool of this client's own. */
  dispatcher?: Dispatcher;
}

interface Bucket {
  remaining: number;
  resetAt: number;
}

/** Top-level resources: their ids stay in a route's key (Discord counts buckets per resource). */
const MAJOR_RESOURCES = new Set(["channels", "guilds", "webhooks"]);

/**
 * The key of a route and its top-level resource: the path with every id but the major one replaced by `{id}`
 * (`/guilds/1/members/2/roles/3` -> `/guilds/1/members/{id}/roles/{id}`); a webhook's token stays as its resource.
 */
export function routeKeyOf(path: string): string {
  const parts = path.split("?")[0]!.split("/").filter(Boolean);
  const out: string[] = [];
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const previous = parts[i - 1];
    if (i === 1 && previous !== undefined && MAJOR_RESOURCES.has(previous)) out.push(part);
    else if (i === 2 && parts[0] === "webhooks") out.push(part);
    else if (/^\d{5,}$/.test(part)) out.push("{id}");
    else out.push(part);
  }
  return `/${out.join("/")}`;
}

/** `path` fit for an error text or a log: a webhook's token replaced by `{token}`. */
export function redactDiscordPath(path: string): string {
  return path.replace(/^(\/webhooks\/[^/]+\/)[^/?]+/, "$1{token}");
}

/** The Discord API base URL: DISCORD_API_BASE_URL is honoured only when NODE_ENV is development or test. */
export function readDiscordApiBaseUrl(r: EnvReader, nodeEnv: string | undefined = process.env.NODE_ENV): string {
  const configured = r.optionalString("DISCORD_API_BASE_URL");
  if (configured === undefined) return DISCORD_API_BASE_URL;
  if (nodeEnv !== "development" && nodeEnv !== "test") {
    r.problem(`DISCORD_API_BASE_URL is honoured only in development and tests (NODE_ENV=development or test); production always calls ${DISCORD_API_BASE_URL}`);
    return DISCORD_API_BASE_URL;
  }
  if (!/^https?:\/\/[^/]+/.test(configured)) r.problem(`DISCORD_API_BASE_URL must be an http(s) URL, got "${configured}"`);
  return configured.replace(/\/+$/, "");
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Creates the Discord client (see the file's comment for what it obeys). */
export function createDiscordRest(options: DiscordRestOptions = {}): DiscordRest {
  const baseUrl = (options.baseUrl ?? DISCORD_API_BASE_URL).replace(/\/+$/, "");
  const base = new URL(baseUrl);
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? realSleep;
  const timeoutMs = options.timeoutMs ?? DISCORD_TIMEOUT_MS;
  const globalLimit = options.globalLimitPerSecond ?? DISCORD_GLOBAL_LIMIT_PER_SECOND;
  const own = options.dispatcher ? undefined : new Agent({ connections: 16, keepAliveTimeout: 30_000 });
  const dispatcher = options.dispatcher ?? own!;

  /** route key -> bucket id learnt from X-RateLimit-Bucket. */
  const bucketOfRoute = new Map<string, string>();
  /** `${bucketId}:${major}` (or the route key before its bucket is known) -> its window. */
  const buckets = new Map<string, Bucket>();
  /** A route blocked by a 429 until (epoch ms): shared 429s name another resource's bucket. */
  const routeBlockedUntil = new Map<string, number>();
  /** identity (bot token, or "" for webhooks) -> a global 429's end. */
  const globalBlockedUntil = new Map<string, number>();
  /**
   * identity -> requests in flight and when recent ones were answered. The proactive global limit counts a request
   * from its sending until a second after its answer: Discord's window starts when a request arrives, which is after
   * it was sent and before it was answered, so `limit` such requests can never fall in one of Discord's windows.
   */
  const globalUse = new Map<string, { inFlight: number; answeredAt: number[]; waiters: Array<() => void> }>();
  const useOf = (identity: string) => {
    let use = globalUse.get(identity);
    if (!use) {
      use = { inFlight: 0, answeredAt: [], waiters: [] };
      globalUse.set(identity, use);
    }
    return use;
  };
  /** route key -> the tail of its queue: one request at a time per route and resource. */
  const queues = new Map<string, Promise<unknown>>();

  const majorOf = (routeKey: string) =>
    routeKey
      .split("/")
      .slice(0, routeKey.startsWith("/webhooks/") ? 4 : 3)
      .join("/");
  const bucketKeyOf = (routeKey: string) => {
    const id = bucketOfRoute.get(routeKey);
    return id === undefined ? `route:${routeKey}` : `${id}:${majorOf(routeKey)}`;
  };

  /**
   * When the call may be sent (epoch ms) and what holds it, given the state now; `at` undefined: when one of the
   * token's requests in flight is answered.
   */
  const blockedUntil = (routeKey: string, identity: string): { at: number | undefined; scope: "user" | "global" | "bucket" } | undefined => {
    const t = now();
    const global = globalBlockedUntil.get(identity) ?? 0;
    if (global > t) return { at: global, scope: "global" };
    const use = useOf(identity);
    use.answeredAt = use.answeredAt.filter((at) => at + 1_000 > t);
    if (use.inFlight + use.answeredAt.length >= globalLimit) {
      return { at: use.inFlight >= globalLimit ? undefined : Math.min(...use.answeredAt) + 1_000, scope: "global" };
    }
    const route = routeBlockedUntil.get(routeKey) ?? 0;
    if (route > t) return { at: route, scope: "user" };
    const bucket = buckets.get(bucketKeyOf(routeKey));
    if (bucket && bucket.remaining <= 0 && bucket.resetAt > t) return { at: bucket.resetAt, scope: "bucket" };
    return undefined;
  };

  /** Counts a request about to be sent: in flight for the global limit, and one less Remaining in its bucket. */
  const take = (identity: string, routeKey: string) => {
    useOf(identity).inFlight += 1;
    const bucket = buckets.get(bucketKeyOf(routeKey));
    if (bucket && bucket.resetAt > now()) bucket.remaining -= 1;
  };

  /** A request of `identity` was answered (or failed): it counts for a second more, then frees its place. */
  const release = (identity: string) => {
    const use = useOf(identity);
    use.inFlight -= 1;
    use.answeredAt.push(now());
    for (const wake of use.waiters.splice(0)) wake();
  };

  const learn = (routeKey: string, identity: string, status: number, headers: Record<string, string>, body: unknown) => {
    const t = now();
    const bucketId = headers["x-ratelimit-bucket"];
    if (bucketId) bucketOfRoute.set(routeKey, bucketId);
    const remaining = Number(headers["x-ratelimit-remaining"]);
    const resetAfter = Number(headers["x-ratelimit-reset-after"]);
    if (headers["x-ratelimit-remaining"] !== undefined && Number.isFinite(remaining) && Number.isFinite(resetAfter)) {
      buckets.set(bucketKeyOf(routeKey), { remaining, resetAt: t + Math.ceil(resetAfter * 1000) });
    }
    if (status !== 429) return undefined;
    const retryAfterBody = typeof body === "object" && body !== null ? (body as { retry_after?: unknown }).retry_after : undefined;
    const retrySeconds = typeof retryAfterBody === "number" ? retryAfterBody : Number(headers["retry-after"] ?? "1");
    const until = t + Math.ceil((Number.isFinite(retrySeconds) ? retrySeconds : 1) * 1000);
    const isGlobal =
      headers["x-ratelimit-global"] === "true" ||
      headers["x-ratelimit-scope"] === "global" ||
      (typeof body === "object" && body !== null && (body as { global?: unknown }).global === true);
    if (isGlobal) globalBlockedUntil.set(identity, Math.max(globalBlockedUntil.get(identity) ?? 0, until));
    else {
      routeBlockedUntil.set(routeKey, Math.max(routeBlockedUntil.get(routeKey) ?? 0, until));
      const bucket = buckets.get(bucketKeyOf(routeKey));
      buckets.set(bucketKeyOf(routeKey), { remaining: 0, resetAt: Math.max(until, bucket?.resetAt ?? 0) });
    }
    const scope = isGlobal ? "global" : headers["x-ratelimit-scope"] === "shared" ? "shared" : "user";
    return { until, scope } as const;
  };

  const send = async (call: DiscordCall, routeKey: string, identity: string): Promise<DiscordAnswer> => {
    const maxWaitMs = call.maxWaitMs ?? DEFAULT_DISCORD_MAX_WAIT_MS;
    const started = now();
    const described = `${call.method} ${redactDiscordPath(call.path)}`;
    for (;;) {
      const blocked = blockedUntil(routeKey, identity);
      if (blocked) {
        const at = blocked.at ?? now() + 1_000;
        if (at - started > maxWaitMs) {
          return {
            kind: "rateLimited",
            ok: false,
            rateLimited: true,
            retryAt: at,
            scope: blocked.scope,
            error: `Discord rate limit (${blocked.scope}) on ${described}: retry at ${new Date(at).toISOString()}`,
          };
        }
        if (blocked.at === undefined) await new Promise<void>((wake) => useOf(identity).waiters.push(wake));
        else await sleep(blocked.at - now());
        continue;
      }
      take(identity, routeKey);
      let answer: Awaited<ReturnType<typeof exchange>>;
      try {
        answer = await exchange(call, described);
      } finally {
        release(identity);
      }
      if (answer.kind === "failed") return answer;
      const limited = learn(routeKey, identity, answer.status, answer.headers, answer.body);
      if (limited) {
        // Failure policy: a 429 is waited out (the loop checks the state `learn` just set) or, past maxWaitMs, answered
        // as rateLimited for the caller to reschedule; nothing is sent into that bucket before it passes.
        if (limited.until - started > maxWaitMs) {
          return {
            kind: "rateLimited",
            ok: false,
            rateLimited: true,
            retryAt: limited.until,
            scope: limited.scope,
            error: `Discord answered 429 (${limited.scope}) on ${described}: retry at ${new Date(limited.until).toISOString()}`,
          };
        }
        continue;
      }
      if (answer.status >= 200 && answer.status < 300) return { kind: "ok", ok: true, status: answer.status, body: answer.body };
      const json = typeof answer.body === "object" && answer.body !== null ? (answer.body as { code?: unknown; message?: unknown }) : {};
      const code = typeof json.code === "number" ? json.code : 0;
      const message = typeof json.message === "string" ? json.message.slice(0, 200) : `HTTP ${answer.status}`;
      return {
        kind: "error",
        ok: false,
        status: answer.status,
        code,
        message,
        error: `Discord answered ${answer.status} on ${described}: ${message}${code ? ` (${code})` : ""}`,
      };
    }
  };

  const exchange = async (
    call: DiscordCall,
    described: string,
  ): Promise<{ kind: "answered"; status: number; headers: Record<string, string>; body: unknown } | { kind: "failed"; ok: false; error: string }> => {
    const query = call.query && Object.keys(call.query).length > 0 ? `?${new URLSearchParams(call.query).toString()}` : "";
    const payload = call.body === undefined ? undefined : Buffer.from(JSON.stringify(call.body), "utf8");
    const headers: Record<string, string> = { "user-agent": "DiscordBot (https://github.com/referral-callbacks, 1.0)" };
    if (payload) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(payload.length);
    }
    if (call.botToken) headers.authorization = `Bot ${call.botToken}`;
    if (call.auditLogReason) headers["x-audit-log-reason"] = encodeURIComponent(call.auditLogReason);
    const abort = new AbortController();
    let timedOut = false;
    // Failure policy: the budget covers connect, send and the answer; past it the call failed (the caller retries).
    const timer = setTimeout(() => {
      timedOut = true;
      abort.abort();
    }, timeoutMs);
    try {
      const res = await dispatcher.request({
        origin: base.origin,
        path: `${base.pathname}${call.path}${query}`,
        method: call.method,
        headers,
        ...(payload ? { body: payload } : {}),
        signal: abort.signal,
      });
      const text = (await res.body.text()).slice(0, MAX_RESPONSE_BYTES);
      const flat: Record<string, string> = {};
      for (const [name, value] of Object.entries(res.headers)) if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(", ") : value;
      let body: unknown;
      try {
        body = text === "" ? undefined : JSON.parse(text);
      } catch {
        // Failure policy: a body that is not JSON (a proxy's page) keeps the status; only the code and message are lost.
        body = undefined;
      }
      return { kind: "answered", status: res.statusCode, headers: flat, body };
    } catch (error) {
      // Failure policy: no answer is an outcome (`failed`), never an exception; its text names the route without tokens.
      const code = (error as { code?: string; cause?: { code?: string } }).cause?.code ?? (error as { code?: string }).code;
      return {
        kind: "failed",
        ok: false,
        error: timedOut ? `${described}: timed out after ${timeoutMs} ms` : `${described}: connection failed${code ? `: ${code}` : ""}`,
      };
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    request(call) {
      const routeKey = routeKeyOf(call.path);
      const identity = call.botToken ?? "";
      const queueKey = `${identity}\u0000${routeKey}`;
      const previous = queues.get(queueKey) ?? Promise.resolve();
      const result = previous.then(() => send(call, routeKey, identity));
      const tail = result.then(
        () => undefined,
        () => undefined,
      );
      queues.set(queueKey, tail);
      // Failure policy: the queue's tail is dropped once it is the last; a call's own outcome reaches its caller.
      void tail.then(() => {
        if (queues.get(queueKey) === tail) queues.delete(queueKey);
      });
      return result;
    },
    readyAt(call) {
      const blocked = blockedUntil(routeKeyOf(call.path), call.botToken ?? "");
      return blocked === undefined ? undefined : (blocked.at ?? now() + 1_000);
    },
    async close() {
      // Closing twice (a dispatcher stopped twice) is a no-op, never undici's "client is destroyed".
      if (own && !own.closed && !own.destroyed) await own.close();
    },
  };
}
