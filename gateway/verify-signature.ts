import { computeSignature, isStale, macMatches, parseIngestSignature, type IngestSignature } from "../services/shared/signature.js";

/** One active referral secret of a server, as resolved for verification. */
export interface SigningKeyMaterial {
  kid: string;
  /** The HMAC key: the secret string's UTF-8 bytes. */
  secret: Uint8Array;
}

/** A parsed ingest header plus the exact text of `t`, which is what the caller signed. */
export interface ParsedSignatureHeader extends IngestSignature {
  tText: string;
}

/**
 * Parses `X-Service-Signature: t=<unix>,v1=sha256=<hex>[,kid=<key-id>]` (step 2).
 * Returns null - answered as 400 `missing or malformed X-Service-Signature header` - when
 * `services/shared/signature.ts#parseIngestSignature` finds it missing or malformed (no `t`,
 * non-integer `t`, no `v1`, `v1` without `sha256=`, hex of the wrong length or not hex),
 * and also when a `v1` hex has upper-case letters: the contract's format is lower-case hex.
 * Several headers are joined by Node with ", ", which repeats `t` and so is malformed too.
 */
export function parseSignatureHeader(header: string | undefined): ParsedSignatureHeader | null {
  const parsed = parseIngestSignature(header);
  if (parsed === null || header === undefined) return null;
  let tText = "";
  for (const rawPart of header.split(",")) {
    const part = rawPart.trim();
    if (part.startsWith("t=")) tText = part.slice(2);
    if (part.startsWith("v1=") && part !== part.toLowerCase()) return null;
  }
  return { ...parsed, tText };
}

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
