import { execFileSync } from "node:child_process";
import { generateKeyPairSync, verify } from "node:crypto";
import test from "ava";
import { signCallback } from "../../services/delivery/pipeline/send-callback.js";
import { ed25519PrivateKeyOf, ed25519PublicKeyOf, publicKeyStringOf } from "../../services/shared/values/signature.js";

// Frozen vector computed outside the project with Python's `cryptography` (OpenSSL's ed25519):
//   Ed25519PrivateKey.from_private_bytes(seed).sign(b"<heart_id>.<t>.<body>")
// The seed is RFC 8032's test 1 secret key; its public key (d75a9801...) is the RFC's too.
const WHSK = "whsk_nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=";
const WHPK = "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
const V1A = "X7kfMYeVTyDOPwo4rzEc0Sj+CW3N8QcDy6mlN90O7hPK6ebxp2zDtHE+53K4L/aILCVKiXw545W0RMFvVn8SCg==";
const NEW_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
// The symmetric vector of delivery-sign.test.ts (openssl), unchanged beside v1a.
const STANDARD_NEW = "q7/+Nqow5KMNZEKS03EnJdofMfRogJbp5K96uXb1He4=";
const T = 1773145800;
const FIELDS = {
  event: "heart.counted" as const,
  serverId: "7f0c2a1e-3b4d-4c5e-8f90-a1b2c3d4e5f6",
  username: "Steve",
  heartId: "0b8f7e6d-5c4b-4a39-8281-706f5e4d3c2b",
  period: "2026-03",
  streakDay: 3,
};
const URL = "https://example.test/hook";

test("v1a: the whsk_/whpk_ codec gives RFC 8032's public key for its test-1 seed", (t) => {
  t.is(publicKeyStringOf(ed25519PrivateKeyOf(WHSK)), WHPK);
  t.is(Buffer.from(WHPK.slice("whpk_".length), "base64").toString("hex"), "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
});

test("v1a alone: webhook-signature is `v1a,<base64>` matching the frozen vector; webhook-id and webhook-timestamp are set", (t) => {
  const signed = signCallback({
    url: URL,
    fields: FIELDS,
    secretsNewestFirst: [NEW_SECRET],
    standardWebhooks: false,
    signingKey: ed25519PrivateKeyOf(WHSK),
    t: T,
  });
  t.is(signed.headers["webhook-signature"], `v1a,${V1A}`);
  t.is(signed.headers["webhook-id"], FIELDS.heartId);
  t.is(signed.headers["webhook-timestamp"], String(T));
});

test("v1a beside v1: space-separated after the HMAC, and the contract's X-Service-Signature is unchanged", (t) => {
  const plain = signCallback({ url: URL, fields: FIELDS, secretsNewestFirst: [NEW_SECRET], standardWebhooks: true, t: T });
  const signed = signCallback({
    url: URL,
    fields: FIELDS,
    secretsNewestFirst: [NEW_SECRET],
    standardWebhooks: true,
    signingKey: ed25519PrivateKeyOf(WHSK),
    t: T,
  });
  t.is(signed.headers["webhook-signature"], `v1,${STANDARD_NEW} v1a,${V1A}`);
  t.is(signed.headers["X-Service-Signature"], plain.headers["X-Service-Signature"]);
  t.is(signed.body, plain.body);
});

test("not opted in: headers byte-identical to a callback signed without any key", (t) => {
  const a = signCallback({ url: URL, fields: FIELDS, secretsNewestFirst: [NEW_SECRET], standardWebhooks: false, t: T });
  t.deepEqual(Object.keys(a.headers), ["Content-Type", "User-Agent", "X-Service-Event", "X-Service-Signature"]);
  t.false(JSON.stringify(a.headers).includes("v1a"));
});

test("v1a verifies with Node's own crypto.verify over '<id>.<t>.<body>' with the whpk_ public key, for a fresh key too", (t) => {
  const { privateKey } = generateKeyPairSync("ed25519");
  const signed = signCallback({ url: URL, fields: FIELDS, secretsNewestFirst: [NEW_SECRET], standardWebhooks: false, signingKey: privateKey, t: T });
  const signature = Buffer.from((signed.headers["webhook-signature"] ?? "").replace(/^v1a,/, ""), "base64");
  const content = Buffer.from(`${signed.headers["webhook-id"]}.${signed.headers["webhook-timestamp"]}.${signed.body}`);
  t.true(verify(null, content, ed25519PublicKeyOf(publicKeyStringOf(privateKey)), signature));
  t.false(verify(null, Buffer.from(`${signed.body} `), ed25519PublicKeyOf(publicKeyStringOf(privateKey)), signature));
});

test("v1a verifies with Python's `cryptography` (an implementation the project did not write)", (t) => {
  const { privateKey } = generateKeyPairSync("ed25519");
  const signed = signCallback({ url: URL, fields: FIELDS, secretsNewestFirst: [NEW_SECRET], standardWebhooks: false, signingKey: privateKey, t: T });
  const script = [
    "import base64, json, sys",
    "from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey",
    "a = json.load(sys.stdin)",
    "key = Ed25519PublicKey.from_public_bytes(base64.b64decode(a['whpk'][len('whpk_'):]))",
    "sig = [s for s in a['header'].split(' ') if s.startswith('v1a,')][0][4:]",
    "key.verify(base64.b64decode(sig), (a['id'] + '.' + a['ts'] + '.' + a['body']).encode())",
    "print('verified')",
  ].join("\n");
  const input = JSON.stringify({
    whpk: publicKeyStringOf(privateKey),
    header: signed.headers["webhook-signature"],
    id: signed.headers["webhook-id"],
    ts: signed.headers["webhook-timestamp"],
    body: signed.body,
  });
  t.is(execFileSync("python3", ["-c", script], { input, encoding: "utf8" }).trim(), "verified");
});
