/**
 * The empty database beside the history database (bench/run.ts --history): CPU per request
 * of the processes that serve it, and every figure measured on both with the ratio
 * history / empty (1 = history costs nothing; 1.25 = a quarter more; for throughput a
 * ratio below 1 is the loss).
 */
import { markdownTable } from "./infra.js";
import { fmt } from "./stats.js";

/** The processes that serve requests: the system under test, the ingest raw baseline, PostgreSQL and Kafka (not the load generator, receivers or harness). */
const SERVING_PROCESSES = new Set(["gateway", "referral-service", "relay", "delivery", "baseline", "postgres", "kafka"]);

/** CPU ms per request over one window: every serving process together (`all`), PostgreSQL alone, and each serving process (the hop profile). */
export function cpuPerRequest(cpuMs: Record<string, number>, requests: number): { all: number; postgres: number; byProcess: Record<string, number> } {
  if (!(requests > 0)) return { all: Number.NaN, postgres: Number.NaN, byProcess: {} };
  let all = 0;
  const byProcess: Record<string, number> = {};
  const per = (ms: number) => Math.round((ms / requests) * 1000) / 1000;
  for (const [name, ms] of Object.entries(cpuMs)) {
    if (!SERVING_PROCESSES.has(name)) continue;
    all += ms;
    byProcess[name] = per(ms);
  }
  return { all: per(all), postgres: per(cpuMs.postgres ?? 0), byProcess };
}

/** One figure on both databases. */
export interface FigureComparison {
  figure: string;
  empty: number;
  history: number;
  /** history / empty; NaN when either is missing or the empty one is 0. */
  ratio: number;
}

/** Every figure whose median both databases have, sorted by name. */
export function compareMedians(empty: Record<string, { median: number }>, history: Record<string, { median: number }>): FigureComparison[] {
  return Object.keys(empty)
    .filter((figure) => figure in history)
    .sort()
    .map((figure) => {
      const e = empty[figure]?.median ?? Number.NaN;
      const h = history[figure]?.median ?? Number.NaN;
      const ratio = Number.isFinite(e) && Number.isFinite(h) && e !== 0 ? Math.round((h / e) * 100) / 100 : Number.NaN;
      return { figure, empty: e, history: h, ratio };
    });
}

/** The CPU figures' suffixes written by the harness (`<measurement>.cpuMsPerRequest.all|postgres`). */
const CPU_ALL = ".cpuMsPerRequest.all";
const CPU_POSTGRES = ".cpuMsPerRequest.postgres";

/** The harness's CPU breakdowns per process (`ingest.gateway.cpuMsPerEvent.load generator`): in the JSON, not in the table. */
const PER_PROCESS_CPU = /\.cpuMsPer(Event|Call|Callback)\./;

/** Markdown: CPU per request on both databases per measurement, then every shared figure (less the per-process CPU breakdowns) with its ratio. */
export function renderComparison(rows: FigureComparison[]): string {
  const byFigure = new Map(rows.map((r) => [r.figure, r]));
  const ratio = (r: FigureComparison | undefined) => (r && Number.isFinite(r.ratio) ? `${fmt(r.ratio, 2)}x` : "—");
  const value = (v: number | undefined, digits: number) => (v !== undefined && Number.isFinite(v) ? fmt(v, digits) : "—");
  const cpuRows = rows
    .filter((r) => r.figure.endsWith(CPU_ALL))
    .map((r) => {
      const measurement = r.figure.slice(0, -CPU_ALL.length);
      const pg = byFigure.get(`${measurement}${CPU_POSTGRES}`);
      return [measurement, value(r.empty, 3), value(r.history, 3), ratio(r), value(pg?.empty, 3), value(pg?.history, 3), ratio(pg)];
    });
  return [
    "### CPU per request (ms, medians)",
    "",
    markdownTable(["measurement", "all: empty", "all: history", "ratio", "PostgreSQL: empty", "PostgreSQL: history", "ratio"], cpuRows),
    "",
    "### Every figure on both databases (medians)",
    "",
    markdownTable(
      ["figure", "empty", "history", "history / empty"],
      rows.filter((r) => !PER_PROCESS_CPU.test(r.figure)).map((r) => [r.figure, value(r.empty, 2), value(r.history, 2), ratio(r)]),
    ),
  ].join("\n");
}
