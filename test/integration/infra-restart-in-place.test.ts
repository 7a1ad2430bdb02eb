/**
 * The infra scripts restart in place (scripts/infra/kafka.ts, scripts/infra/postgres.ts): started again
 * with the same data directory, a broker keeps its address and its topics' messages, and PostgreSQL its
 * port and its data, so the processes reconnect by themselves. Meanwhile a bus logs one line when Kafka
 * goes away and one when it is back (createKafkaOutageLog), not one per retry. Each server here is this
 * file's own; the shared ones are never touched.
 */
import test from "ava";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import pg from "pg";
import { startKafka } from "../../scripts/infra/kafka.js";
import { startPostgres } from "../../scripts/infra/postgres.js";
import { createKafkaBus, ensureTopics } from "../../services/shared/adapters/kafka-bus.js";
import { eventually } from "../helpers/eventually.js";
import { captureLog } from "./gateway-stack.js";

const keptDir = (what: string) => join(tmpdir(), `${what}-kept-${randomBytes(4).toString("hex")}`);

test("Kafka started again with the same data directory: same address, the topic's messages kept; a bus logs one line down and one line up", async (t) => {
  t.timeout(300_000);
  const dataDir = keptDir("kafka");
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const first = await startKafka({ dataDir });
  let second: Awaited<ReturnType<typeof startKafka>> | undefined;
  const captured = captureLog("debug");
  const bus = createKafkaBus({ brokers: [first.brokers], clientId: "restart-in-place", log: captured.log, retries: 2 });
  try {
    const topic = "restart.in.place.v1";
    await ensureTopics([first.brokers], [topic], 1);
    const kafka = new Kafka({ clientId: "restart-in-place-test", brokers: [first.brokers], logLevel: logLevel.NOTHING });
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic, acks: -1, messages: ["one", "two", "three"].map((value) => ({ key: "k", value })) });
    await producer.disconnect();
    await bus.ping();

    await first.stop();
    // Kafka is away: the bus notices (its readiness ping fails) and says so once.
    await eventually(
      async () => {
        await bus.ping().catch(() => undefined);
        return captured.lines.some((line) => String(line.msg).startsWith("kafka down: "));
      },
      { timeoutMs: 60_000 },
    );

    second = await startKafka({ dataDir });
    t.is(second.brokers, first.brokers, "the same address");
    const consumer = kafka.consumer({ groupId: `restart-${randomBytes(4).toString("hex")}` });
    const seen: string[] = [];
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void seen.push(message.value?.toString() ?? "") });
    await eventually(() => seen.length >= 3, { timeoutMs: 60_000 });
    await consumer.disconnect();
    t.deepEqual(seen, ["one", "two", "three"], "the topic's messages are kept");

    await eventually(
      async () => {
        await bus.ping();
        return true;
      },
      { timeoutMs: 60_000 },
    );
    const states = captured.lines.filter((line) => line.kafkaState !== undefined).map((line) => [line.level, line.kafkaState]);
    t.deepEqual(
      states,
      [
        [50, "down"],
        [30, "up"],
      ],
      "one line per state change",
    );
    t.false(
      captured.lines.some((line) => Number(line.level) >= 40 && line.kafkaState === undefined),
      "no other warning or error line",
    );
  } finally {
    await bus.close().catch(() => undefined);
    await first.stop();
    await second?.stop();
  }
});

test("PostgreSQL started again with the same data directory: same port (remembered), the data kept", async (t) => {
  t.timeout(120_000);
  const dataDir = keptDir("pg");
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const first = await startPostgres({ dataDir });
  let second: Awaited<ReturnType<typeof startPostgres>> | undefined;
  try {
    const client = new pg.Client({ connectionString: first.url });
    await client.connect();
    await client.query("CREATE TABLE kept (value text); INSERT INTO kept VALUES ('still here')");
    await client.end();
    await first.stop();

    second = await startPostgres({ dataDir });
    t.is(second.port, first.port, "the same port, remembered by the data directory");
    t.is(second.url, first.url);
    const again = new pg.Client({ connectionString: second.url });
    await again.connect();
    const { rows } = await again.query<{ value: string }>("SELECT value FROM kept");
    await again.end();
    t.deepEqual(rows, [{ value: "still here" }]);
  } finally {
    await first.stop();
    await second?.stop();
  }
});
