import type { ConnectRouter } from "@connectrpc/connect";
import { RewardQueueService } from "../../gen/proto/rewards/v1/rewards_pb.js";
import { createClaimKeyResolver } from "../claims/resolve-claim-key.js";
import { acknowledgeRewardEntries, type AckRewardEntriesDeps } from "./ack-reward-entries.js";
import { listRewardQueue, type ListRewardQueueDeps } from "./list-reward-queue.js";
import { requeueRewardEntries } from "./requeue-reward-entries.js";

/** What RewardQueueService needs: ListRewardQueue's and AckRewardEntries's deps and, optionally, how long a claim key's server is cached (tests: 0). */
export type RewardQueueRouteDeps = ListRewardQueueDeps & AckRewardEntriesDeps & { claimKeyCacheMs?: number };

/**
 * Registers RewardQueueService (issue 31, docs/reward-queue.md): the reward queue a game plugin lists and acknowledges,
 * found by the server's claim key exactly as the check/claim API finds it. Access (services/access/rpc-access.ts): the
 * gateway's `claims` token and admins; a server's owner may list their own server's queue by its id. Re-queueing
 * (RequeueRewardEntries): admins and the server's owner, never the plugin's key.
 */
export function rewardQueueRoutes(deps: RewardQueueRouteDeps): (router: ConnectRouter) => void {
  const resolveKey = createClaimKeyResolver(deps, deps.claimKeyCacheMs);
  return (router) => {
    router.service(RewardQueueService, {
      listRewardQueue: (req) => listRewardQueue(deps, resolveKey, req),
      ackRewardEntries: (req) => acknowledgeRewardEntries(deps, resolveKey, req),
      requeueRewardEntries: (req) => requeueRewardEntries(deps, req),
    });
  };
}
