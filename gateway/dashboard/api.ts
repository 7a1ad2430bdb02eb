import { isPeriod, periodOf } from "../../services/shared/values/period.js";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type CallOptions } from "@connectrpc/connect";
import { ReferralState } from "../../gen/proto/referral/v1/referral_pb.js";
import { ReviewState } from "../../gen/proto/referral/v1/referral_review_pb.js";
import {
  ANCHOR_STATE_TO_PROTO,
  EXPORT_FORMAT_TO_PROTO,
  REVIEW_ACTION_TO_PROTO,
  REVIEW_MODE_NAMES,
  REVIEW_MODE_TO_PROTO,
  REVIEW_STATE_TO_PROTO,
} from "../../services/shared/values/proto-names.js";
import type { DashboardClients } from "./clients.js";
import { ENDPOINT_EVENT_TYPES, PAYLOAD_VERSIONS } from "../../services/shared/values/event-types.js";
import { isVoterKeyKind, PROTO_KEY_KIND, VOTER_KEY_KINDS } from "../../services/shared/values/voter-key-kinds.js";
import { errorReply, fromRpcError, type HttpReply } from "../http-errors.js";
import {
  atMostCharsText,
  choiceText,
  integerBetweenText,
  monthText,
  nonNegativeIntegerText,
  notStringText,
  oneOfText,
} from "../../services/shared/values/contract.js";
import {
  DELIVERY_STATUS_FILTER,
  filterNames,
  DELIVERY_TRANSPORT_FILTER,
  HEART_VERDICT_FILTER,
  toDeliveryDayJson,
  toHeartJson,
  toHeartStatsJson,
  toPluginActivityJson,
  toAttemptJson,
  toDeliveryJson,
  toEndpointHealthJson,
  toEndpointJson,
  toExchangeJson,
  toFunnelJson,
  toLeaderboardJson,
  toRankingJson,
  toOwnerAlertJson,
  toAlertChannelsJson,
  toNetworkGoalJson,
  toReferralEventJson,
  toReviewedReferralJson,
  toSecretJson,
  toServerJson,
  toVoteReportJson,
  toVoterRolesJson,
} from "./to-json.js";

/** Deadline of an ordinary dashboard RPC. */
export const DASHBOARD_RPC_TIMEOUT_MS = 10_000;
/** Deadline of a test send: the outbound request alone may take the 10 s callback timeout. */
export const TEST_SEND_RPC_TIMEOUT_MS = 30_000;
/** Referrers shown per leaderboard and servers per hearts ranking. */
export const RANKING_LIMIT = 100;
/** Pending reward queue entries the Rewards card shows (the oldest first). */
export const REWARD_QUEUE_SHOWN = 50;
/** Longest username search of the deliveries list. */
export const MAX_USERNAME_FILTER_CHARS = 200;

/** A field the API refuses before any call: 400 `{error}` naming the field (`invalidField`); the message is safe to show the owner. */
export class ApiError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ApiError";
  }
}

/** Who is calling: the operator (DASHBOARD_TOKEN, every server) or one owner's session. */
export type Viewer = { kind: "operator" } | { kind: "owner"; ownerId: string; displayName: string; csrfToken: string; expiresAt: Date };

/** What a handler sees of the request. */
export interface ApiRequest {
  viewer: Viewer;
  params: Record<string, string>;
  query: URLSearchParams;
  /** The JSON body (an object; `{}` when the request had none). */
  body: Record<string, unknown>;
  /** Call options for ordinary RPCs (deadline, request id). */
  call: CallOptions;
  /** Call options for test sends (longer deadline). */
  slowCall: CallOptions;
}

/** A handler's answer (status 200 unless given): a JSON body, or a file to download (exports). */
export interface ApiReply {
  status?: number;
  body: unknown;
  /** `truncated`: more rows matched than one export holds (sent as the `X-Export-Truncated: true` header). */
  file?: { contentType: string; filename: string; content: string; truncated: boolean };
}

/** What the API handlers need. */
export interface ApiDeps {
  /** For an owner, clients bound to the owner's session: the referral service scopes every call to the owner's servers. */
  clients: DashboardClients;
  now: () => Date;
}

type Method = "GET" | "POST" | "PUT" | "DELETE";

/** Checks that an owner's session owns the resource a path parameter names; throws (404) otherwise. */
type OwnerCheck = (clients: DashboardClients, id: string, call: CallOptions) => Promise<unknown>;

/**
 * How each path parameter is checked for an owner's session, before the handler
 * runs. Either an owner check (an owner-scoped RPC that answers 404 for another
 * owner's resource), or `within`: the parameter only names something inside the
 * resource of another parameter of the same path (which is checked). A route with
 * a parameter missing here fails at start (route() throws).
 */
const PARAM_OWNER_CHECKS: Readonly<Record<string, OwnerCheck | { within: string }>> = {
  serverId: (clients, serverId, call) => clients.admin.getServer({ serverId }, call),
  deliveryId: (clients, deliveryId, call) => clients.delivery.getDelivery({ deliveryId }, call),
  kid: { within: "serverId" },
  // The endpoint RPCs look an endpoint up by (server, endpoint): another server's endpoint is `unknown endpoint`.
  endpointId: { within: "serverId" },
  referralId: (clients, referralId, call) => clients.reviews.getReferralDetail({ referralId }, call),
  // Another owner's goal is `unknown goal`, as a missing one (services/rewards/network-goal-routes.ts).
  goalId: (clients, goalId, call) => clients.goals.getNetworkGoal({ goalId }, call),
};

interface Route {
  method: Method;
  path: string;
  pattern: RegExp;
  names: string[];
  /** Owner checks of the path's parameters, in order. */
  checks: { name: string; check: OwnerCheck }[];
  handle: (deps: ApiDeps, req: ApiRequest) => Promise<ApiReply>;
}

/** A path like `/servers/:serverId/secrets` -> a matcher with its parameter names and owner checks. */
function route(method: Method, path: string, handle: Route["handle"]): Route {
  const names: string[] = [];
  const source = path.replace(/:([A-Za-z]+)/g, (_, name: string) => {
    names.push(name);
    return "([^/]+)";
  });
  const checks: Route["checks"] = [];
  for (const name of names) {
    const rule = PARAM_OWNER_CHECKS[name];
    if (rule === undefined) throw new Error(`dashboard route ${method} ${path}: parameter :${name} has no owner check; add one to PARAM_OWNER_CHECKS`);
    if (typeof rule === "function") checks.push({ name, check: rule });
    else if (!names.includes(rule.within)) throw new Error(`dashboard route ${method} ${path}: :${name} must come with :${rule.within}`);
  }
  return { method, path, pattern: new RegExp(`^${source}$`), names, checks, handle };
}

/**
 * The dashboard API, relative to `/dashboard/api`. Every answer is JSON; secret
 * values appear only in the answers of create, rotate and reveal.
 *
 * ACCESS RULE (owner sessions see only their own servers), enforced where no route can
 * bypass it:
 * 1. A path parameter is checked before the handler runs (PARAM_OWNER_CHECKS):
 *    `:serverId` and `:deliveryId` must belong to the session's owner, else 404. A new
 *    parameter name fails at start until it gets a check, so a new route taking a
 *    server id is scoped by construction: name the parameter `:serverId`.
 * 2. Handlers get only `deps.clients`, which for an owner carry the session
 *    (x-dashboard-session) on every call; the referral service then scopes each RPC to
 *    the owner (services/access/rpc-access.ts): another owner's server is "unknown
 *    server", lists and rankings hold only the owner's servers, and RPCs not meant for
 *    owners are refused. A handler cannot call without the session.
 * test/integration/access-isolation.test.ts runs every route here as owner A against
 * owner B's resources.
 */
export const ROUTES: readonly Route[] = [
  route("GET", "/session", async (_deps, { viewer }) => {
    if (viewer.kind === "operator") return { body: { ok: true, role: "operator" } };
    return {
      body: {
        ok: true,
        role: "owner",
        owner: { id: viewer.ownerId, display_name: viewer.displayName },
        csrf_token: viewer.csrfToken,
        expires_at: viewer.expiresAt.toISOString(),
      },
    };
  }),

  // Overview
  route("GET", "/servers", async ({ clients }, { call }) => {
    const { servers } = await clients.admin.listServers({}, call);
    return { body: { servers: servers.map(toServerJson) } };
  }),
  route("POST", "/servers", async ({ clients }, { body, call }) => {
    const name = readString(body, "name");
    const registrationUrl = readString(body, "registration_url");
    const { server } = await clients.admin.createServer({ name, registrationUrl }, call);
    return { status: 201, body: { server: toServerJson(server) } };
  }),
  route("GET", "/servers/:serverId", async ({ clients }, { params, call }) => {
    const { server } = await clients.admin.getServer({ serverId: params.serverId }, call);
    return { body: { server: toServerJson(server) } };
  }),

  // Referrals
  route("PUT", "/servers/:serverId/referrals", async ({ clients }, { params, body, call }) => {
    const enabled = readBoolean(body, "enabled");
    const { server } = await clients.admin.setReferralsEnabled({ serverId: params.serverId, enabled }, call);
    return { body: { server: toServerJson(server) } };
  }),
  route("PUT", "/servers/:serverId/registration-url", async ({ clients }, { params, body, call }) => {
    const registrationUrl = readString(body, "registration_url");
    const { server } = await clients.admin.setRegistrationUrl({ serverId: params.serverId, registrationUrl }, call);
    return { body: { server: toServerJson(server) } };
  }),
  route("PUT", "/servers/:serverId/referral-settings", async ({ clients }, { params, body, call }) => {
    // Absent fields stay unchanged; the referral service checks the ranges (docs/referral-rules.md R2, R3).
    const attributionWindowDays = readOptionalInteger(body, "attribution_window_days");
    const lockDays = readOptionalInteger(body, "lock_days");
    const { server } = await clients.admin.setReferralSettings({ serverId: params.serverId, attributionWindowDays, lockDays }, call);
    return { body: { server: toServerJson(server) } };
  }),
  route("GET", "/servers/:serverId/referral-secrets", async ({ clients }, { params, call }) => {
    const { secrets } = await clients.admin.listReferralSecrets({ serverId: params.serverId }, call);
    return { body: { secrets: secrets.map(toSecretJson) } };
  }),
  route("POST", "/servers/:serverId/referral-secrets", async ({ clients }, { params, call }) => {
    const created = await clients.admin.createReferralSecret({ serverId: params.serverId }, call);
    return { status: 201, body: { secret: toSecretJson(created.info), value: created.secret } };
  }),
  route("POST", "/servers/:serverId/referral-secrets/rotate", async ({ clients }, { params, body, call }) => {
    const graceSeconds = readGraceSeconds(body);
    const rotated = await clients.admin.rotateReferralSecret({ serverId: params.serverId, graceSeconds }, call);
    return { status: 201, body: { secret: toSecretJson(rotated.info), value: rotated.secret } };
  }),
  route("POST", "/servers/:serverId/referral-secrets/:kid/revoke", async ({ clients }, { params, call }) => {
    const { info } = await clients.admin.revokeReferralSecret({ serverId: params.serverId, kid: params.kid }, call);
    return { body: { secret: toSecretJson(info) } };
  }),
  route("POST", "/servers/:serverId/referral-secrets/:kid/reveal", async ({ clients }, { params, call }) => {
    const { secret } = await clients.admin.revealReferralSecret({ serverId: params.serverId, kid: params.kid }, call);
    return { body: { kid: params.kid, value: secret } };
  }),
  route("POST", "/servers/:serverId/test-referral-event", async ({ clients }, { params, body, slowCall }) => {
    const event = readString(body, "event");
    const { report } = await clients.delivery.sendTestReferralEvent({ serverId: params.serverId, event }, slowCall);
    return { body: { exchange: toExchangeJson(report) } };
  }),
  route("GET", "/servers/:serverId/funnel", async (deps, { params, query, call }) => {
    const { scope, period } = readScope(query, deps.now());
    const funnel = await deps.clients.referral.getFunnel({ serverId: params.serverId, period }, call);
    return { body: { scope, period, funnel: toFunnelJson(funnel) } };
  }),
  route("GET", "/servers/:serverId/leaderboard", async (deps, { params, query, call }) => {
    const { scope, period } = readScope(query, deps.now());
    const { entries } = await deps.clients.referral.getLeaderboard({ serverId: params.serverId, period, limit: RANKING_LIMIT }, call);
    return { body: { scope, period, entries: entries.map(toLeaderboardJson) } };
  }),

  // Referral list and anti-abuse review (issue 20): the handlers answer 404 for a referral of another server than the path's.
  route("GET", "/servers/:serverId/referral-review", async ({ clients }, { params, call }) => {
    const { mode } = await clients.reviews.getReferralReviewMode({ serverId: params.serverId }, call);
    return { body: { mode: REVIEW_MODE_NAMES[mode] ?? null } };
  }),
  route("PUT", "/servers/:serverId/referral-review", async ({ clients }, { params, body, call }) => {
    const mode = REVIEW_MODE_TO_PROTO[readString(body, "mode") as keyof typeof REVIEW_MODE_TO_PROTO];
    if (mode === undefined) throw new ApiError(oneOfText("mode", Object.keys(REVIEW_MODE_TO_PROTO)));
    const set = await clients.reviews.setReferralReviewMode({ serverId: params.serverId, mode }, call);
    return { body: { mode: REVIEW_MODE_NAMES[set.mode] ?? null } };
  }),
  route("GET", "/servers/:serverId/referrals", async ({ clients }, { params, query, call }) => {
    const page = await clients.reviews.listReferrals(
      { ...readReferralFilter(query, params.serverId ?? ""), pageSize: readCount(query, "page_size"), pageToken: query.get("page_token") ?? "" },
      call,
    );
    return { body: { referrals: page.referrals.map(toReviewedReferralJson), next_page_token: page.nextPageToken || null } };
  }),
  route("GET", "/servers/:serverId/referrals/export", async ({ clients }, { params, query, call }) => {
    const name = query.get("format") ?? "";
    const format = EXPORT_FORMAT_TO_PROTO[name as keyof typeof EXPORT_FORMAT_TO_PROTO];
    if (format === undefined) throw new ApiError(oneOfText("format", Object.keys(EXPORT_FORMAT_TO_PROTO)));
    const exported = await clients.reviews.exportReferrals({ ...readReferralFilter(query, params.serverId ?? ""), format }, call);
    return {
      body: null,
      file: { contentType: exported.contentType, filename: `referrals-${params.serverId}.${name}`, content: exported.body, truncated: exported.truncated },
    };
  }),
  route("GET", "/servers/:serverId/referrals/:referralId", async ({ clients }, { params, call }) => {
    const detail = await clients.reviews.getReferralDetail({ referralId: params.referralId }, call);
    if (detail.referral?.serverId !== params.serverId) throw new ConnectError("referral not found", Code.NotFound);
    return { body: { referral: toReviewedReferralJson(detail.referral), events: detail.events.map(toReferralEventJson) } };
  }),
  route("POST", "/servers/:serverId/referrals/:referralId/review", async ({ clients }, { params, body, call }) => {
    const action = REVIEW_ACTION_TO_PROTO[readString(body, "action") as keyof typeof REVIEW_ACTION_TO_PROTO];
    if (action === undefined) throw new ApiError(oneOfText("action", Object.keys(REVIEW_ACTION_TO_PROTO)));
    const { referral } = await clients.reviews.getReferralDetail({ referralId: params.referralId }, call);
    if (referral?.serverId !== params.serverId) throw new ConnectError("referral not found", Code.NotFound);
    const reviewed = await clients.reviews.reviewReferral({ referralId: params.referralId, action }, call);
    return { body: { referral: toReviewedReferralJson(reviewed.referral), changed: reviewed.changed } };
  }),

  // Integration
  route("PUT", "/servers/:serverId/callback", async ({ clients }, { params, body, call }) => {
    const callbackUrl = readString(body, "callback_url");
    const standardWebhooks = readBoolean(body, "standard_webhooks");
    const payloadVersion = readOptionalInteger(body, "payload_version");
    const publicKeySignatures = readOptionalBoolean(body, "public_key_signatures");
    // The default endpoint's payload version first: a refused version changes nothing.
    if (payloadVersion !== undefined) await clients.admin.updateEndpoint({ serverId: params.serverId, payloadVersion }, call);
    const { server } = await clients.admin.setCallbackSettings({ serverId: params.serverId, callbackUrl, standardWebhooks, publicKeySignatures }, call);
    return { body: { server: toServerJson(server) } };
  }),
  route("POST", "/servers/:serverId/callback/enable", async ({ clients }, { params, call }) => {
    const { server } = await clients.admin.enableCallback({ serverId: params.serverId }, call);
    return { body: { server: toServerJson(server) } };
  }),
  route("POST", "/servers/:serverId/callback-secret/reveal", async ({ clients }, { params, call }) => {
    const revealed = await clients.admin.revealCallbackSecret({ serverId: params.serverId }, call);
    return { body: { secret: toSecretJson(revealed.info), value: revealed.secret } };
  }),
  route("POST", "/servers/:serverId/callback-secret/rotate", async ({ clients }, { params, body, call }) => {
    const graceSeconds = readGraceSeconds(body);
    const rotated = await clients.admin.rotateCallbackSecret({ serverId: params.serverId, graceSeconds }, call);
    return { status: 201, body: { secret: toSecretJson(rotated.info), value: rotated.secret } };
  }),
  route("POST", "/servers/:serverId/test-callback", async ({ clients }, { params, body, slowCall }) => {
    const username = readString(body, "username");
    const { report, delivery } = await clients.delivery.sendTestCallback({ serverId: params.serverId, username }, slowCall);
    return { body: { exchange: toExchangeJson(report), delivery: toDeliveryJson(delivery) } };
  }),
  // Who may call: a dashboard session for the server (the bearer token; owner scoping applies through :serverId).
  route("GET", "/servers/:serverId/endpoint-health", async ({ clients }, { params, call }) => {
    const health = await clients.delivery.getEndpointHealth({ serverId: params.serverId }, call);
    return { body: { health: toEndpointHealthJson(health) } };
  }),

  // Callback endpoints (docs/callbacks.md "Endpoints"): the default one first; each has its own secret, health and test send.
  route("GET", "/servers/:serverId/endpoints", async ({ clients }, { params, call }) => {
    const { endpoints } = await clients.admin.listEndpoints({ serverId: params.serverId }, call);
    return { body: { endpoints: endpoints.map(toEndpointJson), event_types: ENDPOINT_EVENT_TYPES, payload_versions: PAYLOAD_VERSIONS } };
  }),
  route("POST", "/servers/:serverId/endpoints", async ({ clients }, { params, body, call }) => {
    const created = await clients.admin.createEndpoint(
      {
        serverId: params.serverId,
        url: readString(body, "url"),
        eventTypes: readStringList(body, "event_types") ?? [],
        payloadVersion: readOptionalInteger(body, "payload_version") ?? 0,
        standardWebhooks: readOptionalBoolean(body, "standard_webhooks") ?? false,
        publicKeySignatures: readOptionalBoolean(body, "public_key_signatures") ?? false,
      },
      call,
    );
    return { status: 201, body: { endpoint: toEndpointJson(created.endpoint), secret: toSecretJson(created.info), value: created.secret } };
  }),
  route("PUT", "/servers/:serverId/endpoints/:endpointId", async ({ clients }, { params, body, call }) => {
    // Absent fields stay unchanged; a new URL clears a disable.
    const eventTypes = readStringList(body, "event_types");
    const url = body.url === undefined || body.url === null ? undefined : readString(body, "url");
    const { endpoint } = await clients.admin.updateEndpoint(
      {
        serverId: params.serverId,
        endpointId: params.endpointId,
        url,
        eventTypes: eventTypes ?? [],
        updateEventTypes: eventTypes !== undefined,
        payloadVersion: readOptionalInteger(body, "payload_version"),
        standardWebhooks: readOptionalBoolean(body, "standard_webhooks"),
        publicKeySignatures: readOptionalBoolean(body, "public_key_signatures"),
      },
      call,
    );
    return { body: { endpoint: toEndpointJson(endpoint) } };
  }),
  // Discord endpoints (docs/discord.md): the webhook URL in, its id out (the token is never shown again); templates and preview.
  route("POST", "/servers/:serverId/discord-endpoints", async ({ clients }, { params, body, call }) => {
    const { endpoint } = await clients.admin.createDiscordEndpoint(
      {
        serverId: params.serverId,
        webhookUrl: readString(body, "webhook_url"),
        eventTypes: readStringList(body, "event_types") ?? [],
        templates: readDiscordTemplates(body),
        embed: readOptionalBoolean(body, "embed") ?? false,
      },
      call,
    );
    return { status: 201, body: { endpoint: toEndpointJson(endpoint) } };
  }),
  route("PUT", "/servers/:serverId/endpoints/:endpointId/discord-templates", async ({ clients }, { params, body, call }) => {
    const { endpoint } = await clients.admin.setDiscordTemplates(
      { serverId: params.serverId, endpointId: params.endpointId, templates: readDiscordTemplates(body), embed: readOptionalBoolean(body, "embed") },
      call,
    );
    return { body: { endpoint: toEndpointJson(endpoint) } };
  }),
  route("POST", "/servers/:serverId/discord-preview", async ({ clients }, { params, body, call }) => {
    const { content } = await clients.admin.previewDiscordMessage(
      {
        serverId: params.serverId,
        eventType: readString(body, "event_type"),
        template: readString(body, "template"),
        endpointId: readString(body, "endpoint_id"),
      },
      call,
    );
    return { body: { content } };
  }),
  route("POST", "/servers/:serverId/endpoints/:endpointId/enable", async ({ clients }, { params, call }) => {
    const { endpoint } = await clients.admin.enableCallback({ serverId: params.serverId, endpointId: params.endpointId }, call);
    return { body: { endpoint: toEndpointJson(endpoint) } };
  }),
  route("POST", "/servers/:serverId/endpoints/:endpointId/secret/reveal", async ({ clients }, { params, call }) => {
    const revealed = await clients.admin.revealCallbackSecret({ serverId: params.serverId, endpointId: params.endpointId }, call);
    return { body: { secret: toSecretJson(revealed.info), value: revealed.secret } };
  }),
  route("POST", "/servers/:serverId/endpoints/:endpointId/secret/rotate", async ({ clients }, { params, body, call }) => {
    const graceSeconds = readGraceSeconds(body);
    const rotated = await clients.admin.rotateCallbackSecret({ serverId: params.serverId, endpointId: params.endpointId, graceSeconds }, call);
    return { status: 201, body: { secret: toSecretJson(rotated.info), value: rotated.secret } };
  }),
  route("POST", "/servers/:serverId/endpoints/:endpointId/test", async ({ clients }, { params, body, slowCall }) => {
    const username = readString(body, "username");
    const { report, delivery } = await clients.delivery.sendTestCallback({ serverId: params.serverId, endpointId: params.endpointId, username }, slowCall);
    return { body: { exchange: toExchangeJson(report), delivery: toDeliveryJson(delivery) } };
  }),
  route("GET", "/servers/:serverId/endpoints/:endpointId/health", async ({ clients }, { params, call }) => {
    const health = await clients.delivery.getEndpointHealth({ serverId: params.serverId, endpointId: params.endpointId }, call);
    return { body: { health: toEndpointHealthJson(health) } };
  }),
  // Last of the endpoint routes (the isolation test runs them in order on the owner's own endpoint).
  route("DELETE", "/servers/:serverId/endpoints/:endpointId", async ({ clients }, { params, call }) => {
    await clients.admin.deleteEndpoint({ serverId: params.serverId, endpointId: params.endpointId }, call);
    return { body: { deleted: true } };
  }),

  route("PUT", "/servers/:serverId/votifier", async ({ clients }, { params, body, call }) => {
    const request = { host: readString(body, "host"), port: readPort(body), token: readString(body, "token"), serviceName: readString(body, "service_name") };
    const { server } = await clients.admin.setVotifierSettings({ serverId: params.serverId, ...request }, call);
    return { body: { server: toServerJson(server) } };
  }),
  route("POST", "/servers/:serverId/test-vote", async ({ clients }, { params, body, slowCall }) => {
    const username = readString(body, "username");
    const { report } = await clients.delivery.sendTestVote({ serverId: params.serverId, username }, slowCall);
    return { body: { vote: toVoteReportJson(report) } };
  }),
  route("PUT", "/servers/:serverId/pull", async ({ clients }, { params, body, call }) => {
    const enabled = readBoolean(body, "enabled");
    const { server } = await clients.admin.setPullEnabled({ serverId: params.serverId, enabled }, call);
    return { body: { server: toServerJson(server) } };
  }),
  route("POST", "/servers/:serverId/pull-secret/reveal", async ({ clients }, { params, call }) => {
    const revealed = await clients.admin.revealPullSecret({ serverId: params.serverId }, call);
    return { body: { secret: toSecretJson(revealed.info), value: revealed.secret } };
  }),
  route("POST", "/servers/:serverId/pull-secret/rotate", async ({ clients }, { params, body, call }) => {
    const graceSeconds = readGraceSeconds(body);
    const rotated = await clients.admin.rotatePullSecret({ serverId: params.serverId, graceSeconds }, call);
    return { status: 201, body: { secret: toSecretJson(rotated.info), value: rotated.secret } };
  }),

  // The claim ledger (reward plugins' check/claim API): its key and settings
  route("PUT", "/servers/:serverId/claims", async ({ clients }, { params, body, call }) => {
    const paysOnce = readOptionalBoolean(body, "pays_once");
    const settings = {
      holdDays: readSmallInt(body, "hold_days"),
      maxHeldPerPlayer: readSmallInt(body, "max_held_per_player"),
      ...(paysOnce === undefined ? {} : { paysOnce }),
    };
    const { server } = await clients.admin.setClaimSettings({ serverId: params.serverId, ...settings }, call);
    return { body: { server: toServerJson(server) } };
  }),
  route("POST", "/servers/:serverId/claim-secret/reveal", async ({ clients }, { params, call }) => {
    const revealed = await clients.admin.revealClaimKey({ serverId: params.serverId }, call);
    return { body: { secret: toSecretJson(revealed.info), value: revealed.claimKey } };
  }),
  route("POST", "/servers/:serverId/claim-secret/rotate", async ({ clients }, { params, body, call }) => {
    // 0 (or absent) here means no overlap: the previous claim key stops at once.
    const graceSeconds = readGraceSeconds(body);
    const rotated = await clients.admin.rotateClaimKey({ serverId: params.serverId, graceSeconds }, call);
    return { status: 201, body: { secret: toSecretJson(rotated.info), value: rotated.claimKey } };
  }),

  // Voter roles (docs/discord-roles.md): the Discord bot, guild, role and duration; the token is never answered back
  route("GET", "/servers/:serverId/voter-roles", async ({ clients }, { params, call }) => {
    const { settings } = await clients.voterRoles.getVoterRoleSettings({ serverId: params.serverId }, call);
    return { body: { voter_roles: toVoterRolesJson(settings) } };
  }),
  route("PUT", "/servers/:serverId/voter-roles", async ({ clients }, { params, body, call }) => {
    const { settings } = await clients.voterRoles.setVoterRoleSettings(
      {
        serverId: params.serverId,
        botToken: readString(body, "bot_token"),
        guildId: readString(body, "guild_id"),
        roleId: readString(body, "role_id"),
        durationSeconds: readSmallInt(body, "duration_seconds"),
      },
      call,
    );
    return { body: { voter_roles: toVoterRolesJson(settings) } };
  }),
  route("DELETE", "/servers/:serverId/voter-roles", async ({ clients }, { params, call }) => {
    await clients.voterRoles.clearVoterRoleSettings({ serverId: params.serverId }, call);
    return { body: { voter_roles: toVoterRolesJson(undefined) } };
  }),

  // The reward plugins' recent check/claim calls (the plugin activity card)
  route("GET", "/servers/:serverId/plugin-activity", async ({ clients }, { params, call }) => {
    const { rows } = await clients.pluginActivity.getPluginActivity({ serverId: params.serverId }, call);
    return { body: { rows: rows.map(toPluginActivityJson) } };
  }),

  // Deliveries
  route("GET", "/servers/:serverId/deliveries", async ({ clients }, { params, query, call }) => {
    const filter = query.get("status") ?? "";
    const status = DELIVERY_STATUS_FILTER[filter];
    if (status === undefined) throw new ApiError(oneOfText("status", filterNames(DELIVERY_STATUS_FILTER)));
    const transport = DELIVERY_TRANSPORT_FILTER[query.get("transport") ?? ""];
    if (transport === undefined) throw new ApiError(oneOfText("transport", filterNames(DELIVERY_TRANSPORT_FILTER)));
    const username = query.get("username") ?? "";
    if (username.length > MAX_USERNAME_FILTER_CHARS) throw new ApiError(atMostCharsText("username", MAX_USERNAME_FILTER_CHARS));
    const { deliveries } = await clients.delivery.listDeliveries({ serverId: params.serverId, status, transport, username, limit: 100 }, call);
    return { body: { deliveries: deliveries.map(toDeliveryJson) } };
  }),
  route("POST", "/servers/:serverId/deliveries/redeliver-failed", async ({ clients }, { params, body, call }) => {
    const since = readTime(body, "since");
    const { requeued } = await clients.delivery.redeliverFailedSince({ serverId: params.serverId, since: timestampFromDate(since) }, call);
    return { body: { requeued } };
  }),
  // A delivery is addressed through its server, so whatever scopes /servers/:serverId scopes these too.
  route("GET", "/servers/:serverId/deliveries/:deliveryId", async ({ clients }, { params, call }) => {
    const { delivery, attempts } = await clients.delivery.getDelivery({ serverId: params.serverId, deliveryId: params.deliveryId }, call);
    return { body: { delivery: toDeliveryJson(delivery), attempts: attempts.map(toAttemptJson) } };
  }),
  route("POST", "/servers/:serverId/deliveries/:deliveryId/redeliver", async ({ clients }, { params, call }) => {
    const { delivery } = await clients.delivery.redeliver({ serverId: params.serverId, deliveryId: params.deliveryId }, call);
    return { body: { delivery: toDeliveryJson(delivery) } };
  }),

  // Hearts of one server, and the charts (Trends tab)
  route("GET", "/servers/:serverId/hearts", async ({ clients }, { params, query, call }) => {
    const verdict = HEART_VERDICT_FILTER[query.get("verdict") ?? ""];
    if (verdict === undefined) throw new ApiError(oneOfText("verdict", filterNames(HEART_VERDICT_FILTER)));
    const from = readDay(query, "from");
    const to = readDay(query, "to");
    const page = await clients.hearts.listHearts(
      {
        serverId: params.serverId,
        query: query.get("q") ?? "",
        verdict,
        // "all" or absent: every heart; else held, claimed, expired or withdrawn (the service checks it).
        claimState: (query.get("claim") ?? "all") === "all" ? "" : (query.get("claim") ?? ""),
        since: from ? timestampFromDate(from) : undefined,
        // `to` is an inclusive UTC day: hearts before the next midnight.
        until: to ? timestampFromDate(new Date(to.getTime() + DAY_MS)) : undefined,
        pageSize: readCount(query, "page_size"),
        pageToken: query.get("page_token") ?? "",
      },
      call,
    );
    return { body: { hearts: page.hearts.map(toHeartJson), next_page_token: page.nextPageToken || null } };
  }),
  route("GET", "/servers/:serverId/stats/hearts", async ({ clients }, { params, query, call }) => {
    const stats = await clients.hearts.getHeartStats({ serverId: params.serverId, days: readCount(query, "days"), months: readCount(query, "months") }, call);
    return { body: toHeartStatsJson(stats) };
  }),
  route("GET", "/servers/:serverId/stats/deliveries", async ({ clients }, { params, query, call }) => {
    const transport = DELIVERY_TRANSPORT_FILTER[query.get("transport") ?? ""];
    if (transport === undefined) throw new ApiError(oneOfText("transport", filterNames(DELIVERY_TRANSPORT_FILTER)));
    const { days } = await clients.deliveryStats.getDeliveryStats({ serverId: params.serverId, days: readCount(query, "days"), transport }, call);
    return { body: { days: days.map(toDeliveryDayJson) } };
  }),

  // A voter's export and erasure (the owner's server only; the key travels in the body, never in a URL that logs keep).
  route("POST", "/servers/:serverId/voter-data/export", async ({ clients }, { params, body, slowCall }) => {
    const { document } = await clients.voters.exportVoterData({ serverId: params.serverId, ...readVoterKey(body) }, slowCall);
    return { body: null, file: { contentType: "application/json", filename: `voter-data-${params.serverId}.json`, content: document, truncated: false } };
  }),
  route("POST", "/servers/:serverId/voter-data/erase", async ({ clients }, { params, body, slowCall }) => {
    // The confirmation the page asks for: an erasure cannot be undone.
    if (body.confirm !== true) throw new ApiError(ERASE_CONFIRM_TEXT);
    const erased = await clients.voters.eraseVoterData({ serverId: params.serverId, ...readVoterKey(body) }, slowCall);
    return { body: { tombstone: erased.tombstone, counts: Object.fromEntries(Object.entries(erased.counts).map(([k, v]) => [k, Number(v)])) } };
  }),

  // Reward rules and the reward queue (docs/reward-rules.md, docs/reward-queue.md): the Rewards card (rewards.js)
  route("GET", "/servers/:serverId/reward-rules", async ({ clients }, { params, call }) => {
    const got = await clients.rewards.getRewardRules({ serverId: params.serverId }, call);
    return {
      body: {
        version: got.version,
        rules: JSON.parse(got.rulesJson) as unknown,
        draw_seed: got.drawSeed || null,
        saved_by: got.savedBy || null,
        saved_at: got.savedAt ? timestampDate(got.savedAt).toISOString() : null,
      },
    };
  }),
  route("PUT", "/servers/:serverId/reward-rules", async ({ clients }, { params, body, call }) => {
    const baseVersion = readSmallInt(body, "base_version");
    const { version } = await clients.rewards.putRewardRules({ serverId: params.serverId, rulesJson: readRulesJson(body, "rules"), baseVersion }, call);
    return { body: { version } };
  }),
  route("POST", "/servers/:serverId/reward-rules/preview", async ({ clients }, { params, body, call }) => {
    const count = (field: string) => (body[field] === undefined || body[field] === null ? 1 : readSmallInt(body, field));
    const preview = await clients.rewards.previewRewards(
      {
        serverId: params.serverId,
        rulesJson: body.rules === undefined || body.rules === null ? "" : readRulesJson(body, "rules"),
        player: readString(body, "player") || "Steve",
        total: count("total"),
        monthTotal: count("month_total"),
        weekTotal: count("week_total"),
        streakDays: count("streak"),
        streakExtended: true,
      },
      call,
    );
    return {
      body: {
        weight: preview.weight,
        entries: preview.entries.map((e) => ({ key: e.key, reason: e.reason, commands: e.commands, online_only: e.onlineOnly })),
        skipped: preview.skipped.map((s) => ({ key: s.key, reason: s.reason, why: s.why })),
      },
    };
  }),
  route("GET", "/servers/:serverId/reward-queue", async ({ clients }, { params, call }) => {
    const { entries } = await clients.rewardQueue.listRewardQueue({ serverId: params.serverId, limit: REWARD_QUEUE_SHOWN }, call);
    return {
      body: {
        entries: entries.map((e) => ({
          id: e.id,
          reason: e.reason,
          username: e.username,
          commands: e.commands,
          online_only: e.onlineOnly,
          created_at: e.createdAt ? timestampDate(e.createdAt).toISOString() : null,
        })),
      },
    };
  }),
  route("POST", "/servers/:serverId/reward-queue/requeue", async ({ clients }, { params, body, call }) => {
    const page = await clients.rewardQueue.requeueRewardEntries(
      {
        serverId: params.serverId,
        ackedFrom: timestampFromDate(readTime(body, "from")),
        ackedTo: timestampFromDate(readTime(body, "to")),
        after: readString(body, "after"),
      },
      call,
    );
    return { body: { requeued: page.requeued, scanned: page.scanned, next_after: page.nextAfter || null } };
  }),

  // Hearts
  route("GET", "/hearts/ranking", async ({ clients }, { query, call }) => {
    const period = query.get("period") ?? "";
    if (period !== "" && !isPeriod(period)) throw new ApiError(monthText("period"));
    const [ranking, { servers }] = await Promise.all([clients.hearts.getRanking({ period, limit: RANKING_LIMIT }, call), clients.admin.listServers({}, call)]);
    const names = new Map(servers.map((s) => [s.id, s.name]));
    return { body: { period: ranking.period, entries: ranking.entries.map((e) => toRankingJson(e, names)) } };
  }),

  // Owner alerts (docs/owner-alerts.md): the session's own owner only (operators name one with owner_id).
  route("GET", "/alerts", async ({ clients }, { query, call }) => {
    const { alerts } = await clients.alerts.listOwnerAlerts({ ownerId: query.get("owner_id") ?? "", unreadOnly: query.get("unread") === "true" }, call);
    return { body: { alerts: alerts.map(toOwnerAlertJson) } };
  }),
  route("GET", "/servers/:serverId/alerts", async ({ clients }, { params, query, call }) => {
    const { alerts } = await clients.alerts.listServerAlerts({ serverId: params.serverId, unreadOnly: query.get("unread") === "true" }, call);
    return { body: { alerts: alerts.map(toOwnerAlertJson) } };
  }),
  route("POST", "/alerts/read", async ({ clients }, { body, call }) => {
    const { marked } = await clients.alerts.markOwnerAlertsRead({ ownerId: readString(body, "owner_id"), alertIds: readStringList(body, "ids") ?? [] }, call);
    return { body: { marked } };
  }),
  route("GET", "/alert-channels", async ({ clients }, { query, call }) => {
    const { channels } = await clients.alerts.getAlertChannels({ ownerId: query.get("owner_id") ?? "" }, call);
    return { body: toAlertChannelsJson(channels) };
  }),
  route("PUT", "/alert-channels", async ({ clients }, { body, call }) => {
    const webhook = readString(body, "discord_webhook_url");
    const { channels } = await clients.alerts.setAlertChannels(
      {
        ownerId: readString(body, "owner_id"),
        email: readString(body, "email"),
        ...(webhook === "" ? {} : { discordWebhookUrl: webhook }),
        removeDiscordWebhook: readOptionalBoolean(body, "remove_discord_webhook") ?? false,
      },
      call,
    );
    return { body: toAlertChannelsJson(channels) };
  }),

  // Network goals (docs/reward-rules.md "Network goals"): the session's own goals (operators: owner_id, or the goals of
  // servers no owner has); one page of ListNetworkGoals (at most its 100) per call, `cursor` for the next.
  route("GET", "/goals", async ({ clients }, { query, call }) => {
    const page = await clients.goals.listNetworkGoals({ ownerId: query.get("owner_id") ?? "", cursor: query.get("cursor") ?? "" }, call);
    return { body: { goals: page.goals.map(toNetworkGoalJson), next_cursor: page.nextCursor || null } };
  }),
  route("DELETE", "/goals/:goalId", async ({ clients }, { params, call }) => {
    const { unpaidRounds } = await clients.goals.deleteNetworkGoal({ goalId: params.goalId }, call);
    return { body: { unpaid_rounds: unpaidRounds } };
  }),
];

/** The outcome of matching a method and path against the API. */
export type ApiMatch = { kind: "route"; route: Route; params: Record<string, string> } | { kind: "method_not_allowed"; allow: string } | { kind: "not_found" };

/** Finds the route of `method` and `path` (relative to `/dashboard/api`). */
export function matchApiRoute(method: string, path: string): ApiMatch {
  const allowed: string[] = [];
  for (const r of ROUTES) {
    const m = r.pattern.exec(path);
    if (!m) continue;
    if (r.method !== method) {
      allowed.push(r.method);
      continue;
    }
    const params: Record<string, string> = {};
    r.names.forEach((name, i) => (params[name] = decodeParam(m[i + 1] ?? "")));
    return { kind: "route", route: r, params };
  }
  return allowed.length > 0 ? { kind: "method_not_allowed", allow: allowed.join(", ") } : { kind: "not_found" };
}

/** Runs the owner checks of a matched route's parameters (for owner sessions, before the handler). */
export async function checkOwnerParams(route: Route, clients: DashboardClients, params: Record<string, string>, call: CallOptions): Promise<void> {
  for (const { name, check } of route.checks) await check(clients, params[name] ?? "", call);
}

/** A failure -> the API's `{error}` reply (the gateway's one RPC error table); `log` when the cause must be logged. */
export function toApiError(error: unknown): { reply: HttpReply; message: string; log: boolean } {
  if (error instanceof ApiError) return { reply: errorReply("invalidField", error.message), message: error.message, log: false };
  // Failure policy: the table decides; anything it does not name is 500 `internal error`, logged with the request id, never shown.
  const mapped = fromRpcError(error, "dashboard");
  return { reply: mapped.reply, message: (mapped.reply.body as { error: string }).error, log: mapped.cause !== undefined };
}

function decodeParam(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    // Failure policy: a malformed escape cannot name anything; pass it raw so the RPC answers not found.
    return raw;
  }
}

/** An optional string field ("" when absent); 400 for another JSON type. */
/** The 400 text of an erasure without `"confirm": true`. */
export const ERASE_CONFIRM_TEXT = "confirm must be true: an erasure cannot be undone";

/** A voter's key from the body: `key_kind` (username, steam_id, discord_id, minecraft_uuid, account_id) and `key`. */
function readVoterKey(body: Record<string, unknown>) {
  const kind = readString(body, "key_kind");
  if (!isVoterKeyKind(kind)) throw new ApiError(oneOfText("key_kind", VOTER_KEY_KINDS));
  return { keyKind: PROTO_KEY_KIND[kind], key: readString(body, "key") };
}

/** Reward rules as the page sends them: the JSON object itself, or its text; the service validates them. */
function readRulesJson(body: Record<string, unknown>, field: string): string {
  const value = body[field];
  if (typeof value === "string") return value;
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new ApiError(`${field} must be the rules object (or its JSON text)`);
  return JSON.stringify(value);
}

function readString(body: Record<string, unknown>, field: string): string {
  const value = body[field];
  if (value === undefined || value === null) return "";
  if (typeof value !== "string") throw new ApiError(notStringText(field));
  return value;
}

/** The referral list's filters: `state`, `review` (or `flagged=true`), `referrer`; 400 for an unknown value. */
function readReferralFilter(query: URLSearchParams, serverId: string) {
  const stateName = query.get("state") ?? "";
  const state = stateName === "" ? ReferralState.UNSPECIFIED : ANCHOR_STATE_TO_PROTO[stateName as keyof typeof ANCHOR_STATE_TO_PROTO];
  if (state === undefined) throw new ApiError(oneOfText("state", Object.keys(ANCHOR_STATE_TO_PROTO)));
  const reviewName = query.get("review") ?? "";
  const review = reviewName === "" ? ReviewState.UNSPECIFIED : REVIEW_STATE_TO_PROTO[reviewName as keyof typeof REVIEW_STATE_TO_PROTO];
  if (review === undefined) throw new ApiError(oneOfText("review", Object.keys(REVIEW_STATE_TO_PROTO)));
  const flagged = query.get("flagged") ?? "";
  if (flagged !== "" && flagged !== "true" && flagged !== "false") throw new ApiError("flagged must be true or false");
  return { serverId, state, review, flaggedOnly: flagged === "true", referrerIdentity: query.get("referrer") ?? "" };
}

/** A required boolean field. */
function readBoolean(body: Record<string, unknown>, field: string): boolean {
  const value = body[field];
  if (typeof value !== "boolean") throw new ApiError(`${field} must be true or false`);
  return value;
}

/** An optional boolean field (undefined when absent or null: unchanged). */
function readOptionalBoolean(body: Record<string, unknown>, field: string): boolean | undefined {
  const value = body[field];
  return value === undefined || value === null ? undefined : readBoolean(body, field);
}

/** `templates`: an object of template text by event type (absent: none); the service checks them. */
function readDiscordTemplates(body: Record<string, unknown>): Array<{ eventType: string; template: string }> {
  const value = body.templates;
  if (value === undefined || value === null) return [];
  if (typeof value !== "object" || Array.isArray(value) || !Object.values(value).every((v) => typeof v === "string")) {
    throw new ApiError("templates must be an object of template text by event type");
  }
  return Object.entries(value as Record<string, string>).map(([eventType, template]) => ({ eventType, template }));
}

/** An optional list of strings (undefined when absent or null); the service checks the values. */
function readStringList(body: Record<string, unknown>, field: string): string[] | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) throw new ApiError(`${field} must be a list of strings`);
  return value;
}

/** An optional whole number (0 when absent: "keep the current value"; the service checks the range). */
function readSmallInt(body: Record<string, unknown>, field: string): number {
  const value = body[field];
  if (value === undefined || value === null) return 0;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) throw new ApiError(nonNegativeIntegerText(field));
  return value;
}

/** `port`: an optional integer (0 when absent; the service checks the range). */
function readPort(body: Record<string, unknown>): number {
  const value = body.port;
  if (value === undefined || value === null || value === "") return 0;
  const port = typeof value === "string" && /^\d{1,5}$/.test(value) ? Number(value) : value;
  if (typeof port !== "number" || !Number.isInteger(port) || port < 0 || port > 65535) throw new ApiError(integerBetweenText("port", 1, 65535));
  return port;
}

/** An optional integer field (undefined when absent or null); the service checks its range. */
function readOptionalInteger(body: Record<string, unknown>, field: string): number | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isSafeInteger(value)) throw new ApiError(nonNegativeIntegerText(field));
  return value;
}

/** `grace_seconds`: optional non-negative integer; 0 (or absent) means the service's default (24 h). */
function readGraceSeconds(body: Record<string, unknown>): bigint {
  const value = body.grace_seconds;
  if (value === undefined || value === null) return 0n;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) throw new ApiError(nonNegativeIntegerText("grace_seconds"));
  return BigInt(value);
}

/** A required ISO 8601 date-time field. */
function readTime(body: Record<string, unknown>, field: string): Date {
  const value = body[field];
  const parsed = typeof value === "string" && value.trim() !== "" ? new Date(value) : undefined;
  if (!parsed || Number.isNaN(parsed.getTime())) throw new ApiError(`${field} must be an ISO 8601 date-time`);
  return parsed;
}

/** `scope=all` (default) or `scope=month` (the current UTC month by the service's clock). */
function readScope(query: URLSearchParams, now: Date): { scope: "all" | "month"; period: string } {
  const scope = query.get("scope") ?? "all";
  if (scope === "all") return { scope, period: "" };
  if (scope === "month") return { scope, period: periodOf(now) };
  throw new ApiError(choiceText("scope", ["all", "month"]));
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** An optional `YYYY-MM-DD` query parameter (a UTC day) as its midnight; 400 when malformed. */
function readDay(query: URLSearchParams, name: string): Date | undefined {
  const value = query.get(name) ?? "";
  if (value === "") return undefined;
  const day = /^[0-9]{4}-[0-9]{2}-[0-9]{2}$/.test(value) ? new Date(`${value}T00:00:00.000Z`) : undefined;
  if (!day || Number.isNaN(day.getTime()) || day.toISOString().slice(0, 10) !== value) throw new ApiError(`${name} must be a date (YYYY-MM-DD)`);
  return day;
}

/** An optional non-negative integer query parameter (0 when absent: the service's default); 400 otherwise. */
function readCount(query: URLSearchParams, name: string): number {
  const value = query.get(name) ?? "";
  if (value === "") return 0;
  if (!/^[0-9]{1,6}$/.test(value)) throw new ApiError(nonNegativeIntegerText(name));
  return Number(value);
}
