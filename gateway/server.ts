import { sendJson } from "../services/shared/runtime/send-json.js";
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import { createSigningKeyCache, DEFAULT_SIGNING_KEY_CACHE_MS, type SigningKeyCache } from "./signing-key-cache.js";
import type { ResolvePullKeysResponse } from "../gen/proto/servers/v1/servers_pb.js";
import {
  createFailureLimiter,
  DEFAULT_FAILED_SIGNATURE_WINDOW_MS,
  DEFAULT_FAILED_SIGNATURES_GLOBAL,
  DEFAULT_FAILED_SIGNATURES_PER_SOURCE,
  DEFAULT_REFERRAL_LINK_CLICKS_PER_IP,
  DEFAULT_REFERRAL_LINK_WINDOW_MS,
  type FailureLimiter,
} from "./failure-limiter.js";
import type { Client } from "@connectrpc/connect";
import type { DeliveryService } from "../gen/proto/delivery/v1/delivery_pb.js";
import type { HeartService } from "../gen/proto/hearts/v1/hearts_pb.js";
import type { ReferralService } from "../gen/proto/referral/v1/referral_pb.js";
import type { ServerAdminService } from "../gen/proto/servers/v1/servers_pb.js";
import type { ClaimService } from "../gen/proto/claims/v1/claims_pb.js";
import type { PluginActivityService } from "../gen/proto/claims/v1/plugin_activity_pb.js";
import type { RewardQueueService } from "../gen/proto/rewards/v1/rewards_pb.js";
import type { Logger } from "../services/shared/runtime/log.js";
import type { Metrics } from "../services/shared/runtime/metrics.js";
import { handleIngest } from "./handle-ingest.js";
import type { LookupGuards, SignedInput, SignedResult } from "./signed-request.js";
import { createServerDirectory, type ServerDirectory } from "./server-directory.js";
import {
  PULL_CLAIMS_PATH,
  PULL_EVENT_CLAIMS_PATH,
  PULL_EVENTS_PATH,
  PULL_HEARTS_PATH,
  classifyPullKeys,
  handlePullClaim,
  handlePullEventClaim,
  handlePullEventList,
  handlePullList,
  type PullRpcs,
} from "./handle-pull.js";
import { REFERRAL_LINK_PREFIX, TOO_MANY_CLICKS_TEXT, handleReferralLink } from "./handle-referral-link.js";
import { errorReply, type HttpReply } from "./http-errors.js";
import { OPENAPI_PATH, openApiDocument } from "./openapi.js";
import { JWKS_PATH, WEBHOOK_KEYS_PATH, createWellKnownKeys } from "./handle-well-known.js";
import { MAX_BODY_BYTES, declaresTooLarge, readRawBody } from "./raw-body.js";
import { maxCharsOf } from "../services/shared/values/field-rules.js";
import { REQUEST_ID_HEADER, resolveRequestId } from "./request-id.js";
import type { IngestRpcs } from "./forward.js";
import { DOCS_PREFIX, LANDING_PATH, docReply, landingReply } from "./landing.js";
import type { RawReply } from "./http-errors.js";
import { INGEST_PATH } from "../services/shared/values/contract.js";
import {
  DEFAULT_CLAIM_KEY_GUESS_WINDOW_MS,
  DEFAULT_CLAIM_KEY_GUESSES_PER_SOURCE,
  DEFAULT_CLAIM_KEY_PENDING_PER_SOURCE,
  PLUGIN_PRESET_PATHS,
  VOTES_JSON_PATH,
  VOTES_PATH,
  createKnownClaimKeys,
  handleVoteClaim,
  type ClaimKeyGuard,
} from "./handle-vote-claim.js";
import { RECEIPT_PATH_PREFIX, REMINDER_CONFIRM_PREFIX, REMINDER_OPT_IN_SUFFIX, REMINDER_UNSUBSCRIBE_PREFIX } from "../services/shared/values/wire.js";
import { RECEIPT_ROUTE_NAME, handleReceipt } from "./handle-receipt.js";
import { RECEIPT_ANSWER_HEADERS } from "./receipt-page.js";
import {
  REMINDER_CONFIRM_ROUTE_NAME,
  REMINDER_OPT_IN_ROUTE_NAME,
  REMINDER_UNSUBSCRIBE_ROUTE_NAME,
  handleReminderConfirm,
  handleReminderLinkPage,
  handleReminderOptIn,
  handleReminderUnsubscribe,
  type ReminderResult,
  type ReminderRpcs,
} from "./handle-reminder.js";
import type { ReminderService } from "../gen/proto/reminders/v1/reminders_pb.js";
import { createPluginCallRecorder, toPluginCall, toQueuePluginCall, type PluginCallRecorder } from "./record-plugin-calls.js";
import {
  REWARD_QUEUE_ACK_PATH,
  REWARD_QUEUE_PATH,
  handleRewardQueueAck,
  handleRewardQueueList,
  type RewardQueueResult,
  type RewardQueueRpcs,
} from "./handle-reward-queue.js";

/** Deadline of each internal RPC; past it the request is a retryable 500. */
export const RPC_TIMEOUT_MS = 10_000;
/** A whole request (headers and body) must arrive within this, against slow-body clients. */
export const REQUEST_TIMEOUT_MS = 30_000;
/** Server ids per ListServerIds page the gateway asks for. */
const SERVER_IDS_PAGE = 5_000;

/** An extra request handler: returns true when it answered the request. */
export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

/** What the gateway needs; built in gateway/main.ts (or a test). */
export interface GatewayDeps {
  referral: Client<typeof ReferralService>;
  admin: Client<typeof ServerAdminService>;
  /** The pull API's list and claim RPCs. */
  delivery: Client<typeof DeliveryService>;
  /** The reward plugins' check/claim API (CheckVote, ClaimVote). */
  claims: Client<typeof ClaimService>;
  /** The public receipts' GetReceipt. */
  hearts: Client<typeof HeartService>;
  /** The game plugins' reward queue (ListRewardQueue, AckRewardEntries). */
  rewardQueue: Client<typeof RewardQueueService>;
  /** Where the check/claim calls' outcomes go for the owners' plugin activity card (record-plugin-calls.ts); none recorded when absent. */
  pluginActivity?: Client<typeof PluginActivityService>;
  /** How often recorded check/claim calls are sent (PLUGIN_CALL_FLUSH_MS). */
  pluginCallFlushMs?: number;
  log: Logger;
  metrics: Metrics;
  now: () => Date;
  /** /healthz and /readyz (services/shared/runtime/health.ts#createOpsHandler, mounted without metrics: /metrics lives on the ops port). */
  ops?: RequestHandler;
  /** Mounted after the gateway's own routes (for example a dashboard). */
  extraRoutes?: RequestHandler;
  /**
   * When true, the click's recorded address is the last `X-Forwarded-For` entry (the one
   * the trusted proxy in front added); otherwise the socket's peer address. Default false.
   */
  trustProxy?: boolean;
  /** Overrides RPC_TIMEOUT_MS. */
  rpcTimeoutMs?: number;
  /** How long a server's active signing keys are reused (DEFAULT_SIGNING_KEY_CACHE_MS); 0 asks on every request. */
  signingKeyCacheMs?: number;
  /** How long an unknown server id is remembered (DEFAULT_UNKNOWN_SERVER_CACHE_MS); 0 asks every time. */
  unknownServerCacheMs?: number;
  /** At most one key lookup per server per this interval, however many requests ask (DEFAULT_SIGNING_KEY_REFRESH_MS). */
  signingKeyRefreshMs?: number;
  /** Limits on failed signatures (gateway/failure-limiter.ts): per source, and overall for server ids not known to exist; a limit of 0 is off. */
  failedSignatures?: { windowMs?: number; perSource?: number; global?: number };
  /** Referral-link (`/r/`) clicks per client address per window (DEFAULT_REFERRAL_LINK_*); a limit of 0 is off. */
  referralLinkLimit?: { windowMs?: number; perIp?: number };
  /** Limit on wrong claim keys per source of the check/claim API (gateway/handle-vote-claim.ts); a limit of 0 is off. */
  claimKeyGuesses?: { windowMs?: number; perSource?: number };
  /** Whether the dashboard is mounted (the front page links to it only then). */
  dashboard?: boolean;
  /** Vote reminders' RPCs; with `remindersEnabled`, receipt pages offer e-mail reminders (docs/reminders.md). */
  reminders?: Client<typeof ReminderService>;
  /** E-mail reminders on (SMTP_URL set): the receipt page shows the opt-in form and the reminder routes answer. Default false. */
  remindersEnabled?: boolean;
  /** Discord DM reminders on (DISCORD_BOT_TOKEN set): a receipt page of a heart with a Discord id offers them. Default false. */
  discordDmRemindersEnabled?: boolean;
}

/** What the request's single log line says beyond method, path, status and latency. */
interface RequestLog {
  requestId: string;
  route: string;
  outcome?: string;
  serverId?: string;
  kid?: string;
  cause?: unknown;
  quiet?: boolean;
  /** Logged instead of the request's path when the path holds a credential (a route with `secretInPath`). */
  path?: string;
}

const OPENAPI_JSON = JSON.stringify(openApiDocument);

/**
 * Builds the public HTTP/1.1 gateway, unstarted (main.ts or a test calls listen):
 *
 * - `POST /api/referral/events`: raw body (64 KiB limit) -> signature -> forward over Connect.
 *   Who: anyone holding the server's referral secret (the HMAC is the credential).
 * - `POST /api/pull/hearts`, `POST /api/pull/claims`, `POST /api/pull/events`, `POST /api/pull/events/claims`:
 *   the signed pull API (same scheme, the pull secret).
 *   Who: anyone holding the server's pull secret.
 * - `GET /api/votes`, `GET /api/votes/json`: reward plugins' check/claim API (handle-vote-claim.ts), the key in the query;
 *   also at the plugins' preset paths (PLUGIN_PRESET_PATHS: `/api/`, `/vote/`, `/api-vrc/`, ...), the same answers.
 *   Who: anyone holding the server's claim key (read and claim that server's votes only); a wrong key answers `0`.
 * - `GET /api/rewards/queue`, `POST /api/rewards/queue/ack`: the reward queue game plugins pay from (handle-reward-queue.ts),
 *   the claim key in the query. Who: anyone holding the server's claim key; a wrong key answers an empty queue.
 * - `GET /r/<server_id>?referrer=<identity>`: record a click, redirect to the registration URL. Who: the public.
 * - `GET /openapi/referral.json`: the OpenAPI 3.1 document. Who: the public.
 * - `GET /.well-known/webhook-keys.json` and `/.well-known/jwks.json`: the list's published ed25519
 *   public keys for `v1a` callback signatures (handle-well-known.ts). Who: the public.
 * - `GET /`: links to the dashboard, the docs and the OpenAPI document; `GET /docs/<file>`: the docs. Who: the public.
 * - `GET /receipts/<token>` (HTML) and `GET /receipts/<token>.json`: a heart's receipt (handle-receipt.ts). Who: anyone
 *   holding the receipt link (the unguessable token is the credential; the referral service checks it).
 * - then `ops` (/healthz, /readyz; the public; /metrics is served on the ops port, not here), then `extraRoutes` (the dashboard: an owner's
 *   session or the operator's token, see gateway/dashboard/routes.ts), else 404 JSON.
 *
 * Every request gets a request id (the caller's `X-Request-Id` when well-formed, else a
 * uuid), echoed in the response and forwarded to the RPCs; one structured log line per
 * request (no secrets, no signature header, no bodies) and metrics by route and status.
 */
export function createGatewayServer(deps: GatewayDeps): http.Server {
  const { guards, servers } = createGuards(deps);
  const routes = createRoutes(deps, guards);
  const server = http.createServer({ requestTimeout: REQUEST_TIMEOUT_MS }, (req, res) => {
    void handleRequest(deps, guards, routes, req, res);
  });
  servers?.start();
  server.on("close", () => {
    servers?.stop();
    // Failure policy: the held calls are sent once more on close; a failure is counted and logged by the recorder, never thrown.
    void guards.pluginCalls?.stop();
  });
  return server;
}

/** The per-process state of the routes (caches, limits, the server directory unstarted, the plugin call recorder). */
function createGuards(deps: GatewayDeps): { guards: IngestGuards; servers: ServerDirectory | undefined } {
  // One clock for the caches, the limits and the signature's timestamp check (tests move it).
  const nowMs = () => deps.now().getTime();
  const keyCacheOptions = {
    ttlMs: deps.signingKeyCacheMs ?? DEFAULT_SIGNING_KEY_CACHE_MS,
    now: nowMs,
    ...(deps.unknownServerCacheMs === undefined ? {} : { unknownServerTtlMs: deps.unknownServerCacheMs }),
    ...(deps.signingKeyRefreshMs === undefined ? {} : { refreshIntervalMs: deps.signingKeyRefreshMs }),
  };
  const keyCache = createSigningKeyCache(keyCacheOptions);
  const pullKeyCache = createSigningKeyCache<ResolvePullKeysResponse>({ ...keyCacheOptions, classify: classifyPullKeys });
  const limiter = createFailureLimiter({
    windowMs: deps.failedSignatures?.windowMs ?? DEFAULT_FAILED_SIGNATURE_WINDOW_MS,
    perSource: deps.failedSignatures?.perSource ?? DEFAULT_FAILED_SIGNATURES_PER_SOURCE,
    global: deps.failedSignatures?.global ?? DEFAULT_FAILED_SIGNATURES_GLOBAL,
    now: nowMs,
  });
  // The known server ids exempt lookups from the global limit only because the key cache bounds each
  // server's lookups; with the cache off (every request its own lookup) every id meets the global limit.
  const servers =
    keyCacheOptions.ttlMs > 0
      ? createServerDirectory({
          listPage: (cursor) => deps.admin.listServerIds({ cursor, limit: SERVER_IDS_PAGE }, { timeoutMs: deps.rpcTimeoutMs ?? RPC_TIMEOUT_MS }),
          log: deps.log,
          now: nowMs,
        })
      : undefined;
  // The same fixed-window counters, per client address only, every click counted: /r/ is unsigned and each
  // visit writes a click row, so one address cannot flood the table (the signed ingest never meets this limit).
  const clickLimiter = createFailureLimiter({
    windowMs: deps.referralLinkLimit?.windowMs ?? DEFAULT_REFERRAL_LINK_WINDOW_MS,
    perSource: deps.referralLinkLimit?.perIp ?? DEFAULT_REFERRAL_LINK_CLICKS_PER_IP,
    now: nowMs,
  });
  const claimKeys: ClaimKeyGuard = {
    limiter: createFailureLimiter({
      windowMs: deps.claimKeyGuesses?.windowMs ?? DEFAULT_CLAIM_KEY_GUESS_WINDOW_MS,
      perSource: deps.claimKeyGuesses?.perSource ?? DEFAULT_CLAIM_KEY_GUESSES_PER_SOURCE,
      pendingPerSource: DEFAULT_CLAIM_KEY_PENDING_PER_SOURCE,
      now: nowMs,
    }),
    known: createKnownClaimKeys({ now: nowMs }),
  };
  const lookups: LookupGuards = servers === undefined ? { limiter } : { limiter, servers };
  const pluginActivity = deps.pluginActivity;
  const pluginCalls =
    pluginActivity === undefined
      ? undefined
      : createPluginCallRecorder({
          send: (request, call) => pluginActivity.recordPluginCalls(request, call),
          log: deps.log,
          metrics: deps.metrics,
          ...(deps.pluginCallFlushMs === undefined ? {} : { flushMs: deps.pluginCallFlushMs }),
        });
  const guards: IngestGuards = { keyCache, pullKeyCache, lookups, clickLimiter, claimKeys, pluginCalls, requestLines: requestLineLogger(deps.log) };
  return { guards, servers };
}

/**
 * The route table's rows as (method, route name): a route's name is its path with `:name` for each path parameter
 * (`/receipts/:token/reminder`). Builds the table with `deps` and calls nothing; for the OpenAPI document's test.
 */
export function listGatewayRoutes(deps: GatewayDeps): ReadonlyArray<{ method: string; name: string }> {
  return createRoutes(deps, createGuards(deps).guards).map(({ method, name }) => ({ method, name }));
}

/** One request as a route's handler sees it. */
interface RouteRequest {
  req: IncomingMessage;
  res: ServerResponse;
  /** The path without the query string, as received (not decoded). */
  rawPath: string;
  /** The query string without `?` ("" when none). */
  query: string;
  entry: RequestLog;
}

/** One row of the route table: a method and a path pattern -> the handler. */
interface Route {
  method: string;
  /** An exact path, or with `prefix: true` every path that starts with it. */
  path: string;
  prefix?: true;
  /** With `prefix`: the path must also end with this (a sub-resource of a prefixed path, such as a receipt's reminder form). */
  suffix?: string;
  /** The request log's and the metrics' route name. */
  name: string;
  /**
   * The path holds a credential (a receipt token): every request on it, whatever its method or status
   * (a 405 too), is logged with `name` as its path, so the credential never reaches a log line.
   */
  secretInPath?: true;
  /** Headers of every answer on the path, whatever its method or status (a 405 too). */
  headers?: Readonly<Record<string, string>>;
  handle(request: RouteRequest): Promise<void> | void;
}

/**
 * THE gateway's route table: a request whose path matches no row goes on to the ops probes and the
 * mounted routes (the dashboard), then 404 `not found`; a path that matches with another method is
 * 405 with `Allow` listing the methods the table has for that path.
 */
function createRoutes(deps: GatewayDeps, guards: IngestGuards): readonly Route[] {
  const signed = (handle: (request: RouteRequest) => (input: SignedInput) => Promise<SignedResult>) => (request: RouteRequest) =>
    serveSigned(deps, request, handle(request));
  const pullRpcs = (entry: RequestLog): PullRpcs => {
    const callOptions = rpcCallOptions(deps, entry.requestId);
    return {
      resolvePullKeys: (request) => guards.pullKeyCache.get(request.serverId ?? "", () => deps.admin.resolvePullKeys(request, callOptions)),
      refreshPullKeys: (serverId, since) => guards.pullKeyCache.refresh(serverId, () => deps.admin.resolvePullKeys({ serverId }, callOptions), since),
      peekPullKeys: (serverId) => guards.pullKeyCache.peek(serverId),
      listPullHearts: (request) => deps.delivery.listPullHearts(request, callOptions),
      claimPullHearts: (request) => deps.delivery.claimPullHearts(request, callOptions),
      listPullEvents: (request) => deps.delivery.listPullEvents(request, callOptions),
      claimPullEvents: (request) => deps.delivery.claimPullEvents(request, callOptions),
    };
  };
  const landing = ({ req, res, entry }: RouteRequest) => serveRaw(req, res, entry, () => landingReply(req, { dashboard: deps.dashboard ?? false }));
  const docs = ({ req, res, rawPath, query, entry }: RouteRequest) => serveRaw(req, res, entry, () => docReply(rawPath, req, new URLSearchParams(query)));
  const wellKnown = createWellKnownKeys({
    listKeys: () => deps.admin.listWebhookSigningKeys({}, { timeoutMs: deps.rpcTimeoutMs ?? RPC_TIMEOUT_MS }),
    now: deps.now,
  });
  const publishedKeys =
    (path: typeof WEBHOOK_KEYS_PATH | typeof JWKS_PATH) =>
    async ({ entry, res }: RouteRequest): Promise<void> => {
      const { reply, cause } = await wellKnown.reply(path);
      if (cause !== undefined) Object.assign(entry, { outcome: "keys_unavailable", cause });
      sendReply(res, reply);
    };
  return [
    {
      method: "POST",
      path: INGEST_PATH,
      name: INGEST_PATH,
      handle: signed(
        ({ entry }) =>
          (input) =>
            serveIngest(deps, guards, entry, input),
      ),
    },
    {
      method: "POST",
      path: PULL_HEARTS_PATH,
      name: PULL_HEARTS_PATH,
      handle: signed(
        ({ entry }) =>
          (input) =>
            handlePullList(input, pullRpcs(entry), deps.now, guards.lookups),
      ),
    },
    {
      method: "POST",
      path: PULL_CLAIMS_PATH,
      name: PULL_CLAIMS_PATH,
      handle: signed(
        ({ entry }) =>
          (input) =>
            handlePullClaim(input, pullRpcs(entry), deps.now, guards.lookups),
      ),
    },
    {
      method: "POST",
      path: PULL_EVENTS_PATH,
      name: PULL_EVENTS_PATH,
      handle: signed(
        ({ entry }) =>
          (input) =>
            handlePullEventList(input, pullRpcs(entry), deps.now, guards.lookups),
      ),
    },
    {
      method: "POST",
      path: PULL_EVENT_CLAIMS_PATH,
      name: PULL_EVENT_CLAIMS_PATH,
      handle: signed(
        ({ entry }) =>
          (input) =>
            handlePullEventClaim(input, pullRpcs(entry), deps.now, guards.lookups),
      ),
    },
    // The key travels in the query: the request line logs the path only (writeRequestLog), so it never reaches a log.
    { method: "GET", path: VOTES_PATH, name: VOTES_PATH, handle: (request) => serveVoteClaim(deps, guards, request, false) },
    { method: "GET", path: VOTES_JSON_PATH, name: VOTES_JSON_PATH, handle: (request) => serveVoteClaim(deps, guards, request, true) },
    ...PLUGIN_PRESET_PATHS.map(
      ({ path, json }): Route => ({ method: "GET", path, name: path, handle: (request) => serveVoteClaim(deps, guards, request, json) }),
    ),
    // The same key in the query, the same request line without it.
    { method: "GET", path: REWARD_QUEUE_PATH, name: REWARD_QUEUE_PATH, handle: (request) => serveRewardQueueList(deps, guards, request) },
    { method: "POST", path: REWARD_QUEUE_ACK_PATH, name: REWARD_QUEUE_ACK_PATH, handle: (request) => serveRewardQueueAck(deps, guards, request) },
    {
      method: "GET",
      path: REFERRAL_LINK_PREFIX,
      prefix: true,
      name: `${REFERRAL_LINK_PREFIX}:server_id`,
      handle: (request) => serveReferralLink(deps, guards.clickLimiter, request),
    },
    { method: "GET", path: OPENAPI_PATH, name: OPENAPI_PATH, handle: ({ res }) => serveOpenApi(res) },
    { method: "HEAD", path: OPENAPI_PATH, name: OPENAPI_PATH, handle: ({ res }) => serveOpenApi(res) },
    { method: "GET", path: WEBHOOK_KEYS_PATH, name: WEBHOOK_KEYS_PATH, handle: publishedKeys(WEBHOOK_KEYS_PATH) },
    { method: "GET", path: JWKS_PATH, name: JWKS_PATH, handle: publishedKeys(JWKS_PATH) },
    { method: "GET", path: LANDING_PATH, name: LANDING_PATH, handle: landing },
    { method: "HEAD", path: LANDING_PATH, name: LANDING_PATH, handle: landing },
    { method: "GET", path: DOCS_PREFIX, prefix: true, name: `${DOCS_PREFIX}:file`, handle: docs },
    { method: "HEAD", path: DOCS_PREFIX, prefix: true, name: `${DOCS_PREFIX}:file`, handle: docs },
    {
      method: "GET",
      path: RECEIPT_PATH_PREFIX,
      prefix: true,
      name: RECEIPT_ROUTE_NAME,
      secretInPath: true,
      headers: RECEIPT_ANSWER_HEADERS,
      handle: (request) => serveReceipt(deps, request),
    },
    {
      method: "POST",
      path: RECEIPT_PATH_PREFIX,
      prefix: true,
      suffix: REMINDER_OPT_IN_SUFFIX,
      name: REMINDER_OPT_IN_ROUTE_NAME,
      secretInPath: true,
      headers: RECEIPT_ANSWER_HEADERS,
      handle: (request) => serveReminder(deps, request, "opt_in"),
    },
    ...[REMINDER_CONFIRM_PREFIX, REMINDER_UNSUBSCRIBE_PREFIX].flatMap((prefix): Route[] =>
      ["GET", "POST"].map((method) => ({
        method,
        path: prefix,
        prefix: true,
        name: prefix === REMINDER_CONFIRM_PREFIX ? REMINDER_CONFIRM_ROUTE_NAME : REMINDER_UNSUBSCRIBE_ROUTE_NAME,
        secretInPath: true,
        headers: RECEIPT_ANSWER_HEADERS,
        handle: (request: RouteRequest) =>
          serveReminder(deps, request, method === "GET" ? "link_page" : prefix === REMINDER_CONFIRM_PREFIX ? "confirm" : "unsubscribe"),
      })),
    ),
  ];
}

function pathMatches(route: Route, rawPath: string): boolean {
  if (!route.prefix) return rawPath === route.path;
  return rawPath.startsWith(route.path) && (route.suffix === undefined || rawPath.endsWith(route.suffix));
}

/** The gateway's per-process state against unsigned floods, and its request-line logger. */
interface IngestGuards {
  keyCache: SigningKeyCache;
  pullKeyCache: SigningKeyCache<ResolvePullKeysResponse>;
  /** The failed-signature limits and the known server ids of the signed endpoints. */
  lookups: LookupGuards;
  /** Referral-link clicks per client address (429 with Retry-After past it). */
  clickLimiter: FailureLimiter;
  /** The check/claim API's wrong-key limiter and the keys seen working. */
  claimKeys: ClaimKeyGuard;
  /** The plugin activity card's feed: every answered check/claim call, sent in batches (absent: not recorded). */
  pluginCalls: PluginCallRecorder | undefined;
  requestLines: Logger;
}

/**
 * The logger of the per-request line: `log` without its redaction pass. The line's fields are fixed
 * (writeRequestLog: id, method, route, path, status, ms, outcome, server id, kid) and none is a field the
 * redaction list names, so the pass could change nothing, yet it cost CPU on every line (the redaction library
 * re-parses its paths on every call; bench/results/ANALYSIS.md has the figure). A line carrying an error
 * (`err`) still goes through `log`.
 */
function requestLineLogger(log: Logger): Logger {
  return log.child({}, { redact: [] });
}

async function handleRequest(deps: GatewayDeps, guards: IngestGuards, routes: readonly Route[], req: IncomingMessage, res: ServerResponse): Promise<void> {
  const started = process.hrtime.bigint();
  const requestId = resolveRequestId(req.headers[REQUEST_ID_HEADER]);
  const url = req.url ?? "/";
  const queryAt = url.indexOf("?");
  const rawPath = queryAt === -1 ? url : url.slice(0, queryAt);
  const query = queryAt === -1 ? "" : url.slice(queryAt + 1);
  const entry: RequestLog = { requestId, route: "unmatched" };
  res.setHeader(REQUEST_ID_HEADER, requestId);
  res.once("close", () => writeRequestLog(deps, guards.requestLines, req, res, rawPath, entry, started));

  try {
    const matched = routes.filter((route) => pathMatches(route, rawPath));
    const route = matched.find((candidate) => candidate.method === req.method);
    if (matched.length > 0) {
      entry.route = (route ?? (matched[0] as Route)).name;
      if (matched.some((candidate) => candidate.secretInPath)) entry.path = entry.route;
      for (const [name, value] of Object.entries(matched.find((candidate) => candidate.headers)?.headers ?? {})) res.setHeader(name, value);
      if (route) {
        await route.handle({ req, res, rawPath, query, entry });
      } else {
        entry.outcome = "method_not_allowed";
        sendReply(res, errorReply("methodNotAllowed", { headers: { allow: matched.map((candidate) => candidate.method).join(", ") } }));
      }
    } else if (deps.ops && (await routeAs(entry, { route: rawPath, quiet: true }, () => deps.ops!(req, res)))) {
      // Logged at debug under its own path: probes every few seconds are not news.
    } else if (deps.extraRoutes && (await routeAs(entry, { route: "extra" }, () => deps.extraRoutes!(req, res)))) {
      // Answered by a mounted handler (the dashboard).
    } else {
      sendReply(res, errorReply("notFound"));
    }
  } catch (error) {
    // Failure policy: never leak internals - answer 500 `internal error` when still possible and log the cause with the request id.
    entry.outcome = "internal_error";
    entry.cause = error;
    if (!res.headersSent) sendReply(res, errorReply("internal"));
    else res.destroy();
  }
}

function serveIngest(deps: GatewayDeps, { keyCache, lookups }: IngestGuards, entry: RequestLog, input: SignedInput): Promise<SignedResult> {
  const callOptions = rpcCallOptions(deps, entry.requestId);
  const rpcs: IngestRpcs = {
    resolveSigningKeys: (request) => keyCache.get(request.serverId ?? "", () => deps.admin.resolveSigningKeys(request, callOptions)),
    refreshSigningKeys: (serverId, since) => keyCache.refresh(serverId, () => deps.admin.resolveSigningKeys({ serverId }, callOptions), since),
    peekSigningKeys: (serverId) => keyCache.peek(serverId),
    applyEvent: (request) => deps.referral.applyEvent(request, callOptions),
  };
  return handleIngest(input, rpcs, deps.now, lookups);
}

/**
 * A POST signed with the ingest scheme: the size limit (step 1, before anything
 * else is looked at), then the handler with the raw bytes.
 */
async function serveSigned(deps: GatewayDeps, { req, res, entry }: RouteRequest, handle: (input: SignedInput) => Promise<SignedResult>): Promise<void> {
  const body = await readPostBody({ req, res, entry });
  if (body === undefined) return;
  const signatureHeader = req.headers["x-service-signature"];
  const result = await handle({
    signatureHeader: Array.isArray(signatureHeader) ? signatureHeader.join(", ") : signatureHeader,
    rawBody: body,
    source: clientAddress(deps, req),
  });
  Object.assign(entry, { outcome: result.outcome, serverId: result.serverId, kid: result.kid, cause: result.cause });
  sendReply(res, result.reply);
}

/**
 * A POST's raw body within MAX_BODY_BYTES (the size limit before anything else is looked at), or undefined once the
 * request was answered: 413 for a body declared or found too large, nothing for a client that went away.
 */
async function readPostBody({ req, res, entry }: Pick<RouteRequest, "req" | "res" | "entry">): Promise<Buffer | undefined> {
  const body = declaresTooLarge(req.headers, MAX_BODY_BYTES) ? ({ kind: "too_large" } as const) : await readRawBody(req, MAX_BODY_BYTES);
  if (body.kind === "too_large") {
    entry.outcome = "body_too_large";
    sendTooLarge(req, res);
    return undefined;
  }
  if (body.kind === "aborted") {
    // Failure policy: the client is gone; nothing was forwarded, so there is no one to answer.
    entry.outcome = "client_aborted";
    res.destroy();
    return undefined;
  }
  return body.bytes;
}

/**
 * 413 and close: the rest of the body is not read. `Connection: close` makes Node end
 * the socket once the answer is written, instead of draining the body for keep-alive.
 */
function sendTooLarge(req: IncomingMessage, res: ServerResponse): void {
  req.pause();
  sendReply(res, errorReply("bodyTooLarge", { headers: { connection: "close" } }));
}

async function serveReferralLink(deps: GatewayDeps, clickLimiter: FailureLimiter, { req, res, rawPath, query, entry }: RouteRequest): Promise<void> {
  const segment = rawPath.slice(REFERRAL_LINK_PREFIX.length).replace(/\/$/, "");
  if (segment === "" || segment.includes("/")) {
    entry.outcome = "not_found";
    sendReply(res, errorReply("notFound"));
    return;
  }
  const ip = clientAddress(deps, req);
  const admission = clickLimiter.admit(ip);
  if (admission.kind === "limited") {
    entry.outcome = "click_limit";
    sendReply(res, errorReply("tooManyClicks", TOO_MANY_CLICKS_TEXT, { headers: { "retry-after": String(admission.retryAfterSeconds) } }));
    return;
  }
  // Every admitted click counts against its address, whatever its answer.
  admission.done(true);
  const callOptions = rpcCallOptions(deps, entry.requestId);
  const result = await handleReferralLink(
    {
      serverId: decodeSegment(segment),
      referrer: new URLSearchParams(query).get("referrer"),
      ip,
      userAgent: (req.headers["user-agent"] ?? "").slice(0, maxCharsOf("user_agent")),
    },
    { recordClick: (request) => deps.referral.recordClick(request, callOptions) },
  );
  Object.assign(entry, { outcome: result.outcome, cause: result.cause });
  sendReply(res, result.reply);
}

async function serveVoteClaim(deps: GatewayDeps, guards: IngestGuards, { req, res, rawPath, query, entry }: RouteRequest, jsonPath: boolean): Promise<void> {
  const callOptions = rpcCallOptions(deps, entry.requestId);
  const result = await handleVoteClaim(
    { query, jsonPath, source: clientAddress(deps, req) },
    { checkVote: (request) => deps.claims.checkVote(request, callOptions), claimVote: (request) => deps.claims.claimVote(request, callOptions) },
    guards.claimKeys,
  );
  Object.assign(entry, { outcome: result.outcome, serverId: result.serverId, cause: result.cause });
  serveRaw(req, res, entry, () => result.reply);
  // The owners' plugin activity card: held in memory, sent in batches off the request path.
  const call = guards.pluginCalls === undefined ? undefined : toPluginCall({ path: rawPath, query, jsonPath, result, at: deps.now() });
  if (call !== undefined) guards.pluginCalls?.record(call);
}

function rewardQueueRpcs(deps: GatewayDeps, entry: RequestLog): RewardQueueRpcs {
  const callOptions = rpcCallOptions(deps, entry.requestId);
  return {
    listRewardQueue: (request) => deps.rewardQueue.listRewardQueue(request, callOptions),
    ackRewardEntries: (request) => deps.rewardQueue.ackRewardEntries(request, callOptions),
  };
}

function sendRewardQueueResult(
  deps: GatewayDeps,
  guards: IngestGuards,
  { req, res, rawPath, query, entry }: RouteRequest,
  action: "list" | "ack",
  result: RewardQueueResult,
): void {
  Object.assign(entry, { outcome: result.outcome, serverId: result.serverId, cause: result.cause });
  serveRaw(req, res, entry, () => result.reply);
  // The owners' plugin activity card, as for the check/claim calls: held in memory, sent in batches off the request path.
  const call = guards.pluginCalls === undefined ? undefined : toQueuePluginCall({ path: rawPath, query, action, result, at: deps.now() });
  if (call !== undefined) guards.pluginCalls?.record(call);
}

async function serveRewardQueueList(deps: GatewayDeps, guards: IngestGuards, request: RouteRequest): Promise<void> {
  const result = await handleRewardQueueList(
    { query: request.query, source: clientAddress(deps, request.req) },
    rewardQueueRpcs(deps, request.entry),
    guards.claimKeys,
  );
  sendRewardQueueResult(deps, guards, request, "list", result);
}

async function serveRewardQueueAck(deps: GatewayDeps, guards: IngestGuards, request: RouteRequest): Promise<void> {
  const body = await readPostBody(request);
  if (body === undefined) return;
  const result = await handleRewardQueueAck(
    { query: request.query, body, source: clientAddress(deps, request.req) },
    rewardQueueRpcs(deps, request.entry),
    guards.claimKeys,
  );
  sendRewardQueueResult(deps, guards, request, "ack", result);
}

async function serveReceipt(deps: GatewayDeps, { res, rawPath, entry }: RouteRequest): Promise<void> {
  const callOptions = rpcCallOptions(deps, entry.requestId);
  const result = await handleReceipt(
    rawPath,
    { getReceipt: (request) => deps.hearts.getReceipt(request, callOptions) },
    {
      reminders: deps.remindersEnabled === true && deps.reminders !== undefined,
      discordReminders: deps.discordDmRemindersEnabled === true && deps.reminders !== undefined,
    },
  );
  Object.assign(entry, { outcome: result.outcome, cause: result.cause });
  res.writeHead(result.reply.status, { ...result.reply.headers, "content-length": Buffer.byteLength(result.reply.body) });
  res.end(result.reply.body);
}

/** The reminder pages (gateway/handle-reminder.ts); 404 when reminders are off. */
async function serveReminder(deps: GatewayDeps, request: RouteRequest, action: "opt_in" | "link_page" | "confirm" | "unsubscribe"): Promise<void> {
  const { res, rawPath, entry } = request;
  const client = deps.remindersEnabled === true || deps.discordDmRemindersEnabled === true ? deps.reminders : undefined;
  let result: ReminderResult;
  if (client === undefined) {
    result = handleReminderLinkPage("/");
  } else if (action === "link_page") {
    result = handleReminderLinkPage(rawPath);
  } else {
    const body = await readPostBody(request);
    if (body === undefined) return;
    const callOptions = rpcCallOptions(deps, entry.requestId);
    const rpcs: ReminderRpcs = {
      subscribeReminder: (r) => client.subscribeReminder(r, callOptions),
      confirmReminder: (r) => client.confirmReminder(r, callOptions),
      unsubscribeReminder: (r) => client.unsubscribeReminder(r, callOptions),
      subscribeDiscordReminder: (r) => client.subscribeDiscordReminder(r, callOptions),
    };
    result =
      action === "opt_in"
        ? await handleReminderOptIn(rawPath, body, rpcs)
        : action === "confirm"
          ? await handleReminderConfirm(rawPath, rpcs)
          : await handleReminderUnsubscribe(rawPath, rpcs);
  }
  Object.assign(entry, { outcome: result.outcome, cause: result.cause });
  res.writeHead(result.reply.status, { ...result.reply.headers, "content-length": Buffer.byteLength(result.reply.body) });
  res.end(result.reply.body);
}

function serveOpenApi(res: ServerResponse): void {
  res.writeHead(200, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(OPENAPI_JSON),
    "cache-control": "public, max-age=300",
  });
  res.end(OPENAPI_JSON);
}

/**
 * Runs a handler that may decline the request, with the log entry already naming its route: the
 * request's log line is written on the response's 'close', which can come before the handler's
 * promise resolves, so a name set afterwards would be lost (the line would say "unmatched").
 */
async function routeAs(entry: RequestLog, as: { route: string; quiet?: boolean }, handler: () => Promise<boolean>): Promise<boolean> {
  const before = { route: entry.route, quiet: entry.quiet };
  Object.assign(entry, as);
  const handled = await handler();
  if (!handled) Object.assign(entry, before);
  return handled;
}

/** GET/HEAD of a fixed document (front page, docs); 404 when `reply` finds none. */
function serveRaw(req: IncomingMessage, res: ServerResponse, entry: RequestLog, reply: () => RawReply | undefined): void {
  const answer = reply();
  if (!answer) {
    entry.outcome = "not_found";
    sendReply(res, errorReply("notFound"));
    return;
  }
  res.writeHead(answer.status, { ...answer.headers, "content-length": Buffer.byteLength(answer.body) });
  res.end(req.method === "HEAD" ? undefined : answer.body);
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    // Failure policy: a malformed escape cannot name a server; pass it raw so it fails the id check (404).
    return segment;
  }
}

function clientAddress(deps: GatewayDeps, req: IncomingMessage): string {
  const forwarded = req.headers["x-forwarded-for"];
  if (deps.trustProxy && typeof forwarded === "string") {
    const last = forwarded.split(",").pop()?.trim();
    if (last) return last;
  }
  return req.socket.remoteAddress ?? "";
}

function rpcCallOptions(deps: GatewayDeps, requestId: string) {
  return { headers: { [REQUEST_ID_HEADER]: requestId }, timeoutMs: deps.rpcTimeoutMs ?? RPC_TIMEOUT_MS };
}

/** Writes a reply; bodies are JSON with `Content-Type: application/json`. */
function sendReply(res: ServerResponse, reply: HttpReply): void {
  if (reply.body === undefined) {
    res.writeHead(reply.status, { "content-length": 0, ...reply.headers });
    res.end();
    return;
  }
  sendJson(res, reply.status, reply.body, reply.headers);
}

function writeRequestLog(deps: GatewayDeps, lines: Logger, req: IncomingMessage, res: ServerResponse, path: string, entry: RequestLog, started: bigint): void {
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const completed = res.writableFinished;
  const status = completed ? res.statusCode : 499;
  deps.metrics.observe(entry.route, status, seconds);
  const line = {
    requestId: entry.requestId,
    method: req.method,
    route: entry.route,
    path: entry.path ?? path,
    status,
    ms: Math.round(seconds * 1000),
    ...(entry.outcome === undefined ? {} : { outcome: entry.outcome }),
    ...(entry.serverId === undefined ? {} : { serverId: entry.serverId }),
    ...(entry.kid === undefined ? {} : { kid: entry.kid }),
  };
  if (entry.cause !== undefined && status === 503) deps.log.warn({ ...line, err: entry.cause }, "request refused: a dependency is unavailable");
  else if (entry.cause !== undefined) deps.log.error({ ...line, err: entry.cause }, "request failed with an internal error");
  else if (!completed) lines.warn(line, "request aborted by the client");
  else if (entry.quiet) lines.debug(line, "request");
  else lines.info(line, "request");
}
