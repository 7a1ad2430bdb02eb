/**
 * The exact exchange of one delivery attempt, as stored in `delivery_attempts` and shown on
 * the dashboard: what was sent and what came back. Transport-neutral: `target` is where it
 * went (a URL for HTTP callbacks), headers are empty where a transport has none, and a
 * transport without a status code leaves `response.status` 0.
 */

/** One attempt's request and response. */
export interface AttemptExchange {
  /** Where the attempt went (the callback URL). */
  target: string;
  /** The request as sent: headers (the signature header included) and body. */
  request: { headers: Record<string, string>; body: string };
  /** What came back; null when nothing did (refused, timed out, unreachable). */
  response: { status: number; headers: Record<string, string>; body: string; bodyTruncated: boolean } | null;
  latencyMs: number;
  /** Why the attempt did not succeed; null when it did. */
  error: string | null;
  /** The receiver acknowledged (2xx). */
  succeeded: boolean;
  /** For a signed request: the string that was signed ("<t>.<body>"); shown in test reports, not stored. */
  signedString?: string;
}

/**
 * Secret prefixes of the service (callback `whsec_`, referral `rsec_`). A value carrying one is
 * masked before it is stored: a receiver that echoes a secret back must not put it on screen.
 */
const SECRET_VALUE = /\b(whsec|rsec)_[A-Za-z0-9+/=_-]+/g;
/** Response headers whose values are credentials of the receiver's own, never worth showing. */
const MASKED_HEADERS = new Set(["set-cookie", "authorization", "proxy-authorization", "cookie"]);
/** Shown in place of a masked value. */
export const MASKED_VALUE = "[hidden]";

/** Masks any service secret value in `text`. */
export function maskSecretValues(text: string): string {
  return text.replace(SECRET_VALUE, (_, prefix: string) => `${prefix}_${MASKED_VALUE}`);
}

/** Headers ready to store: credential headers masked, secret values masked. */
export function toStoredHeaders(headers: Record<string, string>): Record<string, string> {
  const stored: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    stored[name] = MASKED_HEADERS.has(name.toLowerCase()) ? MASKED_VALUE : maskSecretValues(value);
  }
  return stored;
}

/** The exchange ready to store and show: secrets and receiver credentials masked. */
export function toStoredExchange(exchange: AttemptExchange): AttemptExchange {
  return {
    ...exchange,
    request: { headers: toStoredHeaders(exchange.request.headers), body: maskSecretValues(exchange.request.body) },
    response: exchange.response
      ? { ...exchange.response, headers: toStoredHeaders(exchange.response.headers), body: maskSecretValues(exchange.response.body) }
      : null,
    error: exchange.error === null ? null : maskSecretValues(exchange.error),
  };
}
