import type { EnvReader } from "../../shared/runtime/config.js";
/**
 * The reward callback retry schedule: the delay before each retry, jitter, and the
 * bounds within which a receiver's Retry-After is honoured. Pure: the clock and the
 * random source are passed in.
 */

/** The default schedule: 10 retries over about two days (46 h 42 min before jitter). */
export const DEFAULT_RETRY_SCHEDULE = "10s,30s,2m,10m,30m,1h,3h,6h,12h,24h";
/** Jitter: each delay is spread uniformly over ±20 % so retries of many deliveries do not align. */
export const DEFAULT_JITTER_RATIO = 0.2;
/** The latest a Retry-After may push a retry. */
export const RETRY_AFTER_CAP_MS = 24 * 60 * 60 * 1000;

/** A parsed schedule. */
export interface RetrySchedule {
  /** Delay before retry n (index n-1) after a failed attempt n; attempts = delays + 1. */
  delaysMs: number[];
  /** 0..1: each delay is multiplied by a random factor in [1 - ratio, 1 + ratio]. */
  jitterRatio: number;
  /** Upper bound for a Retry-After. */
  retryAfterCapMs: number;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses "10s,30s,2m,10m,30m,1h,3h,6h,12h,24h" (units ms, s, m, h, d). Throws an
 * Error naming every bad entry; an empty list is an error (at least one retry).
 */
export function parseRetrySchedule(text: string, opts: { jitterRatio?: number; retryAfterCapMs?: number } = {}): RetrySchedule {
  const entries = text.split(",").map((s) => s.trim());
  const problems: string[] = [];
  const delaysMs = entries.map((entry) => {
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(entry);
    const unit = match?.[2] === undefined ? undefined : UNIT_MS[match[2]];
    if (!match?.[1] || unit === undefined || Number(match[1]) <= 0) {
      problems.push(`"${entry}" is not a positive duration like 500ms, 10s, 2m, 1h or 1d`);
      return 0;
    }
    return Math.round(Number(match[1]) * unit);
  });
  if (problems.length > 0) throw new Error(`invalid retry schedule: ${problems.join("; ")}`);
  const jitterRatio = opts.jitterRatio ?? DEFAULT_JITTER_RATIO;
  if (!(jitterRatio >= 0 && jitterRatio < 1)) throw new Error("invalid retry schedule: jitter ratio must be in [0, 1)");
  return { delaysMs, jitterRatio, retryAfterCapMs: opts.retryAfterCapMs ?? RETRY_AFTER_CAP_MS };
}

/** What to do after a failed attempt. */
export type RetryDecision = { kind: "retry"; delayMs: number } | { kind: "give_up" };

/**
 * Decides the next step after failed attempt number `attemptsMade` (1-based, this
 * retry cycle). The jittered schedule delay is a floor; a Retry-After may only
 * push the retry later, never past the cap. After the last scheduled retry: give up.
 */
export function decideRetry(schedule: RetrySchedule, attemptsMade: number, opts: { retryAfterMs?: number; random: () => number }): RetryDecision {
  const base = schedule.delaysMs[attemptsMade - 1];
  if (base === undefined) return { kind: "give_up" };
  const factor = 1 + schedule.jitterRatio * (2 * opts.random() - 1);
  const jittered = Math.max(1, Math.round(base * factor));
  if (opts.retryAfterMs === undefined) return { kind: "retry", delayMs: jittered };
  return { kind: "retry", delayMs: Math.max(jittered, Math.min(opts.retryAfterMs, schedule.retryAfterCapMs)) };
}

/**
 * Parses a Retry-After header value: delay-seconds or an HTTP date (relative to
 * `now`). Returns milliseconds (>= 0), or undefined when absent or unparseable.
 */
export function parseRetryAfter(value: string | undefined, now: Date): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  // HTTP dates always name the weekday and GMT; a bare number with a sign or fraction is invalid.
  if (!/GMT$/.test(trimmed)) return undefined;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now.getTime());
}

/** Total time the schedule spans before jitter, for docs and logs. */
export function scheduleSpanMs(schedule: RetrySchedule): number {
  return schedule.delaysMs.reduce((sum, d) => sum + d, 0);
}

/**
 * Reads DELIVERY_RETRY_SCHEDULE (the dispatcher's, and the referral service's for test callbacks). Here, not in
 * config.ts, so the referral service reads it without loading the dispatcher's and consumer's modules.
 */
export function readRetrySchedule(r: EnvReader): RetrySchedule {
  const scheduleText = r.optionalString("DELIVERY_RETRY_SCHEDULE");
  if (scheduleText) {
    try {
      return parseRetrySchedule(scheduleText);
    } catch (error) {
      // Failure policy: report with every other problem; the process does not start.
      r.problem(`DELIVERY_RETRY_SCHEDULE: ${(error as Error).message}`);
    }
  }
  return parseRetrySchedule(DEFAULT_RETRY_SCHEDULE);
}
