import { runMain } from "../shared/run-main.js";
import { createPrisma } from "../shared/db.js";
import { readinessChecks } from "../shared/readiness.js";
import { HEARTS_TOPIC } from "../shared/bus.js";
import { createKafkaBus, ensureTopics } from "../shared/kafka-bus.js";
import { createLogger, redactUrl } from "../shared/log.js";
import { createMetrics } from "../shared/metrics.js";
import { createOpsServer } from "../shared/ops-server.js";
import { onShutdown } from "../shared/shutdown.js";
import { loadDeliveryConfig } from "./config.js";
import { createDeliveryConsumer } from "./consumer.js";
import { createDispatcher } from "./dispatcher.js";

const log = createLogger("delivery");

runMain(log, async () => {
  const config = loadDeliveryConfig();
  const prisma = createPrisma(config.databaseUrl, { maxConnections: 10 });
  const metrics = createMetrics("delivery");
  const bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: "delivery", log });
  await ensureTopics(config.kafkaBrokers, [HEARTS_TOPIC]);
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
  let draining = false;
  const ops = createOpsServer({
    checks: [...readinessChecks({ prisma, bus }), { name: "consumer", check: () => consumer.checkProgress() }],
    metrics,
    isDraining: () => draining,
  });
  // Registered before the slow start steps, so a SIGTERM while joining the group still drains.
  onShutdown(log, async () => {
    draining = true;
    // Stop taking new work first, then let in-flight callbacks finish and record their attempts.
    await consumer.stop();
    await dispatcher.stop();
    await bus.close();
    await ops.close();
    await prisma.$disconnect();
  });
  const opsPort = await ops.listen(config.opsPort, config.host);
  // Stored deliveries need no Kafka: dispatch them while the consumer is still joining its group.
  dispatcher.start();
  await consumer.start();
  log.info({ opsPort, database: redactUrl(config.databaseUrl), brokers: config.kafkaBrokers, groupId: config.groupId }, "delivery consuming and dispatching");
});
