import type { Scope } from "./scopes.js";

/**
 * What an owner's dashboard session may do with an RPC (see auth-interceptor.ts):
 *
 * - `owned`: allowed on the owner's own servers only. `field` of the request names a
 *   server, or a delivery or referral whose server is looked up. Another owner's (or an
 *   unowned) resource is `not_found` ("unknown server", "unknown delivery", ...), exactly
 *   as for one that does not exist, so an owner cannot even learn that it exists.
 * - `own`: allowed; the handler itself narrows to the owner's servers (lists, rankings,
 *   creating a server assigns it to the owner). The handler reads `OWNER_SCOPE`.
 * - `none`: never for owner sessions (tokens, owners, ingest, clicks, hearts, ...).
 */
export type OwnerPolicy = { kind: "owned"; resource: OwnedResource; field: string } | { kind: "own" } | { kind: "none" };

/** Resources whose server an owner check can find. */
export type OwnedResource = "server" | "delivery" | "referral";

/** The access rule of one RPC. */
export interface RpcAccess {
  /** The scope a service token needs to call the RPC. */
  scope: Scope;
  /** What an owner's dashboard session may do with it. */
  owner: OwnerPolicy;
}

const server = { kind: "owned", resource: "server", field: "serverId" } as const;
const delivery = { kind: "owned", resource: "delivery", field: "deliveryId" } as const;
const referral = { kind: "owned", resource: "referral", field: "referralId" } as const;
const own = { kind: "own" } as const;
const none = { kind: "none" } as const;

/**
 * THE table of internal API access: every RPC of every service, by
 * `<package>.<Service>/<Method>`, with the scope it needs and what an owner session
 * may do with it. An RPC missing here is refused (permission_denied) for everyone,
 * and test/unit/access-rpc-table.test.ts fails until it is added.
 */
export const RPC_ACCESS: Readonly<Record<string, RpcAccess>> = {
  // servers.v1
  "servers.v1.ServerAdminService/CreateServer": { scope: "admin", owner: own },
  "servers.v1.ServerAdminService/GetServer": { scope: "read", owner: server },
  "servers.v1.ServerAdminService/ListServers": { scope: "read", owner: own },
  "servers.v1.ServerAdminService/SetReferralsEnabled": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/SetRegistrationUrl": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/SetReferralSettings": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/CreateReferralSecret": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/RotateReferralSecret": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/RevokeReferralSecret": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/ListReferralSecrets": { scope: "read", owner: server },
  "servers.v1.ServerAdminService/RevealReferralSecret": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/ResolveSigningKeys": { scope: "ingest", owner: none },
  "servers.v1.ServerAdminService/SetCallbackSettings": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/RotateCallbackSecret": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/RevealCallbackSecret": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/EnableCallback": { scope: "admin", owner: server },
  // Callback endpoints: the server's own (endpoint ids are looked up within that server).
  "servers.v1.ServerAdminService/CreateEndpoint": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/ListEndpoints": { scope: "read", owner: server },
  "servers.v1.ServerAdminService/UpdateEndpoint": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/DeleteEndpoint": { scope: "admin", owner: server },
  // Discord endpoints (docs/discord.md): the server's own, like the callback endpoints.
  "servers.v1.ServerAdminService/CreateDiscordEndpoint": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/SetDiscordTemplates": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/PreviewDiscordMessage": { scope: "read", owner: server },
  "servers.v1.ServerAdminService/SetVotifierSettings": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/SetPullEnabled": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/SetPullEventTypes": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/RotatePullSecret": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/RevealPullSecret": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/ResolvePullKeys": { scope: "pull", owner: none },
  // Server ids only, for the gateway's list of the servers that exist (no forged id is among them): `ingest`, which every gateway token holds.
  "servers.v1.ServerAdminService/ListServerIds": { scope: "ingest", owner: none },
  // Public keys only, for the gateway's /.well-known/webhook-keys.json: `ingest`, which every gateway token holds.
  "servers.v1.ServerAdminService/ListWebhookSigningKeys": { scope: "ingest", owner: none },
  "servers.v1.ServerAdminService/RotateWebhookSigningKey": { scope: "admin", owner: none },
  "servers.v1.ServerAdminService/RotateClaimKey": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/RevealClaimKey": { scope: "admin", owner: server },
  "servers.v1.ServerAdminService/SetClaimSettings": { scope: "admin", owner: server },
  // Voter roles (docs/discord-roles.md): the server's owner and list admins; the bot token is never answered back.
  "servers.v1.VoterRoleService/SetVoterRoleSettings": { scope: "admin", owner: server },
  "servers.v1.VoterRoleService/GetVoterRoleSettings": { scope: "read", owner: server },
  "servers.v1.VoterRoleService/ClearVoterRoleSettings": { scope: "admin", owner: server },
  // claims.v1 (the gateway's public check/claim routes for reward plugins)
  "claims.v1.ClaimService/CheckVote": { scope: "claims", owner: none },
  "claims.v1.ClaimService/ClaimVote": { scope: "claims", owner: none },
  // The gateway's batches of those calls, for the owner's plugin activity card: the same gateway token's `claims`.
  "claims.v1.PluginActivityService/RecordPluginCalls": { scope: "claims", owner: none },
  "claims.v1.PluginActivityService/GetPluginActivity": { scope: "read", owner: server },
  // referral.v1
  "referral.v1.ReferralService/RecordClick": { scope: "clicks:record", owner: none },
  "referral.v1.ReferralService/ApplyEvent": { scope: "ingest", owner: none },
  "referral.v1.ReferralService/GetReferral": { scope: "read", owner: referral },
  "referral.v1.ReferralService/GetLeaderboard": { scope: "read", owner: server },
  "referral.v1.ReferralService/GetFunnel": { scope: "read", owner: server },
  // referral.v1 review (issue 20: anti-abuse review queue, the owner's referral list)
  "referral.v1.ReferralReviewService/ListReferrals": { scope: "read", owner: server },
  "referral.v1.ReferralReviewService/GetReferralDetail": { scope: "read", owner: referral },
  "referral.v1.ReferralReviewService/ExportReferrals": { scope: "read", owner: server },
  "referral.v1.ReferralReviewService/GetReferralReviewMode": { scope: "read", owner: server },
  "referral.v1.ReferralReviewService/ReviewReferral": { scope: "admin", owner: referral },
  "referral.v1.ReferralReviewService/SetReferralReviewMode": { scope: "admin", owner: server },
  // hearts.v1
  "hearts.v1.HeartService/CastHeart": { scope: "hearts:cast", owner: none },
  "hearts.v1.HeartService/GetRanking": { scope: "read", owner: own },
  "hearts.v1.HeartService/ListHearts": { scope: "read", owner: server },
  "hearts.v1.HeartService/GetHeartStats": { scope: "read", owner: server },
  // The voter's receipt, for the gateway's public /receipts/<token>: the token is the credential of the one heart it names.
  "hearts.v1.HeartService/GetReceipt": { scope: "receipts", owner: none },
  // Vote reminders, for the gateway's receipt and reminder pages: each token is the credential of what it names.
  "reminders.v1.ReminderService/SubscribeReminder": { scope: "receipts", owner: none },
  "reminders.v1.ReminderService/ConfirmReminder": { scope: "receipts", owner: none },
  "reminders.v1.ReminderService/UnsubscribeReminder": { scope: "receipts", owner: none },
  "reminders.v1.ReminderService/SubscribeDiscordReminder": { scope: "receipts", owner: none },
  "delivery.v1.DeliveryStatsService/GetDeliveryStats": { scope: "read", owner: server },
  // delivery.v1
  "delivery.v1.DeliveryService/ListDeliveries": { scope: "read", owner: server },
  "delivery.v1.DeliveryService/GetDelivery": { scope: "read", owner: delivery },
  "delivery.v1.DeliveryService/GetEndpointHealth": { scope: "read", owner: server },
  "delivery.v1.DeliveryService/Redeliver": { scope: "admin", owner: delivery },
  "delivery.v1.DeliveryService/RedeliverFailedSince": { scope: "admin", owner: server },
  "delivery.v1.DeliveryService/SendTestCallback": { scope: "admin", owner: server },
  "delivery.v1.DeliveryService/SendTestReferralEvent": { scope: "admin", owner: server },
  "delivery.v1.DeliveryService/SendTestVote": { scope: "admin", owner: server },
  "delivery.v1.DeliveryService/ListPullHearts": { scope: "pull", owner: none },
  "delivery.v1.DeliveryService/ClaimPullHearts": { scope: "pull", owner: none },
  "delivery.v1.DeliveryService/ListPullEvents": { scope: "pull", owner: none },
  "delivery.v1.DeliveryService/ClaimPullEvents": { scope: "pull", owner: none },
  // ops.v1 (operators only)
  "ops.v1.OperatorService/ListDeadLetters": { scope: "admin", owner: none },
  // voters.v1 (a voter's export and erasure): admin tokens on any server or the whole list (server_id empty), a
  // server's owner on that server only (an empty server_id is no server of theirs); the audit for admins only.
  "voters.v1.VoterDataService/ExportVoterData": { scope: "admin", owner: server },
  "voters.v1.VoterDataService/EraseVoterData": { scope: "admin", owner: server },
  "voters.v1.VoterDataService/ListVoterDataAudit": { scope: "admin", owner: none },
  // rewards.v1 (a server's reward rules): admin tokens save, read tokens read and preview, on any server; a server's
  // owner all three on their own servers only.
  "rewards.v1.RewardRulesService/GetRewardRules": { scope: "read", owner: server },
  "rewards.v1.RewardRulesService/PutRewardRules": { scope: "admin", owner: server },
  "rewards.v1.RewardRulesService/PreviewRewards": { scope: "read", owner: server },
  "rewards.v1.RewardRulesService/GetPeriodStandings": { scope: "read", owner: server },
  // The reward queue a game plugin pays from (docs/reward-queue.md): the gateway's `claims` token (the plugin's claim key)
  // and admins; a server's owner may list their own server's queue by its id (the dashboard), never acknowledge.
  "rewards.v1.RewardQueueService/ListRewardQueue": { scope: "claims", owner: server },
  "rewards.v1.RewardQueueService/AckRewardEntries": { scope: "claims", owner: none },
  "rewards.v1.RewardQueueService/RequeueRewardEntries": { scope: "admin", owner: server },
  // Network goals (vote party) span servers: admin tokens (the list's admins) save and delete, read tokens read and
  // list, any owner's goals; an owner's session only goals over servers it owns (the handler narrows by OWNER_SCOPE:
  // network-goal-routes.ts; another owner's goal is "unknown goal", another owner's list "unknown owner").
  "rewards.v1.NetworkGoalService/PutNetworkGoal": { scope: "admin", owner: own },
  "rewards.v1.NetworkGoalService/GetNetworkGoal": { scope: "read", owner: own },
  "rewards.v1.NetworkGoalService/ListNetworkGoals": { scope: "read", owner: own },
  "rewards.v1.NetworkGoalService/DeleteNetworkGoal": { scope: "admin", owner: own },
  // alerts.v1 (owner alerts, docs/owner-alerts.md): an owner's session acts on its own owner only (the handler takes
  // the owner from the session; another owner_id is "unknown owner"); service tokens name the owner.
  "alerts.v1.OwnerAlertService/GetAlertChannels": { scope: "read", owner: own },
  "alerts.v1.OwnerAlertService/SetAlertChannels": { scope: "admin", owner: own },
  "alerts.v1.OwnerAlertService/ListOwnerAlerts": { scope: "read", owner: own },
  "alerts.v1.OwnerAlertService/ListServerAlerts": { scope: "read", owner: server },
  "alerts.v1.OwnerAlertService/MarkOwnerAlertsRead": { scope: "admin", owner: own },
  // access.v1
  "access.v1.AccessService/CreateServiceToken": { scope: "admin", owner: none },
  "access.v1.AccessService/ListServiceTokens": { scope: "admin", owner: none },
  "access.v1.AccessService/RevokeServiceToken": { scope: "admin", owner: none },
  "access.v1.AccessService/CreateOwner": { scope: "admin", owner: none },
  "access.v1.AccessService/AssignServer": { scope: "admin", owner: none },
  "access.v1.AccessService/ListOwnerServers": { scope: "admin", owner: none },
  "access.v1.AccessService/CreateDashboardLoginLink": { scope: "admin", owner: none },
  "access.v1.AccessService/RedeemDashboardLoginLink": { scope: "dashboard", owner: none },
  "access.v1.AccessService/GetDashboardSession": { scope: "dashboard", owner: none },
  "access.v1.AccessService/EndDashboardSession": { scope: "dashboard", owner: none },
  "access.v1.AccessService/ListDashboardSessions": { scope: "admin", owner: none },
  "access.v1.AccessService/RevokeDashboardSessions": { scope: "admin", owner: none },
};

/** The table's key of an RPC. */
export function rpcKey(serviceTypeName: string, methodName: string): string {
  return `${serviceTypeName}/${methodName}`;
}
