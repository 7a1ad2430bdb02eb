/**
 * Real OS processes for the end-to-end tests: spawn a service's main.ts exactly as
 * production would run it (`node --import tsx <file>`; not npx, which does not
 * forward SIGTERM to its child), capture its output, wait for readiness, stop it
 * with SIGTERM (and read its exit code) or kill it with SIGKILL. A process group
 * ties the processes to a test: output is printed when the test fails and nothing
 * outlives the test file.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { ExecutionContext } from "ava";

/** The repository root (cwd of every spawned process, so relative paths match `npm run`). */
export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** Output kept per process; older output is dropped beyond this (the tail matters on failure). */
const MAX_OUTPUT_CHARS = 4_000_000;
/** How long `stop()` waits for a drained exit before it gives up with SIGKILL. */
const DEFAULT_STOP_TIMEOUT_MS = 30_000;

/** How a process ended. */
export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** What to start. */
export interface SpawnOptions {
  /** A label for the output dump ("relay", "delivery#2", ...). */
  name: string;
  /** The entry file, relative to the repository root (e.g. "services/relay/main.ts"). */
  file: string;
  /**
   * The command line instead of `node --import tsx <file>`, for a process started exactly as a
   * deployment does (e.g. the container image's `tini -- node dist/...`); `file` then only labels it.
   */
  argv?: string[];
  /**
   * The process's environment on top of a minimal base (PATH, HOME, TMPDIR, LANG),
   * NOT on top of this process's env, so a test states every setting it relies on.
   * A value of undefined leaves the variable out.
   */
  env?: Record<string, string | undefined>;
  /** Default: the repository root. */
  cwd?: string;
  /** Default readiness URL for `waitReady()` (e.g. `http://127.0.0.1:<ops>/readyz`). */
  readyUrl?: string;
}

/** A running (or ended) process. */
export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  /** stdout so far. */
  readonly stdout: string;
  /** stderr so far. */
  readonly stderr: string;
  /** stdout and stderr interleaved in arrival order. */
  readonly output: string;
  /** Set once the process has ended. */
  readonly exitInfo: ExitInfo | undefined;
  /** Resolves when the process has ended. */
  readonly exited: Promise<ExitInfo>;
  /** Polls `url` (default: the spawn's readyUrl) until it answers 200; fails early if the process exits. */
  waitReady(url?: string, timeoutMs?: number): Promise<void>;
  /** Resolves with the first match of `pattern` in stdout+stderr; fails early if the process exits. */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** SIGTERM, then waits for the exit; SIGKILL after `timeoutMs` (and the returned info says so). */
  stop(timeoutMs?: number): Promise<ExitInfo>;
  /** SIGKILL, then waits for the exit. */
  kill(): Promise<ExitInfo>;
  /** Sends `signal` to the process unless it has ended (SIGSTOP pauses it where it stands, SIGCONT resumes it). */
  signal(signal: NodeJS.Signals): void;
}

const live = new Set<ChildProcess>();
/** How to SIGKILL a process together with its children (processes started from an `argv`). */
const killTrees = new Map<ChildProcess, () => void>();

/** The pids of every process in session `sid` (Linux /proc): a detached child's whole tree, orphans included. */
function sessionMembers(sid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // After the parenthesised command name: state, ppid, pgrp, session.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[3]) === sid) members.push(Number(entry));
    } catch {
      // Failure policy: the process ended while we read; it has nothing left to kill.
    }
  }
  return members;
}

/** SIGKILLs every process of a detached child's session (an init such as tini, its child, and any orphan of theirs). */
function killGroup(child: ChildProcess): void {
  child.kill("SIGKILL");
  for (const pid of child.pid === undefined ? [] : sessionMembers(child.pid)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Failure policy: already gone.
    }
  }
}

/** SIGKILLs a process, and its children when it was started from an `argv`. */
function killHard(child: ChildProcess): void {
  const tree = killTrees.get(child);
  if (tree) tree();
  else child.kill("SIGKILL");
}
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Last resort if a test forgot its teardown or the worker is exiting: no orphans.
  process.once("exit", () => {
    for (const child of live) killHard(child);
  });
}

function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ["PATH", "HOME", "TMPDIR", "LANG", "TZ"]) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/** Starts `node --import tsx <file>` with the given env; stdout/stderr are captured. */
export function spawnProcess(opts: SpawnOptions): ManagedProcess {
  installExitHook();
  const env = baseEnv();
  for (const [key, value] of Object.entries(opts.env ?? {})) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  const [command, ...args] = opts.argv ?? [process.execPath, "--import", "tsx", opts.file];
  // A given command line may start children of its own (an init such as tini starts node, npm starts
  // a shell): it runs in a session of its own, so a signal it sends to its group never reaches the
  // test worker, and a kill reaches its whole tree, so nothing is orphaned.
  const ownSession = opts.argv !== undefined;
  const child = spawn(command!, args, {
    cwd: opts.cwd ?? REPO_ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: ownSession,
  });
  if (ownSession) killTrees.set(child, () => killGroup(child));
  live.add(child);
  let stdout = "";
  let stderr = "";
  let output = "";
  const listeners = new Set<() => void>();
  const notify = () => {
    for (const listener of listeners) listener();
  };
  const keepTail = (text: string) => (text.length > MAX_OUTPUT_CHARS ? text.slice(-MAX_OUTPUT_CHARS) : text);
  child.stdout!.setEncoding("utf8");
  child.stderr!.setEncoding("utf8");
  child.stdout!.on("data", (chunk: string) => {
    stdout = keepTail(stdout + chunk);
    output = keepTail(output + chunk);
    notify();
  });
  child.stderr!.on("data", (chunk: string) => {
    stderr = keepTail(stderr + chunk);
    output = keepTail(output + chunk);
    notify();
  });
  let exitInfo: ExitInfo | undefined;
  const exited = new Promise<ExitInfo>((resolve) => {
    // 'close' (not 'exit') so every byte of stdout/stderr has been read when it resolves.
    child.once("close", (code, signal) => {
      live.delete(child);
      exitInfo = { code, signal };
      notify();
      resolve(exitInfo);
    });
    child.once("error", (error) => {
      live.delete(child);
      output += `\n[spawn error] ${error.message}\n`;
      exitInfo = { code: null, signal: null };
      notify();
      resolve(exitInfo);
    });
  });

  const describe = () => `${opts.name} (pid ${child.pid})`;
  const exitedError = () =>
    new Error(`${describe()} exited (code ${exitInfo?.code}, signal ${exitInfo?.signal}) before it was ready; output:\n${tail(output)}`);

  const managed: ManagedProcess = {
    name: opts.name,
    pid: child.pid ?? -1,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    get output() {
      return output;
    },
    get exitInfo() {
      return exitInfo;
    },
    exited,
    async waitReady(url = opts.readyUrl, timeoutMs = 30_000) {
      if (!url) throw new Error(`${describe()}: waitReady needs a URL`);
      const deadline = Date.now() + timeoutMs;
      let last = "no answer yet";
      for (;;) {
        if (exitInfo) throw exitedError();
        try {
          const response = await fetch(url, { signal: AbortSignal.timeout(3_000) });
          const text = await response.text();
          if (response.status === 200) return;
          last = `${response.status} ${text}`;
        } catch (error) {
          // Failure policy: not listening yet counts as "not ready"; the last error is reported on timeout.
          last = (error as Error).message;
        }
        if (Date.now() > deadline) throw new Error(`${describe()}: ${url} not 200 within ${timeoutMs} ms (last: ${last}); output:\n${tail(output)}`);
        await sleep(100);
      }
    },
    waitForOutput(pattern, timeoutMs = 30_000) {
      return new Promise<RegExpMatchArray>((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(output);
          if (match) {
            done();
            resolve(match);
          } else if (exitInfo) {
            done();
            reject(new Error(`${describe()} exited before printing ${pattern}; output:\n${tail(output)}`));
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`${describe()} did not print ${pattern} within ${timeoutMs} ms; output:\n${tail(output)}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
    async stop(timeoutMs = DEFAULT_STOP_TIMEOUT_MS) {
      if (exitInfo) return exitInfo;
      child.kill("SIGTERM");
      const timer = setTimeout(() => killHard(child), timeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
    async kill() {
      if (exitInfo) return exitInfo;
      killHard(child);
      return exited;
    },
    signal(signal) {
      if (!exitInfo) child.kill(signal);
    },
  };
  return managed;
}

/** Processes that belong to one test (or one test file's hooks). */
export interface ProcessGroup {
  /** Spawns and tracks a process. */
  spawn(opts: SpawnOptions): ManagedProcess;
  /** Every process spawned through this group, in order. */
  readonly processes: ManagedProcess[];
  /** Writes every process's output to stderr (used when a test failed). */
  dump(reason: string): void;
  /** SIGKILLs whatever still runs and waits for the exits. */
  killAll(): Promise<void>;
}

/** A group of processes; the caller ends it with `killAll()`. */
export function createProcessGroup(): ProcessGroup {
  const processes: ManagedProcess[] = [];
  return {
    processes,
    spawn(opts) {
      const managed = spawnProcess(opts);
      processes.push(managed);
      return managed;
    },
    dump(reason) {
      for (const p of processes) {
        const exit = p.exitInfo ? `exited code ${p.exitInfo.code} signal ${p.exitInfo.signal}` : "running";
        process.stderr.write(
          `\n----- ${reason}: output of ${p.name} (pid ${p.pid}, ${exit}) -----\n${tail(p.output, 200_000)}\n----- end of ${p.name} -----\n`,
        );
      }
    },
    async killAll() {
      await Promise.all(processes.map((p) => p.kill()));
    },
  };
}

/**
 * A process group bound to one test: its processes are killed in the test's
 * teardown, and their output is printed when the test failed.
 */
export function useProcesses<Context>(t: ExecutionContext<Context>): ProcessGroup {
  const group = createProcessGroup();
  t.teardown(async () => {
    if (!t.passed) group.dump(`test failed: ${t.title}`);
    await group.killAll();
  });
  return group;
}

export { freePort, freePorts, freeRestartablePort } from "../lib/free-ports.js";

/** Parses the pino JSON lines of a process's stdout (non-JSON lines are skipped). */
export function jsonLines(text: string): Array<Record<string, unknown>> {
  const lines: Array<Record<string, unknown>> = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // Failure policy: a partial or non-JSON line is not a log record; skip it.
    }
  }
  return lines;
}

function tail(text: string, chars = 20_000): string {
  return text.length > chars ? `...${text.slice(-chars)}` : text;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
