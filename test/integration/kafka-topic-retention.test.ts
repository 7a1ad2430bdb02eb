/**
 * KAFKA_TOPIC_RETENTION_HOURS on the real broker: a topic the service creates keeps a message that long
 * (retention.ms, with segments of at most 12 hours), and an existing topic that keeps messages longer (or for ever) is
 * reported at start by an error line naming the topic and both values: a heart event it replays after its delivery
 * was removed by retention would be delivered again.
 */
import test from "ava";
import { randomBytes } from "node:crypto";
import kafkajs from "kafkajs";
import { ensureTopics, MAX_TOPIC_SEGMENT_MS } from "../../services/shared/adapters/kafka-bus.js";
import { captureLog } from "../helpers/capture-log.js";

const { Kafka, logLevel, ConfigResourceTypes } = kafkajs;
const brokers = (process.env.KAFKA_BROKERS ?? "").split(",");
const HOUR_MS = 3_600_000;

const admin = new Kafka({ clientId: "topic-retention-test", brokers, logLevel: logLevel.NOTHING }).admin();
test.before(async () => {
  await admin.connect();
});
test.after.always(async () => {
  await admin.disconnect();
});

const topicName = (what: string) => `retention-test-${what}-${randomBytes(5).toString("hex")}`;

/** The topic's retention.ms and segment.ms as the broker reports them. */
async function configOf(topic: string): Promise<Record<string, string>> {
  const described = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ["retention.ms", "segment.ms"] }],
  });
  return Object.fromEntries(described.resources[0]!.configEntries.map((e) => [e.configName, e.configValue]));
}

test("a topic the service creates keeps messages KAFKA_TOPIC_RETENTION_HOURS (retention.ms), in segments of at most 12 hours", async (t) => {
  const [short, long] = [topicName("short"), topicName("long")];
  t.teardown(() => admin.deleteTopics({ topics: [short, long] }));
  const captured = captureLog();
  t.deepEqual(await ensureTopics(brokers, [short], 1, { topicRetentionHours: 5, log: captured.log }), []);
  t.deepEqual(await configOf(short), { "retention.ms": String(5 * HOUR_MS), "segment.ms": String(5 * HOUR_MS) });
  await ensureTopics(brokers, [long], 1, { topicRetentionHours: 168, log: captured.log });
  t.deepEqual(await configOf(long), { "retention.ms": String(168 * HOUR_MS), "segment.ms": String(MAX_TOPIC_SEGMENT_MS) });
  t.deepEqual(captured.lines, [], "a topic created here is never reported");
  // Started again with the same setting: the topics exist and match it; nothing to report.
  t.deepEqual(await ensureTopics(brokers, [short], 1, { topicRetentionHours: 5, log: captured.log }), []);
  t.deepEqual(captured.lines, []);
});

test("an existing topic that keeps messages longer than KAFKA_TOPIC_RETENTION_HOURS, or for ever, is reported by an error line naming it and both values; a shorter one is not", async (t) => {
  const [month, forever, day] = [topicName("month"), topicName("forever"), topicName("day")];
  t.teardown(() => admin.deleteTopics({ topics: [month, forever, day] }));
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic: month, numPartitions: 1, configEntries: [{ name: "retention.ms", value: String(30 * 24 * HOUR_MS) }] },
      { topic: forever, numPartitions: 1, configEntries: [{ name: "retention.ms", value: "-1" }] },
      { topic: day, numPartitions: 1, configEntries: [{ name: "retention.ms", value: String(24 * HOUR_MS) }] },
    ],
  });
  const captured = captureLog();
  const reported = await ensureTopics(brokers, [month, forever, day], 1, { topicRetentionHours: 168, log: captured.log });
  const settingMs = 168 * HOUR_MS;
  t.deepEqual(
    reported.sort((a, b) => a.topic.localeCompare(b.topic)),
    [
      { topic: forever, retentionMs: -1, settingMs },
      { topic: month, retentionMs: 30 * 24 * HOUR_MS, settingMs },
    ].sort((a, b) => a.topic.localeCompare(b.topic)),
  );
  const errors = captured.lines.filter((l) => l.level === 50);
  t.is(errors.length, 2, "one error line per topic");
  const line = errors.find((l) => l.topic === month)!;
  t.like(line, { topic: month, retentionMs: 30 * 24 * HOUR_MS, kafkaTopicRetentionMs: settingMs });
  t.regex(
    String(line.msg),
    new RegExp(`kafka topic ${month} keeps messages longer \\(retention.ms ${30 * 24 * HOUR_MS}\\) than KAFKA_TOPIC_RETENTION_HOURS \\(${settingMs} ms\\)`),
  );
  t.false(
    captured.lines.some((l) => l.topic === day),
    "a topic keeping messages a day is within the setting",
  );
  // The topics keep their own configuration: the service never alters one it did not create.
  t.is((await configOf(month))["retention.ms"], String(30 * 24 * HOUR_MS));
});
