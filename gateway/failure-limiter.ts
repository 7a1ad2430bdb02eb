/** Window of the failed-signature limits. */
export const DEFAULT_FAILED_SIGNATURE_WINDOW_MS = 60_000;
/** Failed authentications per source (client address) per window before that source's key lookups are refused (429). */
export const DEFAULT_FAILED_SIGNATURES_PER_SOURCE = 600;
/** Failed authentications for server ids the gateway does not know to exist, across all sources, per window before such lookups are refused (429). */
export const DEFAULT_FAILED_SIGNATURES_GLOBAL = 6_000;
/** Window of the referral-link (`/r/`) click limit. */
export const DEFAULT_REFERRAL_LINK_WINDOW_MS = 60_000;
/** Referral-link clicks per client address per window before that address gets 429 with Retry-After. */
export const DEFAULT_REFERRAL_LINK_CLICKS_PER_IP = 60;
/** Sources counted at most; the oldest counter is dropped beyond it (memory stays bounded under a flood of addresses). */
const MAX_COUNTED_SOURCES = 10_000;

/** Settings of the limiter; a limit of 0 turns that limit off. */
export interface FailureLimiterOptions {
  windowMs: number;
  /** Per source (the client address). */
  perSource: number;
  /** Across every source, for the admissions that ask for it (`admit`'s `global`); omitted or 0 is off. */
  global?: number;
  /**
   * Requests of one source in flight at once, counted apart from its failures (omitted: in-flight requests count
   * against `perSource` with the failures). For a limit where most requests succeed and one source may legitimately
   * run many at once (a host whose many game servers' plugins call from one address): a burst of wrong guesses is
   * then bounded by this plus `perSource` a window, and right answers never bring a source near its failure budget.
   */
  pendingPerSource?: number;
  /** The clock, in milliseconds (default Date.now). */
  now?: () => number;
}

/** An admitted request (call `done` when it ends), or a refusal with the seconds to wait and which limit refused it. */
export type Admission = { kind: "admitted"; done(failed: boolean): void } | { kind: "limited"; retryAfterSeconds: number; by: "source" | "global" };

/**
 * Bounds what failures cost, charging each one to its SOURCE (the client address), never to the
 * server or key it named: a sender is refused only for its own failures, so nobody's forgeries can
 * get another sender's requests refused. On the signed endpoints it admits the requests that may
 * cost a key lookup (gateway/signed-request.ts#verifySignedRequest) and counts their failed
 * authentications - bad signatures, unknown servers, servers without referrals (or pull) or an active
 * secret; on the check/claim API, wrong claim keys; on `/r/`, every click. The global limit counts
 * only the admissions that ask for it: on the signed endpoints, lookups for server ids the gateway
 * does not know to exist - the only lookups a flood could multiply (a known server's lookups are
 * bounded per server by the key cache). Counts are kept in fixed windows; an admitted request counts
 * as pending until it ends, so a concurrent burst cannot slip past a limit. Once failures plus pending
 * requests reach a limit, admissions under it are refused with a Retry-After (the rest of the window).
 */
export interface FailureLimiter {
  /**
   * Admits a request from `source` (undefined: counted only globally) that is about to cost a lookup;
   * with `global`, it also counts against, and is refused past, the global limit.
   */
  admit(source: string | undefined, opts?: { global?: boolean }): Admission;
}

/** Builds the limiter (fixed windows, O(1) per request, bounded memory). */
export function createFailureLimiter(opts: FailureLimiterOptions): FailureLimiter {
  const now = opts.now ?? Date.now;
  const globalLimit = opts.global ?? 0;
  /** The current window began at the first request after the previous one ended (not on wall-clock boundaries). */
  let windowStart = Number.NEGATIVE_INFINITY;
  let globalFailures = 0;
  let globalPending = 0;
  const sourceFailures = new Map<string, number>();
  const sourcePending = new Map<string, number>();

  const roll = (): number => {
    const at = now();
    if (at >= windowStart + opts.windowMs) {
      windowStart = at;
      globalFailures = 0;
      sourceFailures.clear();
    }
    return at;
  };
  const add = (map: Map<string, number>, key: string, delta: number) => {
    const value = (map.get(key) ?? 0) + delta;
    map.delete(key);
    if (value > 0) map.set(key, value);
    if (map.size > MAX_COUNTED_SOURCES) map.delete(map.keys().next().value as string);
  };
  const pendingApart = (opts.pendingPerSource ?? 0) > 0;
  const sourceFull = (source: string | undefined) => {
    if (source === undefined) return false;
    const failures = sourceFailures.get(source) ?? 0;
    const pending = sourcePending.get(source) ?? 0;
    if (pendingApart) return (opts.perSource > 0 && failures >= opts.perSource) || pending >= (opts.pendingPerSource ?? 0);
    return opts.perSource > 0 && failures + pending >= opts.perSource;
  };

  return {
    admit(source, { global = false } = {}) {
      const at = roll();
      const by = sourceFull(source) ? "source" : global && globalLimit > 0 && globalFailures + globalPending >= globalLimit ? "global" : undefined;
      if (by !== undefined) return { kind: "limited", by, retryAfterSeconds: Math.max(1, Math.ceil((windowStart + opts.windowMs - at) / 1000)) };
      if (global) globalPending++;
      if (source !== undefined) add(sourcePending, source, 1);
      let ended = false;
      return {
        kind: "admitted",
        done(failed) {
          if (ended) return;
          ended = true;
          if (global) globalPending--;
          if (source !== undefined) add(sourcePending, source, -1);
          if (!failed) return;
          roll();
          if (global) globalFailures++;
          if (source !== undefined) add(sourceFailures, source, 1);
        },
      };
    },
  };
}
