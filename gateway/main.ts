import { NIL_UUID } from "../services/shared/ids.js";
import type { AddressInfo } from "node:net";
import { runMain } from "../services/shared/run-main.js";
import { createOpsHandler } from "../services/shared/health.js";
import { createOpsServer } from "../services/shared/ops-server.js";
import { createLogger } from "../services/shared/log.js";
import { createMetrics } from "../services/shared/metrics.js";
import { onShutdown } from "../services/shared/shutdown.js";
import { createReferralServiceClients } from "./clients.js";
import { loadGatewayConfig } from "./config.js";
import { createServiceTransport } from "../services/shared/service-transport.js";
import { readDashboardToken } from "./dashboard/config.js";
import { createDashboardRoutes } from "./dashboard/routes.js";
import { createGatewayServer } from "./server.js";

const log = createLogger("gateway");

runMain(log, async () => {
  const config = loadGatewayConfig();
  const dashboardToken = readDashboardToken();
  const metrics = createMetrics("gateway");
  const clients = createReferralServiceClients(config.referralServiceUrl, config.referralServiceToken);
  let draining = false;
  // Ready when the referral service answers (it is ready only while its database is).
  const checks = [{ name: "referral-service", check: async () => void (await clients.admin.resolveSigningKeys({ serverId: NIL_UUID }, { timeoutMs: 1_500 })) }];
  // The public port answers the probes; /metrics is served on the ops port only.
  const ops = createOpsHandler({ checks, isDraining: () => draining });
  const opsServer = createOpsServer({ checks, metrics, isDraining: () => draining });
  // The owners' dashboard at /dashboard: owners through login links; the operator too when DASHBOARD_TOKEN is set.
  const extraRoutes = createDashboardRoutes({
    transport: createServiceTransport(config.referralServiceUrl, config.referralServiceToken),
    token: dashboardToken,
    secureCookies: config.publicBaseUrl.startsWith("https:"),
    log,
  });
  const server = createGatewayServer({
    ...clients,
    log,
    metrics,
    now: () => new Date(),
    ops,
    extraRoutes,
    trustProxy: config.trustProxy,
    signingKeyCacheMs: config.signingKeyCacheMs,
    unknownServerCacheMs: config.unknownServerCacheMs,
    signingKeyRefreshMs: config.signingKeyRefreshMs,
    failedSignatures: config.failedSignatures,
    dashboard: true,
  });
  await new Promise<void>((resolve) => server.listen(config.port, config.host, resolve));
  const opsPort = await opsServer.listen(config.opsPort, config.host);
  log.info(
    { port: (server.address() as AddressInfo).port, opsPort, referralService: config.referralServiceUrl, dashboard: dashboardToken !== undefined },
    "gateway listening",
  );
  onShutdown(log, async () => {
    draining = true;
    // close() stops accepting and waits for in-flight requests; idle keep-alive sockets are closed.
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    });
    await opsServer.close();
  });
});
