/**
 * The system under test in its production topology: gateway, referral service,
 * relay and delivery each as its own process, started from the target checkout
 * (BENCH_TARGET, default this checkout) the way the Dockerfile runs them
 * (`node dist/<process>/main.js` after `npm run build`, with BENCH_RUNTIME=dist)
 * or through tsx from the sources (BENCH_RUNTIME=tsx, the default: no build in
 * the target). Each process gets its settings from the environment only, is ready
 * when its ops port answers /readyz, logs at the production level to a file, and
 * is stopped with SIGTERM (its own drain), then SIGKILL after a grace period.
 * Harness-owned parts (load generators, baselines, receiver) never come from here.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { BENCH_DIR, snapshotProcessTree, type CpuSnapshot } from "./infra.js";

export { freePort } from "../../scripts/lib/free-ports.js";

/** The four production processes. */
export type ProcessKind = "gateway" | "referral-service" | "relay" | "delivery";

const ENTRY: Record<ProcessKind, string> = {
  gateway: "gateway/main",
  "referral-service": "services/referral-service/main",
  relay: "services/relay/main",
  delivery: "services/delivery/main",
};

/** Where the system under test comes from. */
export interface Target {
  dir: string;
  commit: string;
  /** Uncommitted changes in the target checkout (the figures are then not of `commit` alone). */
  dirty: boolean;
  runtime: "tsx" | "dist";
  /** Environment names the target's config files read (from their source text). */
  envNames: Set<string>;
}

/** Resolves BENCH_TARGET (default: the checkout holding this bench/) and checks it can run. */
export function resolveTarget(): Target {
  const dir = resolve(process.env.BENCH_TARGET ?? join(BENCH_DIR, ".."));
  if (!existsSync(join(dir, "node_modules", "tsx"))) {
    throw new Error(`BENCH_TARGET ${dir} has no node_modules (run npm ci there, or copy node_modules from this checkout)`);
  }
  const runtime = process.env.BENCH_RUNTIME === "dist" ? "dist" : "tsx";
  const git = (...args: string[]) => execFileSync("git", ["-C", dir, ...args], { encoding: "utf8" }).trim();
  let commit = "unknown";
  let dirty = false;
  try {
    commit = git("rev-parse", "HEAD");
    dirty = git("status", "--porcelain", "--untracked-files=no").length > 0;
  } catch {
    // Failure policy: a target that is not a git checkout still runs; its commit is reported as unknown.
  }
  if (runtime === "dist") {
    execFileSync("npm", ["run", "build"], { cwd: dir, stdio: ["ignore", "ignore", "inherit"] });
  }
  return { dir, commit, dirty, runtime, envNames: readEnvNames(dir) };
}

/** UPPER_CASE string literals in the target's config sources: the settings it reads. */
function readEnvNames(dir: string): Set<string> {
  const files = [
    "gateway/config.ts",
    "services/referral-service/config.ts",
    "services/relay/config.ts",
    "services/delivery/pipeline/config.ts",
    "services/shared/runtime/process-config.ts",
    "services/shared/runtime/log.ts",
    "services/access/bootstrap.ts",
    // The same files before services/shared and services/delivery were split into folders (an older target).
    "services/delivery/config.ts",
    "services/shared/process-config.ts",
    "services/shared/log.ts",
  ];
  const names = new Set<string>();
  for (const file of files) {
    try {
      for (const m of readFileSync(join(dir, file), "utf8").matchAll(/"([A-Z][A-Z0-9_]{2,})"/g)) names.add(m[1] as string);
    } catch {
      // Failure policy: a config file the target does not have adds no names; a missing setting shows at process start.
    }
  }
  return names;
}

/** Settings the harness passes that the target's config files never mention (a renamed setting is then ignored). */
export function unknownEnvNames(target: Target, env: Record<string, string>): string[] {
  const always = new Set(["HOST", "NODE_ENV"]);
  return Object.keys(env).filter((name) => !always.has(name) && !target.envNames.has(name));
}

/** One running process of the system under test. */
export interface SutProcess {
  kind: ProcessKind;
  name: string;
  pid: number;
  /** Public or RPC port (gateway, referral service); 0 for the others. */
  port: number;
  opsPort: number;
  /** ms from spawn until /readyz answered 200. */
  readyAfterMs: number;
  /** epoch ms when /readyz first answered 200. */
  readyAt: number;
  /** The process tree's CPU when /readyz first answered 200: what starting it cost (loading, connecting), before any work. */
  cpuAtReady: CpuSnapshot;
  cpu(): CpuSnapshot;
  stop(): Promise<void>;
}

/** Starts one process and waits until its /readyz answers 200. */
export async function startSutProcess(
  target: Target,
  kind: ProcessKind,
  name: string,
  env: Record<string, string>,
  opts: { logDir: string; port?: number; opsPort: number; readyTimeoutMs?: number },
): Promise<SutProcess> {
  const entry = target.runtime === "dist" ? join(target.dir, "dist", `${ENTRY[kind]}.js`) : join(target.dir, `${ENTRY[kind]}.ts`);
  // BENCH_CPU_PROF_DIR: every process of the system under test writes a V8 CPU profile there when it stops (for the
  // shares of where its CPU goes; the profiler's overhead makes that run's throughput no figure to quote).
  const profDir = process.env.BENCH_CPU_PROF_DIR;
  // One folder per process name; V8 names each thread's file (with tsx, its loader thread writes one too).
  const prof = profDir ? ["--cpu-prof", `--cpu-prof-dir=${join(profDir, name)}`] : [];
  const args = target.runtime === "dist" ? [...prof, entry] : [...prof, "--import", "tsx", entry];
  const logFile = join(opts.logDir, `${name}.log`);
  const fd = openSync(logFile, "a");
  const spawnedAt = Date.now();
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd: target.dir,
    env: { PATH: process.env.PATH ?? "", NODE_ENV: "production", LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "info", ...env },
    stdio: ["ignore", fd, fd],
  });
  closeSync(fd);
  let exited: number | string | null = null;
  const exitPromise = new Promise<void>((r) =>
    child.once("exit", (code, signal) => {
      exited = code ?? signal ?? "?";
      r();
    }),
  );
  const deadline = spawnedAt + (opts.readyTimeoutMs ?? 90_000);
  for (;;) {
    if (exited !== null) throw new Error(`${name} exited (${exited}) before it was ready; log tail:\n${tail(logFile)}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${name} not ready within ${opts.readyTimeoutMs ?? 90_000} ms; log tail:\n${tail(logFile)}`);
    }
    try {
      const res = await fetch(`http://127.0.0.1:${opts.opsPort}/readyz`, { signal: AbortSignal.timeout(1_000) });
      await res.arrayBuffer();
      if (res.status === 200) break;
    } catch {
      // Failure policy: the ops port is not up yet while the process starts; keep polling until the deadline.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const readyAt = Date.now();
  const pid = child.pid ?? -1;
  const cpuAtReady = snapshotProcessTree(pid);
  let stopped: Promise<void> | undefined;
  return {
    kind,
    name,
    pid,
    port: opts.port ?? 0,
    opsPort: opts.opsPort,
    readyAfterMs: readyAt - spawnedAt,
    readyAt,
    cpuAtReady,
    cpu: () => snapshotProcessTree(pid),
    stop: () =>
      (stopped ??= (async () => {
        if (exited !== null) return;
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
        await exitPromise;
        clearTimeout(timer);
      })()),
  };
}

function tail(file: string): string {
  try {
    return readFileSync(file, "utf8").split("\n").slice(-15).join("\n");
  } catch {
    // Failure policy: the log is diagnostic context only.
    return "(no log)";
  }
}
