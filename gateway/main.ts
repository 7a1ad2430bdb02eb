import { NIL_UUID } from "../services/shared/values/ids.js";
import type { AddressInfo } from "node:net";
import { addressOf } from "../services/shared/runtime/log.js";
import { runService } from "../services/shared/runtime/run-service.js";
import { createRpcClients } from "../services/shared/rpc/service-clients.js";
import { checkServiceToken } from "./check-service-token.js";
import { createReferralServiceTransports, referralServiceClientsOver } from "./clients.js";
import { loadGatewayConfig } from "./config.js";
import { readDashboardToken } from "./dashboard/config.js";
import { createPublicGateway } from "./public-gateway.js";

runService({
  name: "gateway",
  loadConfig: () => ({ ...loadGatewayConfig(), dashboardToken: readDashboardToken() }),
  create(config, { log, metrics, isDraining }) {
    // One HTTP/2 session to the referral service for the whole process: the readiness check, the routes and the dashboard.
    const transports = createReferralServiceTransports(config.referralServiceUrl, config.referralServiceToken);
    const clients = referralServiceClientsOver(transports.routes);
    // Ready when the referral service answers (it is ready only while its database is).
    const checks = [
      {
        name: "referral-service",
        target: addressOf(config.referralServiceUrl, 80),
        check: async () => void (await clients.admin.resolveSigningKeys({ serverId: NIL_UUID }, { timeoutMs: 1_500 })),
      },
    ];
    const server = createPublicGateway({
      referralServiceUrl: config.referralServiceUrl,
      serviceToken: config.referralServiceToken,
      transports,
      dashboardToken: config.dashboardToken,
      publicBaseUrl: config.publicBaseUrl,
      log,
      metrics,
      now: () => new Date(),
      checks,
      isDraining,
      settings: config,
    });
    return {
      checks,
      async start(opsPort) {
        // A wrong or under-scoped token exits 2 with the reason (ConfigError), before anything listens.
        await checkServiceToken({
          clients: { ...clients, access: createRpcClients(transports.dashboard).access },
          log,
          referralServiceUrl: config.referralServiceUrl,
          operatorDashboard: config.dashboardToken !== undefined,
        });
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
