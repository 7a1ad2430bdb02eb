import type { AddressInfo } from "node:net";
import { runMain } from "../services/shared/run-main.js";
import { createOpsHandler } from "../services/shared/health.js";
import { createLogger } from "../services/shared/log.js";
import { createMetrics } from "../services/shared/metrics.js";
import { onShutdown } from "../services/shared/shutdown.js";
import { createReferralServiceClients } from "./clients.js";
import { loadGatewayConfig } from "./config.js";
import { createDashboardClients } from "./dashboard/clients.js";
import { readDashboardToken } from "./dashboard/config.js";
import { createDashboardRoutes } from "./dashboard/routes.js";
import { createGatewayServer } from "./server.js";

const log = createLogger("gateway");
const NIL_UUID = "00000000-0000-0000-0000-000000000000";

runMain(log, async () => {
  const config = loadGatewayConfig();
  const dashboardToken = readDashboardToken();
  const metrics = createMetrics("gateway");
  const clients = createReferralServiceClients(config.referralServiceUrl);
  let draining = false;
  const ops = createOpsHandler({
    // Ready when the referral service answers (it is ready only while its database is).
    checks: [{ name: "referral-service", check: async () => void (await clients.admin.resolveSigningKeys({ serverId: NIL_UUID }, { timeoutMs: 1_500 })) }],
    metrics,
    isDraining: () => draining,
  });
  // The owners' dashboard at /dashboard, only when DASHBOARD_TOKEN is set (otherwise its paths answer 404).
  const extraRoutes = createDashboardRoutes({ clients: createDashboardClients(config.referralServiceUrl), token: dashboardToken, log });
  const server = createGatewayServer({ ...clients, log, metrics, now: () => new Date(), ops, extraRoutes, trustProxy: config.trustProxy, signingKeyCacheMs: config.signingKeyCacheMs, dashboard: dashboardToken !== undefined });
  await new Promise<void>((resolve) => server.listen(config.port, config.host, resolve));
  log.info({ port: (server.address() as AddressInfo).port, referralService: config.referralServiceUrl, dashboard: dashboardToken !== undefined }, "gateway listening");
  onShutdown(log, async () => {
    draining = true;
    // close() stops accepting and waits for in-flight requests; idle keep-alive sockets are closed.
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    });
  });
});
