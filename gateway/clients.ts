import type { Transport } from "@connectrpc/connect";
import { createRpcClients, type RpcClients } from "../services/shared/service-clients.js";
import { createUnaryServiceTransport } from "../services/shared/service-transport.js";

/** The gateway's clients of the referral service (Connect protocol over HTTP/2); `delivery` serves the pull API's list and claim. */
export type ReferralServiceClients = Pick<RpcClients, "referral" | "admin" | "delivery">;

/**
 * THE gateway's transport to the referral service: one HTTP/2 session, shared by every call of the
 * process (ingest, pull, links, the readiness check and the dashboard) and reconnecting on its own,
 * authenticated with the gateway's service token. Unary calls take the lean path
 * (services/shared/unary-transport.ts): the gateway forwards every ingest event with one.
 */
export function createReferralServiceTransport(baseUrl: string, token: string): Transport {
  return createUnaryServiceTransport(baseUrl, token);
}

/** The clients the gateway's own routes use, over `transport` (createReferralServiceTransport). */
export function referralServiceClientsOver(transport: Transport): ReferralServiceClients {
  const { referral, admin, delivery } = createRpcClients(transport);
  return { referral, admin, delivery };
}

/** The clients over a transport of their own (tests, tools); a process builds one transport and shares it. */
export function createReferralServiceClients(baseUrl: string, token: string): ReferralServiceClients {
  return referralServiceClientsOver(createReferralServiceTransport(baseUrl, token));
}
