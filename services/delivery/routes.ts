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
  ExchangeReportSchema,
  ListPullHeartsResponseSchema,
  PullClaimStatus,
  SendTestVoteResponseSchema,
  VoteReportSchema,
  GetDeliveryResponseSchema,
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
import { DomainError } from "../shared/errors.js";
import { boundField } from "../shared/field-rules.js";
import { canonicalString, formatIngestSignature } from "../shared/signature.js";
import { periodOf } from "../hearts/domain/streak.js";
import { NIL_UUID, sendCallback, signCallback, type DispatchOutcome } from "./send-callback.js";
import { loadCallbackSecrets, loadNewestReferralSecret } from "./store.js";
import { claimPullHearts, listPullHearts, toPullLimit, type PullClaimStatus as PullClaimStatusName } from "./pull-store.js";
import { sendVotifierVote, VOTIFIER_TIMEOUT_MS, VOTIFIER_VOTE_ADDRESS, votifierTargetName } from "./send-votifier.js";

/** What DeliveryService needs beyond the core deps; the lead's config provides them. */
export interface DeliveryRouteDeps {
  /** The development flag: http callback URLs and private addresses allowed. */
  allowInsecureCallbacks: boolean;
  /** Timeout of a test callback (the same as real callbacks: CALLBACK_TIMEOUT_MS). */
  callbackTimeoutMs: number;
  /** The public gateway's base URL, for "send test referral event" (for example https://refer.example.com). */
  publicBaseUrl: string;
}

/** Deliveries per page when the caller gives no limit, and the most one page may hold. */
export const DEFAULT_DELIVERY_PAGE = 50;
export const MAX_DELIVERY_PAGE = 500;
/** Username of a test callback when the owner gives none. */
export const TEST_CALLBACK_USERNAME = "TestPlayer";
/** The ingest path "send test referral event" posts to. */
export const INGEST_PATH = "/api/referral/events";

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const REFERRAL_EVENTS = ["registered", "qualified", "reversed"];

const STATUS_TO_PROTO = { pending: DeliveryStatus.PENDING, delivered: DeliveryStatus.DELIVERED, failed: DeliveryStatus.FAILED } as const;
const STATUS_FROM_PROTO: Partial<Record<DeliveryStatus, "pending" | "delivered" | "failed">> = {
  [DeliveryStatus.PENDING]: "pending",
  [DeliveryStatus.DELIVERED]: "delivered",
  [DeliveryStatus.FAILED]: "failed",
};
const TRANSPORT_TO_PROTO = { callback: DeliveryTransport.CALLBACK, votifier: DeliveryTransport.VOTIFIER, pull: DeliveryTransport.PULL } as const;
const TRANSPORT_FROM_PROTO: Partial<Record<DeliveryTransport, "callback" | "votifier" | "pull">> = {
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
  return (router) => {
    router.service(DeliveryService, {
      async listDeliveries(req) {
        const serverId = await requireServer(deps, req.serverId);
        if (req.limit < 0) throw new DomainError("invalid_argument", "limit must not be negative");
        const status = STATUS_FROM_PROTO[req.status];
        const transport = TRANSPORT_FROM_PROTO[req.transport];
        const rows = await deps.prisma.delivery.findMany({
          where: { serverId, ...(status ? { status } : {}), ...(transport ? { transport } : {}) },
          orderBy: [{ createdAt: "desc" }, { id: "asc" }],
          take: Math.min(req.limit === 0 ? DEFAULT_DELIVERY_PAGE : req.limit, MAX_DELIVERY_PAGE),
        });
        return create(ListDeliveriesResponseSchema, { deliveries: rows.map(toDeliveryMessage) });
      },

      async getDelivery(req) {
        const row = await findDelivery(deps, req.deliveryId);
        const attempts = await deps.prisma.deliveryAttempt.findMany({ where: { deliveryId: row.id }, orderBy: { id: "asc" } });
        return create(GetDeliveryResponseSchema, { delivery: toDeliveryMessage(row), attempts: attempts.map(toAttemptMessage) });
      },

      async redeliver(req) {
        const row = await findDelivery(deps, req.deliveryId);
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
        const serverId = await requireServer(deps, req.serverId);
        if (!req.since) throw new DomainError("invalid_argument", "since is required");
        const changed = await deps.prisma.delivery.updateMany({
          where: { serverId, status: "failed", failedAt: { gte: timestampDate(req.since) } },
          data: requeueData(deps.now()),
        });
        return create(RedeliverFailedSinceResponseSchema, { requeued: changed.count });
      },

      async sendTestCallback(req) {
        const username = boundField("username", req.username);
        const serverId = await requireServer(deps, req.serverId);
        const server = await deps.prisma.server.findUniqueOrThrow({ where: { id: serverId } });
        if (!server.callbackUrl) throw new DomainError("failed_precondition", "no callback URL configured: set one in the integration tab first");
        const now = deps.now();
        const secrets = await loadCallbackSecrets(deps.prisma, deps.secretBox, serverId, now);
        if (secrets.length === 0) throw new DomainError("failed_precondition", "no active callback secret: rotate the callback secret to create one");
        const signed = signCallback({
          url: server.callbackUrl,
          fields: {
            event: "heart.test",
            serverId,
            username: username.trim() === "" ? TEST_CALLBACK_USERNAME : username,
            heartId: NIL_UUID,
            period: periodOf(now),
          },
          secretsNewestFirst: secrets,
          standardWebhooks: server.standardWebhooks,
          t: Math.floor(now.getTime() / 1000),
        });
        const outcome = await sendCallback(signed, { timeoutMs: deps.callbackTimeoutMs, allowInsecure: deps.allowInsecureCallbacks, now: deps.now });
        return create(SendTestCallbackResponseSchema, { report: toReport(signed, outcome) });
      },

      async sendTestReferralEvent(req) {
        const serverId = await requireServer(deps, req.serverId);
        const event = req.event.trim() === "" ? "registered" : req.event.trim();
        if (!REFERRAL_EVENTS.includes(event)) throw new DomainError("invalid_argument", "event must be one of registered|qualified|reversed");
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
        return create(SendTestReferralEventResponseSchema, { report: toReport(request, outcome) });
      },

      async sendTestVote(req) {
        const serverId = await requireServer(deps, req.serverId);
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
            username: req.username.trim() === "" ? TEST_CALLBACK_USERNAME : req.username.trim(),
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
        const serverId = await requireServer(deps, req.serverId);
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
        const serverId = await requireServer(deps, req.serverId);
        const results = await claimPullHearts(deps.prisma, { serverId, heartIds: req.heartIds, now: deps.now() });
        return create(ClaimPullHeartsResponseSchema, { results: results.map((r) => ({ heartId: r.heartId, status: CLAIM_STATUS_TO_PROTO[r.status] })) });
      },
    });
  };
}

function requeueData(now: Date) {
  return { status: "pending" as const, attempts: 0, nextAttemptAt: now, leaseUntil: null, failedAt: null, deliveredAt: null };
}

async function requireServer(deps: CoreDeps, rawId: string): Promise<string> {
  const id = rawId.trim();
  if (id === "") throw new DomainError("invalid_argument", "server_id is required");
  const found = UUID_PATTERN.test(id) ? await deps.prisma.server.findUnique({ where: { id }, select: { id: true } }) : null;
  if (!found) throw new DomainError("unknown_server", "unknown server");
  return id;
}

async function findDelivery(deps: CoreDeps, rawId: string): Promise<DeliveryRow> {
  const id = rawId.trim();
  if (id === "") throw new DomainError("invalid_argument", "delivery_id is required");
  const row = UUID_PATTERN.test(id) ? await deps.prisma.delivery.findUnique({ where: { id } }) : null;
  if (!row) throw new DomainError("not_found", "unknown delivery");
  return row;
}

function toReport(
  request: { url: string; body: string; headers: Record<string, string>; canonicalString: string },
  outcome: DispatchOutcome,
): ExchangeReport {
  return create(ExchangeReportSchema, {
    url: request.url,
    requestHeaders: { ...request.headers, "Content-Length": String(Buffer.byteLength(request.body)) },
    requestBody: request.body,
    canonicalString: request.canonicalString,
    statusCode: outcome.status ?? 0,
    responseBody: outcome.responseBody ?? "",
    latencyMs: outcome.latencyMs,
    error: outcome.kind === "failed" ? outcome.error : outcome.kind === "gone" ? "receiver answered 410 Gone" : "",
    ok: outcome.kind === "delivered",
  });
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
  });
}
