/**
 * The harness's callback receiver: a lean node:http server that answers 200 at
 * once, records each callback's heart_id with its arrival (epoch ms), counts
 * duplicates, and keeps a sample of raw requests whose signatures are checked at
 * the end with node:crypto (HMAC-SHA256 over "<t>.<raw body>", the contract's
 * signature), independently of the product's code. Requests whose heart_id starts
 * with `raw-` come from the raw baseline loop and are only counted.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

const SAMPLE_LIMIT = 500;

export interface BenchReceiver {
  url: string;
  /** heart_id -> first arrival, epoch ms. */
  arrivals: Map<string, number>;
  duplicates: number;
  rawCount: number;
  /** Resolves once `count` distinct hearts arrived (false on timeout). */
  waitForCount(count: number, timeoutMs: number): Promise<boolean>;
  /** Checks the sampled requests' signatures against the servers' callback secrets. */
  checkSignatures(secrets: Map<string, string>): { checked: number; bad: number };
  close(): Promise<void>;
}

export async function startBenchReceiver(): Promise<BenchReceiver> {
  const arrivals = new Map<string, number>();
  const sample: Array<{ header: string; body: Buffer }> = [];
  const state = { duplicates: 0, rawCount: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const at = Date.now();
      res.writeHead(200, { "content-type": "text/plain", "content-length": 2 });
      res.end("ok");
      const body = Buffer.concat(chunks);
      const match = /"heart_id"\s*:\s*"([^"]+)"/.exec(body.toString("utf8"));
      const heartId = match?.[1] ?? "";
      if (heartId.startsWith("raw-")) {
        state.rawCount++;
        return;
      }
      if (arrivals.has(heartId)) state.duplicates++;
      else arrivals.set(heartId, at);
      if (sample.length < SAMPLE_LIMIT || Math.random() < 0.01) {
        if (sample.length >= SAMPLE_LIMIT) sample.splice(Math.floor(Math.random() * SAMPLE_LIMIT), 1);
        sample.push({ header: String(req.headers["x-service-signature"] ?? ""), body });
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    arrivals,
    get duplicates() {
      return state.duplicates;
    },
    get rawCount() {
      return state.rawCount;
    },
    async waitForCount(count, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (arrivals.size < count) {
        if (Date.now() > deadline) return false;
        await new Promise((r) => setTimeout(r, 20));
      }
      return true;
    },
    checkSignatures(secrets) {
      let bad = 0;
      for (const { header, body } of sample) {
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
      return { checked: sample.length, bad };
    },
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}
