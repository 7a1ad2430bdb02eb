/**
 * The capacity model of docs/capacity.md, computed from one run's results (bench/run.ts, best
 * with --history): CPU per vote per process kind and bytes per vote per table, scaled to a list
 * of servers at 1, 10 and 100 million votes a month. Pure: bench/capacity.ts reads the file and
 * renders; the arithmetic is unit-tested on a fixture.
 */
import type { RunSummary } from "./targets.js";

/** The processes a deployment runs and sizes: the four of the system, PostgreSQL and Kafka. */
export const PROCESS_KINDS = ["gateway", "referral-service", "relay", "delivery", "postgres", "kafka"] as const;
export type ProcessKind = (typeof PROCESS_KINDS)[number];
/** The kinds that are Node processes: one event loop each, so at most about one core per process. */
const NODE_KINDS = new Set<ProcessKind>(["gateway", "referral-service", "relay", "delivery"]);

/** What the model assumes; every figure it prints follows from these and the run. */
export interface CapacityAssumptions {
  /** Servers on the list (they bound nothing here: the cost is per vote; stated for the reader). */
  servers: number;
  votesPerMonth: number[];
  /** Peak (first of the month) over the day's average rate. */
  peakOverAverage: number;
  /** Days in the model's month. */
  daysPerMonth: number;
  /** Share of a core the sizing plans to use at the peak. */
  targetUtilisation: number;
  /** Signed referral events (ingest) per vote. */
  ingestEventsPerVote: number;
  /** Years of growth the storage table shows. */
  storageYears: number[];
  /** Days of rows the later retention keeps in the tables it bounds. */
  retentionDays: number;
  /** The tables retention would bound (the rest keep growing). */
  retainedTables: string[];
  /** The relay's shards (services/shared/adapters/outbox.ts RELAY_SHARDS). */
  relayShards: number;
  /** Partitions of each topic today (services/shared/adapters/kafka-bus.ts TOPIC_PARTITIONS). */
  topicPartitions: number;
}

/** The part of a run's results the model reads. */
export interface CapacityRun {
  summary: RunSummary;
  history?: {
    summary: RunSummary;
    template: { sizeBytes: number; rows: Record<string, number>; tables?: Record<string, { bytes: number; rows: number }> };
  };
  details: Array<{
    phase: string;
    database?: string;
    what: string;
    window?: { cpuMs: Record<string, number> };
    load?: { requests: number };
  }>;
}

/** CPU ms per process kind for one unit of work. */
export type CpuByKind = Record<ProcessKind, number>;

/** What the model takes from the run. */
export interface CapacityInputs {
  /** One CastHeart (fraud scoring, outbox row; relay publishing; delivery not running). */
  castHeart: CpuByKind;
  /** One callback sent from a backlog, with its attempt record. */
  callback: CpuByKind;
  /** One signed `registered` event through the gateway at c=32. */
  ingestEvent: CpuByKind;
  /** Bytes per heart of each table of the history (its whole mix: clicks, referrals, claims... per heart). */
  bytesPerHeart: Record<string, number>;
  /** True when the run recorded per-table sizes; false: one figure, the database size over its hearts. */
  perTable: boolean;
}

/** The CastHeart window of the hearts phase without delivery: `fresh voters over <n> servers`. */
const CAST_HEART_WINDOW = /^fresh voters over \d+ servers$/;
/** The row name the history gives its hearts (bench/lib/history.ts). */
const HEARTS_ROWS = "hearts";

const zeroCpu = (): CpuByKind => Object.fromEntries(PROCESS_KINDS.map((k) => [k, 0])) as CpuByKind;

/** A figure set's `<prefix>.<process>` medians as CPU per kind (missing kinds: 0). */
function cpuFromSummary(figures: Record<string, { median: number }>, prefix: string): CpuByKind {
  const cpu = zeroCpu();
  for (const kind of PROCESS_KINDS) {
    const v = figures[`${prefix}.${kind}`]?.median;
    if (v !== undefined && Number.isFinite(v)) cpu[kind] = v;
  }
  return cpu;
}

/**
 * Reads the model's inputs from a --history run (its history side: the targets hold there, and
 * bytes per row come from the history database); throws when the run lacks what the model needs.
 */
export function readCapacityInputs(run: CapacityRun): CapacityInputs {
  const history = run.history;
  if (!history) throw new Error("the run has no history (run it with --history): the model reads the history database's figures and sizes");
  const figures = history.summary["1"] ?? {};
  const windows = run.details.filter((d) => d.phase === "hearts" && d.database === "history" && CAST_HEART_WINDOW.test(d.what) && d.window && d.load);
  if (windows.length === 0) throw new Error("the run has no hearts phase on the history database (CastHeart's CPU per process)");
  const castHeart = zeroCpu();
  const requests = windows.reduce((n, d) => n + (d.load?.requests ?? 0), 0);
  for (const kind of PROCESS_KINDS) {
    const ms = windows.reduce((n, d) => n + (d.window?.cpuMs[kind] ?? 0), 0);
    castHeart[kind] = ms / Math.max(1, requests);
  }
  if (!("callbacks.cpuMsPerCallback.delivery" in figures)) throw new Error("the run has no callbacks phase (CPU per callback)");
  if (!("ingest.gateway.cpuMsPerEvent.gateway" in figures)) throw new Error("the run has no ingest phase (CPU per event)");
  const template = history.template;
  const hearts = template.rows[HEARTS_ROWS] ?? Number.NaN;
  const tables = template.tables && Object.keys(template.tables).length > 0 ? template.tables : undefined;
  const bytesPerHeart = tables
    ? Object.fromEntries(Object.entries(tables).map(([name, t]) => [name, t.bytes / hearts]))
    : { "(every table: the database size)": template.sizeBytes / hearts };
  return {
    castHeart,
    callback: cpuFromSummary(figures, "callbacks.cpuMsPerCallback"),
    ingestEvent: cpuFromSummary(figures, "ingest.gateway.cpuMsPerEvent"),
    bytesPerHeart,
    perTable: tables !== undefined,
  };
}

/** CPU ms per vote per kind: one CastHeart, one callback, and the stated share of an ingest event. */
export function cpuPerVote(inputs: CapacityInputs, a: CapacityAssumptions): CpuByKind {
  const cpu = zeroCpu();
  for (const kind of PROCESS_KINDS) cpu[kind] = inputs.castHeart[kind] + inputs.callback[kind] + a.ingestEventsPerVote * inputs.ingestEvent[kind];
  return cpu;
}

/** One volume's sizing. */
export interface VolumeSizing {
  votesPerMonth: number;
  averageVotesPerSecond: number;
  peakVotesPerSecond: number;
  /** Cores per kind at the peak and the target utilisation. */
  cores: CpuByKind;
  /** Node processes per kind (one core each at most; at least one); PostgreSQL and Kafka: undefined. */
  processes: Partial<Record<ProcessKind, number>>;
  totalCores: number;
  /** Partitions per topic: today's, or the delivery consumers the peak needs if more. */
  partitions: number;
  /** Relay instances that can publish at once (one per shard) against those the peak needs. */
  relayInstancesNeeded: number;
}

/** The month's average votes per second and its peak. */
export function votesPerSecond(votesPerMonth: number, a: CapacityAssumptions): { average: number; peak: number } {
  const average = votesPerMonth / a.daysPerMonth / 86_400;
  return { average, peak: average * a.peakOverAverage };
}

/** Cores, processes and partitions for one volume. */
export function sizeVolume(votesPerMonth: number, perVote: CpuByKind, a: CapacityAssumptions): VolumeSizing {
  const { average, peak } = votesPerSecond(votesPerMonth, a);
  const cores = zeroCpu();
  const processes: Partial<Record<ProcessKind, number>> = {};
  for (const kind of PROCESS_KINDS) {
    cores[kind] = ((perVote[kind] / 1000) * peak) / a.targetUtilisation;
    if (NODE_KINDS.has(kind)) processes[kind] = Math.max(1, Math.ceil(cores[kind]));
  }
  const deliveries = processes.delivery ?? 1;
  return {
    votesPerMonth,
    averageVotesPerSecond: average,
    peakVotesPerSecond: peak,
    cores,
    processes,
    totalCores: PROCESS_KINDS.reduce((n, k) => n + cores[k], 0),
    partitions: Math.max(a.topicPartitions, deliveries),
    relayInstancesNeeded: processes.relay ?? 1,
  };
}

/** PostgreSQL storage after some years, with every table growing and with retention bounding some. */
export interface StorageSizing {
  votesPerMonth: number;
  years: number;
  withoutRetentionBytes: number;
  withRetentionBytes: number;
}

/** Bytes after `years` at `votesPerMonth`: each table's bytes per heart times the hearts; retained tables hold `retentionDays` of them. */
export function sizeStorage(votesPerMonth: number, years: number, bytesPerHeart: Record<string, number>, a: CapacityAssumptions): StorageSizing {
  const hearts = votesPerMonth * 12 * years;
  const retainedHearts = Math.min(hearts, (votesPerMonth / a.daysPerMonth) * a.retentionDays);
  const retained = new Set(a.retainedTables);
  let without = 0;
  let withRetention = 0;
  for (const [table, bytes] of Object.entries(bytesPerHeart)) {
    without += bytes * hearts;
    withRetention += bytes * (retained.has(table) ? retainedHearts : hearts);
  }
  return { votesPerMonth, years, withoutRetentionBytes: without, withRetentionBytes: withRetention };
}
