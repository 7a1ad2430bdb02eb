import type { ResolveSigningKeysResponse } from "../gen/proto/servers/v1/servers_pb.js";
import { SigningKeyStatus } from "../gen/proto/servers/v1/servers_pb.js";

/** How long the gateway reuses a server's active keys; 0 turns the cache off (every request asks). */
export const DEFAULT_SIGNING_KEY_CACHE_MS = 1_000;
/** Servers remembered at most; the oldest entry is dropped beyond it. */
const MAX_CACHED_SERVERS = 10_000;

/** A per-server cache of ResolveSigningKeys answers. */
export interface SigningKeyCache {
  /** The cached answer when fresh, otherwise `load()`'s; concurrent misses share one load (single flight). */
  get(serverId: string, load: () => Promise<ResolveSigningKeysResponse>): Promise<ResolveSigningKeysResponse>;
  /** Drops a server's entry; true when there was one (the caller may then retry with fresh keys). */
  forget(serverId: string): boolean;
}

/**
 * Caches only OK answers, so an unknown or disabled server is asked again on every
 * request and a newly enabled one works at once. A revoked secret keeps verifying for
 * at most `ttlMs`; the ingest handler forgets the entry and asks again when a MAC
 * fails against cached keys, so a newly created secret also works at once.
 */
export function createSigningKeyCache(opts: { ttlMs: number; now?: () => number }): SigningKeyCache {
  const now = opts.now ?? Date.now;
  const entries = new Map<string, { at: number; value: Promise<ResolveSigningKeysResponse> }>();
  return {
    get(serverId, load) {
      if (opts.ttlMs <= 0) return load();
      const hit = entries.get(serverId);
      if (hit && now() - hit.at < opts.ttlMs) return hit.value;
      const value = load();
      entries.delete(serverId);
      entries.set(serverId, { at: now(), value });
      if (entries.size > MAX_CACHED_SERVERS) entries.delete(entries.keys().next().value as string);
      value.then(
        (answer) => {
          if (answer.status !== SigningKeyStatus.OK && entries.get(serverId)?.value === value) entries.delete(serverId);
        },
        () => {
          // Failure policy: a failed lookup is never cached; the next request asks again.
          if (entries.get(serverId)?.value === value) entries.delete(serverId);
        },
      );
      return value;
    },
    forget: (serverId) => entries.delete(serverId),
  };
}
