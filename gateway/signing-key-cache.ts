import type { ResolveSigningKeysResponse } from "../gen/proto/servers/v1/servers_pb.js";
import { SigningKeyStatus } from "../gen/proto/servers/v1/servers_pb.js";

/** How long the gateway reuses a server's active keys; 0 turns the cache off (every request asks). */
export const DEFAULT_SIGNING_KEY_CACHE_MS = 1_000;
/** How long an unknown server id is remembered as unknown (server ids are random uuids minted by the service). */
export const DEFAULT_UNKNOWN_SERVER_CACHE_MS = 30_000;
/** At most one fresh lookup per server per this interval after a MAC failed against cached keys. */
export const DEFAULT_SIGNING_KEY_REFRESH_MS = 1_000;
/** Servers remembered at most; the oldest entry is dropped beyond it. */
const MAX_CACHED_SERVERS = 10_000;

/** A per-server cache of ResolveSigningKeys answers. */
export interface SigningKeyCache {
  /** The cached answer when fresh, otherwise `load()`'s; concurrent misses share one load (single flight). */
  get(serverId: string, load: () => Promise<ResolveSigningKeysResponse>): Promise<ResolveSigningKeysResponse>;
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
export interface SigningKeyCacheOptions {
  ttlMs: number;
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
 * through `invalidate`, which is bounded per server.
 */
export function createSigningKeyCache(opts: SigningKeyCacheOptions): SigningKeyCache {
  const now = opts.now ?? Date.now;
  const unknownTtlMs = opts.unknownServerTtlMs ?? DEFAULT_UNKNOWN_SERVER_CACHE_MS;
  const refreshIntervalMs = opts.refreshIntervalMs ?? DEFAULT_SIGNING_KEY_REFRESH_MS;
  const entries = new Map<string, Entry>();
  /** Per server: when the last refresh was allowed, the kids it replaced, and whether it found them changed. */
  const refreshes = new Map<string, { at: number; replacedKids: string; changed?: boolean }>();

  const remember = <V>(map: Map<string, V>, key: string, value: V) => {
    map.delete(key);
    map.set(key, value);
    if (map.size > MAX_CACHED_SERVERS) map.delete(map.keys().next().value as string);
  };
  const isFresh = (entry: Entry) => {
    // An entry still loading is shared (single flight); a settled one lives as long as its kind allows.
    if (entry.settled === undefined) return true;
    const lifetime = entry.settled.status === SigningKeyStatus.UNKNOWN_SERVER ? unknownTtlMs : opts.ttlMs;
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
              if (answer.status === SigningKeyStatus.UNKNOWN_SERVER) remember(entries, serverId, { at: now(), value: own, settled: answer });
            },
            () => {
              // Failure policy: a failed lookup is never cached; the caller sees the rejection itself.
            },
          );
        }
        return own;
      }
      const value = load();
      const entry: Entry = { at: now(), value };
      remember(entries, serverId, entry);
      value.then(
        (answer) => {
          const refresh = refreshes.get(serverId);
          if (refresh && refresh.changed === undefined) refresh.changed = kidsOf(answer) !== refresh.replacedKids;
          if (entries.get(serverId) !== entry) return;
          const keep = answer.status === SigningKeyStatus.UNKNOWN_SERVER ? unknownTtlMs > 0 : answer.status === SigningKeyStatus.OK && opts.ttlMs > 0;
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
    invalidate(serverId) {
      const hit = entries.get(serverId);
      if (hit?.settled?.status !== SigningKeyStatus.OK) return false;
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

interface Entry {
  at: number;
  value: Promise<ResolveSigningKeysResponse>;
  /** Set once the load succeeded with an answer worth keeping. */
  settled?: ResolveSigningKeysResponse;
}

/** The identity of a key set: its kids in order. */
function kidsOf(answer: ResolveSigningKeysResponse): string {
  return answer.keys.map((k) => k.kid).join(",");
}
