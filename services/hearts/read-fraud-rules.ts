import { readFileSync } from "node:fs";
import type { EnvReader } from "../shared/config.js";
import { DEFAULT_FRAUD_RULES, FraudRulesError, loadFraudRules, type FraudRules } from "./domain/fraud-rules.js";

/**
 * Reads the fraud rule overrides from FRAUD_RULES_JSON (inline JSON) or
 * FRAUD_RULES_FILE (a JSON file); the documented defaults when neither is set.
 */
export function readFraudRules(r: EnvReader): FraudRules {
  let json = r.optionalString("FRAUD_RULES_JSON");
  const file = r.optionalString("FRAUD_RULES_FILE");
  if (!json && file) {
    try {
      json = readFileSync(file, "utf8");
    } catch {
      // Failure policy: a named but unreadable rules file stops the start; silently using defaults would hide it.
      r.problem(`FRAUD_RULES_FILE ${file} cannot be read`);
      return DEFAULT_FRAUD_RULES;
    }
  }
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
