import { DomainError } from "../../shared/rpc/errors.js";
import { boundField } from "../../shared/values/field-rules.js";
import { requiredText, invalidUrlText, urlCredentialsText, urlPortZeroText } from "../../shared/values/contract.js";

/** A trimmed, non-empty server name. */
export function toServerName(name: string): string {
  const trimmed = name.trim();
  if (trimmed === "") throw new DomainError("invalid_argument", requiredText("name"));
  return boundField("name", trimmed);
}

/**
 * A registration URL: an absolute http(s) URL without credentials or port 0, or null
 * when empty (no redirect). The page is public, so plain http is allowed.
 */
export function toRegistrationUrl(url: string): string | null {
  const trimmed = url.trim();
  if (trimmed === "") return null;
  boundField("registration_url", trimmed);
  let parsed: URL;
  try {
    parsed = new URL(trimmed);
  } catch {
    // Failure policy: an unparseable URL is the caller's error, reported without echoing it.
    throw new DomainError("invalid_argument", invalidUrlText("registration_url"));
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") throw new DomainError("invalid_argument", "registration_url must use http or https");
  if (parsed.username !== "" || parsed.password !== "") throw new DomainError("invalid_argument", urlCredentialsText("registration_url"));
  if (parsed.port === "0") throw new DomainError("invalid_argument", urlPortZeroText("registration_url"));
  return parsed.toString();
}
