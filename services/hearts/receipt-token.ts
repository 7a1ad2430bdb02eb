import { createHmac, timingSafeEqual } from "node:crypto";
import type { SecretBox } from "../shared/runtime/secrets.js";
import { RECEIPT_PATH_PREFIX } from "../shared/values/wire.js";
import { bytesOfUuid, isUuid, uuidOfBytes } from "../shared/values/ids.js";

/**
 * Receipt tokens: THE one module that mints and reads them. A token names one heart and cannot be
 * guessed or forged without SECRETS_KEY, and nothing is stored for it:
 *
 *   token = base64url( version 0x01 || heart id (16 bytes) || HMAC-SHA256(receipt key, version || heart id)[0..16] )
 *
 * 33 bytes, 44 URL-safe characters, no padding. The receipt key is SECRETS_KEY's HKDF for the purpose
 * RECEIPT_KEY_PURPOSE (SecretBox.deriveKey), so it is never the key that seals secrets. The MAC is
 * compared in constant time; a token that fails any check is simply not a token (undefined), with no
 * hint of which check failed. Only the referral service holds the key; the gateway passes tokens on.
 */

/** The HKDF info label of the receipt key: changing it invalidates every receipt link. */
export const RECEIPT_KEY_PURPOSE = "hearts.receipt-token.v1";
/** Characters of a receipt token. */
export const RECEIPT_TOKEN_CHARS = 44;

const VERSION = 0x01;
const ID_BYTES = 16;
const MAC_BYTES = 16;
const TOKEN_BYTES = 1 + ID_BYTES + MAC_BYTES;
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{44}$/;

/** The receipt key of a process holding SECRETS_KEY. */
export function receiptKeyOf(secretBox: SecretBox): Buffer {
  return secretBox.deriveKey(RECEIPT_KEY_PURPOSE);
}

function macOf(key: Buffer, signed: Buffer): Buffer {
  return createHmac("sha256", key).update(signed).digest().subarray(0, MAC_BYTES);
}

/** The receipt token of a heart (its id is a uuid). */
export function mintReceiptToken(key: Buffer, heartId: string): string {
  if (!isUuid(heartId)) throw new Error("a receipt token names a heart by its uuid");
  const signed = Buffer.concat([Buffer.of(VERSION), bytesOfUuid(heartId)]);
  return Buffer.concat([signed, macOf(key, signed)]).toString("base64url");
}

/** The heart id a receipt token names, or undefined when it is not a token minted with `key` (tampered, truncated, another key). */
export function readReceiptToken(key: Buffer, token: string): string | undefined {
  if (!TOKEN_PATTERN.test(token)) return undefined;
  const bytes = Buffer.from(token, "base64url");
  if (bytes.length !== TOKEN_BYTES) return undefined;
  const signed = bytes.subarray(0, 1 + ID_BYTES);
  const given = bytes.subarray(1 + ID_BYTES);
  // The MAC is computed and compared whatever the version byte says, so every well-formed token costs the same.
  const macMatches = timingSafeEqual(given, macOf(key, signed));
  if (!macMatches || bytes[0] !== VERSION) return undefined;
  return uuidOfBytes(signed.subarray(1));
}

/** The public receipt page of a token on the gateway at `publicBaseUrl` (PUBLIC_BASE_URL). */
export function receiptUrlOf(publicBaseUrl: string, token: string): string {
  return `${publicBaseUrl.replace(/\/+$/, "")}${RECEIPT_PATH_PREFIX}${token}`;
}

/** Receipt links of one process: the key derived once, the base URL read at each use (tests set it after start). */
export interface ReceiptLinks {
  /** The receipt URL of a heart. */
  urlOf(heartId: string): string;
  /** The heart a token names, or undefined. */
  heartIdOf(token: string): string | undefined;
}

/** Builds the process's ReceiptLinks from SECRETS_KEY's box and PUBLIC_BASE_URL; the key is derived at first use, then kept. */
export function createReceiptLinks(deps: { secretBox: SecretBox; publicBaseUrl: string }): ReceiptLinks {
  let key: Buffer | undefined;
  const keyOf = () => (key ??= receiptKeyOf(deps.secretBox));
  return {
    urlOf: (heartId) => receiptUrlOf(deps.publicBaseUrl, mintReceiptToken(keyOf(), heartId)),
    heartIdOf: (token) => readReceiptToken(keyOf(), token),
  };
}
