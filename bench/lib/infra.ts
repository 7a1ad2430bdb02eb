/**
 * Shared plumbing of the benchmarks: progress lines, a hard time limit, machine
 * facts, a throwaway PostgreSQL cluster with pg_stat_statements, CPU accounting
 * per process (this process, children, the PostgreSQL backends, a JVM), a
 * production-configured logger that writes to /dev/null, and the results writer.
 * Everything listens on and talks to 127.0.0.1 only.
 */
import { execSync } from "node:child_process";
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { pino, type Logger } from "pino";
import { applyMigrations } from "../../scripts/db/schema-engine.js";
import { startPostgres, type PostgresInstance } from "../../scripts/infra/postgres.js";
import { freePort } from "../../scripts/lib/free-ports.js";
import { createLogger } from "../../services/shared/runtime/log.js";

/** bench/ (of whichever copy of the repo runs). */
export const BENCH_DIR = dirname(dirname(fileURLToPath(import.meta.url)));
/** Where results are written. */
export const RESULTS_DIR = join(BENCH_DIR, "results");

/** Reads a positive integer setting from the environment. */
export function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got ${raw}`);
  return value;
}

/**
 * A command-line option `--<name>=<whole number>` of a benchmark script, or `fallback` when absent; anything but a
 * whole number of at least 1 ends the script with exit code 2 and a line saying so.
 */
export function wholeNumberArg(name: string, fallback: number): number {
  const raw = process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const value = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    process.stderr.write(`--${name} must be a whole number of at least 1 (got ${raw})\n`);
    process.exit(2);
  }
  return value;
}

/** A progress printer with elapsed seconds since the benchmark started. */
export function createProgress(name: string): (line: string) => void {
  const started = Date.now();
  return (line) => process.stdout.write(`[${name} +${((Date.now() - started) / 1000).toFixed(1)}s] ${line}\n`);
}

/** Cleanup steps run in reverse order at the end, on a signal or when the time limit hits. */
export interface Cleanup {
  add(step: () => Promise<void> | void): void;
  run(): Promise<void>;
}

/** Creates the cleanup list. */
export function createCleanup(progress: (line: string) => void): Cleanup {
  const steps: Array<() => Promise<void> | void> = [];
  let ran: Promise<void> | undefined;
  return {
    add: (step) => void steps.push(step),
    run: () =>
      (ran ??= (async () => {
        for (const step of steps.reverse()) {
          try {
            await step();
          } catch (error) {
            // Failure policy: keep tearing down the rest; a leftover temp dir is not worth hiding the results.
            progress(`cleanup step failed: ${(error as Error).message}`);
          }
        }
      })()),
  };
}

/**
 * Runs a benchmark's main, reports a failure, always cleans up, then exits: kafkajs,
 * Connect's HTTP/2 sessions and pools keep sockets and timers alive once the run is over.
 */
export async function runBench(main: () => Promise<void>, cleanup: Cleanup, progress: (line: string) => void): Promise<never> {
  try {
    await main();
  } catch (error) {
    process.exitCode = 1;
    progress(`failed: ${(error as Error).stack ?? String(error)}`);
  } finally {
    await cleanup.run();
  }
  process.exit(process.exitCode ?? 0);
}

/**
 * Kills the benchmark (after cleanup) when it runs past `limitSeconds`, and on
 * SIGINT/SIGTERM, so a stuck phase can never hold the machine.
 */
export function installTimeLimit(limitSeconds: number, cleanup: Cleanup, progress: (line: string) => void): void {
  const abort = (why: string) => {
    progress(`${why}; cleaning up and exiting`);
    const hard = setTimeout(() => process.exit(3), 20_000);
    hard.unref();
    void cleanup.run().finally(() => process.exit(2));
  };
  setTimeout(() => abort(`time limit of ${limitSeconds} s reached`), limitSeconds * 1000).unref();
  process.once("SIGINT", () => abort("SIGINT"));
  process.once("SIGTERM", () => abort("SIGTERM"));
}

/** Facts about the machine a run happened on. */
export interface MachineInfo {
  nproc: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  platform: string;
  kernel: string;
  /** 1, 5, 15 minute load averages. */
  loadAverage: number[];
  at: string;
}

/** Reads nproc, CPU model, memory, Node version and the load average now. */
export function machineInfo(): MachineInfo {
  return {
    nproc: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model ?? "unknown",
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${os.platform()} ${os.arch()}`,
    kernel: os.release(),
    loadAverage: os.loadavg().map((v) => Math.round(v * 100) / 100),
    at: new Date().toISOString(),
  };
}

/** The 1-minute load average now. */
export function loadNow(): number {
  return Math.round((os.loadavg()[0] ?? 0) * 100) / 100;
}

const CLOCK_TICKS_PER_SECOND = (() => {
  try {
    return Number(execSync("getconf CLK_TCK", { encoding: "utf8" }).trim()) || 100;
  } catch {
    // Failure policy: Linux uses 100 Hz nearly everywhere; CPU figures are then approximate, not wrong by orders.
    return 100;
  }
})();

/** user+system CPU milliseconds of one process from /proc (0 when it is gone). */
function procCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    // Failure policy: a process that exited between listing and reading contributes nothing.
    return 0;
  }
}

/** The parent pid of a process from /proc (-1 when unreadable). */
function parentPid(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    // Failure policy: an unreadable process is not one of ours.
    return -1;
  }
}

function listPids(): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number);
}

/** CPU ms per pid of a process and its direct children (PostgreSQL: the postmaster and its backends). */
export type CpuSnapshot = Map<number, number>;

/** Reads the CPU ms of `rootPid` and each of its direct children. */
export function snapshotProcessTree(rootPid: number): CpuSnapshot {
  const snapshot: CpuSnapshot = new Map([[rootPid, procCpuMs(rootPid)]]);
  for (const pid of listPids()) if (parentPid(pid) === rootPid) snapshot.set(pid, procCpuMs(pid));
  return snapshot;
}

/**
 * CPU ms used between two snapshots, per pid, so a backend that exits in between
 * does not make the sum go backwards (its CPU after the first snapshot is lost,
 * which undercounts slightly; PostgreSQL pools keep backends alive).
 */
export function cpuBetween(before: CpuSnapshot, after: CpuSnapshot): number {
  let total = 0;
  for (const [pid, ms] of after) total += Math.max(0, ms - (before.get(pid) ?? 0));
  return total;
}

/** The pid of the process whose command line contains `needle`, if any. */
export function findPidByCommandLine(needle: string): number | undefined {
  for (const pid of listPids()) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(needle) && pid !== process.pid) return pid;
    } catch {
      // Failure policy: processes come and go while we scan; skip unreadable ones.
    }
  }
  return undefined;
}

/** Busy and total CPU ms of the whole machine (all cores) since boot, from /proc/stat. */
export function machineCpuMs(): { busy: number; total: number } {
  try {
    const fields = (readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "").trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal guest guest_nice (guest time is already in user).
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
    const busy = user + nice + system + irq + softirq + steal;
    return { busy: (busy * 1000) / CLOCK_TICKS_PER_SECOND, total: ((busy + idle + iowait) * 1000) / CLOCK_TICKS_PER_SECOND };
  } catch {
    // Failure policy: without /proc/stat the contention figure is unknown, reported as NaN.
    return { busy: Number.NaN, total: Number.NaN };
  }
}

/** CPU milliseconds of this Node process (user + system). */
export function selfCpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

/** A throwaway PostgreSQL cluster with pg_stat_statements and a migrated template database. */
export interface BenchPostgres {
  instance: PostgresInstance;
  /** Admin URL (database `postgres`). */
  adminUrl: string;
  /** The cluster's data directory (kept across runs when BenchPostgresOptions.dataDir was given). */
  dataDir: string;
  /** The migrated empty database every createDatabase clones. */
  templateDatabase: string;
  /** pid of the postmaster; its children are the backends. */
  postmasterPid: number;
  serverVersion: string;
  /** Creates a database cloned from the migrated template; returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** Drops a database created above. */
  dropDatabase(name: string): Promise<void>;
  /** Resets pg_stat_statements (cluster-wide). */
  resetStatements(): Promise<void>;
  /** Statement statistics of one database since the last reset, most executed first. */
  readStatements(database: string): Promise<StatementStat[]>;
  /** CPU ms per process of the postmaster and every backend (diff two with cpuBetween). */
  cpuSnapshot(): CpuSnapshot;
  stop(): Promise<void>;
}

/** One normalised statement from pg_stat_statements. */
export interface StatementStat {
  query: string;
  calls: number;
  totalExecMs: number;
  rows: number;
  /** Shared buffers found in PostgreSQL's cache, and read into it (from the OS: its cache or the disk). */
  sharedBlksHit: number;
  sharedBlksRead: number;
}

const TEMPLATE_DB = "bench_template";

/** Options of startBenchPostgres. */
export interface BenchPostgresOptions {
  /** `off` (default, like the test cluster) or PostgreSQL's durable defaults (fsync, synchronous_commit, full_page_writes on). */
  durability?: "off" | "default";
  /** Migrates the template database (default: this checkout's migrations, in process). */
  migrate?: (url: string) => Promise<number>;
  /**
   * A data directory kept across runs (databases built once, such as the history template, stay);
   * default: a throwaway cluster. The migrated empty template is made anew in either case.
   */
  dataDir?: string;
}

/**
 * BENCH_PG_SETTINGS (`name=value,...`): PostgreSQL settings for the bench cluster (what-ifs such as shared_buffers=2GB;
 * the result records the settings it ran with). A pair without `=` is refused.
 */
export function pgSettingsFromEnv(raw: string | undefined): Record<string, string> {
  if (raw === undefined || raw.trim() === "") return {};
  return Object.fromEntries(
    raw.split(",").map((pair) => {
      const i = pair.indexOf("=");
      if (i <= 0) throw new Error(`BENCH_PG_SETTINGS: "${pair}" is not name=value`);
      return [pair.slice(0, i).trim(), pair.slice(i + 1).trim()];
    }),
  );
}

/** Starts PostgreSQL with pg_stat_statements (and BENCH_PG_SETTINGS), and migrates a template database. */
export async function startBenchPostgres(progress: (line: string) => void, opts: BenchPostgresOptions = {}): Promise<BenchPostgres> {
  const started = Date.now();
  const instance = await startPostgres({
    durability: opts.durability ?? "off",
    // A kept cluster gets a free port each run: the one it last ran on may be someone else's by now.
    ...(opts.dataDir === undefined ? {} : { dataDir: opts.dataDir, port: await freePort() }),
    settings: {
      shared_preload_libraries: "pg_stat_statements",
      "pg_stat_statements.track": "all",
      "pg_stat_statements.max": "2000",
      ...pgSettingsFromEnv(process.env.BENCH_PG_SETTINGS),
    },
  });
  const adminUrl = instance.url;
  const postmasterPid = Number(readFileSync(join(instance.dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
  const serverVersion = (await admin.query<{ server_version: string }>("SHOW server_version")).rows[0]?.server_version ?? "unknown";
  // A kept cluster still holds the last run's template, migrated by whichever target ran then.
  if (opts.dataDir !== undefined) await admin.query(`DROP DATABASE IF EXISTS "${TEMPLATE_DB}" WITH (FORCE)`);
  await admin.query(`CREATE DATABASE "${TEMPLATE_DB}"`);
  progress(`postgres ${serverVersion} up on 127.0.0.1:${instance.port} in ${Date.now() - started} ms; migrating the template database`);
  const migrateStarted = Date.now();
  const migrate = opts.migrate ?? (async (url: string) => (await applyMigrations(url)).applied.length);
  const applied = await migrate(withDatabase(adminUrl, TEMPLATE_DB));
  progress(`${Number.isFinite(applied) ? `${applied} migration(s)` : "migrations"} applied in ${Date.now() - migrateStarted} ms`);

  return {
    instance,
    adminUrl,
    dataDir: instance.dataDir,
    templateDatabase: TEMPLATE_DB,
    postmasterPid,
    serverVersion,
    async createDatabase(name) {
      await admin.query(`CREATE DATABASE "${name}" TEMPLATE "${TEMPLATE_DB}"`);
      return withDatabase(adminUrl, name);
    },
    async dropDatabase(name) {
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    },
    async resetStatements() {
      await admin.query("SELECT pg_stat_statements_reset()");
    },
    async readStatements(database) {
      const { rows } = await admin.query<{
        query: string;
        calls: string;
        total_exec_time: number;
        rows: string;
        shared_blks_hit: string;
        shared_blks_read: string;
      }>(
        `SELECT s.query, s.calls, s.total_exec_time, s.rows, s.shared_blks_hit, s.shared_blks_read
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
         WHERE d.datname = $1
         ORDER BY s.calls DESC, s.total_exec_time DESC`,
        [database],
      );
      return rows.map((r) => ({
        query: r.query.replace(/\s+/g, " ").trim(),
        calls: Number(r.calls),
        totalExecMs: r.total_exec_time,
        rows: Number(r.rows),
        sharedBlksHit: Number(r.shared_blks_hit),
        sharedBlksRead: Number(r.shared_blks_read),
      }));
    },
    cpuSnapshot: () => snapshotProcessTree(postmasterPid),
    async stop() {
      await admin.end();
      await instance.stop();
    },
  };
}

/** Returns `url` with its database name replaced. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/**
 * A logger with exactly the options of services/shared/runtime/log.ts#createLogger (level
 * from BENCH_LOG_LEVEL, default `info` as in production), written to /dev/null so
 * the serialisation cost is paid as in production but the terminal stays readable.
 */
export function createBenchLogger(service: string): Logger {
  return createLogger(service, process.env.BENCH_LOG_LEVEL ?? "info", pino.destination({ dest: "/dev/null", sync: true }));
}

/** Writes `bench/results/<name><suffix>.json` and `.md`; the suffix comes from BENCH_TAG (experiments). */
export function writeResults(name: string, json: unknown, markdown: string): { jsonPath: string; mdPath: string } {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const tag = process.env.BENCH_TAG ? `-${process.env.BENCH_TAG.replace(/[^\w.-]/g, "_")}` : "";
  const jsonPath = join(RESULTS_DIR, `${name}${tag}.json`);
  const mdPath = join(RESULTS_DIR, `${name}${tag}.md`);
  writeFileSync(jsonPath, `${JSON.stringify(json, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v), 2)}\n`);
  writeFileSync(mdPath, markdown.endsWith("\n") ? markdown : `${markdown}\n`);
  return { jsonPath, mdPath };
}

/** Markdown table from a header row and data rows. */
export function markdownTable(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map((_h, i) => (i === 0 ? "---" : "---:"))), ...rows.map(line)].join("\n");
}

/** Runs `fn` repeatedly for about `durationMs` and returns ops/s and µs per op. */
export function microbench(durationMs: number, fn: () => void): { ops: number; opsPerSecond: number; microsPerOp: number } {
  for (let i = 0; i < 2_000; i++) fn(); // warm the JIT
  let ops = 0;
  const started = performance.now();
  let elapsed = 0;
  while (elapsed < durationMs) {
    for (let i = 0; i < 500; i++) fn();
    ops += 500;
    elapsed = performance.now() - started;
  }
  return { ops, opsPerSecond: Math.round((ops / elapsed) * 1000), microsPerOp: Math.round(((elapsed * 1000) / ops) * 100) / 100 };
}
