import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { AccessService } from "../../../gen/proto/access/v1/access_pb.js";
import { ClaimService } from "../../../gen/proto/claims/v1/claims_pb.js";
import { PluginActivityService } from "../../../gen/proto/claims/v1/plugin_activity_pb.js";
import { DeliveryService } from "../../../gen/proto/delivery/v1/delivery_pb.js";
import { DeliveryStatsService } from "../../../gen/proto/delivery/v1/delivery_stats_pb.js";
import { HeartService } from "../../../gen/proto/hearts/v1/hearts_pb.js";
import { ReferralService } from "../../../gen/proto/referral/v1/referral_pb.js";
import { ReferralReviewService } from "../../../gen/proto/referral/v1/referral_review_pb.js";
import { ServerAdminService } from "../../../gen/proto/servers/v1/servers_pb.js";
import { VoterDataService } from "../../../gen/proto/voters/v1/voters_pb.js";
import { NetworkGoalService, RewardQueueService, RewardRulesService } from "../../../gen/proto/rewards/v1/rewards_pb.js";
import { ReminderService } from "../../../gen/proto/reminders/v1/reminders_pb.js";
import { VoterRoleService } from "../../../gen/proto/servers/v1/voter_roles_pb.js";
import { OwnerAlertService } from "../../../gen/proto/alerts/v1/alerts_pb.js";

/** A client of every service the referral service process hosts. */
export interface RpcClients {
  referral: Client<typeof ReferralService>;
  /** The owner's referral list and anti-abuse review. */
  reviews: Client<typeof ReferralReviewService>;
  admin: Client<typeof ServerAdminService>;
  hearts: Client<typeof HeartService>;
  delivery: Client<typeof DeliveryService>;
  deliveryStats: Client<typeof DeliveryStatsService>;
  access: Client<typeof AccessService>;
  claims: Client<typeof ClaimService>;
  /** The reward plugins' recent calls: the gateway records them, the dashboard reads them. */
  pluginActivity: Client<typeof PluginActivityService>;
  /** A voter's export and erasure, and their audit. */
  voters: Client<typeof VoterDataService>;
  rewards: Client<typeof RewardRulesService>;
  /** An owner's network goals (vote party; the CLI's `goals` commands). */
  goals: Client<typeof NetworkGoalService>;
  /** The reward queue game plugins list and acknowledge (the gateway's queue routes). */
  rewardQueue: Client<typeof RewardQueueService>;
  /** Voters' e-mail vote reminders (the gateway's receipt and reminder routes). */
  reminders: Client<typeof ReminderService>;
  /** A server's voter roles (the dashboard's server page and its settings). */
  voterRoles: Client<typeof VoterRoleService>;
  /** Owner alerts: channels and the alert list (the dashboard). */
  alerts: Client<typeof OwnerAlertService>;
}

/**
 * THE client factory of the referral service: one client per service over `transport`
 * (service-transport.ts builds it). Callers keep only the clients they are meant to use.
 */
export function createRpcClients(transport: Transport): RpcClients {
  return {
    referral: createClient(ReferralService, transport),
    reviews: createClient(ReferralReviewService, transport),
    admin: createClient(ServerAdminService, transport),
    hearts: createClient(HeartService, transport),
    delivery: createClient(DeliveryService, transport),
    deliveryStats: createClient(DeliveryStatsService, transport),
    access: createClient(AccessService, transport),
    claims: createClient(ClaimService, transport),
    pluginActivity: createClient(PluginActivityService, transport),
    voters: createClient(VoterDataService, transport),
    rewards: createClient(RewardRulesService, transport),
    goals: createClient(NetworkGoalService, transport),
    rewardQueue: createClient(RewardQueueService, transport),
    reminders: createClient(ReminderService, transport),
    voterRoles: createClient(VoterRoleService, transport),
    alerts: createClient(OwnerAlertService, transport),
  };
}
