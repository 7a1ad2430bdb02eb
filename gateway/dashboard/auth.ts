import { createHash, timingSafeEqual } from "node:crypto";

/** Shortest DASHBOARD_TOKEN accepted: a guessable token would open every server's secrets. */
export const MIN_DASHBOARD_TOKEN_CHARS = 16;

/**
 * True when the `Authorization` header is `Bearer <token>` with exactly the
 * configured token. Both sides are hashed first so the comparison is
 * constant-time and does not leak the token's length.
 */
export function isAuthorized(header: string | undefined, token: string): boolean {
  if (header === undefined || token === "") return false;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  const presented = match?.[1] ?? "";
  const expected = createHash("sha256").update(token, "utf8").digest();
  const given = createHash("sha256").update(presented, "utf8").digest();
  // Evaluate both checks unconditionally so a missing token costs the same as a wrong one.
  const same = timingSafeEqual(expected, given);
  return same && match !== null;
}
