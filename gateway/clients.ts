import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { DeliveryService } from "../gen/proto/delivery/v1/delivery_pb.js";
import { ReferralService } from "../gen/proto/referral/v1/referral_pb.js";
import { ServerAdminService } from "../gen/proto/servers/v1/servers_pb.js";

/** The gateway's clients of the referral service (Connect protocol over HTTP/2). */
export interface ReferralServiceClients {
  referral: Client<typeof ReferralService>;
  admin: Client<typeof ServerAdminService>;
  /** The pull API's list and claim. */
  delivery: Client<typeof DeliveryService>;
}

/** Creates the clients; one HTTP/2 session is shared and reconnects on its own. */
export function createReferralServiceClients(baseUrl: string): ReferralServiceClients {
  const transport = createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true });
  return {
    referral: createClient(ReferralService, transport),
    admin: createClient(ServerAdminService, transport),
    delivery: createClient(DeliveryService, transport),
  };
}
