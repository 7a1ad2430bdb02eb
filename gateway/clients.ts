import type { Transport } from "@connectrpc/connect";
import { Http2SessionManager } from "@connectrpc/connect-node";
import { createRpcClients, type RpcClients } from "../services/shared/rpc/service-clients.js";
import { createServiceTransport, createUnaryServiceTransport } from "../services/shared/rpc/service-transport.js";

/**
 * The gateway's clients of the referral service (Connect protocol over HTTP/2); `delivery` serves the pull API's list
 * and claim, `claims` the reward plugins' check/claim API, `pluginActivity` what those calls got (RecordPluginCalls),
 * `hearts` the public receipts (GetReceipt), `rewardQueue` the game plugins' reward queue.
 */
export type ReferralServiceClients = Pick<RpcClients, "referral" | "admin" | "delivery" | "claims" | "hearts" | "pluginActivity" | "rewardQueue" | "reminders">;

/**
 * The gateway's transports to the referral service, over ONE HTTP/2 session (shared, reconnecting on
 * its own), every call authenticated with the gateway's service token:
 * - `routes`: the gateway's own routes and its readiness check, on the lean unary path
 *   (services/shared/rpc/unary-transport.ts; the gateway forwards every ingest event with one call);
 * - `dashboard`: Connect's own transport, for the dashboard's calls (their answers, such as a page of
 *   attempts with their exchanges, may be larger than the lean path reads).
 */
export interface ReferralServiceTransports {
  routes: Transport;
  dashboard: Transport;
}

/** THE gateway's connection to the referral service: one session manager, the transports over it. */
export function createReferralServiceTransports(baseUrl: string, token: string): ReferralServiceTransports {
  const sessions = new Http2SessionManager(baseUrl);
  return { routes: createUnaryServiceTransport(baseUrl, token, sessions), dashboard: createServiceTransport(baseUrl, token, { sessions }) };
}

/** The clients the gateway's own routes use, over `transport` (ReferralServiceTransports.routes). */
export function referralServiceClientsOver(transport: Transport): ReferralServiceClients {
  const { referral, admin, delivery, claims, hearts, pluginActivity, rewardQueue, reminders } = createRpcClients(transport);
  return { referral, admin, delivery, claims, hearts, pluginActivity, rewardQueue, reminders };
}

/** The clients over a connection of their own (tests, tools); a process builds its transports once and shares them. */
export function createReferralServiceClients(baseUrl: string, token: string): ReferralServiceClients {
  return referralServiceClientsOver(createReferralServiceTransports(baseUrl, token).routes);
}
