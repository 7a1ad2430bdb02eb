import { runMain } from "../shared/run-main.js";
import { createPrisma } from "../shared/db.js";
import { readinessChecks } from "../shared/readiness.js";
import { HEARTS_TOPIC } from "../shared/bus.js";
import { createKafkaBus } from "../shared/kafka-bus.js";
import { createLogger, redactUrl } from "../shared/log.js";
import { createMetrics } from "../shared/metrics.js";
import { createOpsServer } from "../shared/ops-server.js";
import { onShutdown } from "../shared/shutdown.js";
import { createStartup, databaseDependency, kafkaDependency } from "../shared/startup.js";
import { verifySecretsKey } from "../shared/secrets-key-check.js";
import { loadDeliveryConfig } from "./config.js";
import { createDeliveryConsumer } from "./consumer.js";
import { createDispatcher } from "./dispatcher.js";

const log = createLogger("delivery");

runMain(log, async () => {
  const config = loadDeliveryConfig();
  const prisma = createPrisma(config.databaseUrl, { maxConnections: 10 });
  const metrics = createMetrics("delivery");
  const bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: "delivery", log });
  const dispatcher = createDispatcher({
    prisma,
    secretBox: config.secretBox,
    log,
    now: () => new Date(),
    schedule: config.schedule,
    timeoutMs: config.callbackTimeoutMs,
    allowInsecure: config.allowInsecureCallbacks,
    concurrency: config.concurrency,
    perServerConcurrency: config.perServerConcurrency,
    pollIntervalMs: config.pollIntervalMs,
    registry: metrics.registry,
  });
  const consumer = createDeliveryConsumer({
    bus,
    prisma,
    log,
    groupId: config.groupId,
    onStored: () => dispatcher.wake(),
    registry: metrics.registry,
    stuckAfterMs: config.consumerStuckAfterMs,
  });
  const startup = createStartup(log);
  let draining = false;
  const ops = createOpsServer({
    checks: [startup.check, ...readinessChecks({ prisma, bus }), { name: "consumer", check: () => consumer.checkProgress() }],
    metrics,
    isDraining: () => draining,
  });
  // Registered before the slow start steps, so a SIGTERM while joining the group still drains.
  onShutdown(log, async () => {
    draining = true;
    startup.stop();
    // Stop taking new work first, then let in-flight callbacks finish and record their attempts.
    await consumer.stop();
    await dispatcher.stop();
    await bus.close();
    await ops.close();
    await prisma.$disconnect();
  });
  // Ops first: /healthz answers and /readyz says what the start waits for, even while a dependency is down.
  const opsPort = await ops.listen(config.opsPort, config.host);
  if (!(await startup.waitFor(databaseDependency(prisma, config.databaseUrl)))) return;
  await verifySecretsKey(prisma, config.secretBox);
  // Stored deliveries need no Kafka: dispatch them while Kafka is awaited and the consumer joins its group.
  dispatcher.start();
  if (!(await startup.waitFor(kafkaDependency(config.kafkaBrokers, [HEARTS_TOPIC], config.groupId)))) return;
  await consumer.start();
  startup.ready();
  log.info({ opsPort, database: redactUrl(config.databaseUrl), brokers: config.kafkaBrokers, groupId: config.groupId }, "delivery consuming and dispatching");
});
