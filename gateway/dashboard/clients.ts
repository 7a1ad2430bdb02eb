import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { DeliveryService } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { DeliveryStatsService } from "../../gen/proto/delivery/v1/delivery_stats_pb.js";
import { HeartService } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { ReferralService } from "../../gen/proto/referral/v1/referral_pb.js";
import { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";

/** The dashboard's clients of the referral service: every internal service it shows. */
export interface DashboardClients {
  admin: Client<typeof ServerAdminService>;
  referral: Client<typeof ReferralService>;
  hearts: Client<typeof HeartService>;
  delivery: Client<typeof DeliveryService>;
  deliveryStats: Client<typeof DeliveryStatsService>;
}

/**
 * Creates the Connect clients over one HTTP/2 transport (the referral
 * service speaks HTTP/2 only); the session is shared and reconnects on its own.
 */
export function createDashboardClients(baseUrl: string): DashboardClients {
  const transport = createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true });
  return {
    admin: createClient(ServerAdminService, transport),
    referral: createClient(ReferralService, transport),
    hearts: createClient(HeartService, transport),
    delivery: createClient(DeliveryService, transport),
    deliveryStats: createClient(DeliveryStatsService, transport),
  };
}
