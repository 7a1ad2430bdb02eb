import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

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

/** Name of the owner's session cookie. */
export const SESSION_COOKIE = "dashboard_session";
/** Header carrying the session's CSRF token on state-changing calls. */
export const CSRF_HEADER = "x-csrf-token";
/** The cookie is sent only to the dashboard's own paths. */
const COOKIE_PATH = "/dashboard";

/** The session cookie: HttpOnly, SameSite=Strict, Path=/dashboard, Secure when the public URL is https. */
export function sessionCookie(sessionToken: string, maxAgeSeconds: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${sessionToken}; Path=${COOKIE_PATH}; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${secure ? "; Secure" : ""}`;
}

/** A Set-Cookie that removes the session cookie. */
export function clearedSessionCookie(secure: boolean): string {
  return sessionCookie("", 0, secure);
}

/** The value of cookie `name` in a Cookie header, or undefined. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const at = part.indexOf("=");
    if (at !== -1 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/**
 * The session's CSRF token, derived from the session token (HMAC-SHA256), so nothing
 * more is stored. The page reads it from GET /dashboard/api/session (same-origin only:
 * another site can neither read that answer nor the HttpOnly cookie) and sends it in
 * X-CSRF-Token.
 */
export function csrfTokenFor(sessionToken: string): string {
  return createHmac("sha256", sessionToken).update("dashboard csrf v1", "utf8").digest("base64url");
}

/**
 * CSRF checks of a state-changing call made with the session cookie; returns the
 * problem, or undefined when it passes. A browser's Sec-Fetch-Site must be
 * `same-origin`, an Origin must be the request's own host, and X-CSRF-Token must be
 * the session's token (constant-time compare).
 */
export function checkCsrf(headers: IncomingHttpHeaders, expected: string): string | undefined {
  const site = headers["sec-fetch-site"];
  if (site !== undefined && site !== "same-origin") return "cross-site request refused";
  const origin = headers.origin;
  if (origin !== undefined && originHost(origin) !== headers.host) return "cross-origin request refused";
  const presented = headers[CSRF_HEADER];
  const given = createHash("sha256")
    .update(typeof presented === "string" ? presented : "", "utf8")
    .digest();
  const wanted = createHash("sha256").update(expected, "utf8").digest();
  if (!timingSafeEqual(given, wanted)) return "missing or invalid CSRF token: send X-CSRF-Token from GET /dashboard/api/session";
  return undefined;
}

function originHost(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    // Failure policy: an Origin that is not a URL (for example "null") matches no host, so the call is refused.
    return undefined;
  }
}
