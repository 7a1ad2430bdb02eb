import type { ConnectRouter } from "@connectrpc/connect";
import { OwnerAlertService } from "../../gen/proto/alerts/v1/alerts_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { getAlertChannels, listOwnerAlerts, listServerAlerts, markOwnerAlertsRead, setAlertChannels } from "./manage-alerts.js";

/** Registers OwnerAlertService (alert channels and the alert list; access rules: services/access/rpc-access.ts). */
export function ownerAlertRoutes(deps: CoreDeps): (router: ConnectRouter) => void {
  return (router) => {
    router.service(OwnerAlertService, {
      getAlertChannels: (req, ctx) => getAlertChannels(deps, req, ctx),
      setAlertChannels: (req, ctx) => setAlertChannels(deps, req, ctx),
      listOwnerAlerts: (req, ctx) => listOwnerAlerts(deps, req, ctx),
      listServerAlerts: (req) => listServerAlerts(deps, req),
      markOwnerAlertsRead: (req, ctx) => markOwnerAlertsRead(deps, req, ctx),
    });
  };
}
