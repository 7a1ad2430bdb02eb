/** Query parameter that carries the click token to the registration page. */
export const REF_TOKEN_PARAM = "ref_token";

/**
 * The registration URL with `ref_token=<token>` added, keeping its other query
 * parameters (an existing `ref_token` is replaced). Empty when no registration
 * URL is set or it does not parse.
 */
export function toRedirectUrl(registrationUrl: string | null, token: string): string {
  if (!registrationUrl) return "";
  let url: URL;
  try {
    url = new URL(registrationUrl);
  } catch {
    // Failure policy: stored URLs are validated on write; a bad legacy value yields no redirect rather than an error.
    return "";
  }
  url.searchParams.set(REF_TOKEN_PARAM, token);
  return url.toString();
}
