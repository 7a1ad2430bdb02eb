/**
 * Public-key (`v1a`, ed25519) callback signatures end to end: a server opted in through the callback
 * settings RPC, a heart cast and counted, the callback through the real pipeline (outbox, relay, Kafka,
 * delivery worker) to a local receiver, verified with Node's own crypto.verify and with Python's
 * `cryptography` against keys fetched from the gateway's public well-known URL; a rotation publishes both
 * keys and the next callback verifies with the new one; a server not opted in gets the contract's headers only.
 */
import { execFileSync } from "node:child_process";
import { randomBytes, verify } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { SIGNING_KEY_CACHE_MS, SIGNING_KEY_OVERLAP_MS } from "../../services/servers/webhook-signing-keys.js";
import { WELL_KNOWN_CACHE_MS } from "../../gateway/handle-well-known.js";
import { ed25519PublicKeyOf } from "../../services/shared/values/signature.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { createServiceClients, startStack, type TestStack } from "../../scripts/harness/stack.js";
import { startReceiver, type Receiver, type RecordedRequest } from "../../scripts/harness/receiver.js";

interface Context {
  stack: TestStack;
  receiver: Receiver;
}
const test = anyTest as TestFn<Context>;
/** The stack's clock runs this far ahead of the wall clock; moved to skip the key caches. */
const clock = { offsetMs: 0 };
let heartIp = 10;

test.before(async (t) => {
  const stack = await startStack({
    allowInsecureCallbacks: true,
    now: () => new Date(Date.now() + clock.offsetMs),
    pipeline: { name: "v1a", delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100, allowInsecureCallbacks: true } },
  });
  t.context = { stack, receiver: await startReceiver() };
});

test.after.always(async (t) => {
  await t.context.stack?.close();
  await t.context.receiver?.close();
});

interface KeysDoc {
  keys: Array<{ kid: string; alg: string; public_key: string; created_at: string; expires_at: string | null }>;
}

async function fetchKeys(stack: TestStack): Promise<{ doc: KeysDoc; text: string; cacheControl: string | null }> {
  const res = await fetch(`${stack.gatewayUrl}/.well-known/webhook-keys.json`);
  const text = await res.text();
  return { doc: JSON.parse(text) as KeysDoc, text, cacheControl: res.headers.get("cache-control") };
}

/** A server with a callback to the receiver, opted in (or not) to v1a. */
async function callbackServer(c: Context, publicKeySignatures: boolean): Promise<string> {
  const { server } = await c.stack.clients.admin.createServer({ name: `v1a-${randomBytes(3).toString("hex")}` });
  const serverId = server!.id;
  const set = await c.stack.clients.admin.setCallbackSettings({ serverId, callbackUrl: c.receiver.url, standardWebhooks: false, publicKeySignatures });
  if (set.server?.publicKeySignatures !== publicKeySignatures) throw new Error("the opt-in is not in the callback settings' answer");
  return serverId;
}

/** Casts a heart and waits for its callback at the receiver. */
async function countedCallback(c: Context, serverId: string): Promise<RecordedRequest> {
  heartIp += 1;
  const cast = await c.stack.clients.hearts.castHeart({
    serverId,
    username: "Steve",
    voterIdentity: `voter-${randomBytes(4).toString("hex")}`,
    ip: `203.0.113.${heartIp}`,
    userAgent: "Mozilla/5.0 (v1a test)",
  });
  const heartId = cast.heartId;
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const found = c.receiver.requests.find((r) => r.text.includes(heartId));
    if (found) return found;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no callback for heart ${heartId}`);
}

/** The request's `v1a,` signatures (base64), from webhook-signature. */
function v1aOf(request: RecordedRequest): string[] {
  const header = request.headers["webhook-signature"];
  return (typeof header === "string" ? header.split(" ") : []).filter((s) => s.startsWith("v1a,")).map((s) => s.slice("v1a,".length));
}

/** The kids of the published keys a request's v1a verifies with (Node's own ed25519). */
function verifyingKids(request: RecordedRequest, doc: KeysDoc): string[] {
  const content = Buffer.concat([Buffer.from(`${request.headers["webhook-id"]}.${request.headers["webhook-timestamp"]}.`), request.body]);
  return doc.keys
    .filter((k) => v1aOf(request).some((sig) => verify(null, content, ed25519PublicKeyOf(k.public_key), Buffer.from(sig, "base64"))))
    .map((k) => k.kid);
}

/** Python's `cryptography` (OpenSSL) verifies the request with the published whpk_ keys: the kid that verifies, or "none". */
function pythonVerifyingKid(request: RecordedRequest, doc: KeysDoc): string {
  const script = [
    "import base64, json, sys",
    "from cryptography.exceptions import InvalidSignature",
    "from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey",
    "a = json.load(sys.stdin)",
    "content = (a['id'] + '.' + a['ts'] + '.').encode() + base64.b64decode(a['body'])",
    "sigs = [s[4:] for s in a['header'].split(' ') if s.startswith('v1a,')]",
    "found = 'none'",
    "for k in a['keys']:",
    "    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(k['public_key'][len('whpk_'):]))",
    "    for s in sigs:",
    "        try:",
    "            key.verify(base64.b64decode(s), content); found = k['kid']",
    "        except InvalidSignature:",
    "            pass",
    "print(found)",
  ].join("\n");
  const input = JSON.stringify({
    keys: doc.keys,
    header: request.headers["webhook-signature"] ?? "",
    id: request.headers["webhook-id"],
    ts: request.headers["webhook-timestamp"],
    body: request.body.toString("base64"),
  });
  return execFileSync("python3", ["-c", script], { input, encoding: "utf8" }).trim();
}

test.serial("opted in: the callback carries v1a, which Node's and Python's ed25519 verify with the key from the well-known URL", async (t) => {
  const serverId = await callbackServer(t.context, true);
  const callback = await countedCallback(t.context, serverId);
  const { doc, cacheControl } = await fetchKeys(t.context.stack);
  t.is(cacheControl, "public, max-age=300");
  t.is(doc.keys.length, 1);
  t.like(doc.keys[0], { alg: "Ed25519", expires_at: null });
  t.regex(doc.keys[0]!.public_key, /^whpk_[A-Za-z0-9+/]{43}=$/);
  t.is(v1aOf(callback).length, 1);
  t.is(callback.headers["webhook-id"], JSON.parse(callback.text).heart_id);
  t.is(callback.headers["webhook-timestamp"], String(JSON.parse(callback.text).timestamp));
  t.deepEqual(verifyingKids(callback, doc), [doc.keys[0]!.kid]);
  t.is(pythonVerifyingKid(callback, doc), doc.keys[0]!.kid);
  // The contract's header is there, unchanged in form.
  t.regex(String(callback.headers["x-service-signature"]), /^t=\d+,v1=[0-9a-f]{64}$/);
});

test.serial("the well-known documents hold public material only: no whsk_, no private JWK member, nothing sealed", async (t) => {
  const { text } = await fetchKeys(t.context.stack);
  const jwks = await (await fetch(`${t.context.stack.gatewayUrl}/.well-known/jwks.json`)).text();
  const sealed = await t.context.stack.prisma.webhookSigningKey.findMany();
  t.true(sealed.length >= 1);
  for (const body of [text, jwks]) {
    t.false(body.includes("whsk_"));
    t.false(/"d"\s*:/.test(body), "no JWK private member d");
    t.false(body.includes("private"));
    for (const row of sealed) {
      t.false(body.includes(row.privateKey));
      const seed = t.context.stack.secretBox.open(row.privateKey).slice("whsk_".length);
      t.false(body.includes(seed));
      t.false(body.includes(Buffer.from(seed, "base64").toString("base64url")));
    }
  }
  // The private key is sealed at rest (AES-256-GCM's "v1:<iv>:<tag>:<ciphertext>"), never the plain whsk_.
  for (const row of sealed) t.regex(row.privateKey, /^v1:/);
  const { keys } = JSON.parse(jwks) as { keys: Array<Record<string, string>> };
  t.deepEqual(Object.keys(keys[0]!).sort(), ["alg", "crv", "kid", "kty", "use", "x"]);
  t.is(`whpk_${Buffer.from(keys[0]!.x!, "base64url").toString("base64")}`, (JSON.parse(text) as KeysDoc).keys[0]!.public_key);
});

test.serial("rotation: both keys published (the old one with its overlap end), and the next callback verifies with the new key", async (t) => {
  const before = (await fetchKeys(t.context.stack)).doc;
  const oldKid = before.keys[0]!.kid;
  const rotated = await t.context.stack.clients.admin.rotateWebhookSigningKey({});
  const newKid = rotated.key!.kid;
  t.not(newKid, oldKid);
  // Past the delivery service's key cache and the gateway's answer cache.
  clock.offsetMs += Math.max(SIGNING_KEY_CACHE_MS, WELL_KNOWN_CACHE_MS) + 1_000;
  const { doc } = await fetchKeys(t.context.stack);
  t.deepEqual(
    doc.keys.map((k) => k.kid),
    [newKid, oldKid],
  );
  t.is(doc.keys[0]!.expires_at, null);
  const overlapEnd = Date.parse(doc.keys[1]!.expires_at ?? "");
  t.true(
    Math.abs(overlapEnd - (Date.now() + clock.offsetMs - (Math.max(SIGNING_KEY_CACHE_MS, WELL_KNOWN_CACHE_MS) + 1_000) + SIGNING_KEY_OVERLAP_MS)) < 60_000,
  );
  const serverId = await callbackServer(t.context, true);
  const callback = await countedCallback(t.context, serverId);
  t.deepEqual(verifyingKids(callback, doc), [newKid]);
  t.is(pythonVerifyingKid(callback, doc), newKid);
  // Past the overlap the old key is no longer published.
  clock.offsetMs += SIGNING_KEY_OVERLAP_MS + WELL_KNOWN_CACHE_MS;
  t.deepEqual(
    (await fetchKeys(t.context.stack)).doc.keys.map((k) => k.kid),
    [newKid],
  );
});

test.serial("not opted in: no webhook-* headers at all, only the contract's; standard_webhooks alone has no v1a", async (t) => {
  const serverId = await callbackServer(t.context, false);
  const callback = await countedCallback(t.context, serverId);
  t.deepEqual(
    Object.keys(callback.headers).filter((h) => h.startsWith("webhook-")),
    [],
  );
  t.regex(String(callback.headers["x-service-signature"]), /^t=\d+,v1=[0-9a-f]{64}$/);
  const { server } = await t.context.stack.clients.admin.createServer({ name: "v1-only" });
  await t.context.stack.clients.admin.setCallbackSettings({ serverId: server!.id, callbackUrl: t.context.receiver.url, standardWebhooks: true });
  const symmetric = await countedCallback(t.context, server!.id);
  t.regex(String(symmetric.headers["webhook-signature"]), /^v1,[A-Za-z0-9+/]{43}=$/);
});

test.serial("the opt-in is kept when SetCallbackSettings leaves it out, and is in GetServer", async (t) => {
  const serverId = await callbackServer(t.context, true);
  await t.context.stack.clients.admin.setCallbackSettings({ serverId, callbackUrl: t.context.receiver.url, standardWebhooks: true });
  t.true((await t.context.stack.clients.admin.getServer({ serverId })).server?.publicKeySignatures);
  await t.context.stack.clients.admin.setCallbackSettings({
    serverId,
    callbackUrl: t.context.receiver.url,
    standardWebhooks: true,
    publicKeySignatures: false,
  });
  t.false((await t.context.stack.clients.admin.getServer({ serverId })).server?.publicKeySignatures);
});

test.serial("RotateWebhookSigningKey needs the admin scope: a read-only or gateway token is refused", async (t) => {
  const { token: readToken } = await t.context.stack.clients.access.createServiceToken({ name: `read-${randomBytes(3).toString("hex")}`, scopes: ["read"] });
  const { token: gatewayToken } = await t.context.stack.clients.access.createServiceToken({
    name: `gw-${randomBytes(3).toString("hex")}`,
    scopes: ["ingest", "pull", "clicks:record", "dashboard"],
  });
  for (const token of [readToken, gatewayToken]) {
    const error = await t.throwsAsync(createServiceClients(t.context.stack.rpcUrl, token).admin.rotateWebhookSigningKey({}));
    t.is(ConnectError.from(error).code, Code.PermissionDenied);
  }
  // The gateway's own scopes read the published keys (public material).
  const listed = await createServiceClients(t.context.stack.rpcUrl, gatewayToken).admin.listWebhookSigningKeys({});
  t.true(listed.keys.length >= 1);
  t.true(listed.keys.every((k) => k.publicKey.startsWith("whpk_")));
});

test.serial("ListWebhookSigningKeys needs the ingest scope: a token without it, or no token, is refused", async (t) => {
  const { token: clicksOnly } = await t.context.stack.clients.access.createServiceToken({
    name: `clicks-${randomBytes(3).toString("hex")}`,
    scopes: ["clicks:record"],
  });
  const refused = await t.throwsAsync(createServiceClients(t.context.stack.rpcUrl, clicksOnly).admin.listWebhookSigningKeys({}));
  t.is(ConnectError.from(refused).code, Code.PermissionDenied);
  const anonymous = await t.throwsAsync(createServiceClients(t.context.stack.rpcUrl, "").admin.listWebhookSigningKeys({}));
  t.is(ConnectError.from(anonymous).code, Code.Unauthenticated);
});
