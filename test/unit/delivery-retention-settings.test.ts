/**
 * RETENTION_DELIVERY_DAYS against KAFKA_TOPIC_RETENTION_HOURS: a removed delivery's dedup key is gone, so a heart event
 * replayed from Kafka after it would be stored and delivered again; the referral service refuses to start unless
 * ended deliveries outlast the topics' messages by more than a day. The relay and delivery processes read the topics'
 * retention they create topics with.
 */
import test from "ava";
import { randomBytes } from "node:crypto";
import { loadDeliveryConfig } from "../../services/delivery/pipeline/config.js";
import { loadReferralServiceConfig } from "../../services/referral-service/config.js";
import { loadRelayConfig } from "../../services/relay/config.js";
import { ConfigError } from "../../services/shared/runtime/config.js";
import { topicConfigEntries } from "../../services/shared/adapters/kafka-bus.js";

const required = {
  DATABASE_URL: "postgres://u@127.0.0.1:5432/db",
  KAFKA_BROKERS: "127.0.0.1:9092",
  SECRETS_KEY: randomBytes(32).toString("base64"),
  ALLOW_UNAUTHENTICATED_RPC: "true",
};
const DAY_SECONDS = 86_400;

/** The problems the referral service's settings report, or [] when it starts. */
function problemsOf(env: Record<string, string>): string[] {
  try {
    loadReferralServiceConfig({ ...required, ...env });
    return [];
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
}

test("by default ended deliveries are kept 90 days and the topics keep messages 168 hours (Kafka's own default)", (t) => {
  const config = loadReferralServiceConfig(required);
  t.is(config.retention.deliverySeconds, 90 * DAY_SECONDS);
  t.is(loadRelayConfig(required).kafkaTopicRetentionHours, 168);
  t.is(loadDeliveryConfig(required).kafkaTopicRetentionHours, 168);
});

test("the referral service refuses RETENTION_DELIVERY_DAYS x 24 <= KAFKA_TOPIC_RETENTION_HOURS + 24, naming both settings", (t) => {
  // 8 days = 192 h; the topics' 168 h + 24 h = 192 h: not more, refused.
  const refused = problemsOf({ RETENTION_DELIVERY_DAYS: "8" });
  t.is(refused.length, 1);
  t.regex(refused[0]!, /RETENTION_DELIVERY_DAYS \(8\) must outlast KAFKA_TOPIC_RETENTION_HOURS \(168\) by more than 24 hours/);
  t.deepEqual(problemsOf({ RETENTION_DELIVERY_DAYS: "9" }), [], "216 h > 192 h");
  t.deepEqual(problemsOf({ RETENTION_DELIVERY_DAYS: "8", KAFKA_TOPIC_RETENTION_HOURS: "167" }), [], "192 h > 191 h");
  t.is(
    problemsOf({ RETENTION_DELIVERY_DAYS: "30", KAFKA_TOPIC_RETENTION_HOURS: String(30 * 24) }).length,
    1,
    "a month of Kafka needs more than a month of deliveries",
  );
  t.is(loadReferralServiceConfig({ ...required, RETENTION_DELIVERY_DAYS: "9" }).retention.deliverySeconds, 9 * DAY_SECONDS);
});

test("RETENTION_DELIVERY_DAYS is at least 8 and KAFKA_TOPIC_RETENTION_HOURS at least 1", (t) => {
  t.true(problemsOf({ RETENTION_DELIVERY_DAYS: "7", KAFKA_TOPIC_RETENTION_HOURS: "1" }).some((p) => /RETENTION_DELIVERY_DAYS must be >= 8/.test(p)));
  t.throws(() => loadRelayConfig({ ...required, KAFKA_TOPIC_RETENTION_HOURS: "0" }), { message: /KAFKA_TOPIC_RETENTION_HOURS must be >= 1/ });
});

test("a topic the service creates keeps a message its retention, in segments of at most 12 hours", (t) => {
  t.deepEqual(topicConfigEntries(168), [
    { name: "retention.ms", value: String(168 * 3_600_000) },
    { name: "segment.ms", value: String(12 * 3_600_000) },
  ]);
  t.deepEqual(topicConfigEntries(2), [
    { name: "retention.ms", value: String(2 * 3_600_000) },
    { name: "segment.ms", value: String(2 * 3_600_000) },
  ]);
});
