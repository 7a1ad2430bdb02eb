/**
 * Issue 29's targets read from one run's results (the JSON bench/run.ts writes): each with the
 * measured value, its bound, and met / not met / not measured. Pure: the run writes the table
 * into its .md and on stdout; bench/capacity.ts reads the same results for the capacity model.
 *
 * The targets hold on the history database: with --history the figures are the history side's
 * (and the CPU ratios history / empty); a run without it is read on its one database and the CPU
 * ratios are "not measured in this run".
 */
import { markdownTable } from "./infra.js";
import { fmt } from "./stats.js";

/** A figure's spread as the run records it; only the median is read here. */
export interface MedianOf {
  median: number;
}

/** Figures per instance count ("1", "2"), as `summary` in the results. */
export type RunSummary = Record<string, Record<string, MedianOf>>;

/** The part of a run's results the targets read. */
export interface TargetsInput {
  summary: RunSummary;
  settings?: { lowConcurrency?: unknown };
  history?: { summary: RunSummary };
  /** The machine the run measured on: its cores bound what a CPU cost per request allows. */
  machine?: { atStart?: { nproc?: number } };
}

/** A target's outcome. */
export type TargetVerdict = "met" | "not met" | "not measured";

/** One target as the table shows it. */
export interface TargetRow {
  /** The target in issue 29's words (one hot path or one bound). */
  target: string;
  /** The measured value with its unit, or why there is none. */
  measured: string;
  bound: string;
  verdict: TargetVerdict;
  /**
   * A target not met: what holds it, from the same run's figures (the CPU each serving process spends per request and
   * what the machine's cores allow at that cost; the raw server's cost beside ours; the vote's stages for latency).
   */
  limit?: string;
}

/** CPU per request on the history database may cost at most this much more than on the empty one. */
export const CPU_RATIO_BOUND = 1.25;
const CPU_BOUND = `history / empty <= ${fmt(CPU_RATIO_BOUND, 2)}x`;
/** The bench's default low concurrency (BENCH_LOW_CONCURRENCY) when the results do not say. */
const DEFAULT_LOW_CONCURRENCY = 8;
/** Why a figure is missing: this run did not run the phase. */
const NOT_IN_RUN = "not measured in this run";

/** The hot paths whose CPU per request the bench measures (`<key>.cpuMsPerRequest.all`). */
function hotPaths(low: number): Array<{ path: string; key: string }> {
  return [
    { path: "ingest `registered`, c=32", key: "ingest.gateway" },
    { path: `ingest \`registered\`, c=${low}`, key: `ingest.c${low}.gateway` },
    { path: "ingest `registered`, open loop", key: "ingest.open" },
    { path: "ingest `qualified`, c=32", key: "lifecycle.qualified" },
    { path: "ingest `reversed`, c=32", key: "lifecycle.reversed" },
    { path: "dry-run (`test: true`)", key: "ingest.dryRun.gateway" },
    { path: "CastHeart over many servers", key: "hearts.many" },
    { path: "CastHeart to one server", key: "hearts.one" },
    { path: "CastHeart with delivery running", key: "hearts.withDelivery" },
    { path: "CastHeart with SteamID64s (claims setup)", key: "claims.cast" },
    { path: "CastHeart at 1,000/s offered (latency)", key: "latency.load" },
    { path: "check, keep-alive", key: "claims.check" },
    { path: "check, Connection: close", key: "claims.checkClose" },
    { path: "check of claimed players", key: "claims.checkClaimed" },
    { path: "claim", key: "claims.claim" },
    { path: "claim again", key: "claims.claimAgain" },
    { path: "pull list", key: "pull.list" },
    // The pull phase's claim window: each plugin lists its first page and claims it, CPU per request over both.
    { path: "pull claim (a page listed, then claimed)", key: "pull.claim" },
    { path: "callbacks drained from a backlog (delivery)", key: "callbacks.drain" },
  ];
}

const medianOf = (figures: Record<string, MedianOf> | undefined, key: string): number | undefined => {
  const v = figures?.[key]?.median;
  return v !== undefined && Number.isFinite(v) ? v : undefined;
};

/**
 * A CPU per request target: `<key>.cpuMsPerRequest.all` on the history database / on the empty one, at most
 * CPU_RATIO_BOUND; not measured when either side lacks the figure (or the run has no history side).
 */
function cpuRatioRow(target: string, key: string, empty: Record<string, MedianOf> | undefined, history: Record<string, MedianOf> | undefined): TargetRow {
  const e = medianOf(empty, `${key}.cpuMsPerRequest.all`);
  const h = medianOf(history, `${key}.cpuMsPerRequest.all`);
  const ratio = e !== undefined && h !== undefined && e > 0 ? h / e : undefined;
  const why = history === undefined ? `${NOT_IN_RUN} (no --history)` : NOT_IN_RUN;
  const row = boundRow(target, ratio, "x", 2, CPU_BOUND, (v) => v <= CPU_RATIO_BOUND, why);
  if (ratio !== undefined) row.measured += ` (${fmt(h, 2)} / ${fmt(e, 2)} ms)`;
  return withLimit(row, growthLimit(empty, history, key));
}

/** A CPU ratio's limit: where the history's extra CPU per request went, process by process (empty -> history, ms), most first. */
function growthLimit(empty: Record<string, MedianOf> | undefined, history: Record<string, MedianOf> | undefined, key: string): string | undefined {
  const e = new Map(hopProfile(empty, key)?.parts ?? []);
  const h = hopProfile(history, key)?.parts ?? [];
  const grown = h
    .map(([hop, ms]) => [hop, e.get(hop) ?? 0, ms] as const)
    .filter(([, before, after]) => after > before)
    .sort((a, b) => b[2] - b[1] - (a[2] - a[1]));
  if (grown.length === 0) return undefined;
  return `the history's extra CPU per request, by process (empty -> history): ${grown.map(([hop, before, after]) => `${hop} ${fmt(before, 2)} -> ${fmt(after, 2)} ms`).join(", ")}`;
}

/** A row that compares `value` with a bound (`ok` decides); missing value -> not measured with `why`. */
function boundRow(
  target: string,
  value: number | undefined,
  unit: string,
  digits: number,
  bound: string,
  ok: (v: number) => boolean,
  why = NOT_IN_RUN,
): TargetRow {
  if (value === undefined) return { target, measured: why, bound, verdict: "not measured" };
  return { target, measured: `${fmt(value, digits)}${unit}`, bound, verdict: ok(value) ? "met" : "not met" };
}

/** The serving processes in the order a request crosses them (the raw server last: it is the baseline's only process). */
const HOPS = ["gateway", "referral-service", "relay", "kafka", "delivery", "postgres", "baseline"] as const;

/**
 * The CPU each serving process spent per request in window `key` (`<key>.cpuMsPerRequest.by.<process>`; ingest windows
 * also have `<key>.cpuMsPerEvent.<process>`), and their sum; undefined when the run has neither.
 */
export function hopProfile(
  side: Record<string, MedianOf> | undefined,
  key: string,
  hops: readonly string[] = HOPS,
): { all: number; parts: Array<[string, number]> } | undefined {
  const parts: Array<[string, number]> = [];
  for (const hop of hops) {
    const ms = medianOf(side, `${key}.cpuMsPerRequest.by.${hop}`) ?? medianOf(side, `${key}.cpuMsPerEvent.${hop}`);
    if (ms !== undefined && ms > 0) parts.push([hop, ms]);
  }
  if (parts.length === 0) return undefined;
  return { all: parts.reduce((sum, [, ms]) => sum + ms, 0), parts };
}

const profileText = (p: { all: number; parts: Array<[string, number]> }): string =>
  `${fmt(p.all, 2)} ms (${p.parts.map(([hop, ms]) => `${hop} ${fmt(ms, 2)}`).join(", ")})`;

/** A throughput target's limit: the CPU of a request over every serving process, and the rate the cores allow at that cost. */
function cpuBoundLimit(side: Record<string, MedianOf> | undefined, key: string, nproc: number | undefined, unit: string): string | undefined {
  const p = hopProfile(side, key);
  if (p === undefined) return undefined;
  // "About": the windows' CPU includes PostgreSQL's background work (checkpoints, autovacuum), so the rate can pass it a little.
  const most = nproc !== undefined && nproc > 0 ? `; ${nproc} cores give about ${fmt((nproc * 1000) / p.all, 0)} ${unit}/s at that cost` : "";
  return `CPU per ${unit}: ${profileText(p)}${most}`;
}

/** A ratio to the raw ingest server's limit: our CPU per event beside the raw server's. */
function rawRatioLimit(side: Record<string, MedianOf> | undefined, ours: string, raw: string): string | undefined {
  const o = hopProfile(side, ours);
  // The raw server's own cost only: it and the PostgreSQL it writes to (the system's processes idle beside it are not its).
  const r = hopProfile(side, raw, ["postgres", "baseline"]);
  if (o === undefined || r === undefined) return undefined;
  // Not a bound on the ratio: the raw server need not be CPU-bound (at c=32 it waits on its commits).
  return `CPU per event: ours ${profileText(o)}, the raw server ${profileText(r)}: ours costs ${fmt(o.all / r.all, 2)}x the raw server's CPU`;
}

/** A latency target's limit: the vote's stages (p50, ms) as the latency phase splits them. */
function stagesLimit(side: Record<string, MedianOf> | undefined, prefix: string, suffix: "p50" | "p99"): string | undefined {
  const stages = Object.keys(side ?? {})
    .filter((k) => k.startsWith(`${prefix}.stage.`) && k.endsWith(`.${suffix}`))
    .map((k) => [k.slice(`${prefix}.stage.`.length, -suffix.length - 1), medianOf(side, k)] as const)
    .filter((e): e is readonly [string, number] => e[1] !== undefined);
  return stages.length === 0 ? undefined : `stages (${suffix}): ${stages.map(([stage, ms]) => `${stage} ${fmt(ms, 1)} ms`).join(", ")}`;
}

/** `row` with its limit when it is not met and the run has the figures to say what holds it. */
function withLimit(row: TargetRow, limit: string | undefined): TargetRow {
  return row.verdict === "not met" && limit !== undefined ? { ...row, limit } : row;
}

/** Every issue 29 target for one run, in the issue's order. */
export function evaluateTargets(run: TargetsInput): TargetRow[] {
  const low = typeof run.settings?.lowConcurrency === "number" ? run.settings.lowConcurrency : DEFAULT_LOW_CONCURRENCY;
  const empty = run.summary["1"];
  const history = run.history?.summary["1"];
  // The absolute targets hold on the history database; a run without one is read on its only database.
  const side = history ?? empty;
  const rows: TargetRow[] = [];
  for (const { path, key } of hotPaths(low)) rows.push(cpuRatioRow(`CPU per request: ${path}`, key, empty, history));
  // The ingest-hot phase: one server with review on, on the history its hot server (the hot address's clicks).
  rows.push(cpuRatioRow("An address with 100,000 earlier clicks: its own events' CPU per request (ingest-hot)", "ingestHot.hotAddress", empty, history));
  rows.push(cpuRatioRow("Ordinary senders' events on the same server (ingest-hot)", "ingestHot.otherSenders", empty, history));
  const nproc = run.machine?.atStart?.nproc;
  const ratioRow = (target: string, key: string, atLeast: number) =>
    boundRow(target, medianOf(side, key), "x", 2, `>= ${fmt(atLeast, 1)}x`, (v) => v >= atLeast);
  rows.push(
    withLimit(
      ratioRow("Ingest `registered` at c=32 / the one-statement raw server", "ingest.ratio", 0.9),
      rawRatioLimit(side, "ingest.gateway", "ingest.baseline"),
    ),
  );
  rows.push(
    withLimit(
      ratioRow(`Ingest \`registered\` at c=${low} / the one-statement raw server`, `ingest.c${low}.ratio`, 0.6),
      rawRatioLimit(side, `ingest.c${low}.gateway`, `ingest.c${low}.baseline`),
    ),
  );
  const drained = cpuBoundLimit(side, "callbacks.drain", nproc, "callback");
  rows.push(
    withLimit(
      boundRow("Callbacks drained from a backlog", medianOf(side, "callbacks.drain.rps"), " /s", 0, ">= 5,000 /s", (v) => v >= 5000),
      drained,
    ),
  );
  rows.push(withLimit(ratioRow("Callbacks drained / the best raw keep-alive sender", "callbacks.ratio", 0.2), drained));
  rows.push(
    withLimit(
      boundRow("CastHeart with delivery running", medianOf(side, "hearts.withDelivery.rps"), " /s", 0, ">= 2,500 /s", (v) => v >= 2500),
      cpuBoundLimit(side, "hearts.withDelivery", nproc, "heart"),
    ),
  );
  rows.push(
    withLimit(
      boundRow("Vote -> callback p50, idle", medianOf(side, "latency.idle.p50"), " ms", 1, "<= 5 ms", (v) => v <= 5),
      stagesLimit(side, "latency.idle", "p50"),
    ),
  );
  rows.push(
    withLimit(
      boundRow("Vote -> callback p99 at 1,000 hearts/s offered", medianOf(side, "latency.load.p99"), " ms", 1, "<= 50 ms", (v) => v <= 50),
      stagesLimit(side, "latency.load", "p99"),
    ),
  );
  return rows;
}

/** Markdown: a heading, which database the figures come from, and the table of targets. */
export function renderTargets(rows: TargetRow[], onHistory: boolean): string {
  const counts = (v: TargetVerdict) => rows.filter((r) => r.verdict === v).length;
  return [
    "## Issue 29 targets",
    "",
    `${onHistory ? "Figures of the history database (CPU: history / empty)" : "Figures of the empty database (a run without --history: the CPU ratios are not measured)"}; ` +
      `${counts("met")} met, ${counts("not met")} not met, ${counts("not measured")} not measured.`,
    "",
    markdownTable(
      ["target", "measured", "bound", "verdict"],
      rows.map((r) => [r.target, r.measured, r.bound, r.verdict === "not measured" ? r.verdict : `**${r.verdict}**`]),
    ),
    ...limitsOf(rows),
  ].join("\n");
}

/** The "what holds it" list under the table: one line per target not met whose limit the run's figures show. */
function limitsOf(rows: TargetRow[]): string[] {
  const limited = rows.filter((r) => r.limit !== undefined);
  if (limited.length === 0) return [];
  return ["", "What holds each target not met, from the same run's figures:", "", ...limited.map((r) => `- **${r.target}**: ${r.limit}.`)];
}
