/**
 * kafkajs's own log while Kafka is down, as the processes print it (createKafkaBus's logCreator):
 * one concise line per retry (what failed, the broker, the retry count and delay), never a stack
 * trace, never kafkajs's internal timestamp/logger fields.
 */
import test from "ava";
import { Writable } from "node:stream";
import { pino } from "pino";
import { createKafkaBus, toKafkaLogLine } from "../../services/shared/kafka-bus.js";

function captureLines() {
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n")) if (line.trim() !== "") raw.push(line);
      done();
    },
  });
  return { log: pino({ level: "debug" }, sink), raw };
}

test("Kafka unreachable: each kafkajs retry is one short line without a stack trace", async (t) => {
  const { log, raw } = captureLines();
  const bus = createKafkaBus({ brokers: ["127.0.0.1:9"], clientId: "kafka-log-lines", log, retries: 3 });
  await t.throwsAsync(bus.publish("hearts.events.v1", [{ key: "k", value: Buffer.from("v") }]));
  await bus.close().catch(() => undefined);
  const errors = raw.map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => Number(entry.level) >= 50);
  t.true(errors.length >= 2, `kafkajs logged its retries: ${raw.join("\n")}`);
  for (const line of raw) {
    t.false(/\bat .+:\d+:\d+/.test(line) || line.includes('"stack"'), `no stack trace in ${line}`);
    t.true(line.length < 400, `a short line (${line.length} chars): ${line}`);
  }
  // One line per retry: every error line of the connection attempts names its retry.
  const attempts = errors.filter((entry) => /ECONNREFUSED/.test(String(entry.msg)));
  t.true(attempts.length >= 2);
  for (const entry of attempts) t.regex(String(entry.msg), /ECONNREFUSED 127\.0\.0\.1:9 \(retry \d+, next in \d+ ms\)$/);
  // kafkajs's own per-connection "Connection error" entry repeats the retry's line with a stack: debug only.
  t.false(
    errors.some((entry) => /^Connection error:/.test(String(entry.msg))),
    "no second line per retry",
  );
});

test("toKafkaLogLine: a consumer crash from our own handler keeps its stack; kafkajs's own errors never do", (t) => {
  const own = toKafkaLogLine({ message: "Crash: TypeError: x is undefined", stack: "TypeError: x is undefined\n    at handler (file.ts:1:1)", groupId: "g" });
  t.is(own.message, "Crash: TypeError: x is undefined");
  t.truthy(own.fields.stack);
  const broker = toKafkaLogLine({ message: "Crash: KafkaJSNumberOfRetriesExceeded: Connection error", stack: "x\n    at y", retryCount: 5, retryTime: 1234.5 });
  t.is(broker.message, "Crash: KafkaJSNumberOfRetriesExceeded: Connection error (retry 5, next in 1235 ms)");
  t.false("stack" in broker.fields);
});
