// Reward callback receiver for a game server: Node.js, standard library only (node:http, node:crypto, node:fs).
// Run: CALLBACK_SECRET=whsec_... PORT=8080 node receiver.mjs   (see README.md)
import { createHmac, timingSafeEqual } from "node:crypto";
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from "node:fs";
import http from "node:http";

/** The contract's replay window: refuse a signature whose t is more than 300 s from now. */
const TOLERANCE_SECONDS = 300;
/** One secret, or several separated by commas during a rotation (any of them verifies). */
const SECRETS = (process.env.CALLBACK_SECRET ?? "")
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);
const PORT = Number(process.env.PORT ?? 8080);
/** The dedupe store: one paid heart_id per line, appended and fsynced before answering 2xx. */
const PAID_FILE = process.env.PAID_FILE ?? "paid-hearts.txt";
/** TEST ONLY: a fixed "now" in unix seconds, so the frozen test vectors verify. Never set it in production. */
const FIXED_NOW = process.env.RECEIVER_NOW;

if (SECRETS.length === 0) {
  console.error("set CALLBACK_SECRET=whsec_... (several comma-separated during a rotation)");
  process.exit(2);
}

const paid = new Set(existsSync(PAID_FILE) ? readFileSync(PAID_FILE, "utf8").split("\n").filter(Boolean) : []);

/** ===== THE PAY HOOK: replace this with your game's reward (a console command, an RCON call, a DB insert). ===== */
function payReward(heartId, username) {
  console.log(`PAID ${heartId} ${username}`);
}

function recordPaid(heartId) {
  const fd = openSync(PAID_FILE, "a");
  try {
    writeSync(fd, `${heartId}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  paid.add(heartId);
}

/** "ok" | "malformed" | "stale" | "bad_signature", checked over the raw body bytes. */
function verify(rawBody, header) {
  const parts = (header ?? "").split(",").map((p) => p.trim().split("="));
  const tText = parts.find(([k]) => k === "t")?.[1] ?? "";
  const macs = parts.filter(([k, v]) => k === "v1" && /^[0-9a-f]{64}$/.test(v ?? "")).map(([, v]) => Buffer.from(v, "hex"));
  if (!/^\d+$/.test(tText) || macs.length === 0) return "malformed";
  const now = FIXED_NOW ? Number(FIXED_NOW) : Math.floor(Date.now() / 1000);
  const matched = SECRETS.some((secret) => {
    const expected = createHmac("sha256", secret).update(`${tText}.`).update(rawBody).digest();
    return macs.some((mac) => timingSafeEqual(mac, expected));
  });
  if (!matched) return "bad_signature";
  if (Math.abs(now - Number(tText)) > TOLERANCE_SECONDS) return "stale";
  return "ok";
}

function answer(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

function handle(rawBody, req, res) {
  const header = req.headers["x-service-signature"];
  const verdict = verify(rawBody, header);
  // Any non-2xx makes the service retry later; never answer 410 here (410 disables your callback).
  if (verdict === "malformed") return answer(res, 400, { error: "missing or malformed X-Service-Signature header" });
  if (verdict !== "ok") return answer(res, 401, { error: `signature rejected: ${verdict}` });
  let event;
  try {
    event = JSON.parse(rawBody.toString("utf8")); // parse only after the signature checked out
  } catch {
    // Failure policy: a signed body that is not JSON is refused (400); the service retries and the dashboard shows it.
    return answer(res, 400, { error: "body is not valid JSON" });
  }
  const t = Number(/t=(\d+)/.exec(header)[1]);
  if (event.timestamp !== undefined && event.timestamp !== t) return answer(res, 400, { error: "timestamp differs from the signature's t" });
  if (event.event === "heart.test") return answer(res, 200, { ok: true, test: true }); // the dashboard's test: pay nothing
  if (event.event !== "heart.counted") return answer(res, 200, { ok: true, ignored: String(event.event) });
  if (typeof event.heart_id !== "string" || typeof event.username !== "string") return answer(res, 400, { error: "heart_id and username are required" });
  if (paid.has(event.heart_id)) return answer(res, 200, { ok: true, duplicate: true }); // a retry or redelivery: already paid
  try {
    payReward(event.heart_id, event.username);
    recordPaid(event.heart_id);
  } catch (error) {
    // Failure policy: not paid or not recorded -> 500, so the service retries the same heart_id later.
    console.error(`pay failed for ${event.heart_id}: ${error}`);
    return answer(res, 500, { error: "reward failed, retry later" });
  }
  return answer(res, 200, { ok: true, paid: true });
}

http
  .createServer((req, res) => {
    if (req.method !== "POST") return answer(res, 405, { error: "POST the reward callback here" });
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => handle(Buffer.concat(chunks), req, res));
  })
  .listen(PORT, "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${PORT}`));
