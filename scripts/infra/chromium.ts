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
 * first run; apt-get's output goes to .cache/apt-get.log). Not root and missing: a clear error saying what to run.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";
import { isExecutable } from "../lib/is-executable.js";
import { isMainModule } from "../lib/is-main-module.js";
import { ensureAptPackages, type AptRequirement } from "./apt.js";

/** Where Debian's `chromium` package puts the browser. */
export const CHROMIUM_PATH = "/usr/bin/chromium";

/** Debian's Chromium, for the dashboard's browser test. */
export const CHROMIUM_REQUIREMENT: AptRequirement = {
  name: "chromium (dashboard browser test)",
  packages: ["chromium"],
  isPresent: () => isExecutable(CHROMIUM_PATH),
};

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
 * and this process is root (scripts/infra/apt.ts: output to a log file, one line here). Throws
 * (with the command to run) when it is missing and this process is not root, or when the install fails.
 */
export async function ensureChromium(opts: EnsureChromiumOptions = {}): Promise<string> {
  const path = opts.path ?? CHROMIUM_PATH;
  const requirement = path === CHROMIUM_PATH ? CHROMIUM_REQUIREMENT : { ...CHROMIUM_REQUIREMENT, isPresent: () => isExecutable(path) };
  await ensureAptPackages([requirement], { log: opts.log, isRoot: opts.isRoot });
  return path;
}

if (isMainModule(import.meta.url)) {
  ensureChromium().then(
    (path) => process.stdout.write(`${path}\n`),
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
