/**
 * Throwaway PostgreSQL clusters for tests, CI and local development.
 *
 * `startPostgres()` runs `initdb` + `pg_ctl start` on a fresh temporary directory and a free
 * localhost port, with durability switched off (fsync, synchronous_commit, full_page_writes) because
 * the data is disposable; `durability: 'default'` keeps PostgreSQL's durable defaults (benchmarks). PostgreSQL refuses to run as root, so when this process is root the
 * binaries run as the unprivileged `postgres` OS user (via `runuser`, or `su` as a fallback) and the
 * temporary directory is chown'ed to that user.
 *
 * With `dataDir` the cluster keeps its data in that directory instead (created by `initdb` when it
 * holds no cluster yet, reused as it is when it does) and stop() leaves it in place, so a later start
 * with the same `dataDir` and `port` comes back with the same address and the same data.
 *
 * CLI: `npx tsx scripts/infra/postgres.ts start [--port <port>] [--data-dir <dir>]` prints
 * `DATABASE_URL=...` and keeps the cluster running in the foreground until SIGINT/SIGTERM.
 * `--port` fixes the port (default: the port `<dir>` last ran with, else a free one); `--data-dir`
 * keeps the data in `<dir>` across runs (default: a temporary directory deleted on exit). Starting
 * again with the same `--data-dir` is a restart in place: same `DATABASE_URL`, same databases.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { chmod, chown, mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { freePort } from "../lib/free-ports.js";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import pg from "pg";
import { isMainModule } from "../lib/is-main-module.js";
import { isExecutable } from "../lib/is-executable.js";
import { parseStartFlags } from "../lib/start-flags.js";

/** Options for {@link startPostgres}. */
export interface StartPostgresOptions {
  /** TCP port on 127.0.0.1; default: the port a given `dataDir` was last run with, else a free port picked by the OS. */
  port?: number;
  /**
   * The cluster's data directory, kept across runs: `initdb` runs only when it holds no cluster yet
   * (no `PG_VERSION`), and stop() leaves it in place. Default: a temporary directory stop() deletes.
   */
  dataDir?: string;
  /** Directory holding `initdb` and `pg_ctl` (only this one is searched); default: env `PG_BIN_DIR`, else `PATH`, `/usr/local/bin`, `/usr/lib/postgresql/<newest>/bin`. */
  binDir?: string;
  /** OS user that owns and runs the cluster when this process is root; default `postgres`. */
  osUser?: string;
  /** `max_connections` of the server; default 300. */
  maxConnections?: number;
  /** How long to wait for the server to accept connections; default 60 000 ms. */
  startTimeoutMs?: number;
  /**
   * `off` (default: the data is disposable): fsync, synchronous_commit and full_page_writes off.
   * `default`: PostgreSQL's own durable defaults (all three on), for benchmarks of a production setup.
   */
  durability?: "off" | "default";
  /** Extra `-c name=value` server settings, e.g. `{ log_statement: 'all' }`. */
  settings?: Record<string, string>;
  /** Progress lines (never contain secrets); default: silent. */
  log?: (line: string) => void;
}

/** A running throwaway cluster returned by {@link startPostgres}. */
export interface PostgresInstance {
  /** `postgresql://postgres@127.0.0.1:<port>/postgres` (trust auth, no password). */
  url: string;
  /** The TCP port the server listens on (127.0.0.1 only). */
  port: number;
  /** Temporary directory holding the unix socket, the server log and (without `dataDir`) the data directory. */
  baseDir: string;
  /** The data directory: `dataDir` when given, else inside {@link baseDir}. */
  dataDir: string;
  /** Stops the server (`pg_ctl stop -m fast`) and deletes {@link baseDir} (a given `dataDir` is kept). Idempotent. */
  stop(): Promise<void>;
  /**
   * Stops the server (`pg_ctl stop -m fast`: open connections are terminated) and keeps its data and
   * settings: clients get "connection refused" until startServer(). For outage tests and in-place restarts.
   */
  stopServer(): Promise<void>;
  /** Starts the server stopped by stopServer() again, on the same port and data; resolves once it accepts connections. */
  startServer(): Promise<void>;
  /**
   * Restarts the server on the same port and data (`pg_ctl restart -m fast`: open
   * connections are terminated) and resolves once it accepts connections again.
   */
  restart(): Promise<void>;
}

const DEFAULT_OS_USER = "postgres";
const DEFAULT_MAX_CONNECTIONS = 300;
const DEFAULT_START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_SECONDS = 30;
const READY_POLL_INTERVAL_MS = 100;
const MAX_PORT_ATTEMPTS = 3;
const SERVER_LOG_TAIL_CHARS = 2_000;
const LOOPBACK_HOST = "127.0.0.1";
const SUPERUSER = "postgres";
const KEEPALIVE_INTERVAL_MS = 60_000;
const WATCHDOG_POLL_INTERVAL_SECONDS = 1;

interface RunAs {
  /** Prefix for a command so that it runs as the cluster owner (empty when no switch is needed). */
  wrap(binary: string, args: string[]): { command: string; args: string[] };
  uid?: number;
  gid?: number;
}

interface LiveCluster {
  pgCtl: string;
  dataDir: string;
  baseDir: string;
  runAs: RunAs;
  /** Shell process that stops the cluster if this process dies without running its exit hooks (SIGKILL, crash). */
  watchdog?: ChildProcess;
}

/** Clusters to kill when the parent process exits without calling stop(). */
const liveClusters = new Set<LiveCluster>();
let exitHooksInstalled = false;

/**
 * Starts a throwaway PostgreSQL cluster on a free 127.0.0.1 port and waits until it accepts
 * connections.
 *
 * The cluster lives in a fresh temporary directory (owned by `postgres` when running as root),
 * uses trust authentication for the `postgres` superuser, and is stopped and deleted by `stop()` or,
 * as a backstop, when the parent process exits.
 *
 * @throws Error with an actionable message when `initdb`/`pg_ctl` are missing or the server fails to start.
 */
export async function startPostgres(opts: StartPostgresOptions = {}): Promise<PostgresInstance> {
  const log = opts.log ?? (() => {});
  const initdb = findBinary("initdb", opts.binDir);
  const pgCtl = findBinary("pg_ctl", opts.binDir);
  const runAs = resolveRunAs(opts.osUser ?? DEFAULT_OS_USER);
  const startTimeoutMs = opts.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
  const timeoutSeconds = String(Math.max(1, Math.ceil(startTimeoutMs / 1000)));

  const startedAtMs = Date.now();
  const baseDir = await mkdtemp(join(tmpdir(), "pg-throwaway-"));
  if (runAs.uid !== undefined && runAs.gid !== undefined) await chown(baseDir, runAs.uid, runAs.gid);
  const dataDir = opts.dataDir === undefined ? join(baseDir, "data") : resolve(opts.dataDir);
  const logFile = join(baseDir, "server.log");
  const cluster: LiveCluster = { pgCtl, dataDir, baseDir, runAs };

  try {
    if (existsSync(join(dataDir, "PG_VERSION"))) {
      log(`reusing the cluster in ${dataDir}`);
    } else {
      if (opts.dataDir !== undefined) await prepareDataDir(dataDir, runAs);
      await runChecked(runAs, initdb, ["-D", dataDir, "-A", "trust", "-U", SUPERUSER, "--no-sync", "-E", "UTF8", "--locale=C"], baseDir);
      log(`initdb done in ${Date.now() - startedAtMs} ms (${dataDir})`);
    }

    let port = 0;
    let serverOptions = "";
    const fixedPort = opts.port ?? (opts.dataDir === undefined ? undefined : lastPortOf(dataDir));
    for (let attempt = 1; ; attempt++) {
      port = fixedPort ?? (await freePort());
      serverOptions = [
        `-p ${port}`,
        `-k ${shellQuote(baseDir)}`,
        `-c listen_addresses=${LOOPBACK_HOST}`,
        ...(opts.durability === "default" ? [] : ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]),
        `-c max_connections=${opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS}`,
        ...Object.entries(opts.settings ?? {}).map(([name, value]) => `-c ${shellQuote(`${name}=${value}`)}`),
      ].join(" ");
      const result = await run(runAs, pgCtl, ["start", "-D", dataDir, "-l", logFile, "-w", "-t", timeoutSeconds, "-s", "-o", serverOptions], baseDir);
      if (result.code === 0) break;
      const serverLog = await readTail(logFile);
      const portTaken = /could not bind|address already in use/i.test(serverLog);
      // Failure policy: a free port found by probing can be grabbed by someone else before the server binds it; retry a few times with a new port, fail on anything else.
      if (portTaken && fixedPort === undefined && attempt < MAX_PORT_ATTEMPTS) {
        log(`port ${port} was taken before the server could bind it, retrying`);
        continue;
      }
      throw new Error(`pg_ctl start failed (exit ${result.code}): ${result.output.trim()}\n--- server log (tail) ---\n${serverLog}`);
    }
    liveClusters.add(cluster);
    installExitHooks();
    cluster.watchdog = spawnWatchdog(cluster);

    const url = `postgresql://${SUPERUSER}@${LOOPBACK_HOST}:${port}/postgres`;
    await waitUntilAcceptingConnections(url, startedAtMs + startTimeoutMs);
    log(`postgres ready on ${LOOPBACK_HOST}:${port} in ${Date.now() - startedAtMs} ms`);

    let stopped: Promise<void> | undefined;
    return {
      url,
      port,
      baseDir,
      dataDir,
      stop: () => (stopped ??= stopCluster(cluster, log)),
      async restart() {
        const restartedAtMs = Date.now();
        // pg_ctl restart reuses the command-line options of the running server (postmaster.opts).
        await runChecked(runAs, pgCtl, ["restart", "-D", dataDir, "-l", logFile, "-m", "fast", "-w", "-t", timeoutSeconds, "-s"], baseDir);
        await waitUntilAcceptingConnections(url, Date.now() + startTimeoutMs);
        log(`postgres restarted in ${Date.now() - restartedAtMs} ms`);
      },
      async stopServer() {
        await runChecked(runAs, pgCtl, ["stop", "-D", dataDir, "-m", "fast", "-w", "-t", String(STOP_TIMEOUT_SECONDS), "-s"], baseDir);
        log(`postgres on ${LOOPBACK_HOST}:${port} stopped (data kept in ${dataDir})`);
      },
      async startServer() {
        const begunAtMs = Date.now();
        await runChecked(runAs, pgCtl, ["start", "-D", dataDir, "-l", logFile, "-w", "-t", timeoutSeconds, "-s", "-o", serverOptions], baseDir);
        await waitUntilAcceptingConnections(url, Date.now() + startTimeoutMs);
        log(`postgres started again on ${LOOPBACK_HOST}:${port} in ${Date.now() - begunAtMs} ms`);
      },
    };
  } catch (error) {
    // Failure policy: never leak a half-started cluster or its temp dir; clean up, then surface the original error.
    stopClusterSync(cluster);
    throw error;
  }
}

/** The port a kept data directory's server last ran with (`-p` in the `postmaster.opts` PostgreSQL writes at start), if any. */
function lastPortOf(dataDir: string): number | undefined {
  try {
    const port = Number(/"-p" "(\d+)"/.exec(readFileSync(join(dataDir, "postmaster.opts"), "utf8"))?.[1]);
    return Number.isInteger(port) && port > 0 ? port : undefined;
  } catch {
    // Failure policy: no postmaster.opts (never started) means no remembered port; a free one is picked.
    return undefined;
  }
}

/** Creates a given data directory (mode 0700, owned by the cluster's OS user when we are root) for initdb. */
async function prepareDataDir(dataDir: string, runAs: RunAs): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await chmod(dataDir, 0o700);
  if (runAs.uid !== undefined && runAs.gid !== undefined) await chown(dataDir, runAs.uid, runAs.gid);
}

/** Locates a PostgreSQL server binary or throws an actionable error. */
function findBinary(name: string, binDir: string | undefined): string {
  const explicitDir = binDir ?? (process.env.PG_BIN_DIR || undefined);
  const dirs = explicitDir
    ? [explicitDir]
    : [...(process.env.PATH ?? "").split(delimiter), "/usr/local/bin", ...listVersionedPostgresBinDirs()].filter(Boolean);
  for (const dir of dirs) {
    const candidate = join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  throw new Error(
    `PostgreSQL server binary "${name}" not found (looked in: ${[...new Set(dirs)].join(", ")}). ` +
      "Install the PostgreSQL server package (e.g. apt-get install postgresql) or set PG_BIN_DIR to the directory containing initdb and pg_ctl.",
  );
}

/** `/usr/lib/postgresql/<version>/bin` directories, newest version first. */
function listVersionedPostgresBinDirs(): string[] {
  const root = "/usr/lib/postgresql";
  try {
    return readdirSync(root)
      .filter((version) => /^\d+$/.test(version))
      .sort((a, b) => Number(b) - Number(a))
      .map((version) => join(root, version, "bin"));
  } catch {
    // Failure policy: the Debian layout is optional; no such directory simply means no candidates.
    return [];
  }
}

/** Decides how to run the binaries: directly, or as `osUser` when we are root (postgres refuses root). */
function resolveRunAs(osUser: string): RunAs {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) {
    return { wrap: (binary, args) => ({ command: binary, args }) };
  }
  const account = lookupOsUser(osUser);
  const runuser = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"].find(isExecutable);
  if (runuser) {
    return { uid: account.uid, gid: account.gid, wrap: (binary, args) => ({ command: runuser, args: ["-u", osUser, "--", binary, ...args] }) };
  }
  const su = ["/usr/bin/su", "/bin/su"].find(isExecutable);
  if (su) {
    return {
      uid: account.uid,
      gid: account.gid,
      wrap: (binary, args) => ({ command: su, args: [osUser, "-s", "/bin/sh", "-c", [binary, ...args].map(shellQuote).join(" ")] }),
    };
  }
  throw new Error(`Running as root but neither runuser nor su is available to run PostgreSQL as "${osUser}".`);
}

function lookupOsUser(osUser: string): { uid: number; gid: number } {
  const passwd = readFileSync("/etc/passwd", "utf8");
  for (const line of passwd.split("\n")) {
    const [name, , uid, gid] = line.split(":");
    if (name === osUser && uid !== undefined && gid !== undefined) return { uid: Number(uid), gid: Number(gid) };
  }
  throw new Error(
    `Running as root, and PostgreSQL refuses to run as root, but OS user "${osUser}" does not exist. ` +
      `Create it (e.g. useradd --system ${osUser}) or run this as a non-root user.`,
  );
}

/** Quotes an argument for /bin/sh (pg_ctl passes `-o` through a shell). */
function shellQuote(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

interface RunResult {
  code: number;
  output: string;
}

/** Runs a binary (as the cluster owner when needed) and collects combined stdout/stderr. */
function run(runAs: RunAs, binary: string, args: string[], cwd: string): Promise<RunResult> {
  const { command, args: fullArgs } = runAs.wrap(binary, args);
  return new Promise((resolve, reject) => {
    const child = spawn(command, fullArgs, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, output }));
  });
}

async function runChecked(runAs: RunAs, binary: string, args: string[], cwd: string): Promise<void> {
  const result = await run(runAs, binary, args, cwd);
  if (result.code !== 0) throw new Error(`${binary} failed (exit ${result.code}): ${result.output.trim()}`);
}

async function readTail(file: string): Promise<string> {
  try {
    return (await readFile(file, "utf8")).slice(-SERVER_LOG_TAIL_CHARS);
  } catch {
    // Failure policy: the log is only diagnostic context for another error; its absence must not mask that error.
    return "(no server log)";
  }
}

/** pg_ctl -w already waited for "ready"; this also proves TCP on 127.0.0.1 works end to end. */
async function waitUntilAcceptingConnections(url: string, deadlineMs: number): Promise<void> {
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.query("SELECT 1");
      return;
    } catch (error) {
      // Failure policy: connection refusals are expected while the server starts; retry until the deadline, then report the last error.
      if (Date.now() > deadlineMs) throw new Error(`PostgreSQL did not accept connections in time: ${(error as Error).message}`);
      await new Promise((resolve) => setTimeout(resolve, READY_POLL_INTERVAL_MS));
    } finally {
      await client.end().catch(() => {
        // Failure policy: closing a probe connection that never opened can fail; nothing to clean up.
      });
    }
  }
}

async function stopCluster(cluster: LiveCluster, log: (line: string) => void): Promise<void> {
  const startedAtMs = Date.now();
  const result = await run(
    cluster.runAs,
    cluster.pgCtl,
    ["stop", "-D", cluster.dataDir, "-m", "fast", "-w", "-t", String(STOP_TIMEOUT_SECONDS), "-s"],
    cluster.baseDir,
  );
  if (result.code !== 0) {
    // Failure policy: a fast shutdown that fails (e.g. stuck backend) must still not leave a server behind; escalate to immediate.
    log(`pg_ctl stop -m fast failed (${result.output.trim()}), retrying with -m immediate`);
    await run(cluster.runAs, cluster.pgCtl, ["stop", "-D", cluster.dataDir, "-m", "immediate", "-w", "-s"], cluster.baseDir);
  }
  cluster.watchdog?.kill();
  liveClusters.delete(cluster);
  await rm(cluster.baseDir, { recursive: true, force: true });
  log(`postgres stopped and ${cluster.baseDir} removed in ${Date.now() - startedAtMs} ms`);
}

/**
 * Exit hooks do not run when this process is killed with SIGKILL or dies in native code; a detached
 * shell polls our pid and then stops the cluster and removes its directory. stop() kills it.
 */
function spawnWatchdog(cluster: LiveCluster): ChildProcess {
  const stop = cluster.runAs.wrap(cluster.pgCtl, ["stop", "-D", cluster.dataDir, "-m", "immediate", "-w", "-s"]);
  const script =
    `while kill -0 ${process.pid} 2>/dev/null; do sleep ${WATCHDOG_POLL_INTERVAL_SECONDS}; done; ` +
    `${[stop.command, ...stop.args].map(shellQuote).join(" ")} >/dev/null 2>&1; rm -rf ${shellQuote(cluster.baseDir)}`;
  const child = spawn("/bin/sh", ["-c", script], { cwd: cluster.baseDir, detached: true, stdio: "ignore" });
  child.on("error", () => {
    // Failure policy: the watchdog is a backstop for abnormal exits only; without /bin/sh the exit hooks still cover normal exits.
  });
  child.unref();
  return child;
}

/** Synchronous variant for process-exit hooks and failed starts (no event loop available on 'exit'). */
function stopClusterSync(cluster: LiveCluster): void {
  const { command, args } = cluster.runAs.wrap(cluster.pgCtl, ["stop", "-D", cluster.dataDir, "-m", "immediate", "-w", "-s"]);
  try {
    if (readdirSync(cluster.dataDir).includes("postmaster.pid")) spawnSync(command, args, { cwd: cluster.baseDir, stdio: "ignore" });
  } catch {
    // Failure policy: no data dir means initdb never finished, so there is no server to stop; removing the directory below is all that is left.
  }
  cluster.watchdog?.kill();
  liveClusters.delete(cluster);
  rmSync(cluster.baseDir, { recursive: true, force: true });
}

/** Stops leftover clusters when the parent exits (normally, by uncaught error, or by a fatal signal). */
function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on("exit", () => {
    for (const cluster of [...liveClusters]) stopClusterSync(cluster);
  });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const onSignal = (): void => {
      // Someone else handles this signal (e.g. the CLI below) and will call stop(); the 'exit' hook stays as the backstop.
      if (process.listeners(signal).some((listener) => listener !== onSignal)) return;
      for (const cluster of [...liveClusters]) stopClusterSync(cluster);
      process.removeListener(signal, onSignal);
      process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

const USAGE = "usage: npx tsx scripts/infra/postgres.ts start [--port <port>] [--data-dir <dir>]\n";

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const flags = command === "start" ? parseStartFlags(rest) : { problem: "" };
  if ("problem" in flags) {
    process.stderr.write(`${flags.problem ? `${flags.problem}\n` : ""}${USAGE}`);
    return 2;
  }
  const instance = await startPostgres({ ...flags, log: (line) => process.stderr.write(`[postgres] ${line}\n`) });
  process.stdout.write(`DATABASE_URL=${instance.url}\n`);
  await new Promise<void>((resolve) => {
    // A pending promise alone does not keep Node alive; this timer does, until a signal arrives.
    const keepAlive = setInterval(() => {}, KEEPALIVE_INTERVAL_MS);
    const onSignal = (signal: NodeJS.Signals): void => {
      process.stderr.write(`[postgres] ${signal} received, stopping\n`);
      clearInterval(keepAlive);
      resolve();
    };
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
  });
  await instance.stop();
  return 0;
}

if (isMainModule(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
