import type http from "node:http";
import { createOpsHandler, type ReadinessCheck } from "../services/shared/runtime/health.js";
import type { Logger } from "../services/shared/runtime/log.js";
import type { Metrics } from "../services/shared/runtime/metrics.js";
import { createReferralServiceTransports, referralServiceClientsOver, type ReferralServiceTransports } from "./clients.js";
import { createDashboardRoutes } from "./dashboard/routes.js";
import { createGatewayServer, type GatewayDeps } from "./server.js";

/** Settings of the public gateway that its process reads (GatewayConfig) and the all-in-one leaves at their defaults. */
export type PublicGatewaySettings = Pick<
  GatewayDeps,
  | "trustProxy"
  | "signingKeyCacheMs"
  | "unknownServerCacheMs"
  | "signingKeyRefreshMs"
  | "failedSignatures"
  | "referralLinkLimit"
  | "remindersEnabled"
  | "discordDmRemindersEnabled"
>;

/**
 * The public gateway as a process runs it, written once for the gateway process and the
 * all-in-one: the referral service's clients with the gateway's own service token, the owners'
 * dashboard at /dashboard (the operator sign-in too when `dashboardToken` is set), and the
 * probes on the public port (/metrics is served on the ops port only). Not listening yet.
 * The gateway's routes and the dashboard share ONE HTTP/2 session: `transports` when the caller
 * built them (gateway/main.ts shares them with its readiness check), else built here.
 */
export function createPublicGateway(opts: {
  referralServiceUrl: string;
  serviceToken: string;
  /** The transports to the referral service (createReferralServiceTransports); built from the URL and token when absent. */
  transports?: ReferralServiceTransports;
  dashboardToken: string | undefined;
  /** Cookies are Secure when this is https. */
  publicBaseUrl: string;
  log: Logger;
  metrics: Metrics;
  now: () => Date;
  checks: ReadinessCheck[];
  isDraining: () => boolean;
  settings?: PublicGatewaySettings;
}): http.Server {
  const transports = opts.transports ?? createReferralServiceTransports(opts.referralServiceUrl, opts.serviceToken);
  const extraRoutes = createDashboardRoutes({
    transport: transports.dashboard,
    token: opts.dashboardToken,
    secureCookies: opts.publicBaseUrl.startsWith("https:"),
    log: opts.log,
  });
  return createGatewayServer({
    ...referralServiceClientsOver(transports.routes),
    log: opts.log,
    metrics: opts.metrics,
    now: opts.now,
    ops: createOpsHandler({ checks: opts.checks, isDraining: opts.isDraining, log: opts.log }),
    extraRoutes,
    trustProxy: opts.settings?.trustProxy,
    signingKeyCacheMs: opts.settings?.signingKeyCacheMs,
    unknownServerCacheMs: opts.settings?.unknownServerCacheMs,
    signingKeyRefreshMs: opts.settings?.signingKeyRefreshMs,
    failedSignatures: opts.settings?.failedSignatures,
    referralLinkLimit: opts.settings?.referralLinkLimit,
    remindersEnabled: opts.settings?.remindersEnabled,
    discordDmRemindersEnabled: opts.settings?.discordDmRemindersEnabled,
    dashboard: true,
  });
}
