import { INTEGER_PATTERN, KID_PATTERN, SHA256_HEX_LENGTH, SIGNATURE_TOLERANCE_SECONDS } from "../../services/shared/signature.js";
import { ERROR_TEXT } from "../../services/shared/contract.js";

/**
 * What the dashboard's signature debugger (static/signature-check.js) needs to judge a
 * header the way the gateway does: the replay window, the patterns of `t` and `kid`, the
 * MAC's hex length and the contract's error texts. Served as
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
  },
} as const;
