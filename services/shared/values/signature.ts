import { createHmac, createPrivateKey, createPublicKey, sign as signBytes, timingSafeEqual, type KeyObject } from "node:crypto";

/** The contract's replay window for the signature timestamp `t`. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;
/** Hex characters of one `v1` MAC. */
export const SHA256_HEX_LENGTH = 64;
/** What a `v1` MAC may look like: lower-case hex (the contract's format; upper case is malformed). */
export const MAC_HEX_PATTERN = /^[0-9a-f]+$/;
/** What `t` may look like (the dashboard's signature debugger applies the same rules). */
export const INTEGER_PATTERN = /^-?\d{1,16}$/;
/** What a `kid` may look like. */
export const KID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

/** HMAC-SHA256 over "<t>.<rawBody>": the signed string is the timestamp, a dot, then the raw bytes. */
export function computeSignature(secret: string | Buffer, t: number | string, rawBody: Buffer | string): Buffer {
  const body = typeof rawBody === "string" ? Buffer.from(rawBody, "utf8") : rawBody;
  return createHmac("sha256", secret).update(`${t}.`, "utf8").update(body).digest();
}

/** The string that is signed, for showing to integrators. */
export function canonicalString(t: number | string, rawBody: Buffer | string): string {
  return `${t}.${typeof rawBody === "string" ? rawBody : rawBody.toString("utf8")}`;
}

/** A parsed ingest header `t=<unix>,v1=sha256=<hex>[,kid=<key-id>]`. */
export interface IngestSignature {
  t: number;
  /** The exact text of `t`: what the caller signed (`<t>.<raw body>`). */
  tText: string;
  /** Raw MAC bytes of every `v1` entry. */
  macs: Buffer[];
  kid?: string;
}

/**
 * THE parser of the ingest scheme's X-Service-Signature header (the ingest endpoint and the pull
 * API; the dashboard's signature debugger reads the same rules from signature-rules.json). Returns
 * null - answered as 400 `missing or malformed X-Service-Signature header` - when it is missing or
 * malformed: a part without `=`, no `t`, a repeated or non-integer `t`, no `v1`, `v1` without
 * `sha256=`, `v1` hex of the wrong length, not hex or with upper-case letters (the contract's format is
 * lower-case hex), a repeated or malformed `kid`. Several headers are joined by Node with ", ", which
 * repeats `t` and so is malformed too. Unknown keys are ignored.
 */
export function parseIngestSignature(header: string | undefined): IngestSignature | null {
  if (header === undefined) return null;
  let t: number | undefined;
  let tText = "";
  let kid: string | undefined;
  const macs: Buffer[] = [];
  for (const rawPart of header.split(",")) {
    const part = rawPart.trim();
    const eq = part.indexOf("=");
    if (eq <= 0) return null;
    const key = part.slice(0, eq);
    const value = part.slice(eq + 1);
    if (key === "t") {
      if (t !== undefined || !INTEGER_PATTERN.test(value)) return null;
      t = Number(value);
      tText = value;
    } else if (key === "v1") {
      if (!value.startsWith("sha256=")) return null;
      const hex = value.slice("sha256=".length);
      if (hex.length !== SHA256_HEX_LENGTH || !MAC_HEX_PATTERN.test(hex)) return null;
      macs.push(Buffer.from(hex, "hex"));
    } else if (key === "kid") {
      if (kid !== undefined || !KID_PATTERN.test(value)) return null;
      kid = value;
    }
    // Unknown keys are ignored so the scheme can grow (v2=...) without breaking callers.
  }
  if (t === undefined || macs.length === 0) return null;
  return kid === undefined ? { t, tText, macs } : { t, tText, macs, kid };
}

/** Constant-time check of any presented MAC against the expected one. */
export function macMatches(expected: Buffer, presented: Buffer[]): boolean {
  let matched = false;
  for (const mac of presented) {
    // timingSafeEqual needs equal lengths; the parser guarantees 32 bytes.
    if (mac.length === expected.length && timingSafeEqual(mac, expected)) matched = true;
  }
  return matched;
}

/** True when `t` is outside ±SIGNATURE_TOLERANCE_SECONDS of `nowSeconds`. */
export function isStale(t: number, nowSeconds: number): boolean {
  return Math.abs(nowSeconds - t) > SIGNATURE_TOLERANCE_SECONDS;
}

/** Builds an ingest header, as a caller would. */
export function formatIngestSignature(secret: string, t: number, rawBody: Buffer | string, kid?: string): string {
  const hex = computeSignature(secret, t, rawBody).toString("hex");
  return `t=${t},v1=sha256=${hex}${kid ? `,kid=${kid}` : ""}`;
}

/**
 * Builds the reward callback header `t=<unix>,v1=<hex>[,v1=<hex>...]`: one bare-hex
 * `v1` per active secret, newest first, so receivers can rotate without downtime.
 */
export function formatCallbackSignature(secretsNewestFirst: string[], t: number, rawBody: Buffer | string): string {
  const parts = secretsNewestFirst.map((secret) => `v1=${computeSignature(secret, t, rawBody).toString("hex")}`);
  return [`t=${t}`, ...parts].join(",");
}

/** Standard Webhooks signature `v1,<base64>` over "<id>.<timestamp>.<body>", keyed by the whsec_ secret's decoded bytes. */
export function formatStandardWebhookSignature(secretsNewestFirst: string[], id: string, t: number, rawBody: string): string {
  return secretsNewestFirst
    .map((secret) => {
      const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64");
      return `v1,${createHmac("sha256", key).update(`${id}.${t}.${rawBody}`, "utf8").digest("base64")}`;
    })
    .join(" ");
}

/** Standard Webhooks' prefix of a serialized ed25519 public key (`whpk_<base64 of the raw 32 bytes>`). */
export const PUBLIC_KEY_PREFIX = "whpk_";
/** Standard Webhooks' prefix of a serialized ed25519 secret key (`whsk_<base64 of the 32-byte seed>`). */
export const SECRET_KEY_PREFIX = "whsk_";
/** DER prefix of a PKCS#8 ed25519 private key, before its 32-byte seed (RFC 8410). */
const ED25519_PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
/** DER prefix of an SPKI ed25519 public key, before its 32 raw bytes (RFC 8410). */
const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");
/** Bytes of a raw ed25519 key (seed or public key). */
export const ED25519_KEY_BYTES = 32;

/** The signing key of a `whsk_<base64 seed>` string. */
export function ed25519PrivateKeyOf(whsk: string): KeyObject {
  const seed = Buffer.from(whsk.startsWith(SECRET_KEY_PREFIX) ? whsk.slice(SECRET_KEY_PREFIX.length) : whsk, "base64");
  if (seed.length !== ED25519_KEY_BYTES) throw new Error("an ed25519 secret key is 32 bytes");
  return createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: "der", type: "pkcs8" });
}

/** The verifying key of a `whpk_<base64 raw public key>` string (what receivers do with a published key). */
export function ed25519PublicKeyOf(whpk: string): KeyObject {
  const raw = Buffer.from(whpk.startsWith(PUBLIC_KEY_PREFIX) ? whpk.slice(PUBLIC_KEY_PREFIX.length) : whpk, "base64");
  if (raw.length !== ED25519_KEY_BYTES) throw new Error("an ed25519 public key is 32 bytes");
  return createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: "der", type: "spki" });
}

/** The `whpk_` form of the public half of an ed25519 private key. */
export function publicKeyStringOf(privateKey: KeyObject): string {
  const spki = createPublicKey(privateKey).export({ format: "der", type: "spki" });
  return `${PUBLIC_KEY_PREFIX}${spki.subarray(ED25519_SPKI_PREFIX.length).toString("base64")}`;
}

/**
 * Standard Webhooks' asymmetric signature `v1a,<base64 of the 64-byte ed25519 signature>` over the
 * same signed content as `v1,`: "<id>.<timestamp>.<body>".
 */
export function formatStandardWebhookAsymmetricSignature(privateKey: KeyObject, id: string, t: number, rawBody: string): string {
  return `v1a,${signBytes(null, Buffer.from(`${id}.${t}.${rawBody}`, "utf8"), privateKey).toString("base64")}`;
}
