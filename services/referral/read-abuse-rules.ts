import type { EnvReader } from "../shared/runtime/config.js";
import { readValueOrFile } from "../shared/runtime/process-config.js";
import { AbuseRulesError, DEFAULT_ABUSE_RULES, loadAbuseRules, type AbuseRules } from "./domain/abuse-signals.js";

/**
 * Reads the referral anti-abuse thresholds from ABUSE_RULES_JSON (inline JSON) or ABUSE_RULES_FILE
 * (a JSON file); the documented defaults (docs/referral-rules.md) when neither is set.
 */
export function readAbuseRules(r: EnvReader): AbuseRules {
  const json = readValueOrFile(r, "ABUSE_RULES_JSON", "ABUSE_RULES_FILE");
  // An unreadable file is already a recorded problem (the start stops); neither setting means the defaults.
  if (!json) return DEFAULT_ABUSE_RULES;
  try {
    return loadAbuseRules(json);
  } catch (error) {
    // Failure policy: report every rule problem with the other settings; the process does not start.
    if (error instanceof AbuseRulesError) for (const p of error.problems) r.problem(`abuse rules: ${p}`);
    else r.problem(`abuse rules: ${(error as Error).message}`);
    return DEFAULT_ABUSE_RULES;
  }
}
