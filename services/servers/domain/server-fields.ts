import { DomainError } from "../../shared/errors.js";

/** Longest server name. */
export const MAX_SERVER_NAME_CHARS = 200;
/** Longest registration URL. */
export const MAX_REGISTRATION_URL_CHARS = 2048;

/** A trimmed, non-empty server name. */
export function toServerName(name: string): string {
  const trimmed = name.trim();
  if (trimmed === "") throw new DomainError("invalid_argument", "name is required");
  if (trimmed.length > MAX_SERVER_NAME_CHARS) throw new DomainError("invalid_argument", `name must be at most ${MAX_SERVER_NAME_CHARS} characters`);
  return trimmed;
}

/**
 * A registration URL: an absolute http(s) URL without credentials, or null
 * when empty (no redirect). The page is public, so plain http is allowed.
 */
export function toRegistrationUrl(url: string): string | null {
  const trimmed = url.trim();
  if (trimmed === "") return null;
  if (trimmed.length > MAX_REGISTRATION_URL_CHARS) {
    throw new DomainError("invalid_argument", `registration_url must be at most ${MAX_REGISTRATION_URL_CHARS} characters`);
  }
  let parsed: URL;
  try {
    parsed = new URL(trimmed);
  } catch {
    // Failure policy: an unparseable URL is the caller's error, reported without echoing it.
    throw new DomainError("invalid_argument", "registration_url is not a valid URL");
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") throw new DomainError("invalid_argument", "registration_url must use http or https");
  if (parsed.username !== "" || parsed.password !== "") throw new DomainError("invalid_argument", "registration_url must not contain credentials");
  return parsed.toString();
}
