import { runService } from "../shared/run-service.js";
import { createPrisma } from "../shared/db.js";
import { readinessChecks } from "../shared/readiness.js";
import { HEARTS_TOPIC } from "../shared/bus.js";
import { createKafkaBus } from "../shared/kafka-bus.js";
import { redactUrl } from "../shared/log.js";
import { kafkaDependency } from "../shared/kafka-dependency.js";
import { databaseDependency } from "../shared/startup-dependencies.js";
import { verifySecretsKey } from "../shared/secrets-key-check.js";
import { loadDeliveryConfig } from "./config.js";
import { createDeliveryWorker } from "./worker.js";

runService({
  name: "delivery",
  loadConfig: () => loadDeliveryConfig(),
  create(config, { log, metrics, startup }) {
    const prisma = createPrisma(config.databaseUrl, { maxConnections: 10 });
    const bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: "delivery", log });
    const worker = createDeliveryWorker({ prisma, bus, secretBox: config.secretBox, log, registry: metrics.registry }, config);
    return {
      checks: [startup.check, ...readinessChecks({ prisma, bus, databaseUrl: config.databaseUrl, brokers: config.kafkaBrokers }), ...worker.checks],
      async start(opsPort) {
        if (!(await startup.waitFor(databaseDependency(prisma, config.databaseUrl)))) return false;
        await verifySecretsKey(prisma, config.secretBox);
        // Stored deliveries need no Kafka: dispatch them while Kafka is awaited and the consumer joins its group.
        worker.dispatcher.start();
        if (!(await startup.waitFor(kafkaDependency(config.kafkaBrokers, [HEARTS_TOPIC], config.groupId)))) return false;
        await worker.consumer.start();
        log.info(
          { opsPort, database: redactUrl(config.databaseUrl), brokers: config.kafkaBrokers, groupId: config.groupId },
          "delivery consuming and dispatching",
        );
        return true;
      },
      // Stop taking new work first, then let in-flight callbacks finish and record their attempts.
      drain: () => worker.stop(),
      async close() {
        await bus.close();
        await prisma.$disconnect();
      },
    };
  },
});
