import type { CoreDeps } from "../shared/adapters/deps.js";
import { claimKeyLookupHash, isClaimKeyShape } from "../shared/runtime/secrets.js";
import { activeSecretWhere } from "../servers/domain/secret-policy.js";

/** How long a claim key's server is reused; a rotated-out key stops answering within this time. */
export const CLAIM_KEY_CACHE_MS = 5_000;
/** Most cached keys; past it the cache starts over (only keys that resolved are cached, so guesses cannot fill it). */
const CLAIM_KEY_CACHE_MAX = 10_000;

/** Finds the server of a claim key; null for a wrong, rotated-out or malformed key. */
export type ClaimKeyResolver = (claimKey: string) => Promise<string | null>;

/**
 * The claim key -> server lookup the check/claim RPCs run first. A key of the wrong shape costs
 * nothing; any other is hashed (SHA-256) and found by the unique `lookup_hash` index among active
 * claim keys: one index lookup, never a scan. Keys that resolve are cached for CLAIM_KEY_CACHE_MS by
 * their hash (never the key itself). The key never reaches a log line, metric or error text.
 */
export function createClaimKeyResolver(deps: CoreDeps, cacheMs = CLAIM_KEY_CACHE_MS): ClaimKeyResolver {
  const cache = new Map<string, { serverId: string; until: number }>();
  return async (claimKey) => {
    if (!isClaimKeyShape(claimKey)) return null;
    const hash = claimKeyLookupHash(claimKey);
    const now = deps.now();
    const cached = cache.get(hash);
    if (cached !== undefined && cached.until > now.getTime()) return cached.serverId;
    const row = await deps.prisma.serverSecret.findFirst({
      where: { lookupHash: hash, purpose: "claim", ...activeSecretWhere(now) },
      select: { serverId: true },
    });
    const serverId = row?.serverId ?? null;
    if (serverId === null) {
      cache.delete(hash);
      return null;
    }
    if (cache.size >= CLAIM_KEY_CACHE_MAX) cache.clear();
    if (cacheMs > 0) cache.set(hash, { serverId, until: now.getTime() + cacheMs });
    return serverId;
  };
}
