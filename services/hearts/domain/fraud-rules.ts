/**
 * The fraud rule set for hearts: what each rule looks at, its limit and the score
 * it adds. A heart is blocked when the total score reaches `blockThreshold`.
 * Defaults are documented in docs/callbacks.md; deployments override any subset
 * with JSON (see `loadFraudRules`).
 */
export interface FraudRules {
  /** Total score at or above which a heart is blocked as fraud. */
  blockThreshold: number;
  /** Distinct voter identities with a counted heart for the same server from the same IP in the window. */
  ipIdentities: { windowMinutes: number; max: number; score: number };
  /** The same, for the same /24 (IPv4) or /64 (IPv6) subnet. */
  subnetIdentities: { windowMinutes: number; max: number; score: number };
  /** Hearts (any verdict, any server) from one IP in the window: velocity. */
  ipVelocity: { windowSeconds: number; max: number; score: number };
  /** Malformed username: empty after trim, longer than `maxLength` code points, control characters, or not matching `pattern` (a Unicode regex). */
  username: { maxLength: number; pattern: string; score: number };
  /** Missing user agent, or one matching `botPattern` (case-insensitive Unicode regex). */
  userAgent: { missingScore: number; botPattern: string; botScore: number };
}

/** The defaults: each strong signal blocks alone; weaker ones block together. */
export const DEFAULT_FRAUD_RULES: FraudRules = Object.freeze({
  blockThreshold: 100,
  ipIdentities: Object.freeze({ windowMinutes: 24 * 60, max: 3, score: 100 }),
  subnetIdentities: Object.freeze({ windowMinutes: 24 * 60, max: 10, score: 50 }),
  ipVelocity: Object.freeze({ windowSeconds: 60, max: 10, score: 60 }),
  username: Object.freeze({ maxLength: 32, pattern: "^[\\p{L}\\p{M}\\p{N}_.\\- ]+$", score: 100 }),
  userAgent: Object.freeze({
    missingScore: 50,
    botPattern: "bot|crawl|spider|scrap|curl|wget|python|httpclient|okhttp|go-http|java/|libwww|headless|phantom|selenium|puppeteer|playwright",
    botScore: 60,
  }),
}) as FraudRules;

/** Thrown by `loadFraudRules` with every problem found in the override. */
export class FraudRulesError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid fraud rules:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "FraudRulesError";
  }
}

type Section = Exclude<keyof FraudRules, "blockThreshold">;
type FieldKind = "count" | "regex";

const SCHEMA: { [S in Section]: Record<keyof FraudRules[S], FieldKind> } = {
  ipIdentities: { windowMinutes: "count", max: "count", score: "count" },
  subnetIdentities: { windowMinutes: "count", max: "count", score: "count" },
  ipVelocity: { windowSeconds: "count", max: "count", score: "count" },
  username: { maxLength: "count", pattern: "regex", score: "count" },
  userAgent: { missingScore: "count", botPattern: "regex", botScore: "count" },
};

/**
 * Parses a JSON override (a partial FraudRules: any subset of sections and fields)
 * over the defaults. Unknown keys, non-integer or negative numbers and regexes
 * that do not compile are all reported at once in a FraudRulesError.
 */
export function loadFraudRules(json: string, base: FraudRules = DEFAULT_FRAUD_RULES): FraudRules {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (error) {
    // Failure policy: fail closed at boot; a broken override must not silently fall back to defaults.
    throw new FraudRulesError([`not valid JSON: ${(error as Error).message}`]);
  }
  if (!isPlainObject(parsed)) throw new FraudRulesError(["must be a JSON object"]);
  const problems: string[] = [];
  const result = structuredClone(base) as unknown as Record<string, unknown>;
  for (const [key, value] of Object.entries(parsed)) {
    if (key === "blockThreshold") {
      if (isCount(value) && value > 0) result.blockThreshold = value;
      else problems.push("blockThreshold must be a positive integer");
      continue;
    }
    if (!(key in SCHEMA)) {
      problems.push(`unknown rule "${key}" (known: blockThreshold, ${Object.keys(SCHEMA).join(", ")})`);
      continue;
    }
    const fields = SCHEMA[key as Section] as Record<string, FieldKind>;
    if (!isPlainObject(value)) {
      problems.push(`${key} must be an object`);
      continue;
    }
    const target = result[key] as Record<string, unknown>;
    for (const [field, fieldValue] of Object.entries(value)) {
      const kind = fields[field];
      if (kind === undefined) problems.push(`unknown field "${key}.${field}" (known: ${Object.keys(fields).join(", ")})`);
      else if (kind === "count" && !isCount(fieldValue)) problems.push(`${key}.${field} must be a non-negative integer`);
      else if (kind === "regex" && !compiles(fieldValue)) problems.push(`${key}.${field} must be a valid regular expression string`);
      else target[field] = fieldValue;
    }
  }
  if (problems.length > 0) throw new FraudRulesError(problems);
  return result as unknown as FraudRules;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}

function compiles(value: unknown): boolean {
  if (typeof value !== "string") return false;
  try {
    new RegExp(value, "u");
    return true;
  } catch {
    // Failure policy: an uncompilable pattern is a configuration problem, reported at boot.
    return false;
  }
}
