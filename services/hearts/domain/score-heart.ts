import type { FraudRules } from "./fraud-rules.js";

/** The request fields the rules read. */
export interface HeartRequestSignals {
  username: string;
  userAgent: string;
}

/**
 * Counts the store queried for this heart. Each count includes the heart being
 * cast, so a first-ever heart from an IP has `identitiesOnIp = 1`. Each stops one
 * past its rule's maximum (the store reads no more rows than it takes to decide the
 * rule: see fraudReadLimits), so a rule that fires reports `max + 1`.
 */
export interface FraudCounts {
  /** Distinct voter identities with a counted heart for this server from this IP in `ipIdentities.windowMinutes`, this voter included. */
  identitiesOnIp: number;
  /** The same for the voter's /24 or /64 subnet in `subnetIdentities.windowMinutes`. */
  identitiesOnSubnet: number;
  /** Hearts of any verdict for any server from this IP in `ipVelocity.windowSeconds`, this one included. */
  heartsFromIp: number;
}

/** One rule that fired: its score and a reason naming the rule and the numbers. */
export interface FraudHit {
  rule: string;
  score: number;
  reason: string;
}

/** The fraud verdict of one heart: total score, every reason, and whether it is blocked. */
export interface FraudVerdict {
  score: number;
  reasons: string[];
  blocked: boolean;
}

/** The time windows the store counts over, from `now`. */
export interface FraudWindows {
  ipIdentitiesSince: Date;
  subnetIdentitiesSince: Date;
  velocitySince: Date;
}

/** Where each counting window starts for a heart cast at `now`. */
export function fraudWindows(rules: FraudRules, now: Date): FraudWindows {
  const at = now.getTime();
  return {
    ipIdentitiesSince: new Date(at - rules.ipIdentities.windowMinutes * 60_000),
    subnetIdentitiesSince: new Date(at - rules.subnetIdentities.windowMinutes * 60_000),
    velocitySince: new Date(at - rules.ipVelocity.windowSeconds * 1000),
  };
}

/** The most earlier rows each count reads (the heart being cast is the + 1 of its count). */
export interface FraudReadLimits {
  ipIdentities: number;
  subnetIdentities: number;
  ipVelocity: number;
}

/**
 * What each count needs to decide its rule: a rule only asks "more than max, this heart included?", so `max` earlier
 * rows answer it; a rule whose score is 0 never fires, so it reads nothing.
 */
export function fraudReadLimits(rules: FraudRules): FraudReadLimits {
  const limit = (rule: { max: number; score: number }) => (rule.score > 0 ? rule.max : 0);
  return { ipIdentities: limit(rules.ipIdentities), subnetIdentities: limit(rules.subnetIdentities), ipVelocity: limit(rules.ipVelocity) };
}

// Control characters (C0, DEL, C1) and the invisible format characters used to spoof names.
const CONTROL_PATTERN = /[\p{Cc}\p{Cf}]/u;

/** Checks the username; returns the reason it is malformed, or null. */
export function usernameProblem(username: string, rules: FraudRules["username"]): string | null {
  if (username.trim() === "") return "empty after trimming";
  if (CONTROL_PATTERN.test(username)) return "contains control characters";
  const length = [...username].length;
  if (length > rules.maxLength) return `longer than ${rules.maxLength} characters (${length})`;
  if (!new RegExp(rules.pattern, "u").test(username)) return "does not match the allowed pattern";
  return null;
}

/** Every rule that fires for this heart. Pure: counts and request in, hits out. */
export function evaluateFraudRules(rules: FraudRules, request: HeartRequestSignals, counts: FraudCounts): FraudHit[] {
  const hits: FraudHit[] = [];
  const { ipIdentities, subnetIdentities, ipVelocity, username, userAgent } = rules;
  if (counts.identitiesOnIp > ipIdentities.max) {
    hits.push({
      rule: "ip_identities",
      score: ipIdentities.score,
      reason: `ip_identities: ${counts.identitiesOnIp} voter identities from this IP in ${ipIdentities.windowMinutes} min (max ${ipIdentities.max})`,
    });
  }
  if (counts.identitiesOnSubnet > subnetIdentities.max) {
    hits.push({
      rule: "subnet_identities",
      score: subnetIdentities.score,
      reason: `subnet_identities: ${counts.identitiesOnSubnet} voter identities from this subnet in ${subnetIdentities.windowMinutes} min (max ${subnetIdentities.max})`,
    });
  }
  if (counts.heartsFromIp > ipVelocity.max) {
    hits.push({
      rule: "ip_velocity",
      score: ipVelocity.score,
      reason: `ip_velocity: ${counts.heartsFromIp} hearts from this IP in ${ipVelocity.windowSeconds} s (max ${ipVelocity.max})`,
    });
  }
  const nameProblem = usernameProblem(request.username, username);
  if (nameProblem !== null) hits.push({ rule: "username", score: username.score, reason: `username: ${nameProblem}` });
  if (request.userAgent.trim() === "") {
    hits.push({ rule: "user_agent", score: userAgent.missingScore, reason: "user_agent: missing" });
  } else if (new RegExp(userAgent.botPattern, "iu").test(request.userAgent)) {
    hits.push({ rule: "user_agent", score: userAgent.botScore, reason: "user_agent: looks like a bot or script" });
  }
  return hits.filter((hit) => hit.score > 0);
}

/** Scores a heart: the sum of every rule that fired; blocked when it reaches the threshold. */
export function scoreHeart(rules: FraudRules, request: HeartRequestSignals, counts: FraudCounts): FraudVerdict {
  const hits = evaluateFraudRules(rules, request, counts);
  const score = hits.reduce((sum, hit) => sum + hit.score, 0);
  return { score, reasons: hits.map((hit) => hit.reason), blocked: score >= rules.blockThreshold };
}
