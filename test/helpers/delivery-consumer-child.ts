/**
 * One delivery consumer in a process of its own, for take-over measurements
 * (test/integration/delivery-takeover.test.ts): the production consumer (createDeliveryConsumer, with the
 * delivery group's session timings) on the real Kafka, a topic and group of the test's own. It handles only
 * event types it ignores, so it needs no database. Prints `consumer joined` once in its group; SIGTERM stops
 * it as the delivery process does (the consumer leaves its group); SIGKILL is a crash (no leave).
 *
 * Env: KAFKA_BROKERS, TAKEOVER_TOPIC, TAKEOVER_GROUP; KAFKA_SESSION_TIMEOUT_MS optional.
 */
import { createDeliveryConsumer } from "../../services/delivery/pipeline/consumer.js";
import type { PrismaClient } from "../../services/shared/adapters/db.js";
import { createKafkaBus } from "../../services/shared/adapters/kafka-bus.js";
import { createLogger } from "../../services/shared/runtime/log.js";

const brokers = (process.env.KAFKA_BROKERS ?? "").split(",");
const log = createLogger("takeover-child", "warn");
const bus = createKafkaBus({ brokers, clientId: "takeover-child", log });
const sessionTimeoutMs = process.env.KAFKA_SESSION_TIMEOUT_MS ? Number(process.env.KAFKA_SESSION_TIMEOUT_MS) : undefined;
const consumer = createDeliveryConsumer({
  bus,
  // Never used: the messages of a take-over test are event types the consumer ignores.
  prisma: {} as PrismaClient,
  log,
  groupId: process.env.TAKEOVER_GROUP ?? "",
  topic: process.env.TAKEOVER_TOPIC ?? "",
  ...(sessionTimeoutMs === undefined ? {} : { sessionTimeoutMs }),
});
await consumer.start();
process.stdout.write("consumer joined\n");
process.once("SIGTERM", () => {
  void consumer
    .stop()
    .then(() => bus.close())
    .then(() => process.exit(0));
});
