import { createEnvReader } from "../../shared/runtime/config.js";
import { readDatabaseUrl, readKafkaBrokers, readKafkaTopicRetentionHours, readPort, readSecretBox } from "../../shared/runtime/process-config.js";
import type { SecretBox } from "../../shared/runtime/secrets.js";
import { DEFAULT_DISPATCH_CONCURRENCY, DEFAULT_PER_SERVER_CONCURRENCY, DEFAULT_POLL_INTERVAL_MS } from "./dispatcher.js";
import { DEFAULT_RETRY_SCHEDULE, parseRetrySchedule, readRetrySchedule, type RetrySchedule } from "./retry-schedule.js";
import { CALLBACK_TIMEOUT_MS } from "./send-callback.js";
import { DEFAULT_CONSUMER_STUCK_AFTER_MS, DEFAULT_KAFKA_SESSION_TIMEOUT_MS, DELIVERY_CONSUMER_GROUP } from "./consumer.js";
import type { EnvReader } from "../../shared/runtime/config.js";
import { DISCORD_API_BASE_URL, readDiscordApiBaseUrl } from "../../shared/adapters/discord-rest.js";
import { readVoterRoleJobSettings, type VoterRoleJobSettings } from "../../voter-roles/give-voter-roles.js";

/** Dispatcher settings shared by the delivery process and the all-in-one mode. */
export interface DispatchSettings {
  schedule: RetrySchedule;
  callbackTimeoutMs: number;
  allowInsecureCallbacks: boolean;
  concurrency: number;
  perServerConcurrency: number;
  pollIntervalMs: number;
  /** DISCORD_API_BASE_URL: honoured only in development and tests (readDiscordApiBaseUrl); else Discord's. */
  discordApiBaseUrl: string;
}

/** Defaults of the dispatcher settings: the delivery process's, the all-in-one's and createDeliveryWorker's. */
export const DEFAULT_DISPATCH_SETTINGS: Readonly<DispatchSettings> = Object.freeze({
  schedule: parseRetrySchedule(DEFAULT_RETRY_SCHEDULE),
  callbackTimeoutMs: CALLBACK_TIMEOUT_MS,
  allowInsecureCallbacks: false,
  concurrency: DEFAULT_DISPATCH_CONCURRENCY,
  perServerConcurrency: DEFAULT_PER_SERVER_CONCURRENCY,
  pollIntervalMs: DEFAULT_POLL_INTERVAL_MS,
  discordApiBaseUrl: DISCORD_API_BASE_URL,
});

/** Default of the delivery process's OPS_PORT. */
export const DEFAULT_DELIVERY_OPS_PORT = 9083;

/** Settings of the delivery process, validated at start. */
export interface DeliveryConfig extends DispatchSettings {
  databaseUrl: string;
  kafkaBrokers: string[];
  /** KAFKA_TOPIC_RETENTION_HOURS: how long the topics the delivery process creates keep a message. */
  kafkaTopicRetentionHours: number;
  secretBox: SecretBox;
  host: string;
  opsPort: number;
  groupId: string;
  consumerStuckAfterMs: number;
  /** KAFKA_SESSION_TIMEOUT_MS: how long a killed delivery process keeps its partitions (DEFAULT_KAFKA_SESSION_TIMEOUT_MS). */
  kafkaSessionTimeoutMs: number;
  /** The voter role job (VOTER_ROLE_*; services/voter-roles/give-voter-roles.ts). */
  voterRoles: VoterRoleJobSettings;
}

/** Reads the dispatcher settings (DELIVERY_RETRY_SCHEDULE, CALLBACK_TIMEOUT_MS, ...). */
export function readDispatchSettings(r: EnvReader): DispatchSettings {
  return {
    schedule: readRetrySchedule(r),
    callbackTimeoutMs: r.int("CALLBACK_TIMEOUT_MS", DEFAULT_DISPATCH_SETTINGS.callbackTimeoutMs, { min: 100, max: 60_000 }),
    allowInsecureCallbacks: r.bool("ALLOW_INSECURE_CALLBACKS", DEFAULT_DISPATCH_SETTINGS.allowInsecureCallbacks),
    concurrency: r.int("DELIVERY_CONCURRENCY", DEFAULT_DISPATCH_SETTINGS.concurrency, { min: 1, max: 1000 }),
    perServerConcurrency: r.int("DELIVERY_PER_SERVER_CONCURRENCY", DEFAULT_DISPATCH_SETTINGS.perServerConcurrency, { min: 1, max: 100 }),
    pollIntervalMs: r.int("DELIVERY_POLL_INTERVAL_MS", DEFAULT_DISPATCH_SETTINGS.pollIntervalMs, { min: 10, max: 60_000 }),
    discordApiBaseUrl: readDiscordApiBaseUrl(r),
  };
}

/** Loads and validates every setting; throws ConfigError listing every problem at once. */
export function loadDeliveryConfig(env: Record<string, string | undefined> = process.env): DeliveryConfig {
  const r = createEnvReader(env);
  const config = {
    databaseUrl: readDatabaseUrl(r),
    kafkaBrokers: readKafkaBrokers(r),
    kafkaTopicRetentionHours: readKafkaTopicRetentionHours(r),
    secretBox: readSecretBox(r),
    host: r.string("HOST", "127.0.0.1"),
    opsPort: readPort(r, "OPS_PORT", DEFAULT_DELIVERY_OPS_PORT),
    groupId: r.string("KAFKA_GROUP_ID", DELIVERY_CONSUMER_GROUP),
    consumerStuckAfterMs: r.int("CONSUMER_STUCK_AFTER_MS", DEFAULT_CONSUMER_STUCK_AFTER_MS, { min: 1_000, max: 3_600_000 }),
    // The broker refuses a session timeout outside its group.min/max.session.timeout.ms (6 s and 30 min by default).
    kafkaSessionTimeoutMs: r.int("KAFKA_SESSION_TIMEOUT_MS", DEFAULT_KAFKA_SESSION_TIMEOUT_MS, { min: 1_000, max: 1_800_000 }),
    ...readDispatchSettings(r),
    voterRoles: readVoterRoleJobSettings(r),
  };
  return r.finish(config as DeliveryConfig);
}
