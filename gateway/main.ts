import type { AddressInfo } from "node:net";
import { runService } from "../services/shared/run-service.js";
import { createOpsHandler } from "../services/shared/health.js";
import { createReferralServiceClients } from "./clients.js";
import { loadGatewayConfig } from "./config.js";
import { createServiceTransport } from "../services/shared/service-transport.js";
import { readDashboardToken } from "./dashboard/config.js";
import { createDashboardRoutes } from "./dashboard/routes.js";
import { createGatewayServer } from "./server.js";

const NIL_UUID = "00000000-0000-0000-0000-000000000000";

runService({
  name: "gateway",
  loadConfig: () => ({ ...loadGatewayConfig(), dashboardToken: readDashboardToken() }),
  create(config, { log, metrics, isDraining }) {
    const clients = createReferralServiceClients(config.referralServiceUrl, config.referralServiceToken);
    // Ready when the referral service answers (it is ready only while its database is).
    const checks = [{ name: "referral-service", check: async () => void (await clients.admin.resolveSigningKeys({ serverId: NIL_UUID }, { timeoutMs: 1_500 })) }];
    // The owners' dashboard at /dashboard: owners through login links; the operator too when DASHBOARD_TOKEN is set.
    const extraRoutes = createDashboardRoutes({
      transport: createServiceTransport(config.referralServiceUrl, config.referralServiceToken),
      token: config.dashboardToken,
      secureCookies: config.publicBaseUrl.startsWith("https:"),
      log,
    });
    const server = createGatewayServer({
      ...clients,
      log,
      metrics,
      now: () => new Date(),
      // The public port answers the probes; /metrics is served on the ops port only.
      ops: createOpsHandler({ checks, isDraining }),
      extraRoutes,
      trustProxy: config.trustProxy,
      signingKeyCacheMs: config.signingKeyCacheMs,
      unknownServerCacheMs: config.unknownServerCacheMs,
      signingKeyRefreshMs: config.signingKeyRefreshMs,
      failedSignatures: config.failedSignatures,
      dashboard: true,
    });
    return {
      checks,
      async start(opsPort) {
        await new Promise<void>((resolve) => server.listen(config.port, config.host, resolve));
        log.info(
          { port: (server.address() as AddressInfo).port, opsPort, referralService: config.referralServiceUrl, dashboard: config.dashboardToken !== undefined },
          "gateway listening",
        );
        return true;
      },
      // close() stops accepting and waits for in-flight requests; idle keep-alive sockets are closed.
      drain: () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        }),
    };
  },
});
