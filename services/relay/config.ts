import { createEnvReader } from "../shared/runtime/config.js";
import { readDatabaseUrl, readKafkaBrokers, readKafkaTopicRetentionHours, readPort } from "../shared/runtime/process-config.js";
import { DEFAULT_RELAY_BATCH_SIZE, DEFAULT_RELAY_POLL_INTERVAL_MS, DEFAULT_RELAY_SAFETY_POLL_INTERVAL_MS, DEFAULT_RELAY_STUCK_AFTER_MS } from "./relay.js";

/** Settings of the relay process, validated at start. */
export interface RelayConfig {
  databaseUrl: string;
  kafkaBrokers: string[];
  /** KAFKA_TOPIC_RETENTION_HOURS: how long the topics the relay creates keep a message. */
  kafkaTopicRetentionHours: number;
  host: string;
  opsPort: number;
  batchSize: number;
  pollIntervalMs: number;
  /** The poll kept as a safety net while commit notifications (LISTEN) arrive. */
  safetyPollIntervalMs: number;
  stuckAfterMs: number;
}

/** Loads and validates every setting; throws ConfigError listing every problem at once. */
export function loadRelayConfig(env: Record<string, string | undefined> = process.env): RelayConfig {
  const r = createEnvReader(env);
  return r.finish({
    databaseUrl: readDatabaseUrl(r),
    kafkaBrokers: readKafkaBrokers(r),
    kafkaTopicRetentionHours: readKafkaTopicRetentionHours(r),
    host: r.string("HOST", "127.0.0.1"),
    opsPort: readPort(r, "OPS_PORT", 9082),
    batchSize: r.int("RELAY_BATCH_SIZE", DEFAULT_RELAY_BATCH_SIZE, { min: 1, max: 10_000 }),
    pollIntervalMs: r.int("RELAY_POLL_INTERVAL_MS", DEFAULT_RELAY_POLL_INTERVAL_MS, { min: 5, max: 60_000 }),
    safetyPollIntervalMs: r.int("RELAY_SAFETY_POLL_INTERVAL_MS", DEFAULT_RELAY_SAFETY_POLL_INTERVAL_MS, { min: 5, max: 600_000 }),
    stuckAfterMs: r.int("RELAY_STUCK_AFTER_MS", DEFAULT_RELAY_STUCK_AFTER_MS, { min: 1_000, max: 3_600_000 }),
  });
}
