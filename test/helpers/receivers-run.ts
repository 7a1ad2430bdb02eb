/**
 * Runs the platform receivers of docs/receivers/<platform>/ as a server owner would: each in a
 * subprocess of its own runtime (node, python3, php -S, a `go build` binary, `java Receiver.java`,
 * an `mcs`-built assembly on `mono`),
 * configured only through the environment their READMEs document (SERVER_ID, PORT, CALLBACK_SECRET, PAID_FILE
 * or PAID_DB, VERIFY and WEBHOOK_KEYS_URL, and the test-only RECEIVER_NOW). Every line they print is kept, so a test can count
 * `PAID <heart_id> <username>` lines.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { eventually } from "./eventually.js";
import { onOutputLines } from "./output-lines.js";

const RECEIVERS_DIR = fileURLToPath(new URL("../../docs/receivers/", import.meta.url));

/** How a platform's receiver is started, given its port; `prepare` runs once before the first start. */
interface ReceiverPlatform {
  prepare?: () => void;
  command: (port: number) => { command: string; args: string[] };
}

const buildDir = mkdtempSync(join(tmpdir(), "receiver-build-"));
const goBinary = join(buildDir, "receiver");
const csharpAssembly = join(buildDir, "Receiver.exe");

/** The platforms, by the name each test title carries. */
export const RECEIVER_PLATFORMS: Record<string, ReceiverPlatform> = {
  node: { command: () => ({ command: process.execPath, args: [`${RECEIVERS_DIR}node/receiver.mjs`] }) },
  python: { command: () => ({ command: "python3", args: [`${RECEIVERS_DIR}python/receiver.py`] }) },
  php: { command: (port) => ({ command: "php", args: ["-S", `127.0.0.1:${port}`, `${RECEIVERS_DIR}php/receiver.php`] }) },
  go: {
    // Standard library only: builds without the network.
    prepare: () => execFileSync("go", ["build", "-o", goBinary, `${RECEIVERS_DIR}go/receiver.go`], { timeout: 180_000, stdio: "pipe" }),
    command: () => ({ command: goBinary, args: [] }),
  },
  java: { command: () => ({ command: "java", args: [`${RECEIVERS_DIR}java/Receiver.java`] }) },
  csharp: {
    // Mono's compiler and runtime come from Debian's packages (scripts/infra/apt.ts, CSHARP_REQUIREMENT).
    prepare: () => execFileSync("mcs", [`-out:${csharpAssembly}`, `${RECEIVERS_DIR}csharp/Receiver.cs`], { timeout: 180_000, stdio: "pipe" }),
    command: () => ({ command: "mono", args: [csharpAssembly] }),
  },
};

const prepared = new Set<string>();

/** Builds `platform`'s receiver once (Go, C#); throws for an unknown platform. */
function preparedPlatform(platform: string): ReceiverPlatform {
  const def = RECEIVER_PLATFORMS[platform];
  if (!def) throw new Error(`no receiver for ${platform}`);
  if (!prepared.has(platform)) {
    def.prepare?.();
    prepared.add(platform);
  }
  return def;
}

/** How long a receiver's output must stay quiet before `settledPaid` reads it. */
const SETTLE_MS = 400;

/** A free TCP port on 127.0.0.1 (the receivers take a fixed PORT; a restart reuses it). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A receiver process as started by `startPlatformReceiver`. */
export interface RunningReceiver {
  url: string;
  port: number;
  /** Every line printed so far (stdout and stderr). */
  lines: string[];
  /** The `PAID ...` lines printed so far. */
  paid(): string[];
  /**
   * The `PAID ...` lines once output has settled: the receivers print before they answer, but the
   * pipe's data can reach this process after the HTTP answer, so a "nothing more was paid" check waits
   * until no line has arrived for SETTLE_MS.
   */
  settledPaid(): Promise<string[]>;
  /** POSTs raw bytes with the given headers; returns the status and body text. */
  post(body: Buffer, headers: Record<string, string>): Promise<{ status: number; text: string }>;
  /** Stops the process (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>;
}

/**
 * Starts `platform`'s receiver for server `serverId` (SERVER_ID) with `secrets` (comma-joined into
 * CALLBACK_SECRET), its paid store in `storeDir` (a restart with the same dir keeps it), on `port`;
 * resolves once it answers HTTP.
 */
export async function startPlatformReceiver(
  platform: string,
  opts: {
    /** The server this receiver pays for (SERVER_ID): a callback whose `server_id` is another is refused. */
    serverId: string;
    secrets: string[];
    storeDir?: string;
    port?: number;
    nowSeconds?: number;
    /** More of the documented settings (VERIFY, WEBHOOK_KEYS_URL, ...). */
    env?: Record<string, string>;
  },
): Promise<RunningReceiver> {
  const def = preparedPlatform(platform);
  const port = opts.port ?? (await freePort());
  const storeDir = opts.storeDir ?? mkdtempSync(join(tmpdir(), `receiver-${platform}-`));
  const { command, args } = def.command(port);
  const child: ChildProcess = spawn(command, args, {
    cwd: storeDir,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      PORT: String(port),
      SERVER_ID: opts.serverId,
      CALLBACK_SECRET: opts.secrets.join(","),
      PAID_FILE: join(storeDir, "paid-hearts.txt"),
      PAID_DB: join(storeDir, "paid-hearts.sqlite3"),
      ...(opts.nowSeconds !== undefined ? { RECEIVER_NOW: String(opts.nowSeconds) } : {}),
      ...opts.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  let lastLineAt = Date.now();
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.on("exit", () => {
      exited = true;
      resolve();
    }),
  );
  onOutputLines(child, (line) => {
    lines.push(line);
    lastLineAt = Date.now();
  });
  const url = `http://127.0.0.1:${port}/callback`;
  const post: RunningReceiver["post"] = async (body, headers) => {
    try {
      const res = await fetch(url, { method: "POST", body, headers: { "content-type": "application/json", ...headers } });
      return { status: res.status, text: await res.text() };
    } catch (error) {
      // Failure policy: a failed exchange is rethrown with its cause and the receiver's output, to see why.
      const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : "";
      throw new Error(`${platform} receiver: POST failed (${String(error)} ${cause}); exited=${exited}\n${lines.join("\n")}`);
    }
  };
  const stop = async () => {
    if (!exited) child.kill("SIGTERM");
    await exit;
  };
  // Java compiles the source on start: give it time on a loaded machine.
  await eventually(
    async () => {
      if (exited) throw new Error(`${platform} receiver exited: ${lines.join("\n")}`);
      const res = await fetch(url, { method: "GET" });
      return res.status === 405;
    },
    { timeoutMs: 90_000, intervalMs: 200, message: `${platform} receiver answering on ${port}` },
  ).catch(async (error: unknown) => {
    // Failure policy: a receiver that never came up is stopped, and the error carries its output.
    await stop();
    throw new Error(`${String(error)}\n${lines.join("\n")}`);
  });
  const paid = () => lines.filter((l) => l.startsWith("PAID "));
  const settledPaid = async () => {
    const since = Date.now();
    await eventually(() => Date.now() - Math.max(lastLineAt, since) >= SETTLE_MS, { timeoutMs: 30_000, intervalMs: 50 });
    return paid();
  };
  return { url, port, lines, paid, settledPaid, post, stop };
}

/** Stops `receiver` when the test `t` ends, pass or fail; returns it. */
export function stopOnTeardown(t: { teardown: (fn: () => Promise<void>) => void }, receiver: RunningReceiver): RunningReceiver {
  t.teardown(() => receiver.stop());
  return receiver;
}

/**
 * What `platform`'s receiver says when started with only `env` (plus PATH, HOME and a free PORT) and a
 * setting is missing: the error it printed before exiting, or, for PHP (a script run per request under
 * `php -S`, which cannot stop the server), the status and text of its answer to a POST.
 */
export async function configurationErrorOf(platform: string, env: Record<string, string>): Promise<string> {
  const def = preparedPlatform(platform);
  const port = await freePort();
  const storeDir = mkdtempSync(join(tmpdir(), `receiver-config-${platform}-`));
  const { command, args } = def.command(port);
  const child = spawn(command, args, {
    cwd: storeDir,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: String(port), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  for (const stream of [child.stdout, child.stderr]) stream?.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
  let exited = false;
  // "close", not "exit": the output is complete once the pipes are.
  const exit = new Promise<void>((resolve) =>
    child.on("close", () => {
      exited = true;
      resolve();
    }),
  );
  try {
    return await eventually(
      async () => {
        if (exited) return `exited: ${output.trim()}`;
        const res = await fetch(`http://127.0.0.1:${port}/callback`, {
          method: platform === "php" ? "POST" : "GET",
          body: platform === "php" ? "{}" : undefined,
        });
        // A receiver other than PHP that answers at all started despite the missing setting.
        return `answered ${res.status}: ${await res.text()}`;
      },
      { timeoutMs: 90_000, intervalMs: 200, message: `${platform} receiver refusing its configuration` },
    );
  } finally {
    if (!exited) child.kill("SIGTERM");
    await exit;
  }
}

/**
 * Runs the C# plugin's /claim command once (`mono Receiver.exe claim <steamId>`), configured as its README
 * says (CLAIM_URL, CLAIM_KEY, CLAIM_DOUBT_FILE in `storeDir`); resolves with the lines it printed.
 */
export async function runCsharpClaim(steamId: string, opts: { claimUrl: string; claimKey: string; storeDir: string }): Promise<string[]> {
  const { command, args } = preparedPlatform("csharp").command(0);
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    CLAIM_URL: opts.claimUrl,
    CLAIM_KEY: opts.claimKey,
    CLAIM_DOUBT_FILE: join(opts.storeDir, "claims-in-doubt.txt"),
  };
  const out = await new Promise<string>((resolve, reject) =>
    execFile(command, [...args, "claim", steamId], { cwd: opts.storeDir, env, timeout: 60_000 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${String(error)}\n${stdout}${stderr}`)) : resolve(`${stdout}${stderr}`),
    ),
  );
  return out.split("\n").filter(Boolean);
}

/** The PHP claim page (docs/receivers/php/claim.php) under `php -S`, as its README runs it. */
export interface RunningClaimPage {
  url: string;
  /** Every line the page's process printed (the pay hook writes `PAID claim <kind> <id>` to stderr). */
  lines: string[];
  /** POSTs the form; returns the status and the page's result text. */
  claim(form: Record<string, string>): Promise<{ status: number; result: string }>;
  stop(): Promise<void>;
}

/** Starts the PHP claim page with CLAIM_URL and CLAIM_KEY; resolves once it answers. */
export async function startPhpClaimPage(opts: { claimUrl: string; claimKey: string }): Promise<RunningClaimPage> {
  const port = await freePort();
  const child = spawn("php", ["-S", `127.0.0.1:${port}`, `${RECEIVERS_DIR}php/claim.php`], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, CLAIM_URL: opts.claimUrl, CLAIM_KEY: opts.claimKey },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  for (const stream of [child.stdout, child.stderr]) stream?.on("data", (chunk: Buffer) => lines.push(...chunk.toString("utf8").split("\n").filter(Boolean)));
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.on("exit", () => {
      exited = true;
      resolve();
    }),
  );
  const url = `http://127.0.0.1:${port}/claim.php`;
  const stop = async () => {
    if (!exited) child.kill("SIGTERM");
    await exit;
  };
  await eventually(
    async () => {
      if (exited) throw new Error(`php claim page exited: ${lines.join("\n")}`);
      return (await fetch(url)).status === 200;
    },
    { timeoutMs: 30_000, intervalMs: 200, message: "php claim page answering" },
  ).catch(async (error: unknown) => {
    // Failure policy: a page that never came up is stopped, and the error carries its output.
    await stop();
    throw error;
  });
  const claim: RunningClaimPage["claim"] = async (form) => {
    const res = await fetch(url, { method: "POST", body: new URLSearchParams(form) });
    const html = await res.text();
    const result = /<p id="result">([^<]*)<\/p>/.exec(html)?.[1] ?? html;
    return { status: res.status, result };
  };
  return { url, lines, claim, stop };
}
