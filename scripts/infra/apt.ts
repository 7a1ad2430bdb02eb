/**
 * Debian packages the tests need beside Node (Chromium for the dashboard test, PHP for the PHP
 * snippet and receiver, Mono for the C# receiver and the uMod plugin, Lua for the FiveM resource, tini for the image's entry command), installed with apt-get when missing. The test
 * runner (scripts/test.ts) lists them; Chromium's requirement lives in ./chromium.ts.
 *
 * apt-get's output (hundreds of lines) goes to a log file, `.cache/apt-get.log`; the caller gets
 * one line per step and, on failure, the log's last lines in the error. Installing needs root; not
 * root and missing: a clear error saying what to run.
 */
import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { isExecutable } from "../lib/is-executable.js";

/** Where apt-get's output goes. */
export const APT_LOG = join(fileURLToPath(new URL("../../", import.meta.url)), ".cache", "apt-get.log");

/** Something the tests need, and the Debian packages that provide it. */
export interface AptRequirement {
  /** What it is for, in the summary line ("php-cli and php-curl for the PHP snippet"). */
  name: string;
  packages: string[];
  /** True when it is already there. */
  isPresent: () => boolean;
}

/** PHP with the curl extension, for the integration guide's PHP snippet. */
export const PHP_REQUIREMENT: AptRequirement = {
  name: "php-cli and php-curl (PHP signing snippet)",
  packages: ["php-cli", "php-curl"],
  isPresent: () => phpHasCurl(),
};

/** Mono's C# compiler and runtime, for the C# (uMod-style) reward callback receiver (docs/receivers/csharp). */
export const CSHARP_REQUIREMENT: AptRequirement = {
  name: "mono-mcs and mono-runtime (C# receiver)",
  packages: ["mono-mcs", "mono-runtime"],
  isPresent: () => isExecutable("/usr/bin/mcs") && isExecutable("/usr/bin/mono"),
};

/** Lua 5.4, for the FiveM reward-queue resource (docs/plugins/fivem) run under a FiveM emulation in the tests. */
export const LUA_REQUIREMENT: AptRequirement = {
  name: "lua5.4 (FiveM reward-queue resource)",
  packages: ["lua5.4"],
  isPresent: () => isExecutable("/usr/bin/lua5.4"),
};

/** tini, the image's init process (PID 1 forwarding signals to node), for the entry-command test. */
export const TINI_REQUIREMENT: AptRequirement = {
  name: "tini (the container image's init)",
  packages: ["tini"],
  isPresent: () => isExecutable("/usr/bin/tini"),
};

function phpHasCurl(): boolean {
  const php = ["/usr/bin/php", "/usr/local/bin/php"].find((p) => isExecutable(p));
  if (!php) return false;
  // The curl extension is a package of its own; a php without it cannot run the snippet.
  return spawnSync(php, ["-r", 'exit(function_exists("curl_init") ? 0 : 1);'], { stdio: "ignore", timeout: 10_000 }).status === 0;
}

/**
 * Installs the packages of every requirement that is missing, with one `apt-get update` and one
 * `apt-get install`, logging to APT_LOG. Resolves when all are present; throws (with the command to
 * run, or the log's tail) otherwise.
 */
export async function ensureAptPackages(requirements: readonly AptRequirement[], opts: { log?: (line: string) => void; isRoot?: boolean } = {}): Promise<void> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`[apt] ${line}\n`));
  const missing = requirements.filter((r) => !r.isPresent());
  if (missing.length === 0) return;
  const packages = missing.flatMap((r) => r.packages);
  const names = missing.map((r) => r.name).join(", ");
  const isRoot = opts.isRoot ?? process.getuid?.() === 0;
  if (!isRoot) {
    throw new Error(
      `missing ${names}, and this process is not root, so it cannot install them; run as root: apt-get update && apt-get install -y --no-install-recommends ${packages.join(" ")}`,
    );
  }
  const started = Date.now();
  log(`installing ${packages.join(" ")} for ${names} (apt-get output: ${APT_LOG})`);
  mkdirSync(dirname(APT_LOG), { recursive: true });
  await runAptGet(["update"]);
  await runAptGet(["install", "-y", "--no-install-recommends", ...packages]);
  const stillMissing = missing.filter((r) => !r.isPresent());
  if (stillMissing.length > 0)
    throw new Error(`apt-get installed ${packages.join(" ")} but ${stillMissing.map((r) => r.name).join(", ")} is still missing; see ${APT_LOG}`);
  log(`installed ${packages.join(" ")} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

/** Runs apt-get non-interactively; its output is appended to APT_LOG, its tail is in the error on failure. */
function runAptGet(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    appendFileSync(APT_LOG, `\n$ apt-get ${args.join(" ")}   (${new Date().toISOString()})\n`);
    const child = spawn("apt-get", args, {
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const tail: string[] = [];
    const record = (chunk: Buffer) => {
      appendFileSync(APT_LOG, chunk);
      tail.push(
        ...chunk
          .toString("utf8")
          .split("\n")
          .filter((l) => l.trim() !== ""),
      );
      tail.splice(0, Math.max(0, tail.length - 20));
    };
    child.stdout.on("data", record);
    child.stderr.on("data", record);
    child.once("error", (error) => reject(new Error(`cannot run apt-get: ${error.message}`)));
    child.once("close", (code) => {
      if (code === 0) resolve();
      else reject(new Error(`apt-get ${args.join(" ")} exited with ${code} (full output: ${APT_LOG}):\n${tail.join("\n")}`));
    });
  });
}
