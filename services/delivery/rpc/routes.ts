import { requireServerId } from "../../servers/server-exists.js";
import { isReferralPayload } from "../pipeline/delivery-types.js";
import { eventBodyFields } from "../pipeline/referral-event.js";
import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import {
  ClaimPullEventsResponseSchema,
  ClaimPullHeartsResponseSchema,
  ListPullEventsResponseSchema,
  DeliveryAttemptSchema,
  DeliverySchema,
  DeliveryService,
  EndpointWindowSchema,
  ExchangeReportSchema,
  ListPullHeartsResponseSchema,
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
} from "../../../gen/proto/delivery/v1/delivery_pb.js";
import type { DeliveryAttempt as AttemptRow } from "../../../gen/prisma/client.js";
import type { CoreDeps } from "../../shared/adapters/deps.js";
import { DomainError } from "../../shared/rpc/errors.js";
import { boundField } from "../../shared/values/field-rules.js";
import { sendTestReferralEvent } from "./send-test-referral-event.js";
import { findEndpoint } from "../../servers/endpoint-store.js";
import type { AttemptExchange } from "../pipeline/attempt-exchange.js";
import {
  findDelivery,
  heldReasonOfDelivery,
  listAttempts,
  listDeliveries,
  readEndpointHealth,
  type DeliveryWithEndpoint,
  type EndpointWindow,
} from "./read-deliveries.js";
import { claimPullEvents, claimPullHearts } from "./claim-pull-hearts.js";
import { listPullEvents, listPullHearts, toPullLimit } from "./pull-store.js";
import { redeliver, redeliverFailedSince } from "./redeliver.js";
import { DEFAULT_RETRY_SCHEDULE, parseRetrySchedule, type RetrySchedule } from "../pipeline/retry-schedule.js";
import { sendTestCallback } from "./send-test-callback.js";
import { sendTestVote } from "./send-test-vote.js";
import { votifierTargetName } from "../pipeline/send-votifier.js";
import { notNegativeText, requiredText } from "../../shared/values/contract.js";
import {
  DELIVERY_STATUS_NAMES,
  DELIVERY_STATUS_TO_PROTO,
  DELIVERY_TRANSPORT_NAMES,
  DELIVERY_TRANSPORT_TO_PROTO,
  PULL_CLAIM_STATUS_TO_PROTO,
} from "../../shared/values/proto-names.js";

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
        if (req.limit < 0) throw new DomainError("invalid_argument", notNegativeText("limit"));
        const status = DELIVERY_STATUS_NAMES[req.status];
        const transport = DELIVERY_TRANSPORT_NAMES[req.transport];
        // The player search is bounded like the username it searches (services/shared/values/field-rules.ts): a NUL or over-long value is 400, never a query.
        const username = boundField("username", req.username).trim();
        const rows = await listDeliveries(deps, { serverId, status, transport, username, limit: req.limit });
        return create(ListDeliveriesResponseSchema, { deliveries: rows.map(toDeliveryMessage) });
      },

      async getDelivery(req) {
        const row = await findDelivery(deps, req.deliveryId, req.serverId);
        const attempts = await listAttempts(deps, row.id);
        return create(GetDeliveryResponseSchema, { delivery: toDeliveryMessage(row), attempts: attempts.map(toAttemptMessage) });
      },

      async redeliver(req) {
        const row = await findDelivery(deps, req.deliveryId, req.serverId);
        const updated = await redeliver(deps, row);
        return create(RedeliverResponseSchema, { delivery: toDeliveryMessage({ ...updated, endpoint: row.endpoint, server: row.server }) });
      },

      async redeliverFailedSince(req) {
        const serverId = await requireServerId(deps, req.serverId);
        if (!req.since) throw new DomainError("invalid_argument", requiredText("since"));
        return create(RedeliverFailedSinceResponseSchema, { requeued: await redeliverFailedSince(deps, serverId, timestampDate(req.since)) });
      },

      async sendTestCallback(req) {
        const username = boundField("username", req.username);
        const serverId = await requireServerId(deps, req.serverId);
        const { exchange, delivery } = await sendTestCallback({ ...deps, retrySchedule }, serverId, username, req.endpointId);
        return create(SendTestCallbackResponseSchema, {
          report: toReport(exchange),
          delivery: toDeliveryMessage(delivery),
        });
      },

      async getEndpointHealth(req) {
        const serverId = await requireServerId(deps, req.serverId);
        const endpoint = await findEndpoint(deps.prisma, serverId, req.endpointId);
        const health = await readEndpointHealth(deps.prisma, endpoint, deps.now());
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
        return create(SendTestReferralEventResponseSchema, { report: toReport(await sendTestReferralEvent(deps, serverId, req.event)) });
      },

      async sendTestVote(req) {
        const serverId = await requireServerId(deps, req.serverId);
        const { target, outcome } = await sendTestVote(deps, serverId, req.username);
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
            steamId: h.platformIds.steamId ?? "",
            discordId: h.platformIds.discordId ?? "",
            minecraftUuid: h.platformIds.minecraftUuid ?? "",
            accountId: h.platformIds.accountId ?? "",
            ...(h.nextEligibleAt ? { nextEligibleAt: timestampFromDate(h.nextEligibleAt) } : {}),
          })),
          nextCursor: page.nextCursor ?? "",
        });
      },

      async claimPullHearts(req) {
        const serverId = await requireServerId(deps, req.serverId);
        const results = await claimPullHearts(deps.prisma, { serverId, heartIds: req.heartIds, now: deps.now() });
        return create(ClaimPullHeartsResponseSchema, { results: results.map((r) => ({ heartId: r.heartId, status: PULL_CLAIM_STATUS_TO_PROTO[r.status] })) });
      },

      async listPullEvents(req) {
        const serverId = await requireServerId(deps, req.serverId);
        const page = await listPullEvents(deps.prisma, { serverId, cursor: req.cursor.trim(), limit: toPullLimit(req.limit), now: deps.now() });
        return create(ListPullEventsResponseSchema, {
          events: page.events.map(({ payload: p, occurredAt }) =>
            !isReferralPayload(p)
              ? // Not a referral (a closed period, a progression event): its body's fields travel as JSON (the gateway answers them as the callback's).
                { event: p.event, eventId: p.event_id, bodyJson: JSON.stringify(eventBodyFields(p)), occurredAt: timestampFromDate(occurredAt) }
              : {
                  event: p.event,
                  eventId: p.event_id,
                  referralId: p.referral_id,
                  referrerIdentity: p.referrer_identity,
                  refereeIdentity: p.referee_identity,
                  state: p.state,
                  previousState: p.previous_state,
                  reason: p.reason ?? "",
                  reasonText: p.reason_text ?? "",
                  occurredAt: timestampFromDate(occurredAt),
                },
          ),
          nextCursor: page.nextCursor ?? "",
        });
      },

      async claimPullEvents(req) {
        const serverId = await requireServerId(deps, req.serverId);
        const results = await claimPullEvents(deps.prisma, { serverId, eventIds: req.eventIds, now: deps.now() });
        return create(ClaimPullEventsResponseSchema, { results: results.map((r) => ({ eventId: r.eventId, status: PULL_CLAIM_STATUS_TO_PROTO[r.status] })) });
      },
    });
  };
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

function toDeliveryMessage(row: DeliveryWithEndpoint): DeliveryMessage {
  return create(DeliverySchema, {
    id: row.id,
    serverId: row.serverId,
    heartId: row.heartId,
    eventType: row.eventType,
    username: row.username,
    period: row.period,
    status: DELIVERY_STATUS_TO_PROTO[row.status],
    attempts: row.attempts,
    nextAttemptAt: timestampFromDate(row.nextAttemptAt),
    createdAt: timestampFromDate(row.createdAt),
    ...(row.deliveredAt ? { deliveredAt: timestampFromDate(row.deliveredAt) } : {}),
    ...(row.failedAt ? { failedAt: timestampFromDate(row.failedAt) } : {}),
    lastStatusCode: row.lastStatusCode ?? 0,
    lastError: row.lastError ?? "",
    transport: DELIVERY_TRANSPORT_TO_PROTO[row.transport],
    endpointId: row.endpointId ?? "",
    endpointUrl: row.endpoint?.url ?? "",
    heldReason: heldReasonOfDelivery(row) ?? "",
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
