import type { ConnectRouter } from "@connectrpc/connect";
import { ClaimService } from "../../gen/proto/claims/v1/claims_pb.js";
import { checkVote } from "./check-vote.js";
import { claimVote, type ClaimVoteDeps } from "./claim-vote.js";
import { createClaimKeyResolver } from "./resolve-claim-key.js";

/** What ClaimService needs: the core deps and, optionally, how long a claim key's server is cached (tests: 0). */
export type ClaimRouteDeps = ClaimVoteDeps & { claimKeyCacheMs?: number };

/** Registers ClaimService (CheckVote, ClaimVote): reward plugins' check/claim answers from the claim ledger. */
export function claimRoutes(deps: ClaimRouteDeps): (router: ConnectRouter) => void {
  const resolveKey = createClaimKeyResolver(deps, deps.claimKeyCacheMs);
  return (router) => {
    router.service(ClaimService, {
      checkVote: (req) => checkVote(deps, resolveKey, req),
      claimVote: (req) => claimVote(deps, resolveKey, req),
    });
  };
}
