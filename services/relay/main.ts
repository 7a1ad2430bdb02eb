import { runService } from "../shared/runtime/run-service.js";
import { createPrisma } from "../shared/adapters/db.js";
import { readinessChecks } from "../shared/adapters/readiness.js";
import { ALL_TOPICS } from "../shared/adapters/bus.js";
import { createKafkaBus } from "../shared/adapters/kafka-bus.js";
import { redactUrl } from "../shared/runtime/log.js";
import { kafkaDependency } from "../shared/adapters/kafka-dependency.js";
import { databaseDependency } from "../shared/adapters/startup-dependencies.js";
import { loadRelayConfig } from "./config.js";
import { createRelay } from "./relay.js";

runService({
  name: "relay",
  loadConfig: () => loadRelayConfig(),
  create(config, { log, metrics, startup }) {
    const prisma = createPrisma(config.databaseUrl, { maxConnections: 4 });
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
    return {
      checks: [
        startup.check,
        ...readinessChecks({ prisma, bus, databaseUrl: config.databaseUrl, brokers: config.kafkaBrokers }),
        { name: "relay", check: () => relay.checkProgress() },
      ],
      async start(opsPort) {
        if (!(await startup.waitFor(databaseDependency(prisma, config.databaseUrl)))) return false;
        if (!(await startup.waitFor(kafkaDependency(config.kafkaBrokers, [...ALL_TOPICS], { topicRetentionHours: config.kafkaTopicRetentionHours, log }))))
          return false;
        relay.start();
        log.info({ opsPort, database: redactUrl(config.databaseUrl), brokers: config.kafkaBrokers }, "relay publishing the outbox to Kafka");
        return true;
      },
      drain: () => relay.stop(),
      async close() {
        await bus.close();
        await prisma.$disconnect();
      },
    };
  },
});
