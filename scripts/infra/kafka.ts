/**
 * Single-node Apache Kafka 3.9.x broker (KRaft, combined broker+controller) for tests and
 * local runs, without Docker: the broker jars come from Maven Central through
 * `scripts/infra/kafka/pom.xml` and run with the local JDK.
 *
 * Library use:
 *   const kafka = await startKafka();   // kafka.brokers === '127.0.0.1:<port>'
 *   await kafka.restart();              // same ports + data, e.g. for a mid-stream restart test
 *   await kafka.stop();
 *
 * CLI use:
 *   npx tsx scripts/infra/kafka.ts fetch   # only download/cache the jars
 *   npx tsx scripts/infra/kafka.ts start [--port <port>] [--data-dir <dir>]
 *                                          # prints KAFKA_BROKERS=127.0.0.1:<port>, runs until SIGINT/SIGTERM
 *
 * `--port` fixes the client port (default: a free one). `--data-dir` keeps the broker's data (topics,
 * messages, consumer offsets) and its ports in `<dir>` across runs (default: a temporary directory deleted
 * on exit); starting again with the same `--data-dir` is a restart in place: the same `KAFKA_BROKERS`
 * (the port the directory was last run with, unless `--port` says otherwise) and the same topics, so the
 * relay and the delivery service reconnect by themselves.
 *
 * Startup speed: the JVM runs C1-only with SerialGC, and the first broker run dumps an
 * AppCDS archive of the loaded classes into the cache dir; later runs map it, which roughly
 * halves JVM startup. Set KAFKA_CDS=0 to disable the archive.
 */
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ensureKafkaJars } from "./kafka/jars.js";
import { startKafka } from "./kafka/broker.js";
import { log } from "./kafka/util.js";
import { parseStartFlags } from "../lib/start-flags.js";

export { ensureKafkaJars } from "./kafka/jars.js";
export { startKafka, type KafkaBroker, type StartKafkaOptions } from "./kafka/broker.js";

const THIS_FILE = fileURLToPath(import.meta.url);
const USAGE = "usage: npx tsx scripts/infra/kafka.ts fetch | start [--port <port>] [--data-dir <dir>]\n";

async function main(argv: string[]): Promise<void> {
  const command = argv[0];
  if (command === "fetch") {
    process.stdout.write(`${await ensureKafkaJars()}\n`);
    return;
  }
  if (command === "start") {
    const flags = parseStartFlags(argv.slice(1));
    if ("problem" in flags) {
      process.stderr.write(`${flags.problem}\n${USAGE}`);
      process.exitCode = 2;
      return;
    }
    const keepAlive = setInterval(() => {}, 1 << 30);
    const brokerPromise = startKafka({
      ...flags,
      onUnexpectedExit: ({ code, signal, logFile }) => {
        log(`broker JVM exited unexpectedly (code ${code}, signal ${signal}); see ${logFile}`);
        process.exit(1);
      },
    });
    // Handlers go in before the broker is up so a signal during startup still ends in a clean stop.
    let stopping = false;
    const shutdown = (signal: NodeJS.Signals): void => {
      if (stopping) return;
      stopping = true;
      log(`${signal} received, stopping broker...`);
      brokerPromise
        .then((broker) => broker.stop())
        .then(
          () => {
            clearInterval(keepAlive);
            log("broker stopped");
            process.exit(0);
          },
          (error: unknown) => {
            log(`stop failed: ${(error as Error).message}`);
            process.exit(1);
          },
        );
    };
    process.on("SIGINT", shutdown);
    process.on("SIGTERM", shutdown);
    const broker = await brokerPromise;
    if (stopping) return;
    process.stdout.write(`KAFKA_BROKERS=${broker.brokers}\n`);
    log("running in the foreground; send SIGINT (Ctrl-C) or SIGTERM to stop");
    return;
  }
  process.stderr.write(USAGE);
  process.exitCode = 2;
}

const invokedDirectly = (() => {
  try {
    return process.argv[1] !== undefined && realpathSync(process.argv[1]) === realpathSync(THIS_FILE);
  } catch {
    // Failure policy: if argv[1] cannot be resolved we are not the entry point; stay a plain library.
    return false;
  }
})();

if (invokedDirectly) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    log((error as Error).message);
    process.exit(1);
  });
}
