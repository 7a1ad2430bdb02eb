import { runMain } from "../shared/run-main.js";
import { createPrisma } from "../shared/db.js";
import { readinessChecks } from "../shared/readiness.js";
import { ALL_TOPICS } from "../shared/bus.js";
import { createKafkaBus } from "../shared/kafka-bus.js";
import { createLogger, redactUrl } from "../shared/log.js";
import { createMetrics } from "../shared/metrics.js";
import { createOpsServer } from "../shared/ops-server.js";
import { onShutdown } from "../shared/shutdown.js";
import { createStartup, databaseDependency, kafkaDependency } from "../shared/startup.js";
import { loadRelayConfig } from "./config.js";
import { createRelay } from "./relay.js";

const log = createLogger("relay");

runMain(log, async () => {
  const config = loadRelayConfig();
  const prisma = createPrisma(config.databaseUrl, { maxConnections: 4 });
  const metrics = createMetrics("relay");
  const bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: "relay", log });
  const relay = createRelay({
    prisma,
    bus,
    log,
    batchSize: config.batchSize,
    pollIntervalMs: config.pollIntervalMs,
    // Wake on commit (LISTEN); the poll slows to the safety interval while notifications arrive.
    notifications: { databaseUrl: config.databaseUrl, safetyPollIntervalMs: config.safetyPollIntervalMs },
    registry: metrics.registry,
    stuckAfterMs: config.stuckAfterMs,
  });
  const startup = createStartup(log);
  let draining = false;
  const ops = createOpsServer({
    checks: [startup.check, ...readinessChecks({ prisma, bus }), { name: "relay", check: () => relay.checkProgress() }],
    metrics,
    isDraining: () => draining,
  });
  onShutdown(log, async () => {
    draining = true;
    startup.stop();
    await relay.stop();
    await bus.close();
    await ops.close();
    await prisma.$disconnect();
  });
  // Ops first: /healthz answers and /readyz says what the start waits for, even while a dependency is down.
  const opsPort = await ops.listen(config.opsPort, config.host);
  if (!(await startup.waitFor(databaseDependency(prisma, config.databaseUrl)))) return;
  if (!(await startup.waitFor(kafkaDependency(config.kafkaBrokers, [...ALL_TOPICS])))) return;
  relay.start();
  startup.ready();
  log.info({ opsPort, database: redactUrl(config.databaseUrl), brokers: config.kafkaBrokers }, "relay publishing the outbox to Kafka");
});
