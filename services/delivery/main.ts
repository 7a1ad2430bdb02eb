import { runService } from "../shared/runtime/run-service.js";
import { createPrisma } from "../shared/adapters/db.js";
import { readinessChecks } from "../shared/adapters/readiness.js";
import { HEARTS_TOPIC } from "../shared/adapters/bus.js";
import { createKafkaBus } from "../shared/adapters/kafka-bus.js";
import { redactUrl } from "../shared/runtime/log.js";
import { kafkaDependency } from "../shared/adapters/kafka-dependency.js";
import { databaseDependency } from "../shared/adapters/startup-dependencies.js";
import { verifySecretsKey } from "../shared/adapters/secrets-key-check.js";
import { loadDeliveryConfig } from "./pipeline/config.js";
import { createDeliveryWorker } from "./pipeline/worker.js";
import { createDiscordRest } from "../shared/adapters/discord-rest.js";
import { createVoterRoleLoop } from "../voter-roles/give-voter-roles.js";

runService({
  name: "delivery",
  loadConfig: () => loadDeliveryConfig(),
  create(config, { log, metrics, startup }) {
    const prisma = createPrisma(config.databaseUrl, { maxConnections: 10 });
    const bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: "delivery", log });
    // The one Discord client of the process (the Discord destination and voter roles): every Discord call obeys its rate limits.
    const discord = createDiscordRest({ baseUrl: config.discordApiBaseUrl });
    const worker = createDeliveryWorker({ prisma, bus, secretBox: config.secretBox, log, registry: metrics.registry, discord }, config);
    const voterRoles = createVoterRoleLoop({
      db: prisma,
      discord,
      secretBox: config.secretBox,
      log,
      now: () => new Date(),
      ...config.voterRoles,
    });
    return {
      checks: [startup.check, ...readinessChecks({ prisma, bus, databaseUrl: config.databaseUrl, brokers: config.kafkaBrokers }), ...worker.checks],
      async start(opsPort) {
        if (!(await startup.waitFor(databaseDependency(prisma, config.databaseUrl)))) return false;
        await verifySecretsKey(prisma, config.secretBox);
        // Stored deliveries need no Kafka: dispatch them while Kafka is awaited and the consumer joins its group.
        worker.dispatcher.start();
        voterRoles.start();
        if (
          !(await startup.waitFor(
            kafkaDependency(config.kafkaBrokers, [HEARTS_TOPIC], { groupId: config.groupId, topicRetentionHours: config.kafkaTopicRetentionHours, log }),
          ))
        )
          return false;
        await worker.consumer.start();
        log.info(
          { opsPort, database: redactUrl(config.databaseUrl), brokers: config.kafkaBrokers, groupId: config.groupId },
          "delivery consuming and dispatching",
        );
        return true;
      },
      // Stop taking new work first, then let in-flight callbacks finish and record their attempts.
      async drain() {
        await voterRoles.stop();
        await worker.stop();
      },
      async close() {
        await discord.close();
        await bus.close();
        await prisma.$disconnect();
      },
    };
  },
});
