/**
 * One callback receiver process (see receiver.ts): a lean node:http server that answers 200 at once
 * (or, on a path `/slow/<ms>/...`, after <ms>: the slow-receiver measurement), records each
 * callback's heart_id with its arrival (epoch ms, taken here, so IPC delay never adds to a latency)
 * and sends the arrivals to the harness in batches every 10 ms. Requests whose heart_id starts with
 * `raw-` come from the raw baseline loop and are only counted. Keeps a reservoir sample of raw
 * requests (signature header + body) that the harness checks at the end.
 *
 * IPC: sends {type:"listening", port}; {type:"arrivals", list:[[heartId, at], ...]}; answers
 * {type:"stats"} with {type:"stats", rawCount, sample:[[header, bodyBase64], ...]}.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

const SAMPLE_LIMIT = 500;
const RAW_MARK = Buffer.from('"heart_id":"raw-');
const HEART_ID = /"heart_id"\s*:\s*"([^"]+)"/;

let rawCount = 0;
let seen = 0;
let pending: Array<[string, number]> = [];
const sample: Array<[string, string]> = [];

function record(heartId: string, at: number, header: string, body: Buffer): void {
  pending.push([heartId, at]);
  seen++;
  // Reservoir sample: every callback has the same chance to be checked.
  if (sample.length < SAMPLE_LIMIT) sample.push([header, body.toString("base64")]);
  else {
    const slot = Math.floor(Math.random() * seen);
    if (slot < SAMPLE_LIMIT) sample[slot] = [header, body.toString("base64")];
  }
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const at = Date.now();
    const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    const slow = req.url?.startsWith("/slow/") ? Number(req.url.split("/")[2]) : 0;
    const answer = () => {
      res.writeHead(200, { "content-type": "text/plain", "content-length": 2 });
      res.end("ok");
    };
    if (slow > 0) setTimeout(answer, slow);
    else answer();
    if (body.indexOf(RAW_MARK) >= 0) {
      rawCount++;
      return;
    }
    const heartId = HEART_ID.exec(body.toString("utf8"))?.[1] ?? "";
    record(heartId, at, String(req.headers["x-service-signature"] ?? ""), body);
  });
});
server.keepAliveTimeout = 60_000;
server.headersTimeout = 65_000;

setInterval(() => {
  if (pending.length === 0) return;
  const list = pending;
  pending = [];
  process.send?.({ type: "arrivals", list });
}, 10).unref();

process.on("message", (message: { type: string }) => {
  if (message.type === "stats") process.send?.({ type: "stats", rawCount, sample });
  if (message.type === "exit") {
    server.close();
    server.closeAllConnections();
    process.exit(0);
  }
});
process.on("disconnect", () => process.exit(0));
server.listen(0, "127.0.0.1", () => process.send?.({ type: "listening", port: (server.address() as AddressInfo).port }));
