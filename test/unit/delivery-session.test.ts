import test from "ava";
import { randomBytes } from "node:crypto";
import { loadDeliveryConfig } from "../../services/delivery/pipeline/config.js";
import { DEFAULT_KAFKA_SESSION_TIMEOUT_MS, deliveryConsumerSession } from "../../services/delivery/pipeline/consumer.js";

const required = {
  DATABASE_URL: "postgres://u@127.0.0.1:5432/db",
  KAFKA_BROKERS: "127.0.0.1:9092",
  SECRETS_KEY: randomBytes(32).toString("base64"),
};

test("the delivery group's session timeout defaults to 6 s (the broker's default minimum), heartbeat and fetch wait 1 s", (t) => {
  t.is(DEFAULT_KAFKA_SESSION_TIMEOUT_MS, 6_000);
  t.is(loadDeliveryConfig(required).kafkaSessionTimeoutMs, DEFAULT_KAFKA_SESSION_TIMEOUT_MS);
  t.deepEqual(deliveryConsumerSession(6_000), { sessionTimeoutMs: 6_000, heartbeatIntervalMs: 1_000, fetchMaxWaitMs: 1_000 });
  t.deepEqual(deliveryConsumerSession(30_000), { sessionTimeoutMs: 30_000, heartbeatIntervalMs: 5_000, fetchMaxWaitMs: 5_000 });
});

test("KAFKA_SESSION_TIMEOUT_MS overrides it, and a value out of range stops the process with the others", (t) => {
  t.is(loadDeliveryConfig({ ...required, KAFKA_SESSION_TIMEOUT_MS: "10000" }).kafkaSessionTimeoutMs, 10_000);
  const error = t.throws(() => loadDeliveryConfig({ ...required, KAFKA_SESSION_TIMEOUT_MS: "500" }));
  t.regex(error!.message, /KAFKA_SESSION_TIMEOUT_MS/);
});
