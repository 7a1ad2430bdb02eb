/** Window of the failed-signature limits. */
export const DEFAULT_FAILED_SIGNATURE_WINDOW_MS = 60_000;
/** Failed authentications per server per window before that server's key lookups are refused (429). */
export const DEFAULT_FAILED_SIGNATURES_PER_SERVER = 600;
/** Failed authentications per source (client address) per window before that source's key lookups are refused (429). */
export const DEFAULT_FAILED_SIGNATURES_PER_SOURCE = 600;
/** Failed authentications across all servers per window before every key lookup is refused (429). */
export const DEFAULT_FAILED_SIGNATURES_GLOBAL = 6_000;
/** Window of the referral-link (`/r/`) click limit. */
export const DEFAULT_REFERRAL_LINK_WINDOW_MS = 60_000;
/** Referral-link clicks per client address per window before that address gets 429 with Retry-After. */
export const DEFAULT_REFERRAL_LINK_CLICKS_PER_IP = 60;
/** Keys (servers, sources) counted at most per dimension; the oldest counter is dropped beyond it (memory stays bounded under a flood of ids). */
const MAX_COUNTED_KEYS = 10_000;

/** Settings of the limiter; a limit of 0 turns that limit off. */
export interface FailureLimiterOptions {
  windowMs: number;
  perServer: number;
  global: number;
  /** Per source (the client address); omitted or 0 is off. */
  perSource?: number;
  now?: () => number;
}

/**
 * Bounds what forgeries cost: the key lookups and refreshes of requests whose MAC did not verify
 * against the gateway's cached keys. It counts failed authentications on the signed endpoints -
 * bad signatures, unknown servers, servers without referrals (or pull) or an active secret - in
 * fixed windows, per server, per source (client address) and globally. The caller admits a request
 * only when it is about to cost a lookup (gateway/handle-ingest.ts#verifySignedRequest); a request
 * whose MAC verifies against cached keys never reaches the limiter, so correctly signed traffic is
 * never refused because of someone else's forgeries. An admitted request counts as pending until it
 * ends, so a concurrent burst cannot slip past a limit. Once failures plus pending requests reach a
 * limit, admissions for that server, that source (or all of them) are refused with a Retry-After (the
 * rest of the window), before any lookup.
 */
export interface FailureLimiter {
  /**
   * Admits a request for `serverId` from `source` that is about to cost a key lookup (call `done` when
   * it ends), or says how many seconds to wait.
   */
  admit(serverId: string, source?: string): { kind: "admitted"; done(failed: boolean): void } | { kind: "limited"; retryAfterSeconds: number };
}

/** Failures and requests in flight of one dimension (servers or sources), by key. */
interface Counters {
  limit: number;
  failures: Map<string, number>;
  pending: Map<string, number>;
}

/** Builds the limiter (fixed windows, O(1) per request, bounded memory). */
export function createFailureLimiter(opts: FailureLimiterOptions): FailureLimiter {
  const now = opts.now ?? Date.now;
  /** The current window began at the first request after the previous one ended (not on wall-clock boundaries). */
  let windowStart = Number.NEGATIVE_INFINITY;
  let globalFailures = 0;
  let globalPending = 0;
  const servers: Counters = { limit: opts.perServer, failures: new Map(), pending: new Map() };
  const sources: Counters = { limit: opts.perSource ?? 0, failures: new Map(), pending: new Map() };

  const roll = (): number => {
    const at = now();
    if (at >= windowStart + opts.windowMs) {
      windowStart = at;
      globalFailures = 0;
      servers.failures.clear();
      sources.failures.clear();
    }
    return at;
  };
  const add = (map: Map<string, number>, key: string, delta: number) => {
    const value = (map.get(key) ?? 0) + delta;
    map.delete(key);
    if (value > 0) map.set(key, value);
    if (map.size > MAX_COUNTED_KEYS) map.delete(map.keys().next().value as string);
  };
  const isFull = (counters: Counters, key: string | undefined) =>
    key !== undefined && counters.limit > 0 && (counters.failures.get(key) ?? 0) + (counters.pending.get(key) ?? 0) >= counters.limit;

  return {
    admit(serverId, source) {
      const at = roll();
      const globalFull = opts.global > 0 && globalFailures + globalPending >= opts.global;
      if (globalFull || isFull(servers, serverId) || isFull(sources, source)) {
        return { kind: "limited", retryAfterSeconds: Math.max(1, Math.ceil((windowStart + opts.windowMs - at) / 1000)) };
      }
      globalPending++;
      add(servers.pending, serverId, 1);
      if (source !== undefined) add(sources.pending, source, 1);
      let ended = false;
      return {
        kind: "admitted",
        done(failed) {
          if (ended) return;
          ended = true;
          globalPending--;
          add(servers.pending, serverId, -1);
          if (source !== undefined) add(sources.pending, source, -1);
          if (!failed) return;
          roll();
          globalFailures++;
          add(servers.failures, serverId, 1);
          if (source !== undefined) add(sources.failures, source, 1);
        },
      };
    },
  };
}
