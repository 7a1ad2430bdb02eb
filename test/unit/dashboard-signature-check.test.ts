/**
 * The dashboard's signature debugger (gateway/dashboard/static/signature-check.js and
 * hmac-sha256.js, the plain JavaScript the page runs): checked against the frozen OpenSSL
 * vectors of the integration guide, against the gateway's own header parser, and on every
 * mistake it claims to recognise.
 */
import { createHmac, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import test from "ava";
import { parseSignatureHeader } from "../../gateway/verify-signature.js";
import { SIGNATURE_RULES, serverMismatchText } from "../../gateway/dashboard/signature-rules.js";
import { hmacSha256, sha256, toHex } from "../../gateway/dashboard/static/hmac-sha256.js";
import {
  checkSignature,
  createMacEngine,
  parseHeader,
  type MacEngine,
  type Scheme,
  type SignatureReport,
} from "../../gateway/dashboard/static/signature-check.js";

interface VectorCase {
  name: string;
  secret: string;
  t: number;
  kid: string | null;
  body: string;
  signed_string: string;
  mac_hex: string;
  ingest_header: string;
  callback_header: string;
}
const vectors = JSON.parse(readFileSync(new URL("../fixtures/signature-vectors.json", import.meta.url), "utf8")) as {
  cases: VectorCase[];
  callback_rotation: { secrets_newest_first: string[]; t: number; body: string; callback_header: string };
};

const rules = SIGNATURE_RULES;
const ENGINES: MacEngine[] = [createMacEngine(undefined), createMacEngine(globalThis.crypto.subtle)];
const plain = ENGINES[0]!;
const hmacHex = (key: string | Buffer, message: string) => createHmac("sha256", key).update(message, "utf8").digest("hex");

const enc = new TextEncoder();

test("plain-JS HMAC-SHA256 reproduces every frozen OpenSSL vector", (t) => {
  for (const v of vectors.cases) t.is(toHex(hmacSha256(enc.encode(v.secret), enc.encode(v.signed_string))), v.mac_hex, v.name);
});

test("plain-JS SHA-256 and HMAC agree with node:crypto on every length around the block edges and on long keys", (t) => {
  t.is(toHex(sha256(new Uint8Array())), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  for (let n = 0; n < 200; n++) {
    const key = randomBytes(n % 140);
    const message = randomBytes(n);
    t.is(toHex(hmacSha256(key, message)), createHmac("sha256", key).update(message).digest("hex"), `key ${key.length} B, message ${n} B`);
  }
});

test("the engine is WebCrypto when crypto.subtle exists and plain JS otherwise (insecure contexts)", (t) => {
  t.is(createMacEngine(globalThis.crypto.subtle).name, "webcrypto");
  t.is(createMacEngine(undefined).name, "plain-js");
});

for (const engine of ENGINES) {
  test(`frozen vectors (${engine.name}): both schemes verify, with the canonical string and the expected header the guide shows`, async (t) => {
    for (const v of vectors.cases) {
      const ingest = await checkSignature({ scheme: "ingest", header: v.ingest_header, body: v.body, secret: v.secret, nowSeconds: v.t }, rules, engine);
      t.is(ingest.verdict, "valid", `${v.name} ingest`);
      t.is(ingest.canonical, v.signed_string);
      t.is(ingest.expectedHex, v.mac_hex);
      t.is(ingest.expectedHeader, v.ingest_header);
      t.is(ingest.answer, null);
      const callback = await checkSignature({ scheme: "callback", header: v.callback_header, body: v.body, secret: v.secret, nowSeconds: v.t }, rules, engine);
      t.is(callback.verdict, "valid", `${v.name} callback`);
      t.is(callback.expectedHeader, v.callback_header);
    }
  });
}

test("a rotation header (one v1 per active secret) verifies with either secret and says which v1 matched", async (t) => {
  const r = vectors.callback_rotation;
  const [newest, older] = r.secrets_newest_first;
  const a = await checkSignature({ scheme: "callback", header: r.callback_header, body: r.body, secret: newest!, nowSeconds: r.t }, rules, plain);
  const b = await checkSignature({ scheme: "callback", header: r.callback_header, body: r.body, secret: older!, nowSeconds: r.t }, rules, plain);
  t.is(a.verdict, "valid");
  t.is(b.verdict, "valid");
  t.true(messages(a).includes("v1 #1 matches"));
  t.true(messages(b).includes("v1 #2 matches"));
});

/** Every finding's text, joined, for `includes` checks. */
function messages(report: SignatureReport): string {
  return report.findings.map((f) => `[${f.level}:${f.part}] ${f.message}`).join("\n");
}

const V = vectors.cases[0]!; // compact-registered, an rsec_ secret
const W = vectors.cases.find((c) => c.name === "heart-counted")!; // a whsec_ secret

async function check(scheme: Scheme, header: string, opts: { body?: string; secret?: string; now?: number } = {}) {
  return checkSignature({ scheme, header, body: opts.body ?? V.body, secret: opts.secret ?? V.secret, nowSeconds: opts.now ?? V.t }, rules, plain);
}
const ingestHeader = (mac: string, t: number | string = V.t) => `t=${t},v1=sha256=${mac}`;

test("the signer's usual mistakes are each named: body alone, no dot, <body>.<t>, final newline, re-serialised JSON", async (t) => {
  const cases: Array<[string, string, RegExp]> = [
    ["body alone", hmacHex(V.secret, V.body), /signed the body alone/],
    ["no dot", hmacHex(V.secret, `${V.t}${V.body}`), /without the dot/],
    ["reversed", hmacHex(V.secret, `${V.body}.${V.t}`), /"<body>.<t>"/],
    ["extra newline", hmacHex(V.secret, `${V.t}.${V.body}\n`), /with a final newline/],
    ["re-serialised", hmacHex(V.secret, `${V.t}.${JSON.stringify(JSON.parse(V.body), null, 2)}`), /No common mistake/],
  ];
  for (const [name, mac, says] of cases) {
    const report = await check("ingest", ingestHeader(mac));
    t.is(report.verdict, "mismatch", name);
    t.deepEqual(report.answer, { status: 401, error: "signature rejected: bad_signature" }, name);
    t.regex(messages(report), says, name);
  }
  // The owner pasted a pretty-printed body, but the sender signed the compact bytes.
  const pretty = JSON.stringify(JSON.parse(V.body), null, 2);
  const compactSigned = await check("ingest", ingestHeader(hmacHex(V.secret, `${V.t}.${V.body}`)), { body: pretty });
  t.regex(messages(compactSigned), /re-serialised body/);
  const withNewline = await check("ingest", ingestHeader(hmacHex(V.secret, `${V.t}.${V.body}`)), { body: `${V.body}\n` });
  t.regex(messages(withNewline), /without its final newline/);
});

test("key mistakes are each named: prefix dropped, base64-decoded whsec_ key, whitespace around the secret, the other kind of secret", async (t) => {
  const noPrefix = await check("ingest", ingestHeader(hmacHex(V.secret.slice("rsec_".length), `${V.t}.${V.body}`)));
  t.regex(messages(noPrefix), /without its "rsec_" prefix/);
  const decodedKey = Buffer.from(W.secret.slice("whsec_".length), "base64");
  const sw = await check("callback", `t=${W.t},v1=${hmacHex(decodedKey, `${W.t}.${W.body}`)}`, { body: W.body, secret: W.secret });
  t.is(sw.verdict, "mismatch");
  t.is(sw.answer, null, "callbacks have no service answer");
  t.regex(messages(sw), /base64-decoded secret \(the Standard Webhooks way\)/);
  const padded = await check("ingest", V.ingest_header, { secret: ` ${V.secret}\n` });
  t.regex(messages(padded), /spaces or newlines around it/);
  const kind = await check("ingest", V.ingest_header, { secret: W.secret });
  t.regex(messages(kind), /This is a callback secret \(whsec_\)/);
  t.regex(messages(kind), /No common mistake/);
});

test("header format problems are malformed (400 with the contract's text) and name the part", async (t) => {
  const mac = V.mac_hex;
  const cases: Array<[string, RegExp]> = [
    ["", /header is empty/],
    [`v1=sha256=${mac}`, /no t=/],
    [`t=${V.t}`, /no v1=sha256=<hex>/],
    [`t=${V.t},v1=${mac}`, /bare hex: the ingest scheme wants v1=sha256=/],
    [`t=${V.t},v1=sha256=${mac.toUpperCase()}`, /upper-case hex/],
    [`t=${V.t},v1=sha256=${mac.slice(2)}`, /62 hex characters; an HMAC-SHA256 has 64/],
    [`t=${V.t},v1=sha256=${Buffer.from(mac, "hex").toString("base64")}`, /looks like base64/],
    [`t=${V.t}.5,v1=sha256=${mac}`, /has a fraction/],
    [`t=${V.t},t=${V.t},v1=sha256=${mac}`, /t appears twice/],
    [`t=${V.t},v1=sha256=${mac},`, /is empty \(a stray comma\?\)/],
    [`t=${V.t},v1=sha256=${mac},kid=bad kid`, /kid=bad kid may only hold/],
  ];
  for (const [header, says] of cases) {
    const report = await check("ingest", header);
    t.is(report.verdict, "malformed", header);
    t.deepEqual(report.answer, { status: 400, error: "missing or malformed X-Service-Signature header" }, header);
    t.regex(messages(report), says, header);
  }
  const callbackWithPrefix = await check("callback", V.ingest_header);
  t.is(callbackWithPrefix.verdict, "malformed");
  t.regex(messages(callbackWithPrefix), /reward callbacks carry bare hex/);
  const named = await check("ingest", `X-Service-Signature: ${V.ingest_header}`);
  t.is(named.verdict, "valid", "a pasted header name is removed");
});

test("the clock: a matching MAC with a stale t is 401 stale; a wrong MAC with a stale t is still bad_signature (MAC first)", async (t) => {
  const late = V.t + rules.tolerance_seconds + 1;
  const stale = await check("ingest", V.ingest_header, { now: late });
  t.is(stale.verdict, "stale");
  t.deepEqual(stale.answer, { status: 401, error: "signature rejected: stale" });
  t.regex(messages(stale), /5 min before the time checked against/);
  const edge = await check("ingest", V.ingest_header, { now: V.t + rules.tolerance_seconds });
  t.is(edge.verdict, "valid", "exactly 300 s is inside the window");
  const wrongAndStale = await check("ingest", ingestHeader("0".repeat(64)), { now: late });
  t.deepEqual(wrongAndStale.answer, { status: 401, error: "signature rejected: bad_signature" });
  const millis = await check("ingest", ingestHeader(hmacHex(V.secret, `${V.t * 1000}.${V.body}`), V.t * 1000));
  t.is(millis.verdict, "stale");
  t.regex(messages(millis), /looks like milliseconds/);
});

test("without a secret the canonical string is still shown and nothing is judged; body problems are reported", async (t) => {
  const report = await check("ingest", V.ingest_header, { secret: "" });
  t.is(report.verdict, "unverified");
  t.is(report.canonical, V.signed_string);
  t.is(report.canonicalBytes, Buffer.byteLength(V.signed_string));
  t.is(report.expectedHex, null);
  t.regex(messages(report), /stays in this page/);
  const bom = await check("ingest", V.ingest_header, { body: `\ufeff${V.body}`, secret: "" });
  t.regex(messages(bom), /byte-order mark/);
  const notJson = await check("ingest", V.ingest_header, { body: "event=registered", secret: "" });
  t.regex(messages(notJson), /not valid JSON: the service answers 400 "body is not valid JSON"/);
  const skew = await check("callback", `t=${W.t + 5},v1=${W.mac_hex}`, { body: W.body, secret: "", now: W.t });
  t.regex(messages(skew), /timestamp \(1767225600\) differs from t=1767225605/);
});

test("the debugger's ingest parser agrees with the gateway's on what is malformed", (t) => {
  const mac = V.mac_hex;
  const headers = [
    V.ingest_header,
    `t=${V.t},v1=sha256=${mac},kid=k_1`,
    ` t=${V.t} , v1=sha256=${mac} `,
    `t=${V.t},v1=sha256=${mac},v1=sha256=${"a".repeat(64)}`,
    `t=${V.t},v1=sha256=${mac},v2=whatever`,
    `t=${V.t},v1=sha256=${mac},foo`,
    `t=${V.t},v1=sha256=${mac},`,
    `t=-${V.t},v1=sha256=${mac}`,
    `t=${"9".repeat(17)},v1=sha256=${mac}`,
    `t=${V.t},v1=sha256=${mac.toUpperCase()}`,
    `t=${V.t},v1=${mac}`,
    `t=${V.t},v1=sha256=${mac}0`,
    `t=${V.t},v1=sha256=${mac},kid=a,kid=b`,
    `t=${V.t},v1=sha256=${mac},kid=${"k".repeat(129)}`,
    `t=${V.t},t=${V.t},v1=sha256=${mac}`,
    `T=${V.t},v1=sha256=${mac}`,
    `t=${V.t}`,
    `=${V.t},v1=sha256=${mac}`,
    "",
  ];
  for (const header of headers) {
    t.is(parseHeader(header, "ingest", rules).malformed, parseSignatureHeader(header) === null, JSON.stringify(header));
  }
});

test("a secret pasted without its prefix is named, in both schemes (docs/callbacks.md promises it for whsec_)", async (t) => {
  const callback = await check("callback", W.callback_header, { body: W.body, secret: W.secret.slice("whsec_".length) });
  t.is(callback.verdict, "mismatch");
  t.regex(messages(callback), /The secret pasted here has no "whsec_" prefix, and the MAC matches "whsec_" \+ it/);
  t.notRegex(messages(callback), /No common mistake/);
  const ingest = await check("ingest", V.ingest_header, { secret: V.secret.slice("rsec_".length) });
  t.is(ingest.verdict, "mismatch");
  t.deepEqual(ingest.answer, { status: 401, error: "signature rejected: bad_signature" });
  t.regex(messages(ingest), /The secret pasted here has no "rsec_" prefix/);
  t.notRegex(messages(ingest), /No common mistake/);
  // Around-the-secret whitespace and a missing prefix together: still named.
  const both = await check("callback", W.callback_header, { body: W.body, secret: ` ${W.secret.slice("whsec_".length)}\n` });
  t.regex(messages(both), /no "whsec_" prefix/);
});

test("in the callback scheme the service signed: a re-serialised body is the receiver's doing, and no hint blames the sender", async (t) => {
  // The service signed the compact raw bytes; the owner pasted what their receiver logged after parsing.
  const pretty = JSON.stringify(JSON.parse(W.body), null, 2);
  const reserialised = await check("callback", W.callback_header, { body: pretty, secret: W.secret });
  t.is(reserialised.verdict, "mismatch");
  t.regex(
    messages(reserialised),
    /your receiver \(or the log you copied from\) parsed the JSON and wrote it again\. Verify over the raw request body, before parsing it/,
  );
  t.notRegex(messages(reserialised), /They signed/);

  // Every mistake the debugger recognises, in the callback scheme: each is named, none as the sender's ("They ...").
  const decodedKey = Buffer.from(W.secret.slice("whsec_".length), "base64");
  const cases: Array<[string, { header: string; body?: string }, RegExp]> = [
    ["body alone", { header: `t=${W.t},v1=${hmacHex(W.secret, W.body)}` }, /over the body alone\. The service never signs that way/],
    ["no dot", { header: `t=${W.t},v1=${hmacHex(W.secret, `${W.t}${W.body}`)}` }, /without the dot/],
    ["reversed", { header: `t=${W.t},v1=${hmacHex(W.secret, `${W.body}.${W.t}`)}` }, /"<body>.<t>"/],
    ["newline lost in the paste", { header: `t=${W.t},v1=${hmacHex(W.secret, `${W.t}.${W.body}\n`)}` }, /end with a newline that the body pasted here lacks/],
    ["newline added in the paste", { header: W.callback_header, body: `${W.body}\n` }, /ends with a newline that the service did not send/],
    ["prefix dropped", { header: `t=${W.t},v1=${hmacHex(W.secret.slice("whsec_".length), `${W.t}.${W.body}`)}` }, /without its "whsec_" prefix/],
    ["decoded key", { header: `t=${W.t},v1=${hmacHex(decodedKey, `${W.t}.${W.body}`)}` }, /base64-decoded secret \(the Standard Webhooks way\)/],
  ];
  for (const [name, { header, body }, says] of cases) {
    const report = await check("callback", header, { body: body ?? W.body, secret: W.secret, now: W.t });
    t.is(report.verdict, "mismatch", name);
    t.regex(messages(report), says, name);
    t.notRegex(messages(report), /They (signed|keyed)|No common mistake/, name);
  }
});

test("callback scheme: a valid signature on a body for another server than the one debugged is refused with the receivers' reason (server_id mismatch); the server's own body stays valid", async (t) => {
  const own = (JSON.parse(W.body) as { server_id: string }).server_id;
  const other = "0d9c8b7a-6f5e-4d3c-8b2a-1f0e9d8c7b6a";
  const callback = (serverId: string | undefined, opts: { header?: string; body?: string; now?: number } = {}) =>
    checkSignature(
      { scheme: "callback", header: opts.header ?? W.callback_header, body: opts.body ?? W.body, secret: W.secret, nowSeconds: opts.now ?? W.t, serverId },
      rules,
      plain,
    );
  const refused = await callback(other);
  t.is(refused.verdict, "refused");
  t.deepEqual(refused.refusal, { status: 403, error: serverMismatchText(other) });
  t.is(serverMismatchText(other), `server_id mismatch: this receiver is for server ${other}`);
  t.regex(messages(refused), new RegExp(`\\[error:server_id\\] server_id mismatch: this receiver is for server ${other} \\(the body's server_id is ${own}\\)`));
  t.true(messages(refused).includes("A valid signature proves the list sent it; only the server_id proves it is for you."));
  t.is(refused.answer, null, "callbacks have no service answer");

  const mine = await callback(own);
  t.is(mine.verdict, "valid");
  t.is(mine.refusal, null);
  t.regex(messages(mine), /\[ok:server_id\] server_id is /);
  const unnamed = await callback(undefined);
  t.is(unnamed.verdict, "valid", "no server given: the signature alone is judged");
  t.regex(messages(unnamed), /\[info:server_id\] Check that the body's server_id is your server's id/);

  // The signature comes first: a wrong MAC stays a mismatch, a stale t stays stale; the server is still named.
  const wrongMac = await callback(other, { header: `t=${W.t},v1=${"0".repeat(64)}` });
  t.is(wrongMac.verdict, "mismatch");
  t.regex(messages(wrongMac), /\[error:server_id\] server_id mismatch/);
  const stale = await callback(other, { now: W.t + rules.tolerance_seconds + 1 });
  t.is(stale.verdict, "stale");
  // A signed body without server_id is for nobody.
  const noServer = JSON.stringify({ event: "heart.counted", heart_id: "h", username: "u", timestamp: W.t });
  const anonymous = await callback(own, { body: noServer, header: `t=${W.t},v1=${hmacHex(W.secret, `${W.t}.${noServer}`)}` });
  t.is(anonymous.verdict, "refused");
  t.regex(messages(anonymous), /the body has no server_id/);
  // The ingest scheme's server_id selects the secret: not judged here.
  const ingest = await checkSignature(
    { scheme: "ingest", header: V.ingest_header, body: V.body, secret: V.secret, nowSeconds: V.t, serverId: other },
    rules,
    plain,
  );
  t.is(ingest.verdict, "valid");
});
