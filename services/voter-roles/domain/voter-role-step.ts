/**
 * What the role job does with a due grant (docs/discord-roles.md): pure, the clock passed in. A grant that has not
 * lapsed gets the role added (again after each counted vote); a lapsed one gets it removed when it was given, and is
 * then deleted; a grant of a server that turned voter roles off is forgotten. Failures are retried with a growing wait,
 * and given up after MAX_VOTER_ROLE_ATTEMPTS: an add then waits for the lapse, a removal deletes the grant.
 */

/** Failed Discord calls for one step before it is given up. */
export const MAX_VOTER_ROLE_ATTEMPTS = 8;
/** The first wait after a failure; doubled each time, at most VOTER_ROLE_RETRY_MAX_MS. */
export const VOTER_ROLE_RETRY_BASE_MS = 60_000;
/** The longest wait between two tries of a step. */
export const VOTER_ROLE_RETRY_MAX_MS = 60 * 60_000;
/** Shortest and longest role duration a server may choose (a minute; a year). */
export const VOTER_ROLE_DURATION_LIMITS_SECONDS = { min: 60, max: 365 * 24 * 60 * 60 } as const;

/** A due grant as the step sees it. */
export interface GrantFacts {
  expiresAt: Date;
  given: boolean;
  /** False when the server turned voter roles off. */
  configured: boolean;
}

/** The step: add the role, remove it, or delete the grant without a call (its role was never given). */
export type VoterRoleStep = { kind: "add" } | { kind: "remove" } | { kind: "forget" };

/** Decides a due grant's step at `now`. */
export function decideVoterRoleStep(g: GrantFacts, now: Date): VoterRoleStep {
  // Voter roles turned off: the token went with the settings, so nothing can be called; the grant is forgotten.
  if (!g.configured) return { kind: "forget" };
  if (g.expiresAt.getTime() > now.getTime()) return { kind: "add" };
  return g.given ? { kind: "remove" } : { kind: "forget" };
}

/** After a failed call (attempts before it): try again at `at`, or give the step up. */
export function retryVoterRoleStep(attempts: number, now: Date): { kind: "retry"; at: Date } | { kind: "give_up" } {
  if (attempts + 1 >= MAX_VOTER_ROLE_ATTEMPTS) return { kind: "give_up" };
  const wait = Math.min(VOTER_ROLE_RETRY_BASE_MS * 2 ** attempts, VOTER_ROLE_RETRY_MAX_MS);
  return { kind: "retry", at: new Date(now.getTime() + wait) };
}
