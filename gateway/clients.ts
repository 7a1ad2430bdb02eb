import { createClient, type Client } from "@connectrpc/connect";
import { DeliveryService } from "../gen/proto/delivery/v1/delivery_pb.js";
import { ReferralService } from "../gen/proto/referral/v1/referral_pb.js";
import { ServerAdminService } from "../gen/proto/servers/v1/servers_pb.js";
import { createServiceTransport } from "../services/shared/service-transport.js";

/** The gateway's clients of the referral service (Connect protocol over HTTP/2). */
export interface ReferralServiceClients {
  referral: Client<typeof ReferralService>;
  admin: Client<typeof ServerAdminService>;
  /** The pull API's list and claim. */
  delivery: Client<typeof DeliveryService>;
}

/** Creates the clients, authenticated with the gateway's service token; one HTTP/2 session is shared and reconnects on its own. */
export function createReferralServiceClients(baseUrl: string, token: string): ReferralServiceClients {
  const transport = createServiceTransport(baseUrl, token);
  return {
    referral: createClient(ReferralService, transport),
    admin: createClient(ServerAdminService, transport),
    delivery: createClient(DeliveryService, transport),
  };
}
