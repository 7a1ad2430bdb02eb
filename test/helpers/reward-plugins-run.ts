/**
 * Runs the reference reward-queue plugins of docs/plugins/ in their own runtimes, each inside a small host that
 * emulates the game's API it uses (test code under test/helpers/plugin-hosts/, never shipped): the uMod plugin under
 * Mono with an Oxide emulation, the FiveM resource under lua5.4 with a FiveM emulation, the PHP script under php-cli
 * as cron runs it (once per step), the Node poller under node with its timers replaced.
 *
 * Every host speaks one protocol, so one table of scenarios drives every plugin: time is virtual and moves only when
 * the test says so. A line on stdin (`join <name> <id>`, `leave <name>`, `advance <seconds>`) is answered `READY` once
 * everything it caused (timers, HTTP requests, callbacks) is done; the plugin's game commands are printed
 * `COMMAND <command>`, its HTTP requests `REQUEST <method> <path>` (never the key). With `exitBeforePath` the host
 * dies just before the plugin's first request to that path, as a server killed between running and acknowledging.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { onOutputLines } from "./output-lines.js";

const PLUGINS_DIR = fileURLToPath(new URL("../../docs/plugins/", import.meta.url));
const HOSTS_DIR = fileURLToPath(new URL("./plugin-hosts/", import.meta.url));

/** What a plugin is started with: the queue's URL and key, its own directory (kept across restarts), a fault. */
export interface PluginStart {
  /** `<gateway>/api/rewards/queue`. */
  queueUrl: string;
  claimKey: string;
  /** The plugin's files (config, executed ids); a restart with the same directory keeps them. */
  dir: string;
  /** The host dies (exit 137) just before the plugin's first request to this path. */
  exitBeforePath?: string;
}

/** A plugin running in its host. */
export interface RunningPlugin {
  /** Every line the host printed. */
  lines: string[];
  /** The game commands run, in order (`COMMAND ...` without the prefix). */
  commands(): string[];
  /** The HTTP requests made, as `<METHOD> <path>`. */
  requests(): string[];
  /** A player connects. */
  join(name: string, id: string): Promise<void>;
  /** A player disconnects. */
  leave(name: string): Promise<void>;
  /** The virtual clock moves on by `seconds`. */
  advance(seconds: number): Promise<void>;
  /** True once the host has exited (killed by `exitBeforePath`, or stopped). */
  exited(): boolean;
  stop(): Promise<void>;
}

/** A reference plugin: how to start it in its host. */
export interface RewardPlugin {
  name: string;
  start(opts: PluginStart): Promise<RunningPlugin>;
}

const buildDir = mkdtempSync(join(tmpdir(), "reward-plugins-build-"));
let oxideHost: string | undefined;

/** Builds the uMod plugin with the Oxide emulation into one Mono assembly, once. */
function builtOxideHost(): string {
  if (oxideHost) return oxideHost;
  const out = join(buildDir, "oxide-host.exe");
  execFileSync("mcs", [`-out:${out}`, `${HOSTS_DIR}OxideHost.cs`, `${PLUGINS_DIR}oxide/RewardQueue.cs`], { timeout: 180_000, stdio: "pipe" });
  oxideHost = out;
  return out;
}

/** A host process speaking the line protocol; resolves once it printed its first READY. */
async function startHostProcess(name: string, command: string, args: string[], opts: { cwd: string; env: Record<string, string> }): Promise<RunningPlugin> {
  const child: ChildProcess = spawn(command, args, {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...opts.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  const lines: string[] = [];
  let readyCount = 0;
  let exited = false;
  const waiters: Array<() => void> = [];
  const wake = () => {
    for (const w of waiters.splice(0)) w();
  };
  const exit = new Promise<void>((resolve) =>
    child.on("close", () => {
      exited = true;
      wake();
      resolve();
    }),
  );
  onOutputLines(child, (line) => {
    lines.push(line);
    if (line.startsWith("READY")) readyCount += 1;
    wake();
  });
  const untilReady = (count: number) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (readyCount >= count || exited) resolve();
        else waiters.push(check);
      };
      check();
      // Failure policy: a host that never answers fails the test with its output, instead of hanging it.
      setTimeout(() => reject(new Error(`${name} host gave no READY within 60 s:\n${lines.join("\n")}`)), 60_000).unref();
    });
  const send = async (line: string) => {
    if (exited) return;
    const target = readyCount + 1;
    child.stdin?.write(`${line}\n`);
    await untilReady(target);
  };
  await untilReady(1);
  return {
    lines,
    commands: () => lines.filter((l) => l.startsWith("COMMAND ")).map((l) => l.slice("COMMAND ".length)),
    requests: () => lines.filter((l) => l.startsWith("REQUEST ")).map((l) => l.slice("REQUEST ".length)),
    join: (player, id) => send(`join ${player} ${id}`),
    leave: (player) => send(`leave ${player}`),
    advance: (seconds) => send(`advance ${seconds}`),
    exited: () => exited,
    async stop() {
      if (!exited) child.stdin?.end();
      if (!exited) child.kill("SIGTERM");
      await exit;
    },
  };
}

/** The uMod (Oxide) plugin for Rust, under Mono, with its config in oxide/config/RewardQueue.json. */
const oxide: RewardPlugin = {
  name: "oxide",
  async start(opts) {
    const host = builtOxideHost();
    const configDir = join(opts.dir, "oxide", "config");
    mkdirSync(configDir, { recursive: true });
    writeFileSync(join(configDir, "RewardQueue.json"), JSON.stringify({ "Queue URL": opts.queueUrl, "Claim key": opts.claimKey }, null, 2));
    return startHostProcess("oxide", "mono", [host], {
      cwd: opts.dir,
      env: { OXIDE_DIR: join(opts.dir, "oxide"), ...(opts.exitBeforePath ? { HOST_EXIT_BEFORE_PATH: opts.exitBeforePath } : {}) },
    });
  },
};

/** The FiveM resource, under lua5.4, its convars in server.cfg as an owner sets them. */
const fivem: RewardPlugin = {
  name: "fivem",
  async start(opts) {
    const resourceDir = join(opts.dir, "resources", "reward-queue");
    mkdirSync(resourceDir, { recursive: true });
    for (const file of ["fxmanifest.lua", "server.lua"]) copyFileSync(join(PLUGINS_DIR, "fivem", "reward-queue", file), join(resourceDir, file));
    writeFileSync(join(opts.dir, "server.cfg"), `set reward_queue_url "${opts.queueUrl}"\nset reward_queue_key "${opts.claimKey}"\nensure reward-queue\n`);
    return startHostProcess("fivem", "lua5.4", [`${HOSTS_DIR}fivem-host.lua`, resourceDir, join(opts.dir, "server.cfg")], {
      cwd: opts.dir,
      env: opts.exitBeforePath ? { HOST_EXIT_BEFORE_PATH: opts.exitBeforePath } : {},
    });
  },
};

/** The Node poller, under node, with the game and its timers emulated. */
const node: RewardPlugin = {
  name: "node",
  async start(opts) {
    return startHostProcess("node", process.execPath, [`${HOSTS_DIR}node-host.mjs`, `${PLUGINS_DIR}node/reward-queue.mjs`], {
      cwd: opts.dir,
      env: {
        QUEUE_URL: opts.queueUrl,
        CLAIM_KEY: opts.claimKey,
        EXECUTED_FILE: join(opts.dir, "executed-ids.json"),
        ...(opts.exitBeforePath ? { HOST_EXIT_BEFORE_PATH: opts.exitBeforePath } : {}),
      },
    });
  },
};

/** A PHP single-quoted string literal of `value`. */
const phpString = (value: string) => `'${value.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;

/**
 * The PHP script for web game sites, run by "cron": once at start and once at the end of every `advance` (a cron run
 * at that moment, REWARDS_NOW the virtual time). Its config pays an entry by printing `COMMAND <command>` for each
 * command and names the players in online.txt (`join`, `leave`: a web game has no join hook, the next run sees them).
 * Its requests pass through a proxy here that logs them; with `exitBeforePath` the proxy kills the run (SIGKILL)
 * when its request to that path arrives, before forwarding it.
 */
const php: RewardPlugin = {
  name: "php",
  async start(opts) {
    const lines: string[] = [];
    const onlineFile = join(opts.dir, "online.txt");
    writeFileSync(onlineFile, "");
    const target = new URL(opts.queueUrl);
    let current: ChildProcess | undefined;
    let killed = false;
    const proxy = http.createServer((req, res) => {
      const path = (req.url ?? "").split("?")[0]!;
      if (opts.exitBeforePath === path && current) {
        lines.push(`KILLED before ${req.method} ${path}`);
        killed = true;
        current.kill("SIGKILL");
        req.socket.destroy();
        return;
      }
      lines.push(`REQUEST ${req.method} ${path}`);
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", async () => {
        try {
          const answer = await fetch(`${target.origin}${req.url}`, {
            method: req.method,
            headers: { "content-type": req.headers["content-type"] ?? "application/json" },
            ...(req.method === "GET" ? {} : { body: Buffer.concat(chunks) }),
          });
          res.writeHead(answer.status, { "content-type": "application/json" }).end(Buffer.from(await answer.arrayBuffer()));
        } catch (error) {
          // Failure policy: the gateway unreachable is what the script sees as a 502, as behind a real proxy.
          res.writeHead(502).end(String(error));
        }
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}${target.pathname}`;
    const configFile = join(opts.dir, "rewards-config.php");
    writeFileSync(
      configFile,
      [
        "<?php",
        "return [",
        `    'queue_url' => ${phpString(proxyUrl)},`,
        `    'claim_key' => ${phpString(opts.claimKey)},`,
        `    'state_dir' => ${phpString(opts.dir)},`,
        `    'online_players' => fn (): array => array_values(array_filter(array_map('trim', file(${phpString(onlineFile)}) ?: []))),`,
        `    'run_entry' => function (array $entry): void { foreach ($entry['commands'] as $command) echo "COMMAND $command\\n"; },`,
        "];",
        "",
      ].join("\n"),
    );
    /** The virtual clock, in unix seconds. */
    let now = 1_900_000_000;
    const runOnce = () =>
      new Promise<void>((resolve) => {
        const child = spawn("php", [`${PLUGINS_DIR}php/pay-rewards.php`, configFile], {
          cwd: opts.dir,
          env: { PATH: process.env.PATH, HOME: process.env.HOME, REWARDS_NOW: String(now) },
          stdio: ["ignore", "pipe", "pipe"],
        });
        current = child;
        onOutputLines(child, (line) => lines.push(line));
        child.on("close", () => {
          current = undefined;
          resolve();
        });
      });
    await runOnce();
    const names = () => readFileSync(onlineFile, "utf8").split("\n").filter(Boolean);
    return {
      lines,
      commands: () => lines.filter((l) => l.startsWith("COMMAND ")).map((l) => l.slice("COMMAND ".length)),
      requests: () => lines.filter((l) => l.startsWith("REQUEST ")).map((l) => l.slice("REQUEST ".length)),
      async join(name) {
        appendFileSync(onlineFile, `${name}\n`);
      },
      async leave(name) {
        writeFileSync(
          onlineFile,
          names()
            .filter((n) => n !== name)
            .map((n) => `${n}\n`)
            .join(""),
        );
      },
      async advance(seconds) {
        now += seconds;
        if (!killed) await runOnce();
      },
      exited: () => killed,
      stop: () => new Promise<void>((resolve) => proxy.close(() => resolve())),
    };
  },
};

/** Every reference plugin, by the name each test title carries. */
export const REWARD_PLUGINS: RewardPlugin[] = [oxide, fivem, php, node];

/** A fresh directory for one plugin's files. */
export function pluginDir(name: string): string {
  return mkdtempSync(join(tmpdir(), `reward-plugin-${name}-`));
}
