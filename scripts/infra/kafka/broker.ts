/**
 * One single-node KRaft broker: its config files, storage format, launch and readiness wait, and the
 * {@link KafkaBroker} handle with stop() and restart().
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ensureKafkaJars, javaMajorVersion, resolveJava } from "./jars.js";
import {
  baseJvmArgs,
  type BrokerJit,
  cdsPlan,
  discardCdsArchive,
  ensureExitHandler,
  type ExitInfo,
  type JvmLayout,
  type JvmProcess,
  KAFKA_STOP_GRACE_MS,
  type LiveBroker,
  liveBrokers,
  spawnJvm,
  spawnWatchdog,
  stopJvm,
} from "./jvm.js";
import { describeClusterOnce, errorLines, logTail, readLogSince, tcpProbe } from "./probe.js";
import { log, withTimeout } from "./util.js";
import { freePorts } from "../../lib/free-ports.js";

/** How long the broker may take from spawn until a kafkajs admin can describe the cluster. */
const KAFKA_READY_TIMEOUT_MS = 90_000;
/** Pause between readiness probes. */
const KAFKA_READY_POLL_INTERVAL_MS = 50;
/** Upper bound for `StorageTool format` (normally well under a second). */
const KAFKA_FORMAT_TIMEOUT_MS = 60_000;
/** Start attempts: retried with fresh ports if a picked port was taken meanwhile, or without CDS after a JVM crash. */
const KAFKA_START_ATTEMPTS = 3;
/** Log lines after which the broker will never become ready (it is shutting itself down). */
const FATAL_STARTUP_LOG_PATTERN = /Fatal error during \w+ startup|Exiting Kafka due to fatal exception/;
/** Kafka 3.9 brokers need Java 11+. */
const KAFKA_MIN_JAVA_MAJOR = 11;
/** Fixed KRaft node id of the single combined broker/controller. */
const KAFKA_NODE_ID = 1;

/** A started broker. */
export interface KafkaBroker {
  /** Bootstrap address for clients, `127.0.0.1:<port>`. */
  brokers: string;
  /** Broker log file (stdout/stderr of the JVM and its log4j output). */
  logFile: string;
  /** The directory holding the broker's data (`dataDir` when given, else inside its temp dir). */
  dataDir: string;
  /** Stops the broker (SIGTERM, SIGKILL after 15 s) and removes its temp dir (a given `dataDir` is kept). Idempotent. */
  stop: () => Promise<void>;
  /** Stops the JVM and starts it again on the same ports, config and data dir; resolves when ready. */
  restart: () => Promise<void>;
}

/** Options for {@link startKafka}. */
export interface StartKafkaOptions {
  /**
   * Directory for the broker log file (`kafka-broker.log`), kept after stop().
   * Default: inside the broker's temp dir, which stop() deletes.
   */
  logDir?: string | undefined;
  /** Called if the broker JVM exits on its own (not via stop()/restart()). Default: a line on stderr. */
  onUnexpectedExit?: ((info: { code: number | null; signal: NodeJS.Signals | null; logFile: string }) => void) | undefined;
  /** The broker JVM's JIT compilers (jvm.ts BrokerJit): `c1` (default) starts faster, `full` is production's, for benchmarks. */
  jit?: BrokerJit | undefined;
  /** The broker's client port on 127.0.0.1; default: the port `dataDir` was last run with, else a free one. */
  port?: number | undefined;
  /**
   * A directory kept across runs: the broker's data (topics, their messages, consumer offsets) and its
   * `server.properties` (ports, cluster id in the formatted storage). A directory already formatted is reused as
   * it is, so a start with the same `dataDir` is a restart in place: same address (unless `port` says
   * otherwise), same topics. Default: a temporary directory stop() deletes.
   */
  dataDir?: string | undefined;
  /**
   * Log every completed request with its broker-side times (`kafka.request.logger` at DEBUG: total, request queue,
   * local, remote, response queue, send) to the log file: for latency measurements (bench/s26-kafka-rtt.ts). Default off.
   */
  requestLog?: boolean | undefined;
}

/** Kafka cluster ids are 16 random bytes in URL-safe base64 without padding (22 chars). */
function randomClusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString("base64url");
    // Kafka's own Uuid.randomUuid() rejects ids starting with '-' because CLIs would parse them as flags.
    if (!id.startsWith("-")) return id;
  }
}

async function formatStorage(layout: JvmLayout, serverProperties: string, clusterId: string): Promise<void> {
  const attempt = async (cds: ReturnType<typeof cdsPlan>): Promise<ExitInfo> => {
    const jvm = spawnJvm(layout, [...baseJvmArgs(layout), ...cds.args], ["kafka.tools.StorageTool", "format", "-t", clusterId, "-c", serverProperties]);
    const info = await withTimeout(jvm.exited, KAFKA_FORMAT_TIMEOUT_MS);
    if (info) return info;
    jvm.child.kill("SIGKILL");
    return { code: null, signal: "SIGKILL", error: new Error(`timed out after ${KAFKA_FORMAT_TIMEOUT_MS} ms`) };
  };
  const cds = cdsPlan(layout, false);
  let info = await attempt(cds);
  if (info.code !== 0 && cds.archivePath) {
    discardCdsArchive(cds.archivePath);
    info = await attempt({ args: [] });
  }
  if (info.code !== 0) {
    throw new Error(
      `kafka StorageTool format failed (code ${info.code}, signal ${info.signal}${info.error ? `, ${info.error.message}` : ""}); ` +
        `last lines of ${layout.logFile}:\n${logTail(layout.logFile)}`,
    );
  }
}

class BrokerStartError extends Error {
  constructor(
    message: string,
    readonly portInUse: boolean,
    readonly usedCdsArchive: string | undefined,
  ) {
    super(message);
  }
}

/** Spawns `kafka.Kafka` and waits until a kafkajs admin can describe the cluster. */
async function launchBroker(
  layout: JvmLayout,
  serverProperties: string,
  brokerPort: number,
  onUnexpectedExit: (jvm: JvmProcess) => void,
  allowCds: boolean,
  jit: BrokerJit,
): Promise<JvmProcess> {
  const logOffset = existsSync(layout.logFile) ? statSync(layout.logFile).size : 0;
  const cds = allowCds ? cdsPlan(layout, true) : { args: [] };
  const jvm = spawnJvm(layout, [...baseJvmArgs(layout, jit), ...cds.args], ["kafka.Kafka", serverProperties]);
  if (cds.dumpPath && cds.archivePath) jvm.cdsDump = { dumpPath: cds.dumpPath, archivePath: cds.archivePath };
  // Do not keep the event loop alive just for the broker: if the caller forgets stop(), the process
  // still exits and the 'exit' handler kills the JVM.
  jvm.child.unref();
  if (jvm.child.pid !== undefined) jvm.watchdog = spawnWatchdog(jvm.child.pid, layout.workDir);
  void jvm.exited.then(() => {
    if (jvm.ready && !jvm.stopping) onUnexpectedExit(jvm);
  });

  const brokers = `127.0.0.1:${brokerPort}`;
  const deadlineMs = Date.now() + KAFKA_READY_TIMEOUT_MS;
  let fatalLogged = false;
  for (;;) {
    if (jvm.exitInfo) break;
    // Kafka takes seconds to shut down after a fatal startup error; notice it in the log and bail out early.
    if (FATAL_STARTUP_LOG_PATTERN.test(readLogSince(layout.logFile, logOffset))) {
      fatalLogged = true;
      break;
    }
    if ((await tcpProbe(brokerPort)) && (await describeClusterOnce(brokers))) {
      const newLog = readLogSince(layout.logFile, logOffset);
      if (cds.archivePath && !cds.dumpPath && /\[cds[^\]]*\].*Unable to use shared archive/.test(newLog)) {
        discardCdsArchive(cds.archivePath); // stale archive: regenerate on the next start
      }
      jvm.ready = true;
      return jvm;
    }
    if (Date.now() >= deadlineMs) break;
    await withTimeout(jvm.exited, KAFKA_READY_POLL_INTERVAL_MS);
  }

  const died = jvm.exitInfo !== undefined;
  await stopJvm(jvm, fatalLogged ? 0 : KAFKA_STOP_GRACE_MS);
  const newLog = readLogSince(layout.logFile, logOffset);
  const portInUse = /Address already in use|BindException/.test(newLog);
  // Only a JVM crash (signal or hs_err banner) can be blamed on a mapped CDS archive.
  const jvmCrashed = died && (jvm.exitInfo?.signal != null || /A fatal error has been detected by the Java Runtime/.test(newLog));
  const reason = fatalLogged
    ? "Kafka broker hit a fatal error during startup"
    : died
      ? `Kafka broker exited during startup (code ${jvm.exitInfo?.code}, signal ${jvm.exitInfo?.signal}${jvm.exitInfo?.error ? `, ${jvm.exitInfo.error.message}` : ""})`
      : `Kafka broker not ready within ${KAFKA_READY_TIMEOUT_MS} ms`;
  throw new BrokerStartError(
    `${reason}; errors from ${layout.logFile}:\n${errorLines(newLog)}\n--- last lines:\n${logTail(layout.logFile)}`,
    portInUse,
    jvmCrashed && !cds.dumpPath ? cds.archivePath : undefined,
  );
}

/** The broker and controller ports a kept `server.properties` names (written by serverPropertiesText), if it exists. */
function readKeptPorts(serverProperties: string): { brokerPort: number; controllerPort: number } | undefined {
  if (!existsSync(serverProperties)) return undefined;
  const text = readFileSync(serverProperties, "utf8");
  const brokerPort = Number(/^listeners=PLAINTEXT:\/\/127\.0\.0\.1:(\d+),/m.exec(text)?.[1]);
  const controllerPort = Number(/^controller\.quorum\.voters=\d+@127\.0\.0\.1:(\d+)$/m.exec(text)?.[1]);
  return Number.isInteger(brokerPort) && Number.isInteger(controllerPort) && brokerPort > 0 && controllerPort > 0 ? { brokerPort, controllerPort } : undefined;
}

function serverPropertiesText(dataDir: string, brokerPort: number, controllerPort: number): string {
  return `${[
    "# Generated by scripts/infra/kafka.ts: single-node KRaft broker for tests.",
    "process.roles=broker,controller",
    `node.id=${KAFKA_NODE_ID}`,
    `controller.quorum.voters=${KAFKA_NODE_ID}@127.0.0.1:${controllerPort}`,
    `listeners=PLAINTEXT://127.0.0.1:${brokerPort},CONTROLLER://127.0.0.1:${controllerPort}`,
    `advertised.listeners=PLAINTEXT://127.0.0.1:${brokerPort}`,
    "controller.listener.names=CONTROLLER",
    "inter.broker.listener.name=PLAINTEXT",
    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    `log.dirs=${dataDir}`,
    "offsets.topic.replication.factor=1",
    "transaction.state.log.replication.factor=1",
    "transaction.state.log.min.isr=1",
    "auto.create.topics.enable=true",
    "num.partitions=3",
    "group.initial.rebalance.delay.ms=0",
    // Small, test-friendly footprint.
    "num.network.threads=2",
    "num.io.threads=4",
    "log.segment.bytes=67108864",
  ].join("\n")}\n`;
}

const LOG4J_PROPERTIES = `${[
  "# Generated by scripts/infra/kafka.ts: everything to stdout, which is redirected to the broker log file.",
  "log4j.rootLogger=INFO, stdout",
  "log4j.appender.stdout=org.apache.log4j.ConsoleAppender",
  "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout",
  "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n",
  "log4j.logger.kafka.request.logger=WARN",
  "log4j.logger.kafka.network.RequestChannel$=WARN",
  "log4j.logger.kafka.authorizer.logger=WARN",
  "log4j.logger.state.change.logger=WARN",
].join("\n")}\n`;

/**
 * Starts a single-node Kafka 3.9 broker (KRaft, broker+controller in one JVM) on free 127.0.0.1 ports,
 * with a fresh temp data dir, and resolves once a kafkajs admin client can describe the cluster. With
 * `dataDir` the data is kept there and reused on the next start (same ports, same topics); `port` fixes the
 * client port.
 * Fetches the jars on first use (see {@link ensureKafkaJars}). The JVM is killed if this process exits.
 *
 * @param opts.logDir where to write `kafka-broker.log` (kept after stop); default: the temp dir.
 * @returns the bootstrap address plus stop() and restart().
 * @throws if java/mvn is missing, or the broker is not ready within 90 s (message includes the log tail).
 */
export async function startKafka(opts: StartKafkaOptions = {}): Promise<KafkaBroker> {
  const startedAtMs = Date.now();
  const libsDir = await ensureKafkaJars();
  const javaBin = resolveJava();
  const javaMajor = javaMajorVersion(javaBin);
  if (javaMajor !== undefined && javaMajor < KAFKA_MIN_JAVA_MAJOR) {
    throw new Error(`${javaBin} is Java ${javaMajor}; the Kafka 3.9 broker needs Java ${KAFKA_MIN_JAVA_MAJOR}+ (17 recommended)`);
  }

  const workDir = mkdtempSync(path.join(os.tmpdir(), "kafka-broker-"));
  const live: LiveBroker = { workDir };
  liveBrokers.add(live);
  ensureExitHandler();
  const cleanupWorkDir = (): void => {
    liveBrokers.delete(live);
    rmSync(workDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  };

  try {
    const logDir = opts.logDir ? path.resolve(opts.logDir) : workDir;
    mkdirSync(logDir, { recursive: true });
    const layout: JvmLayout = {
      javaBin,
      libsDir,
      cacheDir: path.dirname(libsDir),
      workDir,
      logFile: path.join(logDir, "kafka-broker.log"),
      log4jFile: path.join(workDir, "log4j.properties"),
    };
    // A given dataDir keeps the data and the server.properties (its ports) across runs; otherwise both live in workDir.
    const home = opts.dataDir === undefined ? workDir : path.resolve(opts.dataDir);
    mkdirSync(home, { recursive: true });
    const dataDir = path.join(home, "data");
    const serverProperties = path.join(home, "server.properties");
    const kept = readKeptPorts(serverProperties);
    const formatted = existsSync(path.join(dataDir, "meta.properties"));
    const fixedBrokerPort = opts.port ?? kept?.brokerPort;
    writeFileSync(layout.log4jFile, opts.requestLog ? LOG4J_PROPERTIES.replace("kafka.request.logger=WARN", "kafka.request.logger=DEBUG") : LOG4J_PROPERTIES);

    const onUnexpectedExit = (jvm: JvmProcess): void => {
      const info = { code: jvm.exitInfo?.code ?? null, signal: jvm.exitInfo?.signal ?? null, logFile: layout.logFile };
      if (opts.onUnexpectedExit) opts.onUnexpectedExit(info);
      else log(`broker JVM exited unexpectedly (code ${info.code}, signal ${info.signal}); see ${info.logFile}`);
    };

    let brokerPort = 0;
    let formatMs = 0;
    let allowCds = true;
    for (let attempt = 1; ; attempt += 1) {
      const [pickedBrokerPort, pickedControllerPort] = await freePorts(2);
      brokerPort = fixedBrokerPort ?? pickedBrokerPort ?? 0;
      // A kept controller port is reused while it stays apart from the broker's; a retry after a port clash picks new ones.
      const controllerPort = attempt === 1 && kept !== undefined && kept.controllerPort !== brokerPort ? kept.controllerPort : (pickedControllerPort ?? 0);
      writeFileSync(serverProperties, serverPropertiesText(dataDir, brokerPort, controllerPort === brokerPort ? (pickedControllerPort ?? 0) : controllerPort));
      if (attempt === 1 && formatted) {
        log(`reusing the broker data in ${dataDir}`);
      } else if (attempt === 1) {
        const formatStartMs = Date.now();
        await formatStorage(layout, serverProperties, randomClusterId());
        formatMs = Date.now() - formatStartMs;
      }
      try {
        live.jvm = await launchBroker(layout, serverProperties, brokerPort, onUnexpectedExit, allowCds, opts.jit ?? "c1");
        break;
      } catch (error) {
        // Failure policy: retry only the two recoverable causes (a picked port was grabbed meanwhile, or a
        // broken CDS archive crashed the JVM); anything else, or too many attempts, is reported as is.
        if (!(error instanceof BrokerStartError) || attempt >= KAFKA_START_ATTEMPTS) throw error;
        if (error.usedCdsArchive) {
          discardCdsArchive(error.usedCdsArchive);
          allowCds = false;
        } else if (!error.portInUse || fixedBrokerPort !== undefined) {
          throw error;
        }
        log(`broker start attempt ${attempt} failed (${error.portInUse ? "port in use" : "CDS archive"}); retrying`);
      }
    }

    const brokers = `127.0.0.1:${brokerPort}`;
    log(`broker ${brokers} ready in ${Date.now() - startedAtMs} ms (storage format ${formatMs} ms); log: ${layout.logFile}`);

    // Serialise stop()/restart() so overlapping calls never race on the JVM handle.
    let queue: Promise<void> = Promise.resolve();
    let stopped = false;
    const enqueue = (op: () => Promise<void>): Promise<void> => {
      const next = queue.then(op);
      queue = next.catch(() => {
        // Failure policy: the caller of the failed op gets its rejection; later ops must still run.
      });
      return next;
    };

    return {
      brokers,
      logFile: layout.logFile,
      dataDir,
      stop: () =>
        enqueue(async () => {
          if (stopped) return;
          stopped = true;
          try {
            if (live.jvm) await stopJvm(live.jvm);
          } finally {
            cleanupWorkDir();
          }
        }),
      restart: () =>
        enqueue(async () => {
          if (stopped) throw new Error("restart() called after stop()");
          const restartStartMs = Date.now();
          if (live.jvm) await stopJvm(live.jvm);
          live.jvm = undefined;
          writeFileSync(layout.logFile, `\n===== ${new Date().toISOString()} restart requested by scripts/infra/kafka.ts =====\n`, {
            flag: "a",
          });
          live.jvm = await launchBroker(layout, serverProperties, brokerPort, onUnexpectedExit, allowCds, opts.jit ?? "c1");
          log(`broker ${brokers} restarted in ${Date.now() - restartStartMs} ms`);
        }),
    };
  } catch (error) {
    // Failure policy: nothing half-started may outlive a failed start; kill and clean up, then rethrow.
    if (live.jvm) await stopJvm(live.jvm);
    cleanupWorkDir();
    throw error;
  }
}
