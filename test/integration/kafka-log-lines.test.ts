/**
 * kafkajs's own log while Kafka is down, as the processes print it (createKafkaBus's logCreator): one
 * error line when Kafka goes away, with the first error's cause, and one info line when it answers
 * again (createKafkaOutageLog); every retry in between at debug, one concise line each, never a stack
 * trace, never kafkajs's internal timestamp/logger fields; and no warning at every start about the
 * idempotent producer's bounded retries.
 */
import test from "ava";
import { captureLog } from "../helpers/capture-log.js";
import { createKafkaBus, createKafkaOutageLog, toKafkaLogLine } from "../../services/shared/adapters/kafka-bus.js";

test("Kafka unreachable: one error line with the first error's cause, the retries at debug, no warning, no stack trace", async (t) => {
  const { log, raw } = captureLog("debug");
  const bus = createKafkaBus({ brokers: ["127.0.0.1:9"], clientId: "kafka-log-lines", log, retries: 3 });
  await t.throwsAsync(bus.publish("hearts.events.v1", [{ key: "k", value: Buffer.from("v") }]));
  await t.throwsAsync(bus.publish("hearts.events.v1", [{ key: "k", value: Buffer.from("v") }]));
  await bus.close().catch(() => undefined);
  const entries = raw.map((line) => JSON.parse(line) as Record<string, unknown>);
  const loud = entries.filter((entry) => Number(entry.level) >= 40);
  t.deepEqual(
    loud.map((entry) => entry.level),
    [50],
    `one line for the outage, none per retry and no idempotent-producer warning: ${raw.join("\n")}`,
  );
  t.regex(String(loud[0]?.msg), /^kafka down: .*ECONNREFUSED 127\.0\.0\.1:9/, "it names the first error's cause");
  for (const line of raw) {
    t.false(/\bat .+:\d+:\d+/.test(line) || line.includes('"stack"'), `no stack trace in ${line}`);
    t.true(line.length < 400, `a short line (${line.length} chars): ${line}`);
  }
  // Every retry is still there for whoever turns debug on: one short line each, naming its retry.
  const retries = entries.filter((entry) => entry.level === 20 && /ECONNREFUSED 127\.0\.0\.1:9 \(retry \d+, next in \d+ ms\)$/.test(String(entry.msg)));
  t.true(retries.length >= 2, raw.join("\n"));
});

test("createKafkaOutageLog: one line per state change - down with the first cause, up with the outage's length - the rest at debug", (t) => {
  const { log, raw } = captureLog("debug");
  let now = 1_000;
  const outage = createKafkaOutageLog(log, () => now);
  outage.success();
  outage.failure({ message: "Connection error: connect ECONNREFUSED 10.0.0.1:9092", fields: { broker: "10.0.0.1:9092" } });
  now += 500;
  outage.failure({ message: "Connection error: connect ECONNREFUSED 10.0.0.1:9092 (retry 1)", fields: {} });
  outage.failure({ message: "Failed to connect to seed broker", fields: {} });
  now += 29_500;
  outage.success();
  outage.success();
  outage.failure({ message: "The group coordinator is not available", fields: {} });
  const entries = raw.map((line) => JSON.parse(line) as Record<string, unknown>);
  t.deepEqual(
    entries.map((e) => [e.level, e.msg]),
    [
      [50, "kafka down: Connection error: connect ECONNREFUSED 10.0.0.1:9092"],
      [20, "Connection error: connect ECONNREFUSED 10.0.0.1:9092 (retry 1)"],
      [20, "Failed to connect to seed broker"],
      [30, "kafka answering again"],
      [50, "kafka down: The group coordinator is not available"],
    ],
  );
  t.like(entries[3], { downMs: 30_000, errorsAtDebug: 2, kafkaState: "up" });
  t.like(entries[0], { kafka: { broker: "10.0.0.1:9092" }, kafkaState: "down" });
});

test("toKafkaLogLine: the idempotent producer's bounded-retries warning is quiet (debug)", (t) => {
  t.true(toKafkaLogLine({ message: "Limiting retries for the idempotent producer may invalidate EoS guarantees" }).quiet);
  t.false(toKafkaLogLine({ message: "Failed to connect to seed broker" }).quiet);
});

test("toKafkaLogLine: a consumer crash from our own handler keeps its stack; kafkajs's own errors never do", (t) => {
  const own = toKafkaLogLine({ message: "Crash: TypeError: x is undefined", stack: "TypeError: x is undefined\n    at handler (file.ts:1:1)", groupId: "g" });
  t.is(own.message, "Crash: TypeError: x is undefined");
  t.truthy(own.fields.stack);
  const broker = toKafkaLogLine({ message: "Crash: KafkaJSNumberOfRetriesExceeded: Connection error", stack: "x\n    at y", retryCount: 5, retryTime: 1234.5 });
  t.is(broker.message, "Crash: KafkaJSNumberOfRetriesExceeded: Connection error (retry 5, next in 1235 ms)");
  t.false("stack" in broker.fields);
});
