/** Latency summary of one measured phase, in milliseconds. */
export interface LatencySummary {
  count: number;
  mean: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentile of an ascending array (`q` in 0..1); NaN when empty. */
export function percentile(sortedAscending: ArrayLike<number>, q: number): number {
  const n = sortedAscending.length;
  if (n === 0) return Number.NaN;
  const rank = Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1));
  return sortedAscending[rank] ?? Number.NaN;
}

/** Summarises latencies (ms): mean, p50, p95, p99 and max, rounded to 0.01 ms. */
export function summarize(samplesMs: ArrayLike<number>): LatencySummary {
  const sorted = Float64Array.from(samplesMs).sort();
  let sum = 0;
  for (const value of sorted) sum += value;
  const n = sorted.length;
  return {
    count: n,
    mean: round(n === 0 ? Number.NaN : sum / n),
    p50: round(percentile(sorted, 0.5)),
    p95: round(percentile(sorted, 0.95)),
    p99: round(percentile(sorted, 0.99)),
    max: round(n === 0 ? Number.NaN : (sorted[n - 1] ?? Number.NaN)),
  };
}

/** Rounds to `digits` decimals (default 2); NaN stays NaN. */
export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Formats a number for tables: thousands separators, `digits` decimals, "n/a" for NaN. */
export function fmt(value: number | undefined, digits = 1): string {
  if (value === undefined || Number.isNaN(value)) return "n/a";
  return value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** "x.xx×" ratio of `value` to `baseline`, "n/a" when either is missing. */
export function ratio(value: number, baseline: number): string {
  if (!Number.isFinite(value) || !Number.isFinite(baseline) || baseline === 0) return "n/a";
  return `${(value / baseline).toFixed(2)}×`;
}
