import { readFileSync } from "node:fs";
import test from "ava";
import {
  canonicalString,
  computeSignature,
  formatCallbackSignature,
  formatIngestSignature,
  SIGNATURE_TOLERANCE_SECONDS,
} from "../../services/shared/values/signature.js";
import { parseSignatureHeader, verifySignature } from "../../gateway/verify-signature.js";

/** Vectors computed with `openssl dgst -sha256 -hmac`, never with the project's code. */
interface VectorCase {
  name: string;
  secret: string;
  t: number;
  kid: string | null;
  body: string;
  body_base64: string;
  signed_string: string;
  mac_hex: string;
  ingest_header: string;
  callback_header: string;
  openssl: string;
}
const vectors = JSON.parse(readFileSync(new URL("../fixtures/signature-vectors.json", import.meta.url), "utf8")) as {
  cases: VectorCase[];
  callback_rotation: { secrets_newest_first: string[]; t: number; body: string; callback_header: string };
};

const bodyOf = (c: VectorCase) => Buffer.from(c.body_base64, "base64");
const keysOf = (c: VectorCase, secret = c.secret) => [{ kid: c.kid ?? "k_only", secret: Buffer.from(secret, "utf8") }];
const verify = (header: string, c: VectorCase, opts: { body?: Buffer; secret?: string; now?: number } = {}) => {
  const signature = parseSignatureHeader(header);
  if (signature === null) return "malformed";
  return verifySignature({ signature, keys: keysOf(c, opts.secret), rawBody: opts.body ?? bodyOf(c), nowSeconds: opts.now ?? c.t }).kind;
};

test("the vector file covers a kid, a unicode body and a body that differs from its re-serialisation", (t) => {
  t.true(vectors.cases.some((c) => c.kid !== null));
  t.true(vectors.cases.some((c) => /[^\x00-\x7f]/.test(c.body)));
  t.true(vectors.cases.some((c) => JSON.stringify(JSON.parse(c.body)) !== c.body));
});

for (const c of vectors.cases) {
  test(`vector ${c.name}: the body bytes are the UTF-8 of the body text and the signed string is "<t>.<body>"`, (t) => {
    t.deepEqual(bodyOf(c), Buffer.from(c.body, "utf8"));
    t.is(canonicalString(c.t, bodyOf(c)), c.signed_string);
  });

  test(`vector ${c.name}: the project's HMAC equals the openssl MAC`, (t) => {
    t.is(computeSignature(c.secret, c.t, bodyOf(c)).toString("hex"), c.mac_hex);
  });

  test(`vector ${c.name}: the ingest signer writes exactly t=<unix>,v1=sha256=<hex>[,kid=...]`, (t) => {
    t.is(formatIngestSignature(c.secret, c.t, bodyOf(c), c.kid ?? undefined), c.ingest_header);
  });

  test(`vector ${c.name}: the callback signer writes exactly t=<unix>,v1=<hex> with no sha256= prefix`, (t) => {
    t.is(formatCallbackSignature([c.secret], c.t, bodyOf(c)), c.callback_header);
  });

  test(`vector ${c.name}: the gateway's verifier accepts the vector header`, (t) => {
    t.is(verify(c.ingest_header, c), "verified");
  });

  test(`vector ${c.name}: a tampered body -> bad_signature`, (t) => {
    const tampered = Buffer.from(bodyOf(c));
    const at = tampered.length - 2;
    tampered.writeUInt8(tampered.readUInt8(at) ^ 0x01, at);
    t.is(verify(c.ingest_header, c, { body: tampered }), "bad_signature");
  });

  test(`vector ${c.name}: the wrong secret -> bad_signature`, (t) => {
    t.is(verify(c.ingest_header, c, { secret: `${c.secret}x` }), "bad_signature");
  });

  test(`vector ${c.name}: upper-case hex is a malformed header (400)`, (t) => {
    t.is(verify(c.ingest_header.replace(c.mac_hex, c.mac_hex.toUpperCase()), c), "malformed");
  });

  test(`vector ${c.name}: short hex is a malformed header (400)`, (t) => {
    t.is(verify(c.ingest_header.replace(c.mac_hex, c.mac_hex.slice(0, 62)), c), "malformed");
  });

  test(`vector ${c.name}: v1 without the sha256= prefix (the callback form) is a malformed ingest header (400)`, (t) => {
    t.is(verify(c.ingest_header.replace("v1=sha256=", "v1="), c), "malformed");
  });

  test(`vector ${c.name}: a correct MAC with t more than 300 s away -> stale, at exactly 300 s -> verified`, (t) => {
    t.is(verify(c.ingest_header, c, { now: c.t + SIGNATURE_TOLERANCE_SECONDS + 1 }), "stale");
    t.is(verify(c.ingest_header, c, { now: c.t - SIGNATURE_TOLERANCE_SECONDS - 1 }), "stale");
    t.is(verify(c.ingest_header, c, { now: c.t + SIGNATURE_TOLERANCE_SECONDS }), "verified");
  });
}

test("re-serialised body (whitespace and key order changed) fails verification", (t) => {
  const c = vectors.cases.find((v) => v.name === "whitespace-and-key-order");
  if (!c) return t.fail("vector missing");
  const reserialised = Buffer.from(JSON.stringify(JSON.parse(c.body)), "utf8");
  t.notDeepEqual(reserialised, bodyOf(c));
  t.is(verify(c.ingest_header, c, { body: reserialised }), "bad_signature");
});

test("callback rotation: one v1 per active secret, newest first, each equal to the openssl MAC", (t) => {
  const r = vectors.callback_rotation;
  t.is(formatCallbackSignature(r.secrets_newest_first, r.t, r.body), r.callback_header);
});
