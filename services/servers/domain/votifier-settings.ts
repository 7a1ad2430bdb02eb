import { isIP } from "node:net";
import { validateCallbackUrl } from "../../shared/values/callback-url.js";
import { DomainError } from "../../shared/rpc/errors.js";
import { maxCharsOf } from "../../shared/values/field-rules.js";
import { betweenText, requiredText } from "../../shared/values/contract.js";

/** Longest Votifier service name: with it, every vote of a 16-character username fits NuVotifier's 1024-byte frame. */
export const MAX_VOTIFIER_SERVICE_NAME_CHARS = maxCharsOf("votifier_service_name");
/** Longest Votifier token accepted (NuVotifier generates 26 characters). */
export const MAX_VOTIFIER_TOKEN_CHARS = maxCharsOf("votifier_token");
/** Longest host name (DNS). */
export const MAX_VOTIFIER_HOST_CHARS = maxCharsOf("votifier_host");

/** Validated Votifier settings; `token` is null when the caller keeps the stored one. */
export interface VotifierSettings {
  host: string;
  port: number;
  serviceName: string;
  token: string | null;
}

const HOST_PATTERN = /^[A-Za-z0-9.:-]+$/;
const CONTROL_OR_SPACE = /[\s\p{Cc}]/u;

/**
 * Validates SetVotifierSettings. An empty host turns the transport off (null).
 * The host is a DNS name or an IP literal; it goes through the callback URL policy
 * (`validateCallbackUrl`: no localhost, no loopback/private/link-local/metadata IP
 * literals unless ALLOW_INSECURE_CALLBACKS), and the address actually connected
 * to is checked again at every attempt. Error texts name the field and never echo values.
 */
export function toVotifierSettings(
  input: { host: string; port: number; serviceName: string; token: string },
  opts: { allowInsecure: boolean },
): VotifierSettings | null {
  const rawHost = input.host.trim();
  if (rawHost === "") return null;
  const host = rawHost.startsWith("[") && rawHost.endsWith("]") ? rawHost.slice(1, -1) : rawHost;
  if (host.length > MAX_VOTIFIER_HOST_CHARS || !HOST_PATTERN.test(host) || (host.includes(":") && isIP(host) !== 6)) {
    throw new DomainError("invalid_argument", "votifier host must be a host name or an IP address");
  }
  if (!Number.isInteger(input.port) || input.port < 1 || input.port > 65535) throw new DomainError("invalid_argument", betweenText("votifier port", 1, 65535));
  const checked = validateCallbackUrl(`https://${isIP(host) === 6 ? `[${host}]` : host}:${input.port}/`, opts);
  // One home for the address policy: the callback URL check, with this field's name in its text.
  if (!checked.ok) throw new DomainError("invalid_argument", checked.error.replace(/^callback_url/, "votifier host"));
  const serviceName = input.serviceName.trim();
  if (serviceName === "") throw new DomainError("invalid_argument", requiredText("votifier service_name"));
  if (serviceName.length > MAX_VOTIFIER_SERVICE_NAME_CHARS || /\p{Cc}/u.test(serviceName)) {
    throw new DomainError("invalid_argument", `votifier service_name must be at most ${MAX_VOTIFIER_SERVICE_NAME_CHARS} printable characters`);
  }
  const token = input.token.trim();
  if (token.length > MAX_VOTIFIER_TOKEN_CHARS || CONTROL_OR_SPACE.test(token)) {
    throw new DomainError("invalid_argument", `votifier token must be at most ${MAX_VOTIFIER_TOKEN_CHARS} characters without spaces`);
  }
  return { host: host.toLowerCase(), port: input.port, serviceName, token: token === "" ? null : token };
}
