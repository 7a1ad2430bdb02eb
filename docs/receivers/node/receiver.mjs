// Reward callback receiver for a game server: Node.js, standard library only (node:http, node:crypto, node:fs).
// Run: SERVER_ID=<your server id> CALLBACK_SECRET=whsec_... PORT=8080 node receiver.mjs   (see README.md)
// Or, with no secret at all: SERVER_ID=<your server id> VERIFY=public-key WEBHOOK_KEYS_URL=https://<list>/.well-known/webhook-keys.json node receiver.mjs
import { createHmac, createPublicKey, timingSafeEqual, verify as verifyEd25519 } from "node:crypto";
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
/**
 * Your server's id (dashboard, server settings). A valid signature proves the list sent a callback; only its
 * server_id proves it is for you: the list signs every server's callbacks (with one key pair for public-key
 * signatures), so a callback for another server is refused however well it is signed.
 */
const SERVER_ID = (process.env.SERVER_ID ?? "").trim();
/** The dedupe store: one paid heart_id per line, appended and fsynced before answering 2xx. */
const PAID_FILE = process.env.PAID_FILE ?? "paid-hearts.txt";
/** TEST ONLY: a fixed "now" in unix seconds, so the frozen test vectors verify. Never set it in production. */
const FIXED_NOW = process.env.RECEIVER_NOW;
/**
 * Which signature to check:
 * - "service" (default): X-Service-Signature, HMAC with CALLBACK_SECRET; every callback carries it;
 * - "standard-webhooks": webhook-id/-timestamp/-signature `v1,` entries, HMAC keyed by the base64-decoded
 *   part of CALLBACK_SECRET (turn "Standard Webhooks" on for your server);
 * - "public-key": the `v1a,` ed25519 entries, checked with the list's keys from WEBHOOK_KEYS_URL; no secret
 *   (turn "public-key signatures" on for your server).
 */
const VERIFY = process.env.VERIFY ?? "service";
/** For VERIFY=public-key: https://<list>/.well-known/webhook-keys.json. */
const WEBHOOK_KEYS_URL = process.env.WEBHOOK_KEYS_URL ?? "";
/** Refetch the keys at most this often when no cached key verifies (a rotation may be newer than our copy). */
const KEYS_REFETCH_MS = 60_000;

if (!["service", "standard-webhooks", "public-key"].includes(VERIFY)) {
  console.error("VERIFY is service (default), standard-webhooks or public-key");
  process.exit(2);
}
if (!SERVER_ID) {
  console.error("set SERVER_ID=<your server's id> (dashboard, server settings): a callback for another server is refused");
  process.exit(2);
}
if (VERIFY === "public-key" ? !WEBHOOK_KEYS_URL : SECRETS.length === 0) {
  console.error(
    VERIFY === "public-key"
      ? "set WEBHOOK_KEYS_URL=https://<list>/.well-known/webhook-keys.json"
      : "set CALLBACK_SECRET=whsec_... (several comma-separated during a rotation)",
  );
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

/** Constant-time equality of two byte strings of possibly different lengths. */
const bytesEqual = (a, b) => a.length === b.length && timingSafeEqual(a, b);

/** X-Service-Signature: `t=<unix>,v1=<hex>[,v1=<hex>]`, HMAC_SHA256(secret, "<t>.<raw body>"). */
function verifyService(rawBody, headers) {
  const parts = (headers["x-service-signature"] ?? "").split(",").map((p) => p.trim().split("="));
  const tText = parts.find(([k]) => k === "t")?.[1] ?? "";
  const macs = parts.filter(([k, v]) => k === "v1" && /^[0-9a-f]{64}$/.test(v ?? "")).map(([, v]) => Buffer.from(v, "hex"));
  if (!/^\d+$/.test(tText) || macs.length === 0) return { verdict: "malformed" };
  const matched = SECRETS.some((secret) => {
    const expected = createHmac("sha256", secret).update(`${tText}.`).update(rawBody).digest();
    return macs.some((mac) => bytesEqual(mac, expected));
  });
  return { verdict: matched ? "ok" : "bad_signature", t: Number(tText) };
}

/** The webhook-* headers and the `<prefix>` entries of webhook-signature (base64-decoded), or undefined. */
function standardHeaders(rawBody, headers, prefix) {
  const id = headers["webhook-id"] ?? "";
  const tText = headers["webhook-timestamp"] ?? "";
  const signatures = (headers["webhook-signature"] ?? "")
    .split(" ")
    .filter((s) => s.startsWith(prefix))
    .map((s) => Buffer.from(s.slice(prefix.length), "base64"));
  if (!id || !/^\d+$/.test(tText) || signatures.length === 0) return undefined;
  return { t: Number(tText), content: Buffer.concat([Buffer.from(`${id}.${tText}.`), rawBody]), signatures };
}

/** Standard Webhooks `v1,`: base64 HMAC_SHA256(base64-decoded part of whsec_..., "<id>.<t>.<raw body>"). */
function verifyStandardWebhooks(rawBody, headers) {
  const found = standardHeaders(rawBody, headers, "v1,");
  if (!found) return { verdict: "malformed" };
  const matched = SECRETS.some((secret) => {
    const expected = createHmac("sha256", Buffer.from(secret.replace(/^whsec_/, ""), "base64"))
      .update(found.content)
      .digest();
    return found.signatures.some((signature) => bytesEqual(signature, expected));
  });
  return { verdict: matched ? "ok" : "bad_signature", t: found.t };
}

/** The list's published ed25519 keys (from WEBHOOK_KEYS_URL), and when a callback no key verified last fetched them again. */
let publicKeys = [];
let refetchedAt = 0;
const SPKI_ED25519 = Buffer.from("302a300506032b6570032100", "hex");
async function fetchKeys() {
  try {
    const res = await fetch(WEBHOOK_KEYS_URL, { signal: AbortSignal.timeout(5_000) });
    if (res.status !== 200) throw new Error(`answered ${res.status}`);
    const { keys } = await res.json();
    publicKeys = keys
      .filter((k) => k.alg === "Ed25519" && k.public_key.startsWith("whpk_"))
      .map((k) => createPublicKey({ key: Buffer.concat([SPKI_ED25519, Buffer.from(k.public_key.slice(5), "base64")]), format: "der", type: "spki" }));
  } catch (error) {
    // Failure policy: keep the keys we had; a callback no key verifies is refused and retried by the service.
    console.error(`could not fetch ${WEBHOOK_KEYS_URL}: ${error}`);
  }
}

/** Standard Webhooks `v1a,`: ed25519 over "<id>.<t>.<raw body>" with any published key; refetches once a minute at most. */
async function verifyPublicKey(rawBody, headers) {
  const found = standardHeaders(rawBody, headers, "v1a,");
  if (!found) return { verdict: "malformed" };
  const matches = () => publicKeys.some((key) => found.signatures.some((signature) => verifyEd25519(null, found.content, key, signature)));
  if (!matches() && Date.now() - refetchedAt >= KEYS_REFETCH_MS) {
    refetchedAt = Date.now(); // at most once a minute, so forged callbacks cannot make us hammer the list
    await fetchKeys();
  }
  return { verdict: matches() ? "ok" : "bad_signature", t: found.t };
}

/** { verdict: "ok" | "malformed" | "stale" | "bad_signature", t }, checked over the raw body bytes. */
async function verify(rawBody, headers) {
  const checked =
    VERIFY === "public-key"
      ? await verifyPublicKey(rawBody, headers)
      : VERIFY === "standard-webhooks"
        ? verifyStandardWebhooks(rawBody, headers)
        : verifyService(rawBody, headers);
  const now = FIXED_NOW ? Number(FIXED_NOW) : Math.floor(Date.now() / 1000);
  if (checked.verdict === "ok" && Math.abs(now - checked.t) > TOLERANCE_SECONDS) return { verdict: "stale", t: checked.t };
  return checked;
}

function answer(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

async function handle(rawBody, req, res) {
  const { verdict, t } = await verify(rawBody, req.headers);
  // Any non-2xx makes the service retry later; never answer 410 here (410 disables your callback).
  if (verdict === "malformed") return answer(res, 400, { error: `missing or malformed ${VERIFY === "service" ? "X-Service-Signature" : "webhook-*"} headers` });
  if (verdict !== "ok") return answer(res, 401, { error: `signature rejected: ${verdict}` });
  let event;
  try {
    event = JSON.parse(rawBody.toString("utf8")); // parse only after the signature checked out
  } catch {
    // Failure policy: a signed body that is not JSON is refused (400); the service retries and the dashboard shows it.
    return answer(res, 400, { error: "body is not valid JSON" });
  }
  // Signed by the list, but for whom? Before anything is paid or recorded.
  if (event?.server_id !== SERVER_ID) return answer(res, 403, { error: `server_id mismatch: this receiver is for server ${SERVER_ID}` });
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

// The keys first, so the first callback finds them.
if (VERIFY === "public-key") await fetchKeys();
http
  .createServer((req, res) => {
    if (req.method !== "POST") return answer(res, 405, { error: "POST the reward callback here" });
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => handle(Buffer.concat(chunks), req, res));
  })
  .listen(PORT, "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${PORT} (verifying ${VERIFY}, server ${SERVER_ID})`));
