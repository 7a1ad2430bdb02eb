/**
 * The all-in-one banner's line about outbound callback addresses (scripts/start.ts): whether
 * ALLOW_INSECURE_CALLBACKS lifts the SSRF guard (http URLs, loopback, private and other special
 * addresses allowed: development only) or the guard holds (https to public addresses only).
 */
export function insecureCallbacksNotice(allowInsecureCallbacks: boolean): string {
  return allowInsecureCallbacks
    ? "  Callbacks:                 INSECURE URLs ALLOWED (ALLOW_INSECURE_CALLBACKS=true): http, localhost and private addresses are called; development only"
    : "  Callbacks:                 https to public addresses only; set ALLOW_INSECURE_CALLBACKS=true to allow http and local URLs (development only)";
}
