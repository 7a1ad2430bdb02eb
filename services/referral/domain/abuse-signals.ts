/**
 * Anti-abuse signals of referrals: pure rules over facts the ApplyEvent read statement gathers
 * (services/referral/abuse-facts.ts). Flag, don't block: a signal never changes an ingest answer; it
 * decides only the referral's review state, and with it whether its credit counts on the leaderboard.
 * The thresholds are one table (DEFAULT_ABUSE_RULES, documented in docs/referral-rules.md); a
 * deployment overrides any subset with JSON (loadAbuseRules, ABUSE_RULES_JSON / ABUSE_RULES_FILE), as
 * the hearts' fraud rules are overridden. No clock, I/O or randomness here: times are passed in.
 */
import type { ReviewState } from "../../shared/values/review-states.js";

/** The review states live with the shared values (the reward queue applies them too); re-exported for this folder. */
export { COUNTED_REVIEWS, isCounted, REVIEW_STATES, type ReviewState } from "../../shared/values/review-states.js";

/** Every signal, in the order they are listed. */
export const ABUSE_SIGNAL_CODES = [
  "self_referral",
  "self_referral_ip",
  "self_referral_subnet",
  "ip_fanout",
  "subnet_fanout",
  "click_velocity",
  "no_activity",
] as const;
/** One anti-abuse signal. */
export type AbuseSignalCode = (typeof ABUSE_SIGNAL_CODES)[number];

/** A server's anti-abuse mode (`off` unless the owner opts in, so the contract's counting holds). */
export type ReviewMode = "off" | "loose" | "strict";
/** Every mode. */
export const REVIEW_MODES: readonly ReviewMode[] = ["off", "loose", "strict"];

/**
 * The thresholds. A count limit of 0 turns its signal off; a flag of false does too.
 * "Referees" are distinct referee identities of this server's referrals.
 */
export interface AbuseRules {
  /** The referee is the referrer (identities equal, case-insensitively). */
  selfReferral: { enabled: boolean };
  /**
   * The referrer's own address: the click's IP (or /24, /64 subnet), or an address the referee's hearts
   * came from, is one the referrer's own hearts on this server came from.
   */
  selfReferralAddress: { enabled: boolean };
  /** More than `maxReferees` referees whose clicks came from the click's IP within `windowMinutes` before now. */
  ipFanout: { windowMinutes: number; maxReferees: number };
  /** The same for the click's subnet. */
  subnetFanout: { windowMinutes: number; maxReferees: number };
  /** More than `maxClicks` clicks on this server from the click's IP within `windowSeconds` either side of it. */
  clickVelocity: { windowSeconds: number; maxClicks: number };
  /** At `qualified`: fewer than `minHearts` counted hearts by the referee on this server before that moment. */
  noActivity: { minHearts: number };
}

/** The defaults (docs/referral-rules.md, "Anti-abuse"). */
export const DEFAULT_ABUSE_RULES: AbuseRules = Object.freeze({
  selfReferral: Object.freeze({ enabled: true }),
  selfReferralAddress: Object.freeze({ enabled: true }),
  ipFanout: Object.freeze({ windowMinutes: 24 * 60, maxReferees: 3 }),
  subnetFanout: Object.freeze({ windowMinutes: 24 * 60, maxReferees: 10 }),
  clickVelocity: Object.freeze({ windowSeconds: 60, maxClicks: 10 }),
  noActivity: Object.freeze({ minHearts: 1 }),
}) as AbuseRules;

/** What the read statement saw for one referral's click, referrer and referee. */
export interface AbuseFacts {
  /** The event being applied: signals are looked for at `registered` (the mint) and at `qualified`. */
  stage: "registered" | "qualified";
  referrerIdentity: string;
  refereeIdentity: string;
  /** The click's IP was recorded and parsed (address signals need it). */
  clickAddressKnown: boolean;
  /** The click's IP or a referee heart's IP is an IP of the referrer's hearts on this server. */
  referrerSharesIp: boolean;
  /** The same for subnets. */
  referrerSharesSubnet: boolean;
  /** Other referees whose clicks came from the click's IP in the fan-out window (this referee not included). */
  otherRefereesFromIp: number;
  /** The same for the click's subnet. */
  otherRefereesFromSubnet: number;
  /** Clicks from the click's IP within the velocity window either side of it (this one included). */
  clicksFromIp: number;
  /** Counted hearts by the referee on this server before now (read at `qualified` only). */
  refereeHearts: number;
}

/** Signals found, with what was seen for each. */
export interface FoundSignals {
  codes: AbuseSignalCode[];
  details: Partial<Record<AbuseSignalCode, Record<string, number>>>;
}

/** The start of the fan-out windows for a read at `now`. */
export function abuseWindowsAt(rules: AbuseRules, now: Date): { ipFanoutSince: Date; subnetFanoutSince: Date; velocitySeconds: number } {
  return {
    ipFanoutSince: new Date(now.getTime() - rules.ipFanout.windowMinutes * 60_000),
    subnetFanoutSince: new Date(now.getTime() - rules.subnetFanout.windowMinutes * 60_000),
    velocitySeconds: rules.clickVelocity.windowSeconds,
  };
}

/** The signals the facts raise under the rules. */
export function detectSignals(facts: AbuseFacts, rules: AbuseRules): FoundSignals {
  const found: FoundSignals = { codes: [], details: {} };
  const raise = (code: AbuseSignalCode, details: Record<string, number>) => {
    found.codes.push(code);
    found.details[code] = details;
  };
  if (rules.selfReferral.enabled && facts.referrerIdentity.toLowerCase() === facts.refereeIdentity.toLowerCase()) raise("self_referral", {});
  if (rules.selfReferralAddress.enabled && facts.referrerSharesIp) raise("self_referral_ip", {});
  else if (rules.selfReferralAddress.enabled && facts.referrerSharesSubnet) raise("self_referral_subnet", {});
  if (facts.clickAddressKnown) {
    const fromIp = facts.otherRefereesFromIp + 1;
    if (rules.ipFanout.maxReferees > 0 && fromIp > rules.ipFanout.maxReferees) {
      raise("ip_fanout", { referees: fromIp, max: rules.ipFanout.maxReferees, windowMinutes: rules.ipFanout.windowMinutes });
    }
    const fromSubnet = facts.otherRefereesFromSubnet + 1;
    if (rules.subnetFanout.maxReferees > 0 && fromSubnet > rules.subnetFanout.maxReferees) {
      raise("subnet_fanout", { referees: fromSubnet, max: rules.subnetFanout.maxReferees, windowMinutes: rules.subnetFanout.windowMinutes });
    }
    if (rules.clickVelocity.maxClicks > 0 && facts.clicksFromIp > rules.clickVelocity.maxClicks) {
      raise("click_velocity", { clicks: facts.clicksFromIp, max: rules.clickVelocity.maxClicks, windowSeconds: rules.clickVelocity.windowSeconds });
    }
  }
  if (facts.stage === "qualified" && rules.noActivity.minHearts > 0 && facts.refereeHearts < rules.noActivity.minHearts) {
    raise("no_activity", { hearts: facts.refereeHearts, min: rules.noActivity.minHearts });
  }
  return found;
}

/** A referral's recorded signals and review state. */
export interface ReviewRecord {
  signals: string[];
  details: Record<string, unknown>;
  review: ReviewState;
}

/**
 * Folds newly found signals into a referral's record: the codes accumulate (a signal once seen stays),
 * the details of a code are the latest. Review: `off` leaves it as it is (`none`: counted); an unflagged
 * referral that is now flagged is `held` (loose) or `declined` (strict); a referral already flagged keeps
 * its review (an owner's approval is not undone by a later signal).
 */
export function foldSignals(before: ReviewRecord, found: FoundSignals, mode: ReviewMode): ReviewRecord {
  const codes = new Set([...before.signals, ...found.codes]);
  const signals = ABUSE_SIGNAL_CODES.filter((c) => codes.has(c));
  const details = { ...before.details, ...found.details };
  if (mode === "off" || before.review !== "none" || signals.length === 0) return { signals, details, review: before.review };
  return { signals, details, review: mode === "strict" ? "declined" : "held" };
}

/** The owner's decision on a flagged referral. */
export type ReviewAction = "approve" | "decline";

/**
 * The review an action leads to: `changed` with the new state, `unchanged` when it is there already
 * (idempotent), or `not_flagged` (only flagged referrals are reviewed).
 */
export function decideReview(
  current: ReviewState,
  action: ReviewAction,
): { kind: "changed"; to: ReviewState } | { kind: "unchanged" } | { kind: "not_flagged" } {
  if (current === "none") return { kind: "not_flagged" };
  const to: ReviewState = action === "approve" ? "approved" : "declined";
  return current === to ? { kind: "unchanged" } : { kind: "changed", to };
}

/** Thrown by loadAbuseRules with every problem found in the override. */
export class AbuseRulesError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid abuse rules:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "AbuseRulesError";
  }
}

type FieldKind = "count" | "flag";
const SCHEMA: { [S in keyof AbuseRules]: Record<keyof AbuseRules[S], FieldKind> } = {
  selfReferral: { enabled: "flag" },
  selfReferralAddress: { enabled: "flag" },
  ipFanout: { windowMinutes: "count", maxReferees: "count" },
  subnetFanout: { windowMinutes: "count", maxReferees: "count" },
  clickVelocity: { windowSeconds: "count", maxClicks: "count" },
  noActivity: { minHearts: "count" },
};

/**
 * Parses a JSON override (any subset of sections and fields) over the defaults. Unknown keys,
 * non-integer or negative counts and non-boolean flags are all reported at once (AbuseRulesError).
 */
export function loadAbuseRules(json: string, base: AbuseRules = DEFAULT_ABUSE_RULES): AbuseRules {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (error) {
    // Failure policy: fail closed at boot; a broken override must not silently fall back to defaults.
    throw new AbuseRulesError([`not valid JSON: ${(error as Error).message}`]);
  }
  if (!isPlainObject(parsed)) throw new AbuseRulesError(["must be a JSON object"]);
  const problems: string[] = [];
  const result = structuredClone(base) as unknown as Record<string, Record<string, unknown>>;
  for (const [key, value] of Object.entries(parsed)) {
    const fields = (SCHEMA as Record<string, Record<string, FieldKind>>)[key];
    if (fields === undefined) {
      problems.push(`unknown rule "${key}" (known: ${Object.keys(SCHEMA).join(", ")})`);
      continue;
    }
    if (!isPlainObject(value)) {
      problems.push(`${key} must be an object`);
      continue;
    }
    for (const [field, fieldValue] of Object.entries(value)) {
      const kind = fields[field];
      if (kind === undefined) problems.push(`unknown field "${key}.${field}" (known: ${Object.keys(fields).join(", ")})`);
      else if (kind === "count" && !(typeof fieldValue === "number" && Number.isInteger(fieldValue) && fieldValue >= 0)) {
        problems.push(`${key}.${field} must be a non-negative integer`);
      } else if (kind === "flag" && typeof fieldValue !== "boolean") problems.push(`${key}.${field} must be true or false`);
      else result[key]![field] = fieldValue;
    }
  }
  if (problems.length > 0) throw new AbuseRulesError(problems);
  return result as unknown as AbuseRules;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
