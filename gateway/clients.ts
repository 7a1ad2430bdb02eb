import { createRpcClients, type RpcClients } from "../services/shared/service-clients.js";
import { createUnaryServiceTransport } from "../services/shared/service-transport.js";

/** The gateway's clients of the referral service (Connect protocol over HTTP/2); `delivery` serves the pull API's list and claim. */
export type ReferralServiceClients = Pick<RpcClients, "referral" | "admin" | "delivery">;

/**
 * Creates the clients, authenticated with the gateway's service token; one HTTP/2 session is shared and
 * reconnects on its own. Unary calls take the lean path (services/shared/unary-transport.ts): the gateway
 * forwards every ingest event with one.
 */
export function createReferralServiceClients(baseUrl: string, token: string): ReferralServiceClients {
  const { referral, admin, delivery } = createRpcClients(createUnaryServiceTransport(baseUrl, token));
  return { referral, admin, delivery };
}
