import type { EnvReader } from "../shared/runtime/config.js";
import { readValueOrFile } from "../shared/runtime/process-config.js";
import { DEFAULT_FRAUD_RULES, FraudRulesError, loadFraudRules, type FraudRules } from "./domain/fraud-rules.js";

/**
 * Reads the fraud rule overrides from FRAUD_RULES_JSON (inline JSON) or
 * FRAUD_RULES_FILE (a JSON file); the documented defaults when neither is set.
 */
export function readFraudRules(r: EnvReader): FraudRules {
  const json = readValueOrFile(r, "FRAUD_RULES_JSON", "FRAUD_RULES_FILE");
  // An unreadable file is already a recorded problem (the start stops); neither setting means the defaults.
  if (!json) return DEFAULT_FRAUD_RULES;
  try {
    return loadFraudRules(json);
  } catch (error) {
    // Failure policy: report every rule problem with the other settings; the process does not start.
    if (error instanceof FraudRulesError) for (const p of error.problems) r.problem(`fraud rules: ${p}`);
    else r.problem(`fraud rules: ${(error as Error).message}`);
    return DEFAULT_FRAUD_RULES;
  }
}
