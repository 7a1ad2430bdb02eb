import { isUuid } from "../shared/ids.js";
import { requireServerId } from "../servers/server-exists.js";
import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import {
  ClaimPullHeartsResponseSchema,
  DeliveryAttemptSchema,
  DeliverySchema,
  DeliveryService,
  DeliveryStatus,
  DeliveryTransport,
  EndpointWindowSchema,
  ExchangeReportSchema,
  ListPullHeartsResponseSchema,
  PullClaimStatus,
  SendTestVoteResponseSchema,
  VoteReportSchema,
  GetDeliveryResponseSchema,
  GetEndpointHealthResponseSchema,
  ListDeliveriesResponseSchema,
  RedeliverFailedSinceResponseSchema,
  RedeliverResponseSchema,
  SendTestCallbackResponseSchema,
  SendTestReferralEventResponseSchema,
  type Delivery as DeliveryMessage,
  type ExchangeReport,
} from "../../gen/proto/delivery/v1/delivery_pb.js";
import type { Delivery as DeliveryRow, DeliveryAttempt as AttemptRow } from "../../gen/prisma/client.js";
import type { CoreDeps } from "../shared/deps.js";
import { ERROR_TEXT, isReferralEventName } from "../shared/contract.js";
import { DomainError } from "../shared/errors.js";
import { boundField } from "../shared/field-rules.js";
import { canonicalString, formatIngestSignature } from "../shared/signature.js";
import { periodOf } from "../shared/period.js";
import type { AttemptExchange } from "./attempt-exchange.js";
import { createCallbackTransport } from "./callback-transport.js";
import { LEASE_MARGIN_MS } from "./dispatcher.js";
import { readEndpointHealth, type EndpointWindow } from "./endpoint-health.js";
import { performAttempt } from "./perform-attempt.js";
import { claimPullHearts, listPullHearts, toPullLimit, type PullClaimStatus as PullClaimStatusName } from "./pull-store.js";
import { DEFAULT_RETRY_SCHEDULE, parseRetrySchedule, type RetrySchedule } from "./retry-schedule.js";
import { sendCallback, toHttpExchange } from "./send-callback.js";
import { sendVotifierVote, VOTIFIER_TIMEOUT_MS, VOTIFIER_VOTE_ADDRESS, votifierTargetName } from "./send-votifier.js";
import { insertTestDelivery, loadCallbackSecrets, loadNewestReferralSecret } from "./store.js";

/** What DeliveryService needs beyond the core deps; the lead's config provides them. */
export interface DeliveryRouteDeps {
  /** The development flag: http callback URLs and private addresses allowed. */
  allowInsecureCallbacks: boolean;
  /** Timeout of a test callback (the same as real callbacks: CALLBACK_TIMEOUT_MS). */
  callbackTimeoutMs: number;
  /** The public gateway's base URL, for "send test referral event" (for example https://refer.example.com). */
  publicBaseUrl: string;
  /** Retry schedule of test callbacks (DELIVERY_RETRY_SCHEDULE); the default schedule when omitted. */
  retrySchedule?: RetrySchedule;
}

/** Deliveries per page when the caller gives no limit, and the most one page may hold. */
export const DEFAULT_DELIVERY_PAGE = 50;
export const MAX_DELIVERY_PAGE = 500;
/** Username of a test callback when the owner gives none. */
export const TEST_CALLBACK_USERNAME = "TestPlayer";
/** The ingest path "send test referral event" posts to. */
export const INGEST_PATH = "/api/referral/events";

const STATUS_TO_PROTO = { pending: DeliveryStatus.PENDING, delivered: DeliveryStatus.DELIVERED, failed: DeliveryStatus.FAILED } as const;
const STATUS_FROM_PROTO: Partial<Record<DeliveryStatus, "pending" | "delivered" | "failed">> = {
  [DeliveryStatus.PENDING]: "pending",
  [DeliveryStatus.DELIVERED]: "delivered",
  [DeliveryStatus.FAILED]: "failed",
};
const TRANSPORT_TO_PROTO = { callback: DeliveryTransport.CALLBACK, votifier: DeliveryTransport.VOTIFIER, pull: DeliveryTransport.PULL } as const;
/** The proto transport -> the stored transport name (undefined for UNSPECIFIED). */
export const TRANSPORT_FROM_PROTO: Partial<Record<DeliveryTransport, "callback" | "votifier" | "pull">> = {
  [DeliveryTransport.CALLBACK]: "callback",
  [DeliveryTransport.VOTIFIER]: "votifier",
  [DeliveryTransport.PULL]: "pull",
};
const CLAIM_STATUS_TO_PROTO: Record<PullClaimStatusName, PullClaimStatus> = {
  claimed: PullClaimStatus.CLAIMED,
  already_claimed: PullClaimStatus.ALREADY_CLAIMED,
  unknown: PullClaimStatus.UNKNOWN,
};

/**
 * Registers DeliveryService: delivery list and detail (with every attempt, for
 * every transport), manual redelivery, the dashboard's test callback, test
 * referral event and test vote, and the pull transport's list and claim (which
 * the gateway's signed pull API calls after verifying the owner's signature).
 */
export function deliveryRoutes(deps: CoreDeps & DeliveryRouteDeps): (router: ConnectRouter) => void {
  const retrySchedule = deps.retrySchedule ?? parseRetrySchedule(DEFAULT_RETRY_SCHEDULE);
  return (router) => {
    router.service(DeliveryService, {
      async listDeliveries(req) {
        const serverId = await requireServerId(deps, req.serverId);
        if (req.limit < 0) throw new DomainError("invalid_argument", "limit must not be negative");
        const status = STATUS_FROM_PROTO[req.status];
        const transport = TRANSPORT_FROM_PROTO[req.transport];
        // The player search is bounded like the username it searches (services/shared/field-rules.ts): a NUL or over-long value is 400, never a query.
        const username = boundField("username", req.username).trim();
        const rows = await deps.prisma.delivery.findMany({
          where: {
            serverId,
            ...(status ? { status } : {}),
            ...(transport ? { transport } : {}),
            ...(username === "" ? {} : { username: { contains: username, mode: "insensitive" } }),
          },
          orderBy: [{ createdAt: "desc" }, { id: "asc" }],
          take: Math.min(req.limit === 0 ? DEFAULT_DELIVERY_PAGE : req.limit, MAX_DELIVERY_PAGE),
        });
        return create(ListDeliveriesResponseSchema, { deliveries: rows.map(toDeliveryMessage) });
      },

      async getDelivery(req) {
        const row = await findDelivery(deps, req.deliveryId, req.serverId);
        const attempts = await deps.prisma.deliveryAttempt.findMany({ where: { deliveryId: row.id }, orderBy: { id: "asc" } });
        return create(GetDeliveryResponseSchema, { delivery: toDeliveryMessage(row), attempts: attempts.map(toAttemptMessage) });
      },

      async redeliver(req) {
        const row = await findDelivery(deps, req.deliveryId, req.serverId);
        // Conditional write: only a finished delivery goes back to the queue, with a fresh retry cycle; the attempt log stays.
        const changed = await deps.prisma.delivery.updateMany({
          where: { id: row.id, status: { in: ["failed", "delivered"] } },
          data: requeueData(deps.now()),
        });
        if (changed.count !== 1) throw new DomainError("failed_precondition", "delivery is already pending; it will be sent when due");
        const updated = await deps.prisma.delivery.findUniqueOrThrow({ where: { id: row.id } });
        return create(RedeliverResponseSchema, { delivery: toDeliveryMessage(updated) });
      },

      async redeliverFailedSince(req) {
        const serverId = await requireServerId(deps, req.serverId);
        if (!req.since) throw new DomainError("invalid_argument", "since is required");
        const changed = await deps.prisma.delivery.updateMany({
          where: { serverId, status: "failed", failedAt: { gte: timestampDate(req.since) } },
          data: requeueData(deps.now()),
        });
        return create(RedeliverFailedSinceResponseSchema, { requeued: changed.count });
      },

      async sendTestCallback(req) {
        const username = boundField("username", req.username);
        const serverId = await requireServerId(deps, req.serverId);
        const server = await deps.prisma.server.findUniqueOrThrow({ where: { id: serverId } });
        if (!server.callbackUrl) throw new DomainError("failed_precondition", "no callback URL configured: set one in the integration tab first");
        const now = deps.now();
        const secrets = await loadCallbackSecrets(deps.prisma, deps.secretBox, serverId, now);
        if (secrets.length === 0) throw new DomainError("failed_precondition", "no active callback secret: rotate the callback secret to create one");
        // A delivery like any other: stored, first attempt here and now (leased to this call), retried by the dispatcher.
        const delivery = await insertTestDelivery(deps.prisma, {
          serverId,
          username: username.trim() === "" ? TEST_CALLBACK_USERNAME : username,
          period: periodOf(now),
          now,
          leaseUntil: new Date(now.getTime() + deps.callbackTimeoutMs + LEASE_MARGIN_MS),
          callbackUrl: server.callbackUrl,
          standardWebhooks: server.standardWebhooks,
        });
        const attemptDeps = { ...deps, schedule: retrySchedule, timeoutMs: deps.callbackTimeoutMs, allowInsecure: deps.allowInsecureCallbacks };
        const report = await performAttempt(attemptDeps, createCallbackTransport(attemptDeps), delivery);
        // Failure policy: the secret was revoked between the check and the attempt; the delivery stays pending, held like any other.
        if (report.kind === "released") throw new DomainError("failed_precondition", "no active callback secret: rotate the callback secret to create one");
        const stored = await deps.prisma.delivery.findUniqueOrThrow({ where: { id: delivery.id } });
        return create(SendTestCallbackResponseSchema, {
          report: toReport(report.outcome.exchange),
          delivery: toDeliveryMessage(stored),
        });
      },

      async getEndpointHealth(req) {
        const serverId = await requireServerId(deps, req.serverId);
        const health = await readEndpointHealth(deps.prisma, serverId, deps.now());
        return create(GetEndpointHealthResponseSchema, {
          serverId,
          callbackUrl: health.callbackUrl ?? "",
          last24h: toWindowMessage(health.last24h),
          last7d: toWindowMessage(health.last7d),
          ...optionalTimestamps({
            lastSuccessAt: health.lastSuccessAt,
            lastFailureAt: health.lastFailureAt,
            failingSince: health.failingSince,
            autoDisableAt: health.autoDisableAt,
            disabledAt: health.disabledAt,
          }),
          lastFailureReason: health.lastFailureReason ?? "",
          disabledReason: health.disabledReason ?? "",
          failedDeliveries7d: health.failedDeliveries7d,
          pendingDeliveries: health.pendingDeliveries,
        });
      },

      async sendTestReferralEvent(req) {
        const serverId = await requireServerId(deps, req.serverId);
        const event = req.event.trim() === "" ? "registered" : req.event.trim();
        if (!isReferralEventName(event)) throw new DomainError("invalid_argument", ERROR_TEXT.badEvent);
        const now = deps.now();
        const secret = await loadNewestReferralSecret(deps.prisma, deps.secretBox, serverId, now);
        if (!secret) throw new DomainError("failed_precondition", "no active referral secret: create one in the referrals tab first");
        const t = Math.floor(now.getTime() / 1000);
        const body = JSON.stringify({
          event,
          token: "test-token",
          server_id: serverId,
          referee_identity: "test-player",
          server_event_id: `dashboard-test-${now.getTime()}`,
          ts: t,
          test: true,
        });
        const request = {
          url: `${deps.publicBaseUrl.replace(/\/+$/, "")}${INGEST_PATH}`,
          body,
          headers: { "Content-Type": "application/json", "X-Service-Signature": formatIngestSignature(secret.secret, t, body, secret.kid) },
          canonicalString: canonicalString(t, body),
        };
        // The service's own public endpoint is trusted configuration, so the callback address guard does not apply.
        const outcome = await sendCallback(request, { timeoutMs: deps.callbackTimeoutMs, allowInsecure: true, now: deps.now });
        return create(SendTestReferralEventResponseSchema, { report: toReport({ ...toHttpExchange(request, outcome), signedString: request.canonicalString }) });
      },

      async sendTestVote(req) {
        const serverId = await requireServerId(deps, req.serverId);
        // Bounded like a heart's username (services/shared/field-rules.ts): a NUL or over-long name is 400, never sent.
        const testVoteUsername = boundField("username", req.username).trim() || TEST_CALLBACK_USERNAME;
        const server = await deps.prisma.server.findUniqueOrThrow({ where: { id: serverId } });
        if (!server.votifierHost || !server.votifierPort || !server.votifierToken) {
          throw new DomainError("failed_precondition", "Votifier is not set up: set host, port, token and service name in the integration tab first");
        }
        const target = { host: server.votifierHost, port: server.votifierPort };
        let token: string;
        try {
          token = deps.secretBox.open(server.votifierToken);
        } catch {
          // Failure policy: a token sealed under another SECRETS_KEY cannot be used; tell the owner to set it again.
          throw new DomainError("failed_precondition", "the stored Votifier token cannot be decrypted: set the token again");
        }
        const outcome = await sendVotifierVote(
          { ...target, token },
          {
            serviceName: server.votifierServiceName ?? "",
            username: testVoteUsername,
            address: VOTIFIER_VOTE_ADDRESS,
            timestamp: deps.now().getTime(),
          },
          { timeoutMs: VOTIFIER_TIMEOUT_MS, allowInsecure: deps.allowInsecureCallbacks },
        );
        return create(SendTestVoteResponseSchema, {
          report: create(VoteReportSchema, {
            target: votifierTargetName(target),
            greeting: outcome.greeting,
            payload: outcome.payload,
            frameBytes: outcome.frameBytes,
            response: outcome.answer,
            latencyMs: outcome.latencyMs,
            error: outcome.error ?? "",
            ok: outcome.kind === "delivered",
          }),
        });
      },

      async listPullHearts(req) {
        const serverId = await requireServerId(deps, req.serverId);
        const page = await listPullHearts(deps.prisma, { serverId, cursor: req.cursor.trim(), limit: toPullLimit(req.limit) });
        return create(ListPullHeartsResponseSchema, {
          hearts: page.hearts.map((h) => ({
            heartId: h.heartId,
            username: h.username,
            period: h.period,
            countedAt: timestampFromDate(h.countedAt),
            streakDay: h.streakDay ?? 0,
          })),
          nextCursor: page.nextCursor ?? "",
        });
      },

      async claimPullHearts(req) {
        const serverId = await requireServerId(deps, req.serverId);
        const results = await claimPullHearts(deps.prisma, { serverId, heartIds: req.heartIds, now: deps.now() });
        return create(ClaimPullHeartsResponseSchema, { results: results.map((r) => ({ heartId: r.heartId, status: CLAIM_STATUS_TO_PROTO[r.status] })) });
      },
    });
  };
}

function requeueData(now: Date) {
  return { status: "pending" as const, attempts: 0, nextAttemptAt: now, leaseUntil: null, failedAt: null, deliveredAt: null };
}

/** The delivery `rawId`; with `rawServerId`, only when it belongs to that server (another server's id is unknown). */
async function findDelivery(deps: CoreDeps, rawId: string, rawServerId = ""): Promise<DeliveryRow> {
  const id = rawId.trim();
  if (id === "") throw new DomainError("invalid_argument", "delivery_id is required");
  const serverId = rawServerId.trim() === "" ? undefined : await requireServerId(deps, rawServerId);
  const row = isUuid(id) ? await deps.prisma.delivery.findUnique({ where: { id } }) : null;
  if (!row || (serverId !== undefined && row.serverId !== serverId)) throw new DomainError("not_found", "unknown delivery");
  return row;
}

/** One exchange as the dashboard's report: exactly what was sent and what came back. */
function toReport(exchange: AttemptExchange): ExchangeReport {
  return create(ExchangeReportSchema, {
    url: exchange.target,
    requestHeaders: exchange.request.headers,
    requestBody: exchange.request.body,
    canonicalString: exchange.signedString ?? "",
    statusCode: exchange.response?.status ?? 0,
    responseBody: exchange.response?.body ?? "",
    latencyMs: exchange.latencyMs,
    error: exchange.error ?? "",
    ok: exchange.succeeded,
  });
}

function toWindowMessage(w: EndpointWindow) {
  return create(EndpointWindowSchema, { attempts: w.attempts, succeeded: w.succeeded, successRate: w.successRate });
}

/** Proto timestamps of the set times only (unset stays unset). */
function optionalTimestamps<K extends string>(times: Record<K, Date | null>): Partial<Record<K, ReturnType<typeof timestampFromDate>>> {
  const out: Partial<Record<K, ReturnType<typeof timestampFromDate>>> = {};
  for (const [key, at] of Object.entries(times) as [K, Date | null][]) if (at) out[key] = timestampFromDate(at);
  return out;
}

function toDeliveryMessage(row: DeliveryRow): DeliveryMessage {
  return create(DeliverySchema, {
    id: row.id,
    serverId: row.serverId,
    heartId: row.heartId,
    eventType: row.eventType,
    username: row.username,
    period: row.period,
    status: STATUS_TO_PROTO[row.status],
    attempts: row.attempts,
    nextAttemptAt: timestampFromDate(row.nextAttemptAt),
    createdAt: timestampFromDate(row.createdAt),
    ...(row.deliveredAt ? { deliveredAt: timestampFromDate(row.deliveredAt) } : {}),
    ...(row.failedAt ? { failedAt: timestampFromDate(row.failedAt) } : {}),
    lastStatusCode: row.lastStatusCode ?? 0,
    lastError: row.lastError ?? "",
    transport: TRANSPORT_TO_PROTO[row.transport],
  });
}

function toAttemptMessage(row: AttemptRow) {
  return create(DeliveryAttemptSchema, {
    attempt: row.attempt,
    startedAt: timestampFromDate(row.startedAt),
    statusCode: row.statusCode ?? 0,
    latencyMs: row.latencyMs,
    error: row.error ?? "",
    url: row.url,
    requestHeaders: toHeaderMap(row.requestHeaders),
    requestBody: row.requestBody ?? "",
    responseHeaders: toHeaderMap(row.responseHeaders),
    responseBody: row.responseBody ?? "",
    responseBodyTruncated: row.responseBodyTruncated,
    exchangeRecorded: row.requestHeaders !== null,
    responseReceived: row.responseHeaders !== null,
    succeeded: row.succeeded,
  });
}

/** A stored header object (jsonb) -> name -> value; anything else is no headers. */
function toHeaderMap(value: unknown): Record<string, string> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return {};
  const headers: Record<string, string> = {};
  for (const [name, v] of Object.entries(value)) if (typeof v === "string") headers[name] = v;
  return headers;
}
