import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from "node:crypto";

/** Bytes of the AES-256-GCM key that encrypts secrets at rest. */
export const SECRETS_KEY_BYTES = 32;
const IV_BYTES = 12;
const SEALED_PREFIX = "v1";

/** Encrypts and decrypts secrets at rest (AES-256-GCM, random IV per seal). */
export interface SecretBox {
  seal(plaintext: string): string;
  open(sealed: string): string;
  /**
   * A 32-byte key of its own for one purpose (HKDF-SHA256 of SECRETS_KEY with `purpose` as its info), so
   * a MAC keyed with it can never be confused with another use of the key; the same purpose gives the same key.
   */
  deriveKey(purpose: string): Buffer;
}

/** Parses SECRETS_KEY: 32 bytes as base64 or 64 hex characters. Returns null when malformed. */
export function parseSecretsKey(value: string): Buffer | null {
  const trimmed = value.trim();
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, "hex");
  const decoded = Buffer.from(trimmed, "base64");
  return decoded.length === SECRETS_KEY_BYTES ? decoded : null;
}

/** Creates the SecretBox for a 32-byte key. */
export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== SECRETS_KEY_BYTES) throw new Error(`secrets key must be ${SECRETS_KEY_BYTES} bytes`);
  return {
    seal(plaintext) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
      const tag = cipher.getAuthTag();
      return [SEALED_PREFIX, iv.toString("base64"), tag.toString("base64"), ciphertext.toString("base64")].join(":");
    },
    open(sealed) {
      const [prefix, iv, tag, ciphertext] = sealed.split(":");
      if (prefix !== SEALED_PREFIX || !iv || !tag || ciphertext === undefined) throw new Error("sealed secret has an unknown format");
      const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64"));
      decipher.setAuthTag(Buffer.from(tag, "base64"));
      return Buffer.concat([decipher.update(Buffer.from(ciphertext, "base64")), decipher.final()]).toString("utf8");
    },
    deriveKey(purpose) {
      return Buffer.from(hkdfSync("sha256", key, Buffer.alloc(0), purpose, SECRETS_KEY_BYTES));
    },
  };
}

/** A referral click token: 192 bits of randomness, URL-safe. */
export function generateClickToken(): string {
  return randomBytes(24).toString("base64url");
}

/** A referral ingest secret (the HMAC key is the whole string's UTF-8 bytes). */
export function generateReferralSecret(): string {
  return `rsec_${randomBytes(32).toString("base64url")}`;
}

/**
 * A reward callback secret in the Standard Webhooks form `whsec_<base64 of 32 bytes>`.
 * The contract's `v1=<hex>` signature keys HMAC with the whole string; the optional
 * Standard Webhooks signature keys it with the base64-decoded part, as that spec says.
 */
export function generateCallbackSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

/** A pull API secret (the HMAC key is the whole string's UTF-8 bytes, as for referral secrets). */
export function generatePullSecret(): string {
  return `psec_${randomBytes(32).toString("base64url")}`;
}

/** A new claim key for reward plugins' check/claim API: `vck_` + 43 base64url characters (32 random bytes). */
export function generateClaimKey(): string {
  return `vck_${randomBytes(32).toString("base64url")}`;
}

/** Whether `key` has the shape of a claim key (anything else is answered as a wrong key without a database lookup). */
export function isClaimKeyShape(key: string): boolean {
  return /^vck_[A-Za-z0-9_-]{43}$/.test(key);
}

/** The lookup hash of a claim key: hex SHA-256 (server_secrets.lookup_hash). The key itself is never stored unsealed. */
export function claimKeyLookupHash(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** A short random key id, for example `k_3f9a1c2b`. */
export function generateKid(): string {
  return `k_${randomBytes(4).toString("hex")}`;
}

/** A bearer token of the internal API (`rst_` + 256 bits); stored only as its SHA-256. */
export function generateServiceToken(): string {
  return `rst_${randomBytes(32).toString("base64url")}`;
}

/** A one-time dashboard login token (`dl_` + 256 bits); stored only as its SHA-256. */
export function generateLoginToken(): string {
  return `dl_${randomBytes(32).toString("base64url")}`;
}

/** A dashboard session token, the cookie's value (`ds_` + 256 bits); stored only as its SHA-256. */
export function generateSessionToken(): string {
  return `ds_${randomBytes(32).toString("base64url")}`;
}

/** Lower-case hex SHA-256 of a token: the only form in which tokens are stored and looked up. */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}
