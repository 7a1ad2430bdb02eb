import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import {
  DeliveryStatus,
  DeliveryTransport,
  type Delivery,
  type DeliveryAttempt,
  type EndpointWindow,
  type ExchangeReport,
  type GetEndpointHealthResponse,
  type VoteReport,
} from "../../gen/proto/delivery/v1/delivery_pb.js";
import type { AlertChannels, OwnerAlert } from "../../gen/proto/alerts/v1/alerts_pb.js";
import type { GetNetworkGoalResponse } from "../../gen/proto/rewards/v1/rewards_pb.js";
import type { DeliveryDayStats } from "../../gen/proto/delivery/v1/delivery_stats_pb.js";
import { HeartVerdict, type GetHeartStatsResponse, type HeartCountBucket, type HeartSummary, type RankingEntry } from "../../gen/proto/hearts/v1/hearts_pb.js";
import type { GetFunnelResponse, LeaderboardEntry } from "../../gen/proto/referral/v1/referral_pb.js";
import type { ReferralEventRecord, ReviewedReferral } from "../../gen/proto/referral/v1/referral_review_pb.js";
import type { CallbackEndpoint, SecretInfo, Server } from "../../gen/proto/servers/v1/servers_pb.js";
import type { PluginActivityRow } from "../../gen/proto/claims/v1/plugin_activity_pb.js";
import type { VoterRoleSettings } from "../../gen/proto/servers/v1/voter_roles_pb.js";
import { PLUGIN_PRESET_PATHS, VOTES_JSON_PATH, VOTES_PATH } from "../handle-vote-claim.js";
import { REWARD_QUEUE_ACK_PATH, REWARD_QUEUE_PATH } from "../handle-reward-queue.js";
import {
  ANCHOR_STATE_NAMES,
  REVIEW_STATE_NAMES,
  DELIVERY_STATUS_NAMES,
  DELIVERY_STATUS_TO_PROTO,
  DELIVERY_TRANSPORT_NAMES,
  DELIVERY_TRANSPORT_TO_PROTO,
  PLAYER_ID_KIND_NAMES,
  PLUGIN_CALL_OUTCOME_NAMES,
  VERDICT_FROM_PROTO,
  VERDICT_TO_PROTO,
} from "../../services/shared/values/proto-names.js";

/**
 * Proto messages -> the dashboard API's JSON (snake_case, ISO 8601 times, null
 * for unset). Secret values never pass through here: the routes add them only to
 * the answers of create, rotate and reveal.
 */

/** An ISO 8601 time, or null when unset. */
export function toIso(ts: Timestamp | undefined): string | null {
  return ts ? timestampDate(ts).toISOString() : null;
}

/** A server's settings. */
export function toServerJson(server: Server | undefined) {
  if (!server) return null;
  return {
    id: server.id,
    name: server.name,
    referrals_enabled: server.referralsEnabled,
    registration_url: server.registrationUrl,
    callback_url: server.callbackUrl,
    standard_webhooks: server.standardWebhooks,
    public_key_signatures: server.publicKeySignatures,
    payload_version: server.payloadVersion,
    callback_disabled_reason: server.callbackDisabledReason,
    callback_disabled_at: toIso(server.callbackDisabledAt),
    created_at: toIso(server.createdAt),
    votifier_host: server.votifierHost,
    votifier_port: server.votifierPort === 0 ? null : server.votifierPort,
    votifier_service_name: server.votifierServiceName,
    votifier_token_set: server.votifierTokenSet,
    pull_enabled: server.pullEnabled,
    attribution_window_days: server.attributionWindowDays,
    lock_days: server.lockDays,
    claims: {
      claim_key_set: server.claims?.claimKeySet ?? false,
      hold_days: server.claims?.holdDays ?? 0,
      max_held_per_player: server.claims?.maxHeldPerPlayer ?? 0,
      pays_once: server.claims?.paysOnce ?? false,
    },
  };
}

/** Where a secret stands, for display. */
export type SecretStatus = "active" | "expiring" | "expired" | "revoked";

/** A secret's metadata, never its value. */
export function toSecretJson(info: SecretInfo | undefined) {
  if (!info) return null;
  const status: SecretStatus = info.revokedAt ? "revoked" : !info.active ? "expired" : info.expiresAt ? "expiring" : "active";
  return {
    kid: info.kid,
    created_at: toIso(info.createdAt),
    expires_at: toIso(info.expiresAt),
    revoked_at: toIso(info.revokedAt),
    active: info.active,
    status,
  };
}

/** A filter table's accepted values as its error text lists them ("" stands for "all" unwritten). */
export function filterNames(filter: Record<string, unknown>): string[] {
  return Object.keys(filter).filter((name) => name !== "");
}

/** The API's delivery status filter -> the proto enum (UNSPECIFIED = all). */
export const DELIVERY_STATUS_FILTER: Record<string, DeliveryStatus> = {
  "": DeliveryStatus.UNSPECIFIED,
  all: DeliveryStatus.UNSPECIFIED,
  ...DELIVERY_STATUS_TO_PROTO,
};

/** The API's delivery transport filter -> the proto enum (UNSPECIFIED = all). */
export const DELIVERY_TRANSPORT_FILTER: Record<string, DeliveryTransport> = {
  "": DeliveryTransport.UNSPECIFIED,
  all: DeliveryTransport.UNSPECIFIED,
  ...DELIVERY_TRANSPORT_TO_PROTO,
};

/** One delivery (a callback, a Votifier vote or a pull claim, and where it stands). */
export function toDeliveryJson(d: Delivery | undefined) {
  if (!d) return null;
  return {
    id: d.id,
    server_id: d.serverId,
    heart_id: d.heartId,
    event_type: d.eventType,
    username: d.username,
    period: d.period,
    status: DELIVERY_STATUS_NAMES[d.status] ?? "unknown",
    attempts: d.attempts,
    next_attempt_at: toIso(d.nextAttemptAt),
    created_at: toIso(d.createdAt),
    delivered_at: toIso(d.deliveredAt),
    failed_at: toIso(d.failedAt),
    last_status_code: d.lastStatusCode === 0 ? null : d.lastStatusCode,
    last_error: d.lastError,
    transport: DELIVERY_TRANSPORT_NAMES[d.transport] ?? "unknown",
    // The callback endpoint it goes to (null for Votifier and pull).
    endpoint_id: d.endpointId || null,
    endpoint_url: d.endpointUrl || null,
    // Why a pending delivery is not being sent (null when it is not held): the dashboard shows it as held.
    held_reason: d.heldReason || null,
  };
}

/**
 * One recorded attempt of a delivery with its exact exchange: the request as sent (the
 * signature header included; no secret is ever in it) and the response (null when none
 * arrived, or for attempts recorded before exchanges were stored).
 */
export function toAttemptJson(a: DeliveryAttempt) {
  const statusCode = a.statusCode === 0 ? null : a.statusCode;
  return {
    attempt: a.attempt,
    started_at: toIso(a.startedAt),
    status_code: statusCode,
    latency_ms: a.latencyMs,
    error: a.error,
    url: a.url,
    succeeded: a.succeeded,
    // HTTP callbacks are POSTs; a transport without methods (a socket protocol) has none.
    request: a.exchangeRecorded ? { method: /^https?:/i.test(a.url) ? "POST" : null, url: a.url, headers: a.requestHeaders, body: a.requestBody } : null,
    response:
      a.exchangeRecorded && a.responseReceived
        ? { status_code: statusCode, latency_ms: a.latencyMs, headers: a.responseHeaders, body: a.responseBody, body_truncated: a.responseBodyTruncated }
        : null,
  };
}

function toWindowJson(w: EndpointWindow | undefined) {
  return { attempts: w?.attempts ?? 0, succeeded: w?.succeeded ?? 0, success_rate: w?.successRate ?? 0 };
}

/** One callback endpoint: where it posts, what it receives, its opt-ins and disable state (never its secret). */
export function toEndpointJson(e: CallbackEndpoint | undefined) {
  if (!e) return null;
  return {
    id: e.id,
    is_default: e.isDefault,
    url: e.url,
    event_types: e.eventTypes,
    payload_version: e.payloadVersion,
    standard_webhooks: e.standardWebhooks,
    public_key_signatures: e.publicKeySignatures,
    disabled_at: toIso(e.disabledAt),
    disabled_reason: e.disabledReason,
    created_at: toIso(e.createdAt),
    kind: e.kind || "callback",
    // A Discord endpoint: its webhook's id (never the token) and its templates by event type.
    discord_webhook_id: e.discordWebhookId,
    discord_templates: Object.fromEntries(e.discordTemplates.map((x) => [x.eventType, x.template])),
    discord_embed: e.discordEmbed,
  };
}

/** How a server's callback endpoint is doing (success rates, last success and failure, disable state). */
export function toEndpointHealthJson(h: GetEndpointHealthResponse) {
  return {
    server_id: h.serverId,
    callback_url: h.callbackUrl,
    last_24h: toWindowJson(h.last24h),
    last_7d: toWindowJson(h.last7d),
    last_success_at: toIso(h.lastSuccessAt),
    last_failure_at: toIso(h.lastFailureAt),
    last_failure_reason: h.lastFailureReason,
    failing_since: toIso(h.failingSince),
    auto_disable_at: toIso(h.autoDisableAt),
    disabled_at: toIso(h.disabledAt),
    disabled_reason: h.disabledReason,
    failed_deliveries_7d: h.failedDeliveries7d,
    pending_deliveries: h.pendingDeliveries,
  };
}

/** Which plugins call each check/claim path (the card names the path and them). */
const PATH_USERS: Readonly<Record<string, string>> = {
  [VOTES_PATH]: "EasyVoteExtended, the FiveM vote script, RocketMod Votifier (the documented URLs)",
  [VOTES_JSON_PATH]: "VoteReward (the documented .vrc file)",
  [REWARD_QUEUE_PATH]: "a game plugin listing the reward queue (docs/reward-queue.md)",
  [REWARD_QUEUE_ACK_PATH]: "a game plugin acknowledging reward queue entries",
  ...Object.fromEntries(PLUGIN_PRESET_PATHS.map(({ path, usedBy }) => [path, `a preset: ${usedBy}`])),
};

/** One row of the plugin activity card: a path, an id kind and an outcome, with its count and the last call. */
export function toPluginActivityJson(row: PluginActivityRow) {
  return {
    path: row.family,
    used_by: PATH_USERS[row.family] ?? "",
    // A reward queue call names no player (its kind is unspecified): `none`.
    player_id_kind: PLAYER_ID_KIND_NAMES[row.playerIdKind] ?? "none",
    outcome: PLUGIN_CALL_OUTCOME_NAMES[row.outcome] ?? "unknown",
    calls: row.calls,
    since: toIso(row.since),
    last_at: toIso(row.lastAt),
    last_action: row.lastAction,
    last_answer: row.lastAnswer,
    last_player_id: row.lastPlayerId === "" ? null : row.lastPlayerId,
  };
}

/** One HTTP exchange exactly as it happened (test callback, test referral event). */
export function toExchangeJson(report: ExchangeReport | undefined) {
  if (!report) return null;
  return {
    method: "POST",
    url: report.url,
    request_headers: report.requestHeaders,
    request_body: report.requestBody,
    canonical_string: report.canonicalString,
    status_code: report.statusCode === 0 ? null : report.statusCode,
    response_body: report.responseBody,
    latency_ms: report.latencyMs,
    error: report.error,
    ok: report.ok,
  };
}

/** One Votifier v2 exchange (test vote); the token is never part of it. */
export function toVoteReportJson(report: VoteReport | undefined) {
  if (!report) return null;
  return {
    target: report.target,
    greeting: report.greeting,
    payload: report.payload,
    frame_bytes: report.frameBytes,
    response: report.response,
    latency_ms: report.latencyMs,
    error: report.error,
    ok: report.ok,
  };
}

/** The referral funnel: counts and rates (0..1). */
export function toFunnelJson(f: GetFunnelResponse) {
  return {
    clicks: Number(f.clicks),
    registered: Number(f.registered),
    qualified: Number(f.qualified),
    reversed: Number(f.reversed),
    click_to_register_rate: f.clickToRegisterRate,
    register_to_qualify_rate: f.registerToQualifyRate,
    reversal_rate: f.reversalRate,
    clawbacks: Number(f.clawbacks),
    reversals_by_reason: f.reversalsByReason.map((r) => ({ reason: r.reason, count: Number(r.count), clawbacks: Number(r.clawbacks) })),
  };
}

/** One referral with its anti-abuse record (the Referrals tab's list and detail). */
export function toReviewedReferralJson(r: ReviewedReferral | undefined) {
  if (!r) return null;
  return {
    id: r.id,
    referrer: r.referrerIdentity,
    referee: r.refereeIdentity,
    state: ANCHOR_STATE_NAMES[r.state] ?? null,
    registered_at: toIso(r.registeredAt),
    qualified_at: toIso(r.qualifiedAt),
    reversed_at: toIso(r.reversedAt),
    review: REVIEW_STATE_NAMES[r.review] ?? null,
    reviewed_at: toIso(r.reviewedAt),
    counted: r.counted,
    signals: r.signals.map((s) => ({ code: s.code, details: JSON.parse(s.detailsJson || "{}") as unknown })),
  };
}

/** One event applied to a referral. */
export function toReferralEventJson(e: ReferralEventRecord) {
  return { type: e.type, server_event_id: e.serverEventId, received_at: toIso(e.receivedAt), outcome: e.outcome };
}

/** One referrer on the leaderboard. */
export function toLeaderboardJson(e: LeaderboardEntry) {
  return { rank: e.rank, referrer: e.referrerIdentity, credits: Number(e.credits), reversed: Number(e.reversed), clawbacks: Number(e.clawbacks) };
}

/** One server in the hearts ranking, with its name when the dashboard knows it. */
export function toRankingJson(e: RankingEntry, names: ReadonlyMap<string, string>) {
  return { rank: e.rank, server_id: e.serverId, server_name: names.get(e.serverId) ?? null, hearts: Number(e.hearts) };
}

/** The API's verdict filter -> the proto enum (UNSPECIFIED = all). */
export const HEART_VERDICT_FILTER: Record<string, HeartVerdict> = { "": HeartVerdict.UNSPECIFIED, all: HeartVerdict.UNSPECIFIED, ...VERDICT_TO_PROTO };

/** One cast heart with its verdict and the deliveries it produced (one per transport). */
export function toHeartJson(h: HeartSummary) {
  return {
    heart_id: h.heartId,
    username: h.username,
    voter_identity: h.voterIdentity,
    verdict: VERDICT_FROM_PROTO[h.verdict] || "unknown",
    fraud_score: h.fraudScore,
    fraud_reasons: h.fraudReasons,
    streak_day: h.streakDay === 0 ? null : h.streakDay,
    period: h.period,
    cast_at: toIso(h.castAt),
    steam_id: h.steamId || null,
    discord_id: h.discordId || null,
    minecraft_uuid: h.minecraftUuid || null,
    account_id: h.accountId || null,
    // The claim ledger (reward plugins' check/claim API); null when the heart is not in it.
    claim:
      h.claimState === ""
        ? null
        : { state: h.claimState, expired_reason: h.claimExpiredReason || null, expires_at: toIso(h.claimExpiresAt), claimed_at: toIso(h.claimedAt) },
    deliveries: h.deliveries.map((d) => ({
      id: d.deliveryId,
      transport: d.transport,
      status: d.status,
      attempts: d.attempts,
      last_status_code: d.lastStatusCode === 0 ? null : d.lastStatusCode,
      delivered_at: toIso(d.deliveredAt),
      held_reason: d.heldReason || null,
    })),
  };
}

function toHeartBucketJson(b: HeartCountBucket) {
  return { bucket: b.bucket, counted: Number(b.counted), cooldown: Number(b.cooldown), fraud: Number(b.fraud) };
}

/** Hearts per UTC day and month by verdict. */
export function toHeartStatsJson(s: GetHeartStatsResponse) {
  return { daily: s.daily.map(toHeartBucketJson), monthly: s.monthly.map(toHeartBucketJson) };
}

/** One UTC day of deliveries by outcome, with that day's attempt latency (null without attempts). */
export function toDeliveryDayJson(d: DeliveryDayStats) {
  const attempts = Number(d.attempts);
  return {
    day: d.day,
    delivered: Number(d.delivered),
    failed: Number(d.failed),
    pending: Number(d.pending),
    attempts,
    attempts_ok: Number(d.attemptsOk),
    latency_p50_ms: attempts === 0 ? null : d.latencyP50Ms,
    latency_p95_ms: attempts === 0 ? null : d.latencyP95Ms,
    latency_max_ms: attempts === 0 ? null : d.latencyMaxMs,
  };
}

/**
 * A server's voter roles as the dashboard shows them (never the token), with `status`: the short line of the server's
 * page: off, the last Discord error and when, working (the last role change), or waiting for the first vote.
 */
export function toVoterRolesJson(s: VoterRoleSettings | undefined) {
  const at = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : null);
  const lastErrorAt = at(s?.lastErrorAt);
  const lastOkAt = at(s?.lastOkAt);
  const status = !s?.configured
    ? "Off"
    : s.lastError !== ""
      ? `Last error at ${lastErrorAt}: ${s.lastError}`
      : lastOkAt !== null
        ? `Working: last role change at ${lastOkAt}`
        : "Waiting for the first counted vote with a Discord id";
  return {
    configured: s?.configured ?? false,
    guild_id: s?.guildId ?? "",
    role_id: s?.roleId ?? "",
    duration_seconds: s?.durationSeconds ?? 0,
    bot_token_set: s?.botTokenSet ?? false,
    last_error: s?.lastError ?? "",
    last_error_at: lastErrorAt,
    last_ok_at: lastOkAt,
    status,
  };
}
/** A network goal on the Goals card: its target, the round counted now and its progress (never its rewards' commands). */
export function toNetworkGoalJson(g: GetNetworkGoalResponse) {
  return {
    id: g.goalId,
    name: g.name,
    server_ids: g.serverIds,
    target: g.target,
    payees: g.payees,
    round: g.round,
    progress: g.progress,
    reached: g.reached,
    last_reached_at: toIso(g.lastReachedAt),
  };
}

/** An owner alert on the dashboard's notification list. */
export function toOwnerAlertJson(a: OwnerAlert) {
  return {
    id: a.id,
    server_id: a.serverId,
    kind: a.kind,
    title: a.title,
    detail: a.detail,
    link: a.link,
    created_at: toIso(a.createdAt),
    read: a.read,
    resolved: a.resolved,
  };
}

/** An owner's alert channels: the address, and whether a Discord webhook is set with its id (never its URL). */
export function toAlertChannelsJson(c: AlertChannels | undefined) {
  return { email: c?.email ?? "", discord_webhook_set: c?.discordWebhookSet ?? false, discord_webhook_id: c?.discordWebhookId ?? "" };
}
