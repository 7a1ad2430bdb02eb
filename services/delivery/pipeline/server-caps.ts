import type { AttemptOutcome } from "./transport.js";

/**
 * Adaptive per-server caps: how many attempts one dispatcher keeps in flight for one server. A
 * server starts at the configured per-server concurrency (the small cap); while it answers fast
 * and uses at least half of its slots, it gets one more slot per answer (so a busy fast server's
 * cap doubles each round of answers), up to a maximum; a slow answer halves the cap and a failure
 * drops it back to the small cap at once. So a fast receiver gets many slots and a slow, failing
 * or hanging one holds few (a hanging one never answers, so it never grows). The decisions
 * are pure (nextServerCap); createServerCaps keeps the caps that differ from the small cap.
 */

/** An answer at most this slow (2xx) counts as fast: the server may get one more slot. */
export const FAST_ANSWER_MS = 250;

/** How one attempt's answer counts for its server's cap. */
export type CapAnswer =
  /** 2xx within FAST_ANSWER_MS. */
  | "fast"
  /** 2xx, slower than FAST_ANSWER_MS. */
  | "slow"
  /** Anything else the receiver (or the network) gave: non-2xx, 410, timeout, refused. */
  | "failed"
  /** Nothing was sent (no secret any more, or the attempt threw): the cap stays. */
  | "none";

/** The caps' bounds: the small cap every server starts at and falls back to, and the most a server may grow to. */
export interface CapLimits {
  base: number;
  max: number;
}

/** The most a server's cap may grow to for a dispatcher of `concurrency` slots: a quarter of them, never below `base`. */
export function maxServerCap(concurrency: number, base: number): number {
  return Math.max(base, Math.floor(concurrency / 4));
}

/** How an attempt's outcome counts (undefined: the attempt threw before it had one). */
export function toCapAnswer(outcome: AttemptOutcome | undefined): CapAnswer {
  if (outcome === undefined || outcome.kind === "held" || outcome.kind === "deferred") return "none";
  if (outcome.kind !== "delivered") return "failed";
  return outcome.latencyMs <= FAST_ANSWER_MS ? "fast" : "slow";
}

/**
 * A server's next cap after one answer. `inFlight` is what it had in flight when the answer came
 * (this attempt included): a fast answer grows the cap by one only while the server used at least
 * half of it (a server sending one at a time keeps its small cap); a slow answer halves it and a
 * failure drops it to `base` (never below `base`).
 */
export function nextServerCap(cap: number, answer: CapAnswer, inFlight: number, limits: CapLimits): number {
  switch (answer) {
    case "fast":
      return inFlight * 2 >= cap ? Math.min(limits.max, cap + 1) : cap;
    case "slow":
      return Math.max(limits.base, Math.floor(cap / 2));
    case "failed":
      return limits.base;
    case "none":
      return cap;
  }
}

/** One dispatcher's per-server caps. */
export interface ServerCaps {
  /** The server's cap now. */
  capOf(serverId: string): number;
  /** Applies one answer of the server's (with what it had in flight, this attempt included). */
  record(serverId: string, answer: CapAnswer, inFlight: number): void;
  /** The caps that differ from the small cap, by server id (what the claim passes on). */
  raised(): ReadonlyMap<string, number>;
}

/** Per-server caps of one dispatcher (only the raised ones are kept: a server at its small cap has no entry). */
export function createServerCaps(limits: CapLimits): ServerCaps {
  const raised = new Map<string, number>();
  return {
    capOf: (serverId) => raised.get(serverId) ?? limits.base,
    record(serverId, answer, inFlight) {
      const next = nextServerCap(raised.get(serverId) ?? limits.base, answer, inFlight, limits);
      if (next === limits.base) raised.delete(serverId);
      else raised.set(serverId, next);
    },
    raised: () => raised,
  };
}
