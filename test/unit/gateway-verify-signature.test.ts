import test from "ava";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { parseSignatureHeader, verifySignature, type SigningKeyMaterial } from "../../gateway/verify-signature.js";

const NOW = 1_767_225_600;
const BODY = Buffer.from('{"event":"registered","server_id":"s"}', "utf8");
const key = (kid: string, secret: string): SigningKeyMaterial => ({ kid, secret: Buffer.from(secret, "utf8") });
const OLD = key("k_old", "rsec_old");
const NEW = key("k_new", "rsec_new");
const HEX = "a".repeat(64);

const verdict = (header: string, keys: SigningKeyMaterial[], now = NOW, body = BODY) => {
  const signature = parseSignatureHeader(header);
  return signature === null ? "malformed" : verifySignature({ signature, keys, rawBody: body, nowSeconds: now }).kind;
};

test("every malformed header the ruling lists parses to null (-> 400)", (t) => {
  const malformed: Record<string, string | undefined> = {
    "missing header": undefined,
    "empty header": "",
    "no t": `v1=sha256=${HEX}`,
    "non-integer t": `t=abc,v1=sha256=${HEX}`,
    "fractional t": `t=1767225600.5,v1=sha256=${HEX}`,
    "empty t": `t=,v1=sha256=${HEX}`,
    "no v1": `t=${NOW}`,
    "v1 without sha256=": `t=${NOW},v1=${HEX}`,
    "v1 with another algorithm": `t=${NOW},v1=sha1=${HEX}`,
    "v1 hex too short": `t=${NOW},v1=sha256=${HEX.slice(1)}`,
    "v1 hex too long": `t=${NOW},v1=sha256=${HEX}a`,
    "v1 with non-hex characters": `t=${NOW},v1=sha256=${"g".repeat(64)}`,
    "v1 hex upper-case": `t=${NOW},v1=sha256=${"A".repeat(64)}`,
    "two t values (two headers joined)": `t=${NOW},v1=sha256=${HEX}, t=${NOW},v1=sha256=${HEX}`,
    "a part without =": `t=${NOW},v1=sha256=${HEX},garbage`,
  };
  for (const [name, header] of Object.entries(malformed)) t.is(parseSignatureHeader(header), null, name);
});

test("a well-formed header parses t, the MAC and the kid; spaces after commas are tolerated", (t) => {
  const parsed = parseSignatureHeader(`t=${NOW}, v1=sha256=${HEX}, kid=k_new`);
  t.is(parsed?.t, NOW);
  t.is(parsed?.tText, String(NOW));
  t.is(parsed?.kid, "k_new");
  t.deepEqual(parsed?.macs, [Buffer.from(HEX, "hex")]);
});

test("the MAC is checked over the t text as written in the header", (t) => {
  const header = formatIngestSignature("rsec_new", NOW, BODY).replace(`t=${NOW}`, `t=0${NOW}`);
  t.is(verdict(header, [NEW]), "bad_signature", "signed over 1767225600 but the header says 01767225600");
});

test("two active secrets during rotation both verify without a kid", (t) => {
  t.is(verdict(formatIngestSignature("rsec_old", NOW, BODY), [NEW, OLD]), "verified");
  t.is(verdict(formatIngestSignature("rsec_new", NOW, BODY), [NEW, OLD]), "verified");
  const signature = parseSignatureHeader(formatIngestSignature("rsec_old", NOW, BODY));
  const result = signature && verifySignature({ signature, keys: [NEW, OLD], rawBody: BODY, nowSeconds: NOW });
  t.deepEqual(result, { kind: "verified", kid: "k_old" });
});

test("with a kid only that key is tried: a MAC by another active key -> bad_signature", (t) => {
  t.is(verdict(formatIngestSignature("rsec_old", NOW, BODY, "k_new"), [NEW, OLD]), "bad_signature");
  t.is(verdict(formatIngestSignature("rsec_old", NOW, BODY, "k_old"), [NEW, OLD]), "verified");
});

test("unknown kid -> bad_signature", (t) => {
  t.is(verdict(formatIngestSignature("rsec_new", NOW, BODY, "k_gone"), [NEW, OLD]), "bad_signature");
});

test("a revoked secret (no longer among the active keys) -> bad_signature", (t) => {
  t.is(verdict(formatIngestSignature("rsec_old", NOW, BODY), [NEW]), "bad_signature");
});

test("stale timestamp with a wrong MAC -> bad_signature (the MAC is checked before the clock)", (t) => {
  t.is(verdict(formatIngestSignature("rsec_wrong", NOW - 3600, BODY), [NEW], NOW), "bad_signature");
});

test("stale timestamp with a right MAC -> stale; the window is ±300 s inclusive", (t) => {
  t.is(verdict(formatIngestSignature("rsec_new", NOW - 301, BODY), [NEW]), "stale");
  t.is(verdict(formatIngestSignature("rsec_new", NOW + 301, BODY), [NEW]), "stale");
  t.is(verdict(formatIngestSignature("rsec_new", NOW - 300, BODY), [NEW]), "verified");
  t.is(verdict(formatIngestSignature("rsec_new", NOW + 300, BODY), [NEW]), "verified");
});

test("any of several v1 values may match", (t) => {
  const good = formatIngestSignature("rsec_new", NOW, BODY);
  t.is(verdict(`${good},v1=sha256=${HEX}`, [NEW]), "verified");
  t.is(verdict(`t=${NOW},v1=sha256=${HEX},${good.split(",")[1]}`, [NEW]), "verified");
});

test("no keys -> bad_signature", (t) => {
  t.is(verdict(formatIngestSignature("rsec_new", NOW, BODY), []), "bad_signature");
});
