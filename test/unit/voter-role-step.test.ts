import test from "ava";
import {
  decideVoterRoleStep,
  MAX_VOTER_ROLE_ATTEMPTS,
  retryVoterRoleStep,
  VOTER_ROLE_RETRY_MAX_MS,
} from "../../services/voter-roles/domain/voter-role-step.js";

const now = new Date("2027-06-01T12:00:00Z");
const at = (ms: number) => new Date(now.getTime() + ms);

test("a due grant is added until it lapses, then removed if it was given, else forgotten; a server that turned roles off forgets them (its token is gone)", (t) => {
  const cases = [
    [{ expiresAt: at(1), given: false, configured: true }, "add"],
    [{ expiresAt: at(1), given: true, configured: true }, "add"],
    [{ expiresAt: at(0), given: true, configured: true }, "remove"],
    [{ expiresAt: at(-1), given: false, configured: true }, "forget"],
    [{ expiresAt: at(60_000), given: true, configured: false }, "forget"],
  ] as const;
  for (const [facts, kind] of cases) t.is(decideVoterRoleStep(facts, now).kind, kind, JSON.stringify(facts));
});

test("a failed step waits 1, 2, 4, ... minutes (at most an hour) and is given up after MAX_VOTER_ROLE_ATTEMPTS failures", (t) => {
  t.deepEqual(retryVoterRoleStep(0, now), { kind: "retry", at: at(60_000) });
  t.deepEqual(retryVoterRoleStep(2, now), { kind: "retry", at: at(240_000) });
  t.deepEqual(retryVoterRoleStep(MAX_VOTER_ROLE_ATTEMPTS - 2, now), { kind: "retry", at: at(VOTER_ROLE_RETRY_MAX_MS) });
  t.deepEqual(retryVoterRoleStep(MAX_VOTER_ROLE_ATTEMPTS - 1, now), { kind: "give_up" });
});
