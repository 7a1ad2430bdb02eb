import type { ConnectRouter } from "@connectrpc/connect";
import { HeartService } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { OWNER_SCOPE } from "../shared/rpc/interceptors.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { castHeart } from "./cast-heart.js";
import { createCastHeartQueue, type CastHeartBatchOptions } from "./cast-heart-batch.js";
import { DEFAULT_FRAUD_RULES, type FraudRules } from "./domain/fraud-rules.js";
import { getRanking } from "./get-ranking.js";
import { getHeartStats } from "./heart-stats.js";
import { listHearts } from "./list-hearts.js";
import { getReceipt } from "./get-receipt.js";
import { createReceiptLinks } from "./receipt-token.js";

/** What HeartService needs: the core deps and, optionally, a fraud rule set (defaults otherwise). */
export type HeartRouteDeps = CoreDeps & {
  /** The public gateway's base URL (PUBLIC_BASE_URL): receipt links point there. */
  publicBaseUrl: string;
  fraudRules?: FraudRules;
  /** CastHeart's group commit bounds (services/hearts/cast-heart-batch.ts defaults when omitted). */
  castHeartBatch?: CastHeartBatchOptions;
};

/** Registers HeartService (CastHeart, GetRanking, ListHearts, GetHeartStats, GetReceipt) on a Connect router; each use case lives in its verb-named file. */
export function heartRoutes(deps: HeartRouteDeps): (router: ConnectRouter) => void {
  const rules = deps.fraudRules ?? DEFAULT_FRAUD_RULES;
  // Group commit: concurrent CastHeart calls are decided and written together (services/hearts/cast-heart-batch.ts).
  const casts = createCastHeartQueue(deps, rules, deps.castHeartBatch);
  const receipts = createReceiptLinks(deps);
  return (router) => {
    router.service(HeartService, {
      castHeart: (req) => castHeart(deps, rules, casts, receipts, req),
      getRanking: (req, ctx) => getRanking(deps, req, ctx.values.get(OWNER_SCOPE)),
      listHearts: (req) => listHearts(deps, req),
      getHeartStats: (req) => getHeartStats(deps, req),
      getReceipt: (req) => getReceipt(deps, receipts, req),
    });
  };
}
