import { INTEGER_PATTERN, KID_PATTERN, SHA256_HEX_LENGTH, SIGNATURE_TOLERANCE_SECONDS } from "../../services/shared/values/signature.js";
import { ERROR_TEXT } from "../../services/shared/values/contract.js";

/**
 * What the dashboard's signature debugger (static/signature-check.js) needs to judge a
 * header the way the gateway does: the replay window, the patterns of `t` and `kid`, the
 * MAC's hex length and the contract's error texts; and how the shipped receivers
 * (docs/receivers/) refuse a callback signed for another server (`server_mismatch`, with
 * `{server_id}` standing for the receiver's own). Served as
 * `GET /dashboard/signature-rules.json`, so the page never keeps a second copy.
 */
export const SIGNATURE_RULES = {
  tolerance_seconds: SIGNATURE_TOLERANCE_SECONDS,
  t_pattern: INTEGER_PATTERN.source,
  kid_pattern: KID_PATTERN.source,
  mac_hex_length: SHA256_HEX_LENGTH,
  texts: {
    malformed: ERROR_TEXT.badSignatureHeader,
    bad_signature: ERROR_TEXT.badSignature,
    stale: ERROR_TEXT.stale,
    invalid_json: ERROR_TEXT.invalidJson,
    server_mismatch: "server_id mismatch: this receiver is for server {server_id}",
  },
} as const;

/**
 * The reason a receiver for server `serverId` refuses a validly signed callback whose body's
 * `server_id` is another server's: the text the six shipped receivers answer with (403) and the
 * debugger reports.
 */
export function serverMismatchText(serverId: string): string {
  return SIGNATURE_RULES.texts.server_mismatch.replace("{server_id}", serverId);
}
