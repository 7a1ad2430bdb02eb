/** Window of the failed-signature limits. */
export const DEFAULT_FAILED_SIGNATURE_WINDOW_MS = 60_000;
/** Failed signatures per server per window before that server's requests get 429. */
export const DEFAULT_FAILED_SIGNATURES_PER_SERVER = 600;
/** Failed signatures across all servers per window before every request gets 429. */
export const DEFAULT_FAILED_SIGNATURES_GLOBAL = 6_000;
/** Servers counted at most; the oldest counter is dropped beyond it (memory stays bounded under a flood of ids). */
const MAX_COUNTED_SERVERS = 10_000;

/** Settings of the limiter; a limit of 0 turns that limit off. */
export interface FailureLimiterOptions {
  windowMs: number;
  perServer: number;
  global: number;
  now?: () => number;
}

/**
 * Counts failed authentications on the ingest endpoint - bad signatures, unknown servers and
 * servers without referrals or an active secret, each of which may have cost a key lookup - in
 * fixed windows, per server and globally. A request is admitted before its lookup and counts as
 * pending until it ends, so a concurrent burst cannot slip past the limit. Once failures plus
 * pending requests reach a limit, requests for that server (or all requests) are answered 429
 * with Retry-After before any lookup, until the window ends. Legitimate, correctly signed
 * traffic never fails, so it only meets the limit while someone floods the same server (or the
 * whole endpoint) with forgeries, or runs more concurrent requests than the limit.
 */
export interface FailureLimiter {
  /** Admits a request for `serverId` (call `done` when it ends), or says how many seconds to wait. */
  admit(serverId: string): { kind: "admitted"; done(failed: boolean): void } | { kind: "limited"; retryAfterSeconds: number };
}

/** Builds the limiter (fixed windows, O(1) per request, bounded memory). */
export function createFailureLimiter(opts: FailureLimiterOptions): FailureLimiter {
  const now = opts.now ?? Date.now;
  /** The current window began at the first request after the previous one ended (not on wall-clock boundaries). */
  let windowStart = Number.NEGATIVE_INFINITY;
  let globalFailures = 0;
  let globalPending = 0;
  const failures = new Map<string, number>();
  const pending = new Map<string, number>();

  const roll = (): number => {
    const at = now();
    if (at >= windowStart + opts.windowMs) {
      windowStart = at;
      globalFailures = 0;
      failures.clear();
    }
    return at;
  };
  const add = (map: Map<string, number>, key: string, delta: number) => {
    const value = (map.get(key) ?? 0) + delta;
    map.delete(key);
    if (value > 0) map.set(key, value);
    if (map.size > MAX_COUNTED_SERVERS) map.delete(map.keys().next().value as string);
  };

  return {
    admit(serverId) {
      const at = roll();
      const globalFull = opts.global > 0 && globalFailures + globalPending >= opts.global;
      const serverFull = opts.perServer > 0 && (failures.get(serverId) ?? 0) + (pending.get(serverId) ?? 0) >= opts.perServer;
      if (globalFull || serverFull) {
        return { kind: "limited", retryAfterSeconds: Math.max(1, Math.ceil((windowStart + opts.windowMs - at) / 1000)) };
      }
      globalPending++;
      add(pending, serverId, 1);
      let ended = false;
      return {
        kind: "admitted",
        done(failed) {
          if (ended) return;
          ended = true;
          globalPending--;
          add(pending, serverId, -1);
          if (!failed) return;
          roll();
          globalFailures++;
          add(failures, serverId, 1);
        },
      };
    },
  };
}
