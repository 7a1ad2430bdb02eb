import type { ResolveSigningKeysResponse } from "../gen/proto/servers/v1/servers_pb.js";
import { SigningKeyStatus } from "../gen/proto/servers/v1/servers_pb.js";

/** How long the gateway reuses a server's active keys; 0 turns the cache off (every request asks). */
export const DEFAULT_SIGNING_KEY_CACHE_MS = 1_000;
/** How long an unknown server id is remembered as unknown (server ids are random uuids minted by the service). */
export const DEFAULT_UNKNOWN_SERVER_CACHE_MS = 30_000;
/** At most one fresh lookup per server per this interval after a MAC failed against cached keys. */
export const DEFAULT_SIGNING_KEY_REFRESH_MS = 1_000;
/**
 * How long a server's last OK keys are kept after they stopped being fresh. They never verify a
 * request on their own: a MAC that verifies against them only earns the request a fresh lookup that
 * the failure limiter does not charge (the sender holds a secret that was active this recently), so
 * a flood of forgeries for the same server cannot get its real traffic refused.
 */
export const STALE_SIGNING_KEYS_RETENTION_MS = 3_600_000;
/** Servers remembered at most; the oldest entry is dropped beyond it. */
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
  /** The cached answer when fresh, otherwise `load()`'s; concurrent misses share one load (single flight). */
  get(serverId: string, load: () => Promise<A>): Promise<A>;
  /**
   * The answer held for the server, without a lookup: a fresh OK or unknown-server answer
   * (`fresh: true`, what `get` would return), else the last OK keys kept for
   * STALE_SIGNING_KEYS_RETENTION_MS after they went stale (`fresh: false`; only with the key cache
   * on), else undefined.
   */
  peek(serverId: string): CachedKeyAnswer<A> | undefined;
  /**
   * Called when a MAC failed against cached keys: drops the server's entry so the next `get`
   * asks again, and returns true - at most once per server per refresh interval, unless the
   * previous refresh found the keys changed. Otherwise (nothing cached, or a fruitless refresh
   * within the interval) returns false and keeps the entry, so a flood of bad signatures costs
   * at most one lookup per server per interval.
   */
  invalidate(serverId: string): boolean;
}

/** Settings of the cache; see the DEFAULT_* constants. */
export interface SigningKeyCacheOptions<A extends KeyAnswer = ResolveSigningKeysResponse> {
  ttlMs: number;
  /** Reads an answer's status (default: classifySigningKeys). */
  classify?: (answer: A) => KeyAnswerKind;
  unknownServerTtlMs?: number;
  refreshIntervalMs?: number;
  now?: () => number;
}

/**
 * Caches OK answers for `ttlMs` and unknown-server answers for `unknownServerTtlMs` (a server id
 * is a random uuid minted at creation, so an id unknown now is not about to exist). A disabled
 * server is asked again on every request, so re-enabling takes effect at once (its failures are
 * rate limited by the gateway's failure limiter instead). Failed lookups are never cached.
 * A revoked secret keeps verifying for at most `ttlMs`; a newly created one verifies at once
 * through `invalidate`, which is bounded per server. `peek` shows what is held without asking,
 * including a server's last OK keys for STALE_SIGNING_KEYS_RETENTION_MS after they went stale, so the
 * gateway can tell a correctly signed request from a forgery before it spends a lookup
 * (gateway/handle-ingest.ts#verifySignedRequest).
 */
export function createSigningKeyCache<A extends KeyAnswer = ResolveSigningKeysResponse>(opts: SigningKeyCacheOptions<A>): SigningKeyCache<A> {
  const now = opts.now ?? Date.now;
  const classify = opts.classify ?? classifySigningKeys;
  const unknownTtlMs = opts.unknownServerTtlMs ?? DEFAULT_UNKNOWN_SERVER_CACHE_MS;
  const refreshIntervalMs = opts.refreshIntervalMs ?? DEFAULT_SIGNING_KEY_REFRESH_MS;
  const entries = new Map<string, Entry<A>>();
  /** Per server: the last OK answer and when it was loaded (kept past its freshness, see STALE_SIGNING_KEYS_RETENTION_MS). */
  const lastOk = new Map<string, { at: number; answer: A }>();
  /** Per server: when the last refresh was allowed, the kids it replaced, and whether it found them changed. */
  const refreshes = new Map<string, { at: number; replacedKids: string; changed?: boolean }>();

  const remember = <V>(map: Map<string, V>, key: string, value: V) => {
    map.delete(key);
    map.set(key, value);
    if (map.size > MAX_CACHED_SERVERS) map.delete(map.keys().next().value as string);
  };
  const isFresh = (entry: Entry<A>) => {
    // An entry still loading is shared (single flight); a settled one lives as long as its kind allows.
    if (entry.settled === undefined) return true;
    const lifetime = classify(entry.settled) === "unknown_server" ? unknownTtlMs : opts.ttlMs;
    return now() - entry.at < lifetime;
  };

  return {
    get(serverId, load) {
      const hit = entries.get(serverId);
      if (hit && isFresh(hit)) return hit.value;
      if (opts.ttlMs <= 0) {
        // Key cache off: every request asks for itself (nothing shared); only an unknown server is remembered.
        const own = load();
        if (unknownTtlMs > 0) {
          own.then(
            (answer) => {
              if (classify(answer) === "unknown_server") remember(entries, serverId, { at: now(), value: own, settled: answer });
            },
            () => {
              // Failure policy: a failed lookup is never cached; the caller sees the rejection itself.
            },
          );
        }
        return own;
      }
      const value = load();
      const entry: Entry<A> = { at: now(), value };
      remember(entries, serverId, entry);
      value.then(
        (answer) => {
          const refresh = refreshes.get(serverId);
          if (refresh && refresh.changed === undefined) refresh.changed = kidsOf(answer) !== refresh.replacedKids;
          const kind = classify(answer);
          // The last OK keys outlive their freshness (stale keys only vouch for a lookup); any other answer ends them.
          if (kind === "ok") remember(lastOk, serverId, { at: entry.at, answer });
          else lastOk.delete(serverId);
          if (entries.get(serverId) !== entry) return;
          const keep = kind === "unknown_server" ? unknownTtlMs > 0 : kind === "ok" && opts.ttlMs > 0;
          if (keep) entry.settled = answer;
          else entries.delete(serverId);
        },
        () => {
          // Failure policy: a failed lookup is never cached; the next request asks again.
          if (entries.get(serverId) === entry) entries.delete(serverId);
        },
      );
      return value;
    },
    peek(serverId) {
      const hit = entries.get(serverId);
      if (hit?.settled !== undefined && isFresh(hit)) return { answer: hit.settled, fresh: true };
      const last = lastOk.get(serverId);
      if (last === undefined) return undefined;
      if (now() - last.at >= STALE_SIGNING_KEYS_RETENTION_MS) {
        lastOk.delete(serverId);
        return undefined;
      }
      return { answer: last.answer, fresh: false };
    },
    invalidate(serverId) {
      const hit = entries.get(serverId);
      if (hit?.settled === undefined || classify(hit.settled) !== "ok") return false;
      // A refresh that found the keys changed (a secret created or revoked) was the owner's doing, not
      // a forger's, so it does not use up the interval; one that found nothing new does.
      const last = refreshes.get(serverId);
      if (last !== undefined && last.changed !== true && now() - last.at < refreshIntervalMs) return false;
      remember(refreshes, serverId, { at: now(), replacedKids: kidsOf(hit.settled) });
      entries.delete(serverId);
      return true;
    },
  };
}

interface Entry<A> {
  at: number;
  value: Promise<A>;
  /** Set once the load succeeded with an answer worth keeping. */
  settled?: A;
}

/** The identity of a key set: its kids in order. */
function kidsOf(answer: KeyAnswer): string {
  return answer.keys.map((k) => k.kid).join(",");
}
