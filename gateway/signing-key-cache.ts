import type { ResolveSigningKeysResponse } from "../gen/proto/servers/v1/servers_pb.js";
import { SigningKeyStatus } from "../gen/proto/servers/v1/servers_pb.js";
import { createSpacedSingleFlight, type SpacedSingleFlight } from "./spaced-single-flight.js";

/** How long the gateway reuses a server's active keys; 0 turns the cache off (every request asks). */
export const DEFAULT_SIGNING_KEY_CACHE_MS = 1_000;
/** How long an unknown server id is remembered as unknown (server ids are random uuids minted by the service). */
export const DEFAULT_UNKNOWN_SERVER_CACHE_MS = 30_000;
/** At most one key lookup per server per this interval, however many requests ask (the ones past it wait for the next). */
export const DEFAULT_SIGNING_KEY_REFRESH_MS = 1_000;
/**
 * How long a server's last OK keys are kept after they stopped being fresh. They never verify a
 * request on their own: a MAC that verifies against them only earns the request a fresh lookup that
 * the failure limiter does not charge (the sender holds a secret that was active this recently).
 */
export const STALE_SIGNING_KEYS_RETENTION_MS = 3_600_000;
/** Servers remembered at most (and, apart, unknown ids at most); the oldest entry is dropped beyond it. */
const MAX_CACHED_SERVERS = 10_000;

/** What the cache needs of a key answer (ResolveSigningKeys's, ResolvePullKeys's). */
export interface KeyAnswer {
  status: number;
  keys: ReadonlyArray<{ kid: string }>;
}

/** How the cache reads an answer's status: keys to keep, an unknown server to remember, or anything else (never kept). */
export type KeyAnswerKind = "ok" | "unknown_server" | "other";

/** The ingest keys' classification (ResolveSigningKeys's statuses); the default. */
export function classifySigningKeys(answer: KeyAnswer): KeyAnswerKind {
  if (answer.status === SigningKeyStatus.OK) return "ok";
  return answer.status === SigningKeyStatus.UNKNOWN_SERVER ? "unknown_server" : "other";
}

/** What the cache holds for a server without asking: `fresh` answers are served by `get`; stale keys only vouch for a lookup. */
export type CachedKeyAnswer<A> = { answer: A; fresh: boolean };

/** A per-server cache of key answers (ResolveSigningKeys by default). */
export interface SigningKeyCache<A extends KeyAnswer = ResolveSigningKeysResponse> {
  /**
   * The cached answer when fresh, otherwise a lookup (`load()`): the one in flight for the server if
   * any, else a new one - at most one per server per refresh interval, so a request past it waits for
   * the next lookup and shares it with every other request that asks meanwhile. With the key cache off
   * every call is a lookup of its own (only an unknown server is remembered).
   */
  get(serverId: string, load: () => Promise<A>): Promise<A>;
  /**
   * After a MAC failed against keys that may be older than the request: an answer of a lookup that
   * started at or after `since` (the cache's clock, ms) - the one held or in flight when it is that
   * recent, else the next one, bounded and shared like `get`'s - so a secret created before the request
   * was sent verifies, and forged requests for the server cost one lookup per interval, not one each.
   * Undefined with the key cache off: the caller's keys were its own lookup already.
   */
  refresh(serverId: string, load: () => Promise<A>, since: number): Promise<A> | undefined;
  /**
   * The answer held for the server, without a lookup: a fresh OK or unknown-server answer
   * (`fresh: true`, what `get` would return), else the last OK keys kept for
   * STALE_SIGNING_KEYS_RETENTION_MS after they went stale (`fresh: false`; only with the key cache
   * on), else undefined.
   */
  peek(serverId: string): CachedKeyAnswer<A> | undefined;
}

/** Settings of the cache; see the DEFAULT_* constants. */
export interface SigningKeyCacheOptions<A extends KeyAnswer = ResolveSigningKeysResponse> {
  ttlMs: number;
  /** Reads an answer's status (default: classifySigningKeys). */
  classify?: (answer: A) => KeyAnswerKind;
  unknownServerTtlMs?: number;
  refreshIntervalMs?: number;
  /** The clock, in milliseconds (default Date.now). */
  now?: () => number;
}

/**
 * Caches OK answers for `ttlMs` and unknown-server answers for `unknownServerTtlMs` (a server id is
 * a random uuid minted at creation, so an id unknown now is not about to exist; unknown ids are kept
 * apart, so a flood of them never pushes a real server's keys out). Every other answer - a server
 * with referrals (or pull) off, a failed lookup - is not kept, but the next lookup for that server
 * still waits for its turn: lookups per server are single-flight and at most one per
 * `refreshIntervalMs`, whatever the answers, so forged traffic that names a real server cannot
 * multiply its lookups and needs no refusal. A revoked secret keeps verifying for at most `ttlMs`;
 * a newly created one verifies at once through `refresh`, at the latest after one interval.
 * `peek` shows what is held without asking, including a server's last OK keys for
 * STALE_SIGNING_KEYS_RETENTION_MS after they went stale, so the gateway can tell a correctly signed
 * request from a forgery before it spends a lookup (gateway/signed-request.ts#verifySignedRequest).
 */
export function createSigningKeyCache<A extends KeyAnswer = ResolveSigningKeysResponse>(opts: SigningKeyCacheOptions<A>): SigningKeyCache<A> {
  const now = opts.now ?? Date.now;
  const classify = opts.classify ?? classifySigningKeys;
  const unknownTtlMs = opts.unknownServerTtlMs ?? DEFAULT_UNKNOWN_SERVER_CACHE_MS;
  const refreshIntervalMs = opts.refreshIntervalMs ?? DEFAULT_SIGNING_KEY_REFRESH_MS;
  /** Per server: its lookups (shared, spaced) and the last OK answer while fresh. */
  const servers = new Map<string, ServerKeys<A>>();
  /** Per unknown server id: the unknown-server answer and when its lookup started. */
  const unknown = new Map<string, Loaded<A>>();
  /** Per server: the last OK answer, kept past its freshness (see STALE_SIGNING_KEYS_RETENTION_MS). */
  const lastOk = new Map<string, Loaded<A>>();

  const remember = <V>(map: Map<string, V>, key: string, value: V) => {
    map.delete(key);
    map.set(key, value);
    if (map.size > MAX_CACHED_SERVERS) map.delete(map.keys().next().value as string);
  };
  const freshUnknown = (serverId: string) => {
    const held = unknown.get(serverId);
    if (held === undefined) return undefined;
    if (now() - held.at < unknownTtlMs) return held;
    unknown.delete(serverId);
    return undefined;
  };
  const freshOk = (state: ServerKeys<A> | undefined) => (state?.ok !== undefined && now() - state.ok.at < opts.ttlMs ? state.ok : undefined);
  const stateOf = (serverId: string) => {
    const state = servers.get(serverId) ?? { flight: createSpacedSingleFlight<A>({ intervalMs: refreshIntervalMs, now }) };
    remember(servers, serverId, state);
    return state;
  };
  /** One lookup of the server's answer, and what it leaves in the cache. */
  const lookup = (serverId: string, state: ServerKeys<A>, load: () => Promise<A>) => () => {
    const at = now();
    // Failure policy: a failed lookup is never cached; its callers see the rejection, and the next lookup waits for its turn.
    return load().then((answer) => {
      const kind = classify(answer);
      // Runs may overlap (a lookup slower than the interval): the later one's answer stays.
      if (state.ok !== undefined && state.ok.at > at) return answer;
      if (kind === "ok") {
        state.ok = { at, answer };
        remember(lastOk, serverId, { at, answer });
        return answer;
      }
      // Any other answer ends the keys held, stale ones included.
      delete state.ok;
      lastOk.delete(serverId);
      if (kind === "unknown_server" && unknownTtlMs > 0) {
        remember(unknown, serverId, { at, answer });
        servers.delete(serverId);
      }
      return answer;
    });
  };

  return {
    get(serverId, load) {
      const known = freshUnknown(serverId);
      if (known !== undefined) return Promise.resolve(known.answer);
      if (opts.ttlMs <= 0) {
        // Key cache off: every request asks for itself (nothing shared); only an unknown server is remembered.
        const own = load();
        if (unknownTtlMs > 0) {
          const at = now();
          own.then(
            (answer) => {
              if (classify(answer) === "unknown_server") remember(unknown, serverId, { at, answer });
            },
            () => {
              // Failure policy: a failed lookup is never cached; the caller sees the rejection itself.
            },
          );
        }
        return own;
      }
      const state = stateOf(serverId);
      const ok = freshOk(state);
      if (ok !== undefined) return Promise.resolve(ok.answer);
      return state.flight.run(lookup(serverId, state, load));
    },
    refresh(serverId, load, since) {
      if (opts.ttlMs <= 0) return undefined;
      const state = stateOf(serverId);
      const ok = freshOk(state);
      if (ok !== undefined && ok.at >= since) return Promise.resolve(ok.answer);
      return state.flight.run(lookup(serverId, state, load), since);
    },
    peek(serverId) {
      const known = freshUnknown(serverId);
      if (known !== undefined) return { answer: known.answer, fresh: true };
      const ok = freshOk(servers.get(serverId));
      if (ok !== undefined) return { answer: ok.answer, fresh: true };
      const last = lastOk.get(serverId);
      if (last === undefined) return undefined;
      if (now() - last.at >= STALE_SIGNING_KEYS_RETENTION_MS) {
        lastOk.delete(serverId);
        return undefined;
      }
      return { answer: last.answer, fresh: false };
    },
  };
}

/** An answer and when its lookup started. */
interface Loaded<A> {
  at: number;
  answer: A;
}

/** What the cache holds for one server it has asked about. */
interface ServerKeys<A> {
  flight: SpacedSingleFlight<A>;
  /** The last OK answer (fresh for ttlMs from `at`). */
  ok?: Loaded<A>;
}
