import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { ClaimService } from "../../gen/proto/claims/v1/claims_pb.js";
import type { CoreDeps } from "../shared/deps.js";

/** Registers ClaimService (CheckVote, ClaimVote): reward plugins' check/claim answers from the claim ledger. */
export function claimRoutes(_deps: CoreDeps): (router: ConnectRouter) => void {
  return (router) => {
    router.service(ClaimService, {
      checkVote: () => {
        throw new ConnectError("not implemented yet", Code.Unimplemented);
      },
      claimVote: () => {
        throw new ConnectError("not implemented yet", Code.Unimplemented);
      },
    });
  };
}
