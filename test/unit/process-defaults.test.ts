import test from "ava";
import { randomBytes } from "node:crypto";
import { DEFAULT_DISPATCH_SETTINGS, loadDeliveryConfig } from "../../services/delivery/pipeline/config.js";
import { loadReferralServiceConfig } from "../../services/referral-service/config.js";
import { loadRelayConfig } from "../../services/relay/config.js";
import { DEFAULT_RELAY_BATCH_SIZE, DEFAULT_RELAY_POLL_INTERVAL_MS, DEFAULT_RELAY_STUCK_AFTER_MS } from "../../services/relay/relay.js";

const required = {
  DATABASE_URL: "postgres://u@127.0.0.1:5432/db",
  KAFKA_BROKERS: "127.0.0.1:9092",
  SECRETS_KEY: randomBytes(32).toString("base64"),
  ALLOW_UNAUTHENTICATED_RPC: "true",
};

test("the delivery process's dispatcher settings default to DEFAULT_DISPATCH_SETTINGS (createDeliveryWorker's defaults)", (t) => {
  const config = loadDeliveryConfig(required);
  const { schedule, callbackTimeoutMs, allowInsecureCallbacks, concurrency, perServerConcurrency, pollIntervalMs, discordApiBaseUrl } = config;
  t.deepEqual(
    { schedule, callbackTimeoutMs, allowInsecureCallbacks, concurrency, perServerConcurrency, pollIntervalMs, discordApiBaseUrl },
    { ...DEFAULT_DISPATCH_SETTINGS },
  );
});

test("the referral service's test callbacks default to the dispatcher's timeout and schedule", (t) => {
  const config = loadReferralServiceConfig(required);
  t.is(config.callbackTimeoutMs, DEFAULT_DISPATCH_SETTINGS.callbackTimeoutMs);
  t.deepEqual(config.retrySchedule, DEFAULT_DISPATCH_SETTINGS.schedule);
});

test("the relay process's settings default to createRelay's defaults", (t) => {
  const config = loadRelayConfig(required);
  t.deepEqual(
    { batchSize: config.batchSize, pollIntervalMs: config.pollIntervalMs, stuckAfterMs: config.stuckAfterMs },
    { batchSize: DEFAULT_RELAY_BATCH_SIZE, pollIntervalMs: DEFAULT_RELAY_POLL_INTERVAL_MS, stuckAfterMs: DEFAULT_RELAY_STUCK_AFTER_MS },
  );
});
