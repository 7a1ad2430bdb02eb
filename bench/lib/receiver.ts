/**
 * The harness's callback receivers: `count` processes of their own (bench/lib/receiver-child.ts),
 * each a lean node:http server on its own port that answers 200 at once, so the receiver is not
 * what limits a drain or the raw loop (its CPU is measured per window: `pids`). Each heart server
 * of the bench gets a distinct URL (`urlFor(i)`: receiver i % count, path /hook/i), as 8 real game
 * servers would have. The harness gets every callback's heart_id with its arrival time (epoch ms,
 * taken in the receiver process), counts duplicates, and checks a sample of signatures at the end
 * with node:crypto (HMAC-SHA256 over "<t>.<raw body>", the contract's signature), independently
 * of the product's code. `slowUrl(ms, i)` answers after `ms` (a slow receiver of one server).
 */
import { fork, type ChildProcess } from "node:child_process";
import { createHmac, timingSafeEqual } from "node:crypto";
import { fileURLToPath } from "node:url";

export interface BenchReceiver {
  /** One base URL per receiver process (`http://127.0.0.1:<port>`). */
  origins: string[];
  /** The callback URL of bench server `i`: receiver `i % count`, path `/hook/<i>`. */
  urlFor(i: number): string;
  /** A URL of receiver `i % count` that answers after `delayMs`. */
  slowUrl(delayMs: number, i: number): string;
  /** Receiver process ids (their CPU per window). */
  pids: number[];
  /** heart_id -> first arrival, epoch ms. */
  arrivals: Map<string, number>;
  duplicates: number;
  /** Raw-loop requests received, over every receiver. */
  rawCount(): Promise<number>;
  /** Resolves once `count` distinct hearts arrived (false on timeout). */
  waitForCount(count: number, timeoutMs: number): Promise<boolean>;
  /** Checks the sampled requests' signatures against the servers' callback secrets. */
  checkSignatures(secrets: Map<string, string>): Promise<{ checked: number; bad: number }>;
  close(): Promise<void>;
}

interface Child {
  proc: ChildProcess;
  port: number;
}

type StatsMessage = { type: "stats"; rawCount: number; sample: Array<[string, string]> };

/** Starts `count` receiver processes (default 2). */
export async function startBenchReceiver(count = 2): Promise<BenchReceiver> {
  const arrivals = new Map<string, number>();
  const state = { duplicates: 0 };
  const childPath = fileURLToPath(new URL("./receiver-child.ts", import.meta.url));
  const execArgv = process.execArgv.some((arg) => arg.includes("tsx")) ? process.execArgv : [...process.execArgv, "--import", "tsx"];
  const children: Child[] = await Promise.all(
    Array.from({ length: Math.max(1, count) }, async () => {
      const proc = fork(childPath, [], { execArgv, stdio: ["ignore", "inherit", "inherit", "ipc"] });
      proc.on("message", (message: { type: string; list?: Array<[string, number]> }) => {
        if (message.type !== "arrivals" || !message.list) return;
        for (const [heartId, at] of message.list) {
          if (arrivals.has(heartId)) state.duplicates++;
          else arrivals.set(heartId, at);
        }
      });
      const port = await new Promise<number>((resolve, reject) => {
        const onMessage = (message: { type: string; port?: number }) => {
          if (message.type === "listening" && message.port) {
            proc.off("message", onMessage);
            resolve(message.port);
          }
        };
        proc.on("message", onMessage);
        proc.once("exit", (code) => reject(new Error(`receiver exited early (code ${code})`)));
      });
      return { proc, port };
    }),
  );
  const stats = () =>
    Promise.all(
      children.map(
        (c) =>
          new Promise<StatsMessage>((resolve) => {
            const onMessage = (message: StatsMessage) => {
              if (message.type !== "stats") return;
              c.proc.off("message", onMessage);
              resolve(message);
            };
            c.proc.on("message", onMessage);
            c.proc.send({ type: "stats" });
          }),
      ),
    );
  const origin = (i: number) => `http://127.0.0.1:${children[i % children.length]?.port}`;
  return {
    origins: children.map((_, i) => origin(i)),
    urlFor: (i) => `${origin(i)}/hook/${i}`,
    slowUrl: (delayMs, i) => `${origin(i)}/slow/${delayMs}/${i}`,
    pids: children.map((c) => c.proc.pid ?? -1),
    arrivals,
    get duplicates() {
      return state.duplicates;
    },
    async rawCount() {
      return (await stats()).reduce((sum, s) => sum + s.rawCount, 0);
    },
    async waitForCount(count, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (arrivals.size < count) {
        if (Date.now() > deadline) return false;
        await new Promise((r) => setTimeout(r, 20));
      }
      return true;
    },
    async checkSignatures(secrets) {
      let bad = 0;
      let checked = 0;
      for (const s of await stats()) {
        for (const [header, body64] of s.sample) {
          checked++;
          const body = Buffer.from(body64, "base64");
          const m = /^t=(\d+),v1=([0-9a-f]{64})/.exec(header);
          const serverId = /"server_id"\s*:\s*"([^"]+)"/.exec(body.toString("utf8"))?.[1] ?? "";
          const secret = secrets.get(serverId);
          if (!m || !secret) {
            bad++;
            continue;
          }
          const expected = createHmac("sha256", secret).update(`${m[1]}.`).update(body).digest();
          if (!timingSafeEqual(expected, Buffer.from(m[2] ?? "", "hex"))) bad++;
        }
      }
      return { checked, bad };
    },
    async close() {
      await Promise.all(
        children.map(async (c) => {
          if (c.proc.exitCode !== null || c.proc.signalCode !== null) return;
          const exited = new Promise<void>((r) => c.proc.once("exit", () => r()));
          c.proc.send({ type: "exit" });
          const timer = setTimeout(() => c.proc.kill("SIGKILL"), 3_000);
          await exited;
          clearTimeout(timer);
        }),
      );
    },
  };
}
