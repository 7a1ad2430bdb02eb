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
 *   npx tsx scripts/infra/kafka.ts start   # prints KAFKA_BROKERS=127.0.0.1:<port>, runs until SIGINT/SIGTERM
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

export { ensureKafkaJars } from "./kafka/jars.js";
export { startKafka, type KafkaBroker, type StartKafkaOptions } from "./kafka/broker.js";

const THIS_FILE = fileURLToPath(import.meta.url);

async function main(argv: string[]): Promise<void> {
  const command = argv[0];
  if (command === "fetch") {
    process.stdout.write(`${await ensureKafkaJars()}\n`);
    return;
  }
  if (command === "start") {
    const keepAlive = setInterval(() => {}, 1 << 30);
    const brokerPromise = startKafka({
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
  process.stderr.write("usage: npx tsx scripts/infra/kafka.ts <start|fetch>\n");
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
