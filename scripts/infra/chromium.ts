/**
 * Debian's Chromium for browser tests (playwright-core drives it; playwright's own browser
 * downloads cannot be fetched on these machines).
 *
 * Library use:
 *   const browser = await launchChromium();          // installs when missing; fresh profile
 *   const page = await browser.context.newPage();
 *   await browser.close();                          // also deletes the profile directory
 *
 * playwright-core's `chromium.launch()` refuses a `--user-data-dir` argument, so the fresh
 * profile is given to `launchPersistentContext(userDataDir, {executablePath, args})` instead.
 *
 * CLI use:
 *   npx tsx scripts/infra/chromium.ts   # installs when missing, prints the executable path
 *
 * When `/usr/bin/chromium` is missing and this process is root, it runs
 * `apt-get update && apt-get install -y --no-install-recommends chromium` (about a minute on the
 * first run; progress goes to stderr). Not root and missing: a clear error saying what to run.
 */
import { spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type BrowserContext } from "playwright-core";
import { isExecutable } from "../lib/is-executable.js";

/** Where Debian's `chromium` package puts the browser. */
export const CHROMIUM_PATH = "/usr/bin/chromium";

/**
 * Flags that work on these machines (root, no GPU, no internet): no sandbox (root cannot use
 * it), no GPU, no QUIC, and nothing that phones home.
 */
export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
] as const;

/** A running browser with a profile of its own. */
export interface LaunchedChromium {
  context: BrowserContext;
  /** The fresh profile directory (`--user-data-dir`), deleted by close(). */
  userDataDir: string;
  close(): Promise<void>;
}

/**
 * Launches Debian's Chromium (installed first when missing, see ensureChromium) through
 * playwright-core with CHROMIUM_FLAGS and a fresh temporary `--user-data-dir`.
 */
export async function launchChromium(opts: { viewport?: { width: number; height: number } } = {}): Promise<LaunchedChromium> {
  const executablePath = await ensureChromium();
  const userDataDir = await mkdtemp(join(tmpdir(), "chromium-profile-"));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath,
      args: [...CHROMIUM_FLAGS],
      viewport: opts.viewport ?? { width: 1280, height: 900 },
    });
  } catch (error) {
    // Failure policy: do not leave a profile directory behind when the browser did not start.
    await rm(userDataDir, { recursive: true, force: true });
    throw error;
  }
  return {
    context,
    userDataDir,
    async close() {
      await context.close();
      await rm(userDataDir, { recursive: true, force: true });
    },
  };
}

/** Options of {@link ensureChromium}; the defaults are the real machine's. */
export interface EnsureChromiumOptions {
  /** Executable to look for; default {@link CHROMIUM_PATH}. */
  path?: string;
  /** Whether this process may run apt-get; default: running as root. */
  isRoot?: boolean;
  /** Progress lines; default: stderr. */
  log?: (line: string) => void;
}

/**
 * Returns the path of Debian's Chromium, installing it with apt-get first when it is missing
 * and this process is root. Throws (with the command to run) when it is missing and this
 * process is not root, or when the install fails.
 */
export async function ensureChromium(opts: EnsureChromiumOptions = {}): Promise<string> {
  const path = opts.path ?? CHROMIUM_PATH;
  const log = opts.log ?? ((line: string) => process.stderr.write(`[chromium] ${line}\n`));
  if (isExecutable(path)) return path;
  const isRoot = opts.isRoot ?? process.getuid?.() === 0;
  if (!isRoot) {
    throw new Error(
      `${path} not found and this process is not root, so it cannot install it; ` +
        "run as root: apt-get update && apt-get install -y --no-install-recommends chromium",
    );
  }
  log(`${path} not found; installing Debian's chromium package (about a minute on the first run)`);
  await runApt(["update"], log);
  await runApt(["install", "-y", "--no-install-recommends", "chromium"], log);
  if (!isExecutable(path)) throw new Error(`apt-get installed chromium but ${path} is still missing`);
  log(`installed ${path}`);
  return path;
}


/** Runs apt-get non-interactively, forwarding its output line by line as progress. */
function runApt(args: string[], log: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("apt-get", args, {
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const tail: string[] = [];
    const forward = (chunk: Buffer) => {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line.trim() === "") continue;
        log(`apt-get ${args[0]}: ${line}`);
        tail.push(line);
        if (tail.length > 20) tail.shift();
      }
    };
    child.stdout.on("data", forward);
    child.stderr.on("data", forward);
    child.once("error", (error) => reject(new Error(`cannot run apt-get: ${error.message}`)));
    child.once("close", (code) => {
      if (code === 0) resolve();
      else reject(new Error(`apt-get ${args.join(" ")} exited with ${code}:\n${tail.join("\n")}`));
    });
  });
}

function isMain(): boolean {
  try {
    return process.argv[1] !== undefined && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    // Failure policy: when the entry cannot be resolved this module was imported, not run.
    return false;
  }
}

if (isMain()) {
  ensureChromium().then(
    (path) => process.stdout.write(`${path}\n`),
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
