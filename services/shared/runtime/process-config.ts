import { readFileSync } from "node:fs";
import type { EnvReader } from "./config.js";
import { createSecretBox, parseSecretsKey, type SecretBox } from "./secrets.js";

/** Reads DATABASE_URL (required) and checks it is a postgres URL. */
export function readDatabaseUrl(env: EnvReader): string {
  const url = env.requiredString("DATABASE_URL");
  if (url && !/^postgres(ql)?:\/\//.test(url)) env.problem("DATABASE_URL must start with postgres:// or postgresql://");
  return url;
}

/** Reads KAFKA_BROKERS (required), a comma-separated host:port list. */
export function readKafkaBrokers(env: EnvReader): string[] {
  const brokers = env.list("KAFKA_BROKERS", []);
  if (brokers.length === 0) env.problem("KAFKA_BROKERS is required (comma-separated host:port list)");
  for (const b of brokers) if (!/^[^:\s]+:\d+$/.test(b)) env.problem(`KAFKA_BROKERS entry "${b}" must be host:port`);
  return brokers;
}

/** Default of KAFKA_TOPIC_RETENTION_HOURS: Kafka's own default (log.retention.hours, 7 days). */
export const DEFAULT_KAFKA_TOPIC_RETENTION_HOURS = 168;

/**
 * Reads KAFKA_TOPIC_RETENTION_HOURS (default 168): how long the topics the service creates keep a message
 * (`retention.ms`). Read by every process that creates topics (relay, delivery) and by the referral service, whose
 * delivery retention must outlast it (a message replayed after its delivery was removed would be stored again).
 */
export function readKafkaTopicRetentionHours(env: EnvReader): number {
  return env.int("KAFKA_TOPIC_RETENTION_HOURS", DEFAULT_KAFKA_TOPIC_RETENTION_HOURS, { min: 1, max: 24 * 3_650 });
}

/**
 * A setting given inline (`name`) or as a file (`fileName`, read when `name` is unset or empty): its
 * text, undefined when neither is set, or null when the file cannot be read (a problem is recorded).
 */
export function readValueOrFile(env: EnvReader, name: string, fileName: string): string | undefined | null {
  const value = env.optionalString(name);
  const file = env.optionalString(fileName);
  if (value || !file) return value;
  try {
    return readFileSync(file, "utf8");
  } catch {
    // Failure policy: a named but unreadable file stops the start as a config problem naming the path (not a
    // secret); silently going on without the setting would hide it.
    env.problem(`${fileName} ${file} cannot be read`);
    return null;
  }
}

/** Reads SECRETS_KEY (32 bytes, base64 or hex) or SECRETS_KEY_FILE; returns the SecretBox. */
export function readSecretBox(env: EnvReader): SecretBox | undefined {
  const value = readValueOrFile(env, "SECRETS_KEY", "SECRETS_KEY_FILE");
  if (value === null) return undefined;
  if (!value) {
    env.problem("SECRETS_KEY (32 bytes as base64 or 64 hex characters) or SECRETS_KEY_FILE is required; generate one with: openssl rand -base64 32");
    return undefined;
  }
  const key = parseSecretsKey(value);
  if (!key) {
    env.problem("SECRETS_KEY must be 32 bytes as base64 or 64 hex characters");
    return undefined;
  }
  return createSecretBox(key);
}

/** Reads a TCP port setting. */
export function readPort(env: EnvReader, name: string, fallback: number): number {
  return env.int(name, fallback, { min: 0, max: 65535 });
}

/** Shortest service token accepted from a setting (ADMIN_SERVICE_TOKEN, GATEWAY_SERVICE_TOKEN, REFERRAL_SERVICE_TOKEN). */
export const MIN_SERVICE_TOKEN_CHARS = 32;

/**
 * Reads a service token setting: at least MIN_SERVICE_TOKEN_CHARS, no whitespace.
 * Problems name the setting, never the value. Undefined when unset and not required.
 */
export function readServiceToken(env: EnvReader, name: string, opts: { required: boolean; hint?: string }): string | undefined {
  const token = env.optionalString(name);
  if (token === undefined) {
    if (opts.required) env.problem(`${name} is required${opts.hint ? `: ${opts.hint}` : ""}`);
    return undefined;
  }
  if (token.length < MIN_SERVICE_TOKEN_CHARS) env.problem(`${name} must be at least ${MIN_SERVICE_TOKEN_CHARS} characters`);
  if (/\s/.test(token)) env.problem(`${name} must not contain whitespace`);
  return token;
}
