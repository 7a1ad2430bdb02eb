import { runMain } from "../shared/run-main.js";
import { createPrisma } from "../shared/db.js";
import { readinessChecks } from "../shared/readiness.js";
import { createLogger, redactUrl } from "../shared/log.js";
import { createMetrics } from "../shared/metrics.js";
import { createOpsServer } from "../shared/ops-server.js";
import { onShutdown } from "../shared/shutdown.js";
import { createStartup, databaseDependency } from "../shared/startup.js";
import { verifySecretsKey } from "../shared/secrets-key-check.js";
import { loadReferralServiceConfig } from "./config.js";
import { createReferralServiceServer } from "./server.js";
import { bootstrapServiceTokens } from "../access/bootstrap.js";

const log = createLogger("referral-service");

runMain(log, async () => {
  const config = loadReferralServiceConfig();
  const prisma = createPrisma(config.databaseUrl, { maxConnections: config.dbPoolSize });
  const metrics = createMetrics("referral-service");
  let draining = false;
  const rpc = createReferralServiceServer({
    prisma,
    secretBox: config.secretBox,
    log,
    metrics,
    now: () => new Date(),
    allowInsecureCallbacks: config.allowInsecureCallbacks,
    callbackTimeoutMs: config.callbackTimeoutMs,
    retrySchedule: config.retrySchedule,
    publicBaseUrl: config.publicBaseUrl,
    loginLinkBaseUrl: config.loginLinkBaseUrl,
    fraudRules: config.fraudRules,
    auth: { allowUnauthenticated: config.access.allowUnauthenticated },
  });
  const startup = createStartup(log);
  const ops = createOpsServer({ checks: [startup.check, ...readinessChecks({ prisma })], metrics, isDraining: () => draining });
  let listening = false;
  onShutdown(log, async () => {
    draining = true;
    startup.stop();
    if (listening) await rpc.close();
    await ops.close();
    await prisma.$disconnect();
  });
  // Ops first: /healthz answers and /readyz says what the start waits for, even while the database is down.
  const opsPort = await ops.listen(config.opsPort, config.host);
  if (!(await startup.waitFor(databaseDependency(prisma, config.databaseUrl)))) return;
  await verifySecretsKey(prisma, config.secretBox);
  // Before listening: upsert the configured tokens; refuse to start (exit 2) when no token could call the service.
  await bootstrapServiceTokens(prisma, config.access, log, new Date());
  const port = await rpc.listen(config.port, config.host);
  listening = true;
  startup.ready();
  log.info({ port, opsPort, database: redactUrl(config.databaseUrl) }, "referral service listening (Connect, gRPC, gRPC-Web over HTTP/2)");
});
