import type { Transport } from "@connectrpc/connect";
import { DASHBOARD_SESSION_HEADER } from "../../services/shared/values/wire.js";
import { createRpcClients, type RpcClients } from "../../services/shared/rpc/service-clients.js";
import { withHeaders } from "../../services/shared/rpc/service-transport.js";

/** The dashboard's clients of the referral service: every internal service it shows. */
export type DashboardClients = Pick<
  RpcClients,
  | "admin"
  | "referral"
  | "reviews"
  | "hearts"
  | "delivery"
  | "deliveryStats"
  | "pluginActivity"
  | "voters"
  | "rewards"
  | "rewardQueue"
  | "voterRoles"
  | "alerts"
  | "goals"
>;

/** The thirteen clients over one transport (services/shared/rpc/service-transport.ts: HTTP/2, the gateway's token). */
export function createDashboardClients(transport: Transport): DashboardClients {
  const { admin, referral, reviews, hearts, delivery, deliveryStats, pluginActivity, voters, rewards, rewardQueue, voterRoles, alerts, goals } =
    createRpcClients(transport);
  return { admin, referral, reviews, hearts, delivery, deliveryStats, pluginActivity, voters, rewards, rewardQueue, voterRoles, alerts, goals };
}

/**
 * The clients of one owner's request: every call carries the session token
 * (`x-dashboard-session`), so the referral service scopes it to that owner's servers
 * whatever the handler asks for. The dashboard API handlers get only these.
 */
export function createSessionClients(transport: Transport, sessionToken: string): DashboardClients {
  return createDashboardClients(withHeaders(transport, { [DASHBOARD_SESSION_HEADER]: sessionToken }));
}

/** The gateway's client of the access service: login links and sessions. */
export function createAccessClient(transport: Transport): RpcClients["access"] {
  return createRpcClients(transport).access;
}
