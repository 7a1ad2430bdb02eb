import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { SecretBox } from "../shared/runtime/secrets.js";
import { bytesOfUuid, uuidOfBytes } from "../shared/values/ids.js";

/**
 * The two tokens of a vote reminder, each good for one purpose only (docs/reminders.md):
 *
 * - confirm: `base64url(subscription id (16 bytes) || 32 random bytes)`; only its SHA-256 is stored, replaced at
 *   every opt-in and cleared once confirmed;
 * - unsubscribe: `base64url(subscription id || HMAC-SHA256(unsubscribe key, id || nonce))`; the nonce is random per
 *   opt-in and stored, the key is SECRETS_KEY's HKDF for UNSUBSCRIBE_KEY_PURPOSE, so nothing stored lets anyone
 *   build a token, and every reminder can carry the same link without the token being kept.
 *
 * Both are 64 URL-safe characters; the two cannot stand in for each other (a confirm token's random half is not the
 * MAC). A token that fails any check is no token (undefined), with no hint which check failed.
 */

/** The HKDF info label of the unsubscribe key: changing it invalidates every unsubscribe link sent. */
export const UNSUBSCRIBE_KEY_PURPOSE = "reminders.unsubscribe-token.v1";
const ID_BYTES = 16;
const SECRET_BYTES = 32;
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{64}$/;

/** A token split into the subscription it names and its secret half, or undefined when it is malformed. */
export function splitReminderToken(token: string): { id: string; secret: Buffer } | undefined {
  if (!TOKEN_PATTERN.test(token)) return undefined;
  const bytes = Buffer.from(token, "base64url");
  if (bytes.length !== ID_BYTES + SECRET_BYTES) return undefined;
  return { id: uuidOfBytes(bytes.subarray(0, ID_BYTES)), secret: bytes.subarray(ID_BYTES) };
}

/** A new confirm token of a subscription and the hash to store. */
export function mintConfirmToken(id: string): { token: string; hash: Buffer } {
  const token = Buffer.concat([bytesOfUuid(id), randomBytes(SECRET_BYTES)]).toString("base64url");
  return { token, hash: hashToken(token) };
}

/** The stored form of a confirm token. */
export function hashToken(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}

/** Constant-time: is `token` the one whose hash is stored? */
export function matchesHash(token: string, stored: Buffer | null): boolean {
  return stored !== null && stored.length === SECRET_BYTES && timingSafeEqual(hashToken(token), stored);
}

/** Unsubscribe tokens of one process: the key derived once from SECRETS_KEY. */
export interface UnsubscribeTokens {
  mint(id: string, nonce: Buffer): string;
  /** Constant-time: does `secret` (the token's second half) belong to this subscription and nonce? */
  matches(id: string, nonce: Buffer, secret: Buffer): boolean;
}

/** Builds the process's unsubscribe tokens from SECRETS_KEY's box; the key is derived at first use, then kept. */
export function createUnsubscribeTokens(secretBox: SecretBox): UnsubscribeTokens {
  let key: Buffer | undefined;
  const macOf = (id: string, nonce: Buffer) =>
    createHmac("sha256", (key ??= secretBox.deriveKey(UNSUBSCRIBE_KEY_PURPOSE)))
      .update(Buffer.concat([bytesOfUuid(id), nonce]))
      .digest();
  return {
    mint: (id, nonce) => Buffer.concat([bytesOfUuid(id), macOf(id, nonce)]).toString("base64url"),
    matches: (id, nonce, secret) => secret.length === SECRET_BYTES && timingSafeEqual(secret, macOf(id, nonce)),
  };
}

/** A new random nonce for a subscription's unsubscribe token. */
export function newUnsubscribeNonce(): Buffer {
  return randomBytes(16);
}
