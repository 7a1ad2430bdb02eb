import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { AccessService } from "../../gen/proto/access/v1/access_pb.js";
import { DeliveryService } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { DeliveryStatsService } from "../../gen/proto/delivery/v1/delivery_stats_pb.js";
import { HeartService } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { ReferralService } from "../../gen/proto/referral/v1/referral_pb.js";
import { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";
import { DASHBOARD_SESSION_HEADER } from "../../services/access/auth-interceptor.js";
import { withHeaders } from "../../services/shared/service-transport.js";

/** The dashboard's clients of the referral service: every internal service it shows. */
export interface DashboardClients {
  admin: Client<typeof ServerAdminService>;
  referral: Client<typeof ReferralService>;
  hearts: Client<typeof HeartService>;
  delivery: Client<typeof DeliveryService>;
  deliveryStats: Client<typeof DeliveryStatsService>;
}

/** The four clients over one transport (services/shared/service-transport.ts: HTTP/2, the gateway's token). */
export function createDashboardClients(transport: Transport): DashboardClients {
  return {
    admin: createClient(ServerAdminService, transport),
    referral: createClient(ReferralService, transport),
    hearts: createClient(HeartService, transport),
    delivery: createClient(DeliveryService, transport),
    deliveryStats: createClient(DeliveryStatsService, transport),
  };
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
export function createAccessClient(transport: Transport): Client<typeof AccessService> {
  return createClient(AccessService, transport);
}
