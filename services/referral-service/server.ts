import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { ConnectRouter } from "@connectrpc/connect";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { createServerInterceptor } from "../shared/rpc/interceptors.js";
import { MAX_RPC_MESSAGE_BYTES } from "../shared/values/field-rules.js";
import type { Metrics } from "../shared/runtime/metrics.js";
import { referralRoutes } from "../referral/routes.js";
import { referralReviewRoutes } from "../referral/review-routes.js";
import type { ApplyEventBatchOptions } from "../referral/apply-event.js";
import { serverAdminRoutes } from "../servers/routes.js";
import { heartRoutes } from "../hearts/routes.js";
import { claimRoutes } from "../claims/routes.js";
import { pluginActivityRoutes } from "../plugin-activity/routes.js";
import { deliveryRoutes, type DeliveryRouteDeps } from "../delivery/rpc/routes.js";
import { withdrawOthers } from "../delivery/pipeline/withdraw-unpaid.js";
import { unparkDeliveries } from "../delivery/pipeline/write-deliveries.js";
import { operatorRoutes } from "../operator/routes.js";
import { voterDataRoutes } from "../voter-data/routes.js";
import { rewardRulesRoutes } from "../rewards/routes.js";
import { networkGoalRoutes } from "../rewards/network-goal-routes.js";
import { rewardQueueRoutes } from "../rewards/queue-routes.js";
import { reminderRoutes } from "../reminders/routes.js";
import { voterRoleRoutes } from "../voter-roles/routes.js";
import { ownerAlertRoutes } from "../alerts/routes.js";
import type { Mailer } from "../shared/adapters/mailer.js";
import { DEFAULT_IDLE_CHECK_SECONDS } from "../rewards/domain/next-check.js";
import { deliveryStatsRoutes } from "../delivery/rpc/delivery-stats.js";
import type { FraudRules } from "../hearts/domain/fraud-rules.js";
import type { AbuseRules } from "../referral/domain/abuse-signals.js";
import type { CastHeartBatchOptions } from "../hearts/cast-heart-batch.js";
import { accessRoutes, type AccessRouteDeps } from "../access/routes.js";
import { createAuthInterceptor } from "../access/auth-interceptor.js";
import { createTokenVerifier, type TokenVerifier } from "../access/service-tokens.js";
import { ReferralService } from "../../gen/proto/referral/v1/referral_pb.js";
import { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";
import { ClaimService } from "../../gen/proto/claims/v1/claims_pb.js";
import { createLeanUnaryAdapter } from "./lean-unary.js";

/** Everything the referral service's RPCs need. */
export interface ReferralServiceDeps extends CoreDeps, DeliveryRouteDeps, Pick<AccessRouteDeps, "loginLinkBaseUrl"> {
  metrics: Metrics;
  /** Fraud scoring rules for hearts; the documented defaults when omitted. */
  fraudRules?: FraudRules;
  /** Referral anti-abuse thresholds; the documented defaults when omitted. */
  abuseRules?: AbuseRules;
  /**
   * How callers are authenticated. Default: service tokens stored in the database
   * (createTokenVerifier). `allowUnauthenticated` is the development-only
   * ALLOW_UNAUTHENTICATED_RPC: a call without `authorization` acts as admin.
   */
  auth?: { verifyToken?: TokenVerifier; allowUnauthenticated?: boolean };
  /** ApplyEvent's group commit bounds (services/referral/apply-event.ts defaults when omitted). */
  applyEventBatch?: ApplyEventBatchOptions;
  /** CastHeart's group commit bounds (services/hearts/cast-heart-batch.ts defaults when omitted). */
  castHeartBatch?: CastHeartBatchOptions;
  /** The reward queue's poll interval of a quiet server (REWARD_QUEUE_IDLE_CHECK_SECONDS); DEFAULT_IDLE_CHECK_SECONDS when omitted. */
  rewardQueueIdleCheckSeconds?: number;
  /** How long an HTTP/2 session may stay without a frame before it is closed; RPC_IDLE_SESSION_TIMEOUT_MS when omitted. */
  idleSessionTimeoutMs?: number;
  /** Vote reminders' mailer (SMTP_URL); without it opt-ins are refused and nothing is sent (docs/reminders.md). */
  mailer?: Mailer;
  /** DISCORD_BOT_TOKEN is set: Discord DM reminder opt-ins are taken (docs/reminders.md). */
  discordDmReminders?: boolean;
}

/** The Connect routes of every internal service this process hosts. */
export function createRoutes(deps: ReferralServiceDeps): (router: ConnectRouter) => void {
  return (router) => {
    referralRoutes(deps, {
      ...(deps.applyEventBatch ? { applyEventBatch: deps.applyEventBatch } : {}),
      ...(deps.abuseRules ? { abuseRules: deps.abuseRules } : {}),
    })(router);
    referralReviewRoutes(deps)(router);
    serverAdminRoutes({ ...deps, releaseHeld: unparkDeliveries })(router);
    heartRoutes(deps)(router);
    claimRoutes({ ...deps, withdrawOthers })(router);
    pluginActivityRoutes(deps)(router);
    deliveryRoutes(deps)(router);
    operatorRoutes(deps)(router);
    voterDataRoutes(deps)(router);
    rewardRulesRoutes(deps)(router);
    networkGoalRoutes(deps)(router);
    rewardQueueRoutes({ ...deps, withdrawOthers, idleCheckSeconds: deps.rewardQueueIdleCheckSeconds ?? DEFAULT_IDLE_CHECK_SECONDS })(router);
    deliveryStatsRoutes(deps)(router);
    reminderRoutes(deps)(router);
    voterRoleRoutes(deps)(router);
    ownerAlertRoutes(deps)(router);
    accessRoutes(deps)(router);
  };
}

/** How long close() lets in-flight streams finish before it cuts the sessions still open. */
export const DRAIN_TIMEOUT_MS = 10_000;

/**
 * An HTTP/2 session with no frame in either direction for this long gets GOAWAY (open streams may
 * finish); still silent for as long again, it is destroyed. Idle connections cannot pile up on the
 * RPC port, and a quiet gateway's session (Connect's client keeps one for 15 minutes) is replaced by
 * a fresh one on its next call. docs/limits.md.
 */
export const RPC_IDLE_SESSION_TIMEOUT_MS = 5 * 60_000;

/**
 * Builds the referral service's HTTP/2 (cleartext) server, unstarted. One port
 * serves the Connect, gRPC and gRPC-Web protocols; every RPC needs a service token
 * (services/access/auth-interceptor.ts, rules in services/access/rpc-access.ts).
 */
export function createReferralServiceServer(deps: ReferralServiceDeps): {
  server: http2.Http2Server;
  listen(port: number, host?: string): Promise<number>;
  /** Drains: GOAWAY, in-flight streams finish; sessions still open after `drainTimeoutMs` are destroyed. */
  close(drainTimeoutMs?: number): Promise<void>;
} {
  // Outermost first: logging/metrics/error mapping wraps the access check, which wraps every handler.
  const interceptors = [
    createServerInterceptor(deps.log, deps.metrics),
    createAuthInterceptor({
      prisma: deps.prisma,
      now: deps.now,
      verifyToken: deps.auth?.verifyToken ?? createTokenVerifier(deps.prisma),
      allowUnauthenticated: deps.auth?.allowUnauthenticated ?? false,
    }),
  ];
  // The ingest path's calls (one ApplyEvent per event, ResolveSigningKeys on a key-cache miss) and the plugins' checks and
  // claims (one CheckVote/ClaimVote per GET /api/votes) take the lean path:
  // same interceptors, same implementations, same answers, without Connect's per-call machinery (lean-unary.ts).
  const handler = createLeanUnaryAdapter({
    leanMethods: [
      ReferralService.method.applyEvent,
      ServerAdminService.method.resolveSigningKeys,
      ClaimService.method.checkVote,
      ClaimService.method.claimVote,
    ],
    routes: createRoutes(deps),
    interceptors,
    // Connect, gRPC and gRPC-Web are all enabled by default on the same port.
    // Refuse an oversized request message at the edge (ResourceExhausted), before it is decoded.
    readMaxBytes: MAX_RPC_MESSAGE_BYTES,
  });
  const server = http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  const idleSessionTimeoutMs = deps.idleSessionTimeoutMs ?? RPC_IDLE_SESSION_TIMEOUT_MS;
  server.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    // Failure policy: an idle session is closed gracefully (GOAWAY, open streams may finish); one still
    // open an idle period later (a stream the peer never ends) is destroyed.
    session.setTimeout(idleSessionTimeoutMs, () => {
      if (session.closed || session.destroyed) return;
      session.close();
      const cut = setTimeout(() => session.destroy(), idleSessionTimeoutMs);
      cut.unref();
      session.once("close", () => clearTimeout(cut));
    });
  });
  return {
    server,
    listen: (port, host = "127.0.0.1") =>
      new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
      }),
    close: (drainTimeoutMs = DRAIN_TIMEOUT_MS) =>
      new Promise((resolve) => {
        // Graceful: stop accepting; GOAWAY lets in-flight streams finish before sessions close.
        for (const session of sessions) session.close();
        // Failure policy: a stream that never ends (a client still sending a message refused as too large,
        // a peer that went silent) must not hold shutdown forever; after the drain time it is cut.
        const cut = setTimeout(() => {
          for (const session of sessions) session.destroy();
        }, drainTimeoutMs);
        cut.unref();
        server.close(() => {
          clearTimeout(cut);
          resolve();
        });
      }),
  };
}
