/**
 * Raw Kafka round trip through the project's own bus (createKafkaBus, the delivery consumer's session):
 * one message at a time with random gaps; per message the publish ack time and publish -> batch handler time.
 * Usage: KAFKA_BROKERS=host:port npx tsx bench/s26-kafka-rtt.ts [count]
 *    or: npx tsx bench/s26-kafka-rtt.ts [count] --start=c1|full [--request-log]
 *        (a broker of its own with that JIT, start-up time printed; --request-log prints the broker's own request times)
 * Before measuring, a warm-up of 200 batches of 20 messages (a broker that served the bench's earlier phases is warm).
 */
import { createKafkaBus, ensureTopics } from "../services/shared/adapters/kafka-bus.js";
import { createLogger } from "../services/shared/runtime/log.js";
import { deliveryConsumerSession } from "../services/delivery/pipeline/consumer.js";
import { startKafka } from "../scripts/infra/kafka.js";

const startArg = process.argv.find((a) => a.startsWith("--start="))?.slice("--start=".length);
const t00 = Date.now();
const broker = startArg === "c1" || startArg === "full" ? await startKafka({ jit: startArg, requestLog: process.argv.includes("--request-log") }) : undefined;
const startMs = Date.now() - t00;
const brokers = (broker?.brokers ?? process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(",");
const count = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 60);
const topic = `s26-rtt-${process.pid}-${Date.now()}`;
const log = createLogger("rtt", "warn");
await ensureTopics(brokers, [topic]);
const pub = createKafkaBus({ brokers, clientId: "rtt-pub", log });
const sub = createKafkaBus({ brokers, clientId: "rtt-sub", log });
await pub.connectPublisher?.();
const seen = new Map<string, number>();
let wake: (() => void) | undefined;
const s = await sub.subscribe({
  groupId: `${topic}-g`,
  topics: [topic],
  fromBeginning: true,
  session: deliveryConsumerSession(6_000),
  batchHandler: async (ms) => {
    const t = performance.now();
    for (const m of ms) seen.set(Buffer.from(m.value).toString(), t);
    wake?.();
  },
});
await new Promise((r) => setTimeout(r, 3000));
for (let i = 0; i < 200; i++)
  await pub.publish(
    topic,
    Array.from({ length: 20 }, (_, j) => ({ key: `w${j}`, value: Buffer.from(`w${i}-${j}`) })),
  );
await new Promise((r) => setTimeout(r, 1000));
const ack: number[] = [];
const rtt: number[] = [];
for (let i = 0; i < count; i++) {
  await new Promise((r) => setTimeout(r, 40 + Math.random() * 120));
  const id = `m${i}`;
  const t0 = performance.now();
  const got = new Promise<void>((r) => (wake = r));
  await pub.publish(topic, [{ key: `k${i % 13}`, value: Buffer.from(id) }]);
  const t1 = performance.now();
  while (!seen.has(id)) await Promise.race([got, new Promise((r) => setTimeout(r, 2000))]);
  ack.push(t1 - t0);
  rtt.push(seen.get(id)! - t0);
}
const q = (a: number[], p: number) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))]!;
console.log(
  JSON.stringify({
    jit: startArg ?? "external",
    startMs,
    n: count,
    ackP50: q(ack, 0.5).toFixed(2),
    ackP90: q(ack, 0.9).toFixed(2),
    rttP50: q(rtt, 0.5).toFixed(2),
    rttP90: q(rtt, 0.9).toFixed(2),
    rttMax: Math.max(...rtt).toFixed(1),
  }),
);
await s.stop();
await pub.close();
await sub.close();
if (broker && process.argv.includes("--request-log")) {
  const { readFileSync } = await import("node:fs");
  console.log(
    readFileSync(broker.logFile, "utf8")
      .split("\n")
      .filter((l) => /Completed request:.*(PRODUCE|FETCH)/i.test(l))
      .slice(-400)
      .join("\n"),
  );
}
await broker?.stop();
process.exit(0);
