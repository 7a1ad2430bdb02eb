import type { ConnectRouter } from "@connectrpc/connect";
import { PluginActivityService } from "../../gen/proto/claims/v1/plugin_activity_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { getPluginActivity } from "./get-plugin-activity.js";
import { recordPluginCalls } from "./record-plugin-calls.js";

/**
 * Registers PluginActivityService: RecordPluginCalls (the gateway's batches of the reward plugins' check/claim
 * calls, scope `claims`) and GetPluginActivity (the owner's plugin activity card, scope `read`, owners: their own
 * servers). Access rules: services/access/rpc-access.ts.
 */
export function pluginActivityRoutes(deps: CoreDeps): (router: ConnectRouter) => void {
  return (router) => {
    router.service(PluginActivityService, {
      recordPluginCalls: (req) => recordPluginCalls(deps, req),
      getPluginActivity: (req) => getPluginActivity(deps, req),
    });
  };
}
