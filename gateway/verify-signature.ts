import { computeSignature, isStale, macMatches, type IngestSignature } from "../services/shared/values/signature.js";

/** One active referral secret of a server, as resolved for verification. */
export interface SigningKeyMaterial {
  kid: string;
  /** The HMAC key: the secret string's UTF-8 bytes. */
  secret: Uint8Array;
}

/** A parsed X-Service-Signature header (step 2). */
export type ParsedSignatureHeader = IngestSignature;

/** Step 2: the header's one parser, services/shared/values/signature.ts#parseIngestSignature (null: 400 malformed). */
export { parseIngestSignature as parseSignatureHeader } from "../services/shared/values/signature.js";

/** The outcome of verifying an ingest signature (steps 6 and 7 of the order of checks). */
export type SignatureVerdict =
  /** A key matched and `t` is fresh; `kid` names the key that matched. */
  { kind: "verified"; kid: string } | { kind: "bad_signature" } | { kind: "stale" };

/**
 * Verifies a parsed X-Service-Signature against a server's active keys.
 *
 * - With a `kid`, only that key is tried; an unknown `kid` is `bad_signature`.
 * - Without one, every active key is tried - all of them, so timing does not tell which matched.
 * - Every comparison is constant-time (`macMatches`).
 * - The MAC is checked BEFORE the clock: a forged `t` cannot probe the replay window,
 *   so a stale timestamp with a wrong MAC is `bad_signature`, not `stale`.
 * - The signed string is `<t as written in the header>.<raw body bytes>`.
 */
export function verifySignature(input: {
  signature: ParsedSignatureHeader;
  keys: readonly SigningKeyMaterial[];
  rawBody: Buffer;
  nowSeconds: number;
}): SignatureVerdict {
  const { signature, rawBody } = input;
  const candidates = signature.kid === undefined ? input.keys : input.keys.filter((k) => k.kid === signature.kid);
  let matchedKid: string | undefined;
  for (const key of candidates) {
    const expected = computeSignature(Buffer.from(key.secret), signature.tText, rawBody);
    if (macMatches(expected, signature.macs)) matchedKid ??= key.kid;
  }
  if (matchedKid === undefined) return { kind: "bad_signature" };
  if (isStale(signature.t, input.nowSeconds)) return { kind: "stale" };
  return { kind: "verified", kid: matchedKid };
}
