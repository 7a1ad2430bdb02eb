/**
 * The broker's JVMs: spawning with test-tuned flags and the AppCDS archive, stopping (SIGTERM, then
 * SIGKILL), and making sure no JVM or temp dir outlives this process (exit handler plus watchdog).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, existsSync, openSync, realpathSync, renameSync, rmSync, statSync } from "node:fs";
import type net from "node:net";
import os from "node:os";
import path from "node:path";
import { javaMajorVersion } from "./jars.js";
import { withTimeout } from "./util.js";

/** Grace period after SIGTERM before the broker gets SIGKILL. */
export const KAFKA_STOP_GRACE_MS = 15_000;
/** Broker JVM heap. */
const KAFKA_HEAP_MAX_MB = 512;
const KAFKA_HEAP_INITIAL_MB = 256;
/** Oldest JDK whose `-XX:ArchiveClassesAtExit` (dynamic AppCDS) we rely on. */
const CDS_MIN_JAVA_MAJOR = 13;
/** Watchdog: how many 100 ms steps to wait for a SIGKILLed JVM to vanish before deleting its temp dir. */
const WATCHDOG_REAP_WAIT_STEPS = 50;

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error | undefined;
}

/** One running JVM plus the helpers tied to its lifetime. */
export interface JvmProcess {
  child: ChildProcess;
  exited: Promise<ExitInfo>;
  exitInfo?: ExitInfo | undefined;
  /** `sh` that SIGKILLs the JVM when this Node process dies without running exit handlers. */
  watchdog?: ChildProcess | undefined;
  /** AppCDS dump written when this JVM exits, promoted to the shared archive after a clean exit. */
  cdsDump?: { dumpPath: string; archivePath: string } | undefined;
  /** Set while stop()/restart() is deliberately ending this JVM. */
  stopping: boolean;
  /** Set once the broker answered the readiness probe; exits before that are startup failures. */
  ready: boolean;
}

export interface LiveBroker {
  jvm?: JvmProcess | undefined;
  workDir: string;
}

/** Brokers that the process 'exit' handler must kill. */
export const liveBrokers = new Set<LiveBroker>();
let exitHandlerInstalled = false;

export function ensureExitHandler(): void {
  if (exitHandlerInstalled) return;
  exitHandlerInstalled = true;
  process.on("exit", () => {
    for (const broker of liveBrokers) {
      broker.jvm?.child.kill("SIGKILL");
      broker.jvm?.watchdog?.kill("SIGKILL");
      if (broker.jvm?.cdsDump) rmSync(broker.jvm.cdsDump.dumpPath, { force: true });
      try {
        rmSync(broker.workDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 20 });
      } catch {
        // Failure policy: the process is exiting; a leftover temp dir is harmless and must not mask the exit.
      }
    }
  });
}

/**
 * Starts an `sh` that SIGKILLs `pid` once its stdin reaches EOF, i.e. when this Node process (or worker
 * thread) goes away in any way, including SIGKILL or worker.terminate() where no 'exit' handler runs; it then
 * removes `workDir`. Ignores INT/TERM/HUP so a Ctrl-C to the process group leaves it waiting for the EOF.
 */
export function spawnWatchdog(pid: number, workDir: string): ChildProcess | undefined {
  const script = [
    "trap '' INT TERM HUP",
    "read _ignored",
    `kill -9 ${pid} 2>/dev/null`,
    // Wait (bounded) until the JVM is dead (gone or a zombie) so it cannot write while we delete its files.
    `n=0; while [ $n -lt ${WATCHDOG_REAP_WAIT_STEPS} ] && [ -r /proc/${pid}/stat ] && ! grep -q ') Z' /proc/${pid}/stat 2>/dev/null; do sleep 0.1; n=$((n+1)); done`,
    'rm -rf -- "$1"',
  ].join("\n");
  try {
    const watchdog = spawn("/bin/sh", ["-c", script, "kafka-watchdog", workDir], {
      stdio: ["pipe", "ignore", "ignore"],
    });
    watchdog.once("error", () => {
      // Failure policy: the watchdog is a best-effort extra; the 'exit' handler still covers normal exits.
    });
    watchdog.unref();
    (watchdog.stdin as net.Socket | null)?.unref();
    return watchdog;
  } catch {
    // Failure policy: best effort, as above; /bin/sh missing must not prevent the broker from starting.
    return undefined;
  }
}

export interface JvmLayout {
  javaBin: string;
  libsDir: string;
  cacheDir: string;
  workDir: string;
  logFile: string;
  log4jFile: string;
}

/**
 * Which JIT compilers the broker's JVM uses: `c1` (C1 only, `-XX:TieredStopAtLevel=1`) starts faster, for the test
 * suite's brokers; `full` (the JVM's default tiered C1 + C2) is what a production broker runs, for the benchmarks.
 */
export type BrokerJit = "c1" | "full";

/** JVM flags tuned for a fast-starting, small broker; `jit` as in {@link BrokerJit} (default `c1`). */
export function baseJvmArgs(layout: JvmLayout, jit: BrokerJit = "c1"): string[] {
  return [
    `-Xmx${KAFKA_HEAP_MAX_MB}m`,
    `-Xms${KAFKA_HEAP_INITIAL_MB}m`,
    "-XX:+UseSerialGC",
    // C1 only: a faster startup (figures: bench/results/ANALYSIS.md); plenty for test traffic.
    ...(jit === "c1" ? ["-XX:TieredStopAtLevel=1"] : []),
    "-XX:-UsePerfData",
    `-XX:ErrorFile=${path.join(layout.workDir, "hs_err_pid%p.log")}`,
    "-Djava.awt.headless=true",
    `-Dlog4j.configuration=${pathToFileUrl(layout.log4jFile)}`,
    `-Dkafka.logs.dir=${path.dirname(layout.logFile)}`,
  ];
}

function pathToFileUrl(file: string): string {
  return new URL(`file://${path.resolve(file)}`).href;
}

/**
 * AppCDS flags: map the shared archive if there is one, else (for the broker only) dump one at exit.
 * The archive name is keyed on the JDK so a JDK change never maps an incompatible archive.
 */
export function cdsPlan(layout: JvmLayout, canDump: boolean): { args: string[]; archivePath?: string; dumpPath?: string } {
  if (process.env.KAFKA_CDS === "0") return { args: [] };
  const major = javaMajorVersion(layout.javaBin);
  if (major === undefined || major < CDS_MIN_JAVA_MAJOR) return { args: [] };
  let jdkKey: string;
  try {
    const real = realpathSync(layout.javaBin);
    jdkKey = createHash("sha256")
      .update(`${real}:${statSync(real).mtimeMs}:${os.arch()}`)
      .digest("hex")
      .slice(0, 12);
  } catch {
    // Failure policy: cannot identify the JDK -> no archive; startup is just slower.
    return { args: [] };
  }
  const archivePath = path.join(layout.cacheDir, `broker-cds-${jdkKey}.jsa`);
  if (existsSync(archivePath)) return { args: [`-XX:SharedArchiveFile=${archivePath}`], archivePath };
  if (!canDump) return { args: [] };
  const dumpPath = `${archivePath}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  // -Xlog:cds=off hides ~100 "Pre JDK 6 class not supported by CDS" lines (log4j 1.x classes) at dump time.
  return { args: [`-XX:ArchiveClassesAtExit=${dumpPath}`, "-Xlog:cds=off"], archivePath, dumpPath };
}

/** Publishes a finished AppCDS dump if the JVM exited by itself (a SIGKILLed dump may be truncated). */
function promoteCdsDump(jvm: JvmProcess): void {
  const dump = jvm.cdsDump;
  if (!dump) return;
  jvm.cdsDump = undefined;
  try {
    const cleanExit = jvm.exitInfo?.signal === null && jvm.exitInfo.code !== null;
    if (cleanExit && existsSync(dump.dumpPath) && statSync(dump.dumpPath).size > 0 && !existsSync(dump.archivePath)) {
      renameSync(dump.dumpPath, dump.archivePath);
    }
  } catch {
    // Failure policy: the archive is only a startup-time optimisation; without it the next start is slower.
  } finally {
    rmSync(dump.dumpPath, { force: true });
  }
}

/** A crash while mapping a bad archive must not wedge every later start: drop the archive. */
export function discardCdsArchive(archivePath: string | undefined): void {
  if (archivePath) rmSync(archivePath, { force: true });
}

export function spawnJvm(layout: JvmLayout, jvmArgs: string[], mainArgs: string[]): JvmProcess {
  const logFd = openSync(layout.logFile, "a");
  let child: ChildProcess;
  try {
    child = spawn(layout.javaBin, [...jvmArgs, "-cp", `${layout.libsDir}${path.sep}*`, ...mainArgs], {
      cwd: layout.workDir,
      stdio: ["ignore", logFd, logFd],
      env: process.env,
    });
  } finally {
    closeSync(logFd);
  }
  const jvm: JvmProcess = {
    child,
    stopping: false,
    ready: false,
    exited: new Promise<ExitInfo>((resolve) => {
      child.once("error", (error) => {
        jvm.exitInfo ??= { code: null, signal: null, error };
        resolve(jvm.exitInfo);
      });
      child.once("exit", (code, signal) => {
        jvm.exitInfo ??= { code, signal };
        resolve(jvm.exitInfo);
      });
    }),
  };
  return jvm;
}

/** Sends SIGTERM, waits up to `graceMs`, then SIGKILL; cleans up the watchdog and CDS dump. */
export async function stopJvm(jvm: JvmProcess, graceMs: number = KAFKA_STOP_GRACE_MS): Promise<void> {
  jvm.stopping = true;
  if (!jvm.exitInfo) {
    // The child is unref'd while it runs; while stopping, it must hold the event loop, or a JVM slower than the grace
    // period leaves `await jvm.exited` with nothing pending: Node exits 13 and stop() never resolves.
    jvm.child.ref();
    if (graceMs > 0) jvm.child.kill("SIGTERM");
    if (graceMs <= 0 || !(await withTimeout(jvm.exited, graceMs))) {
      jvm.child.kill("SIGKILL");
      await jvm.exited;
    }
  }
  jvm.watchdog?.kill("SIGKILL");
  promoteCdsDump(jvm);
}
