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
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  accessSync,
  closeSync,
  constants as fsConstants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import { freePorts } from '../lib/free-ports.js';

const THIS_FILE = fileURLToPath(import.meta.url);
const REPO_ROOT = path.resolve(path.dirname(THIS_FILE), '..', '..');
const POM_FILE = path.join(REPO_ROOT, 'scripts', 'infra', 'kafka', 'pom.xml');

/** How long the broker may take from spawn until a kafkajs admin can describe the cluster. */
const KAFKA_READY_TIMEOUT_MS = 90_000;
/** Grace period after SIGTERM before the broker gets SIGKILL. */
const KAFKA_STOP_GRACE_MS = 15_000;
/** Pause between readiness probes. */
const KAFKA_READY_POLL_INTERVAL_MS = 50;
/** Upper bound for `StorageTool format` (normally well under a second). */
const KAFKA_FORMAT_TIMEOUT_MS = 60_000;
/** Upper bound for the one-off Maven fetch of the broker jars. */
const MAVEN_FETCH_TIMEOUT_MS = 15 * 60_000;
/** Per-probe TCP connect timeout while waiting for the listener. */
const KAFKA_TCP_PROBE_TIMEOUT_MS = 500;
/** kafkajs timeouts used by the readiness probe. */
const KAFKA_PROBE_CONNECTION_TIMEOUT_MS = 1_000;
const KAFKA_PROBE_REQUEST_TIMEOUT_MS = 2_000;
/** Start attempts: retried with fresh ports if a picked port was taken meanwhile, or without CDS after a JVM crash. */
const KAFKA_START_ATTEMPTS = 3;
/** Broker JVM heap. */
const KAFKA_HEAP_MAX_MB = 512;
const KAFKA_HEAP_INITIAL_MB = 256;
/** How much of the broker log is quoted in startup errors. */
const KAFKA_LOG_TAIL_BYTES = 8_192;
const KAFKA_LOG_TAIL_LINES = 40;
const KAFKA_ERROR_LINES_MAX = 15;
/** Log lines quoted as the likely cause of a failed start. */
const KAFKA_ERROR_LINE_PATTERN = /\] (ERROR|FATAL) |^Caused by: |^Exception in thread|A fatal error has been detected/;
/** Log lines after which the broker will never become ready (it is shutting itself down). */
const FATAL_STARTUP_LOG_PATTERN = /Fatal error during \w+ startup|Exiting Kafka due to fatal exception/;
/** Oldest JDK whose `-XX:ArchiveClassesAtExit` (dynamic AppCDS) we rely on. */
const CDS_MIN_JAVA_MAJOR = 13;
/** Kafka 3.9 brokers need Java 11+. */
const KAFKA_MIN_JAVA_MAJOR = 11;
/** Watchdog: how many 100 ms steps to wait for a SIGKILLed JVM to vanish before deleting its temp dir. */
const WATCHDOG_REAP_WAIT_STEPS = 50;
/** Fixed KRaft node id of the single combined broker/controller. */
const KAFKA_NODE_ID = 1;
const LOG_PREFIX = 'kafka:';

/** A started broker. */
export interface KafkaBroker {
  /** Bootstrap address for clients, `127.0.0.1:<port>`. */
  brokers: string;
  /** Broker log file (stdout/stderr of the JVM and its log4j output). */
  logFile: string;
  /** Stops the broker (SIGTERM, SIGKILL after 15 s) and removes its temp dir. Idempotent. */
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
}

interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error | undefined;
}

/** One running JVM plus the helpers tied to its lifetime. */
interface JvmProcess {
  child: ChildProcess;
  exited: Promise<ExitInfo>;
  exitInfo?: ExitInfo | undefined;
  /** `sh` that SIGKILLs the JVM when this Node process dies without running exit handlers. */
  watchdog?: ChildProcess | undefined;
  /** AppCDS dump written when this JVM exits, promoted to the shared archive after a clean exit. */
  cdsDump?: { dumpPath: string; archivePath: string } | undefined;
  /** Set while stop()/restart() is deliberately ending this JVM. */
  stopping: boolean;
  /** Set once the broker answered the readiness probe; exits before that are startup failures. */
  ready: boolean;
}

interface LiveBroker {
  jvm?: JvmProcess | undefined;
  workDir: string;
}

/** Brokers that the process 'exit' handler must kill. */
const liveBrokers = new Set<LiveBroker>();
let exitHandlerInstalled = false;

function log(message: string): void {
  process.stderr.write(`${LOG_PREFIX} ${message}\n`);
}

/** Resolves with `value` or with `undefined` after `ms`, without keeping a timer alive afterwards. */
async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const timeout = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), ms);
    });
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function readKafkaVersion(): string {
  const pom = readFileSync(POM_FILE, 'utf8');
  const match = /<kafka\.version>\s*([^<\s]+)\s*<\/kafka\.version>/.exec(pom);
  if (!match?.[1]) throw new Error(`cannot find <kafka.version> in ${POM_FILE}`);
  return match[1];
}

function cachePaths(): { version: string; cacheDir: string; libsDir: string; markerFile: string; pomSha256: string } {
  const version = readKafkaVersion();
  const cacheDir = path.join(REPO_ROOT, '.cache', `kafka-${version}`);
  return {
    version,
    cacheDir,
    libsDir: path.join(cacheDir, 'libs'),
    markerFile: path.join(cacheDir, 'libs.complete.json'),
    pomSha256: createHash('sha256').update(readFileSync(POM_FILE)).digest('hex'),
  };
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, fsConstants.X_OK);
    return statSync(file).isFile();
  } catch {
    // Failure policy: a missing/unreadable candidate just means "not this one"; the caller tries the next.
    return false;
  }
}

function findOnPath(command: string): string | undefined {
  for (const dir of (process.env['PATH'] ?? '').split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, command))) return path.join(dir, command);
  }
  return undefined;
}

/** The `java` launcher Kafka's own scripts would use: $JAVA_HOME/bin/java, else `java` on PATH. */
function resolveJava(): string {
  const javaHome = process.env['JAVA_HOME'];
  if (javaHome && isExecutable(path.join(javaHome, 'bin', 'java'))) return path.join(javaHome, 'bin', 'java');
  const onPath = findOnPath('java');
  if (onPath) return onPath;
  throw new Error(
    'java not found (checked $JAVA_HOME/bin/java and PATH): the local Kafka broker needs a JDK/JRE 17 ' +
      '(e.g. `apt-get install -y openjdk-17-jdk-headless`)',
  );
}

/** Major Java version read from `<java home>/release` (no JVM spawn); undefined if unknown. */
function javaMajorVersion(javaBin: string): number | undefined {
  try {
    const release = readFileSync(path.join(path.dirname(path.dirname(realpathSync(javaBin))), 'release'), 'utf8');
    const version = /^JAVA_VERSION="([^"]+)"/m.exec(release)?.[1];
    if (!version) return undefined;
    const parts = version.split('.').map((p) => Number.parseInt(p, 10));
    const major = parts[0] === 1 ? parts[1] : parts[0];
    return Number.isFinite(major) ? major : undefined;
  } catch {
    // Failure policy: unknown JDK layout -> unknown version; we then skip the version-gated optimisations.
    return undefined;
  }
}

function readMarker(markerFile: string): { pomSha256?: string } | undefined {
  try {
    return JSON.parse(readFileSync(markerFile, 'utf8')) as { pomSha256?: string };
  } catch {
    // Failure policy: a missing or corrupt marker means "cache incomplete", which triggers a re-fetch.
    return undefined;
  }
}

function isCacheComplete(paths: ReturnType<typeof cachePaths>): boolean {
  return (
    readMarker(paths.markerFile)?.pomSha256 === paths.pomSha256 &&
    existsSync(path.join(paths.libsDir, `kafka_2.13-${paths.version}.jar`))
  );
}

/** Runs a command, collecting its output; rejects with the output on failure or timeout. */
function runCommand(command: string, args: string[], timeoutMs: number, cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`failed to run ${command}: ${error.message}`));
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`${command} ${args.join(' ')} failed (code ${code}, signal ${signal}):\n${output.slice(-4000)}`));
    });
  });
}

/**
 * Ensures the Kafka broker jars (kafka_2.13 and its runtime classpath, plus slf4j-reload4j) are in
 * `<repo>/.cache/kafka-<version>/libs`, fetching them from Maven Central with `mvn` on first use.
 * A marker file (tied to the pom's hash) makes later calls a no-op.
 *
 * @returns absolute path of the directory holding all jars (use as `-cp '<dir>/*'`).
 * @throws if the jars are missing and `java` or `mvn` is not installed, or the Maven fetch fails.
 */
export async function ensureKafkaJars(): Promise<string> {
  const paths = cachePaths();
  if (isCacheComplete(paths)) return paths.libsDir;

  resolveJava(); // Maven needs a JDK too: fail early with the clearer message.
  const mvn = findOnPath('mvn');
  if (!mvn) {
    throw new Error(
      `mvn not found on PATH: it is needed once to fetch the Kafka ${paths.version} jars from Maven Central ` +
        '(e.g. `apt-get install -y maven`)',
    );
  }
  const startedAtMs = Date.now();
  log(`fetching Kafka ${paths.version} jars from Maven Central (first run only)...`);
  mkdirSync(paths.cacheDir, { recursive: true });
  const stagingDir = path.join(paths.cacheDir, `libs.staging-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    await runCommand(
      mvn,
      [
        '-q',
        '-B',
        '-Dstyle.color=never',
        '-f',
        POM_FILE,
        'dependency:copy-dependencies',
        `-Dkafka.libs.dir=${stagingDir}`,
      ],
      MAVEN_FETCH_TIMEOUT_MS,
      REPO_ROOT,
    );
    const mainJar = `kafka_2.13-${paths.version}.jar`;
    if (!existsSync(path.join(stagingDir, mainJar))) {
      throw new Error(`Maven finished but ${mainJar} is not in ${stagingDir}; check ${POM_FILE}`);
    }
    // Another process may have completed the same fetch meanwhile: keep its result, drop ours.
    if (!isCacheComplete(paths)) {
      rmSync(paths.libsDir, { recursive: true, force: true });
      renameSync(stagingDir, paths.libsDir);
      removeCdsArchives(paths.cacheDir); // archives are only valid for the jars they were built from
      writeFileSync(
        paths.markerFile,
        `${JSON.stringify({ kafkaVersion: paths.version, pomSha256: paths.pomSha256, fetchedAt: new Date().toISOString() })}\n`,
      );
    }
  } finally {
    rmSync(stagingDir, { recursive: true, force: true });
  }
  const jarCount = readdirSync(paths.libsDir).filter((f) => f.endsWith('.jar')).length;
  log(`Kafka ${paths.version}: ${jarCount} jars ready in ${paths.libsDir} (${((Date.now() - startedAtMs) / 1000).toFixed(1)} s)`);
  return paths.libsDir;
}

function removeCdsArchives(cacheDir: string): void {
  for (const name of readdirSync(cacheDir)) {
    if (name.endsWith('.jsa')) rmSync(path.join(cacheDir, name), { force: true });
  }
}

/** Kafka cluster ids are 16 random bytes in URL-safe base64 without padding (22 chars). */
function randomClusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString('base64url');
    // Kafka's own Uuid.randomUuid() rejects ids starting with '-' because CLIs would parse them as flags.
    if (!id.startsWith('-')) return id;
  }
}

function tcpProbe(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(KAFKA_TCP_PROBE_TIMEOUT_MS, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function describeClusterOnce(brokers: string): Promise<boolean> {
  const admin = new Kafka({
    clientId: 'local-kafka-ready-probe',
    brokers: [brokers],
    logLevel: logLevel.NOTHING,
    connectionTimeout: KAFKA_PROBE_CONNECTION_TIMEOUT_MS,
    requestTimeout: KAFKA_PROBE_REQUEST_TIMEOUT_MS,
    retry: { retries: 0 },
  }).admin();
  try {
    await admin.connect();
    const cluster = await admin.describeCluster();
    return cluster.brokers.length > 0 && cluster.controller !== null;
  } catch {
    // Failure policy: errors are expected while the broker is still starting; the caller polls until its deadline.
    return false;
  } finally {
    await admin.disconnect().catch(() => {
      // Failure policy: disconnecting a probe that never connected may fail; nothing to clean up then.
    });
  }
}

function readLogSince(logFile: string, offset: number): string {
  let fd: number | undefined;
  try {
    fd = openSync(logFile, 'r');
    const length = Math.max(0, statSync(logFile).size - offset);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, offset);
    return buffer.toString('utf8');
  } catch {
    // Failure policy: the log is only used for diagnostics; an unreadable log yields no extra detail.
    return '';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** The first ERROR/FATAL/exception lines of a log excerpt: usually the real cause, unlike the shutdown tail. */
function errorLines(logText: string): string {
  const lines = logText.split('\n').filter((line) => KAFKA_ERROR_LINE_PATTERN.test(line));
  return lines.length > 0 ? lines.slice(0, KAFKA_ERROR_LINES_MAX).join('\n') : '(no ERROR lines)';
}

function logTail(logFile: string): string {
  let fd: number | undefined;
  try {
    fd = openSync(logFile, 'r');
    const size = statSync(logFile).size;
    const length = Math.min(size, KAFKA_LOG_TAIL_BYTES);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    return buffer.toString('utf8').split('\n').slice(-KAFKA_LOG_TAIL_LINES).join('\n');
  } catch (error) {
    // Failure policy: the tail only decorates an error message; say why it is missing instead of failing.
    return `(could not read ${logFile}: ${(error as Error).message})`;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function ensureExitHandler(): void {
  if (exitHandlerInstalled) return;
  exitHandlerInstalled = true;
  process.on('exit', () => {
    for (const broker of liveBrokers) {
      broker.jvm?.child.kill('SIGKILL');
      broker.jvm?.watchdog?.kill('SIGKILL');
      if (broker.jvm?.cdsDump) rmSync(broker.jvm.cdsDump.dumpPath, { force: true });
      try {
        rmSync(broker.workDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 20 });
      } catch {
        // Failure policy: the process is exiting; a leftover temp dir is harmless and must not mask the exit.
      }
    }
  });
}

/**
 * Starts an `sh` that SIGKILLs `pid` once its stdin reaches EOF, i.e. when this Node process (or worker
 * thread) goes away in any way, including SIGKILL or worker.terminate() where no 'exit' handler runs; it then
 * removes `workDir`. Ignores INT/TERM/HUP so a Ctrl-C to the process group leaves it waiting for the EOF.
 */
function spawnWatchdog(pid: number, workDir: string): ChildProcess | undefined {
  const script = [
    "trap '' INT TERM HUP",
    'read _ignored',
    `kill -9 ${pid} 2>/dev/null`,
    // Wait (bounded) until the JVM is dead (gone or a zombie) so it cannot write while we delete its files.
    `n=0; while [ $n -lt ${WATCHDOG_REAP_WAIT_STEPS} ] && [ -r /proc/${pid}/stat ] && ! grep -q ') Z' /proc/${pid}/stat 2>/dev/null; do sleep 0.1; n=$((n+1)); done`,
    'rm -rf -- "$1"',
  ].join('\n');
  try {
    const watchdog = spawn('/bin/sh', ['-c', script, 'kafka-watchdog', workDir], {
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    watchdog.once('error', () => {
      // Failure policy: the watchdog is a best-effort extra; the 'exit' handler still covers normal exits.
    });
    watchdog.unref();
    (watchdog.stdin as net.Socket | null)?.unref();
    return watchdog;
  } catch {
    // Failure policy: best effort, as above; /bin/sh missing must not prevent the broker from starting.
    return undefined;
  }
}

interface JvmLayout {
  javaBin: string;
  libsDir: string;
  cacheDir: string;
  workDir: string;
  logFile: string;
  log4jFile: string;
}

/** JVM flags tuned for a fast-starting, small test broker. */
function baseJvmArgs(layout: JvmLayout): string[] {
  return [
    `-Xmx${KAFKA_HEAP_MAX_MB}m`,
    `-Xms${KAFKA_HEAP_INITIAL_MB}m`,
    '-XX:+UseSerialGC',
    '-XX:TieredStopAtLevel=1', // C1 only: ~0.8 s faster startup; plenty for test traffic
    '-XX:-UsePerfData',
    `-XX:ErrorFile=${path.join(layout.workDir, 'hs_err_pid%p.log')}`,
    '-Djava.awt.headless=true',
    `-Dlog4j.configuration=${pathToFileUrl(layout.log4jFile)}`,
    `-Dkafka.logs.dir=${path.dirname(layout.logFile)}`,
  ];
}

function pathToFileUrl(file: string): string {
  return new URL(`file://${path.resolve(file)}`).href;
}

/**
 * AppCDS flags: map the shared archive if there is one, else (for the broker only) dump one at exit.
 * The archive name is keyed on the JDK so a JDK change never maps an incompatible archive.
 */
function cdsPlan(layout: JvmLayout, canDump: boolean): { args: string[]; archivePath?: string; dumpPath?: string } {
  if (process.env['KAFKA_CDS'] === '0') return { args: [] };
  const major = javaMajorVersion(layout.javaBin);
  if (major === undefined || major < CDS_MIN_JAVA_MAJOR) return { args: [] };
  let jdkKey: string;
  try {
    const real = realpathSync(layout.javaBin);
    jdkKey = createHash('sha256').update(`${real}:${statSync(real).mtimeMs}:${os.arch()}`).digest('hex').slice(0, 12);
  } catch {
    // Failure policy: cannot identify the JDK -> no archive; startup is just slower.
    return { args: [] };
  }
  const archivePath = path.join(layout.cacheDir, `broker-cds-${jdkKey}.jsa`);
  if (existsSync(archivePath)) return { args: [`-XX:SharedArchiveFile=${archivePath}`], archivePath };
  if (!canDump) return { args: [] };
  const dumpPath = `${archivePath}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  // -Xlog:cds=off hides ~100 "Pre JDK 6 class not supported by CDS" lines (log4j 1.x classes) at dump time.
  return { args: [`-XX:ArchiveClassesAtExit=${dumpPath}`, '-Xlog:cds=off'], archivePath, dumpPath };
}

/** Publishes a finished AppCDS dump if the JVM exited by itself (a SIGKILLed dump may be truncated). */
function promoteCdsDump(jvm: JvmProcess): void {
  const dump = jvm.cdsDump;
  if (!dump) return;
  jvm.cdsDump = undefined;
  try {
    const cleanExit = jvm.exitInfo?.signal === null && jvm.exitInfo.code !== null;
    if (cleanExit && existsSync(dump.dumpPath) && statSync(dump.dumpPath).size > 0 && !existsSync(dump.archivePath)) {
      renameSync(dump.dumpPath, dump.archivePath);
    }
  } catch {
    // Failure policy: the archive is only a startup-time optimisation; without it the next start is slower.
  } finally {
    rmSync(dump.dumpPath, { force: true });
  }
}

/** A crash while mapping a bad archive must not wedge every later start: drop the archive. */
function discardCdsArchive(archivePath: string | undefined): void {
  if (archivePath) rmSync(archivePath, { force: true });
}

function spawnJvm(layout: JvmLayout, jvmArgs: string[], mainArgs: string[]): JvmProcess {
  const logFd = openSync(layout.logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(layout.javaBin, [...jvmArgs, '-cp', `${layout.libsDir}${path.sep}*`, ...mainArgs], {
      cwd: layout.workDir,
      stdio: ['ignore', logFd, logFd],
      env: process.env,
    });
  } finally {
    closeSync(logFd);
  }
  const jvm: JvmProcess = {
    child,
    stopping: false,
    ready: false,
    exited: new Promise<ExitInfo>((resolve) => {
      child.once('error', (error) => {
        jvm.exitInfo ??= { code: null, signal: null, error };
        resolve(jvm.exitInfo);
      });
      child.once('exit', (code, signal) => {
        jvm.exitInfo ??= { code, signal };
        resolve(jvm.exitInfo);
      });
    }),
  };
  return jvm;
}

async function formatStorage(layout: JvmLayout, serverProperties: string, clusterId: string): Promise<void> {
  const attempt = async (cds: ReturnType<typeof cdsPlan>): Promise<ExitInfo> => {
    const jvm = spawnJvm(layout, [...baseJvmArgs(layout), ...cds.args], [
      'kafka.tools.StorageTool',
      'format',
      '-t',
      clusterId,
      '-c',
      serverProperties,
    ]);
    const info = await withTimeout(jvm.exited, KAFKA_FORMAT_TIMEOUT_MS);
    if (info) return info;
    jvm.child.kill('SIGKILL');
    return { code: null, signal: 'SIGKILL', error: new Error(`timed out after ${KAFKA_FORMAT_TIMEOUT_MS} ms`) };
  };
  const cds = cdsPlan(layout, false);
  let info = await attempt(cds);
  if (info.code !== 0 && cds.archivePath) {
    discardCdsArchive(cds.archivePath);
    info = await attempt({ args: [] });
  }
  if (info.code !== 0) {
    throw new Error(
      `kafka StorageTool format failed (code ${info.code}, signal ${info.signal}${info.error ? `, ${info.error.message}` : ''}); ` +
        `last lines of ${layout.logFile}:\n${logTail(layout.logFile)}`,
    );
  }
}

/** Sends SIGTERM, waits up to `graceMs`, then SIGKILL; cleans up the watchdog and CDS dump. */
async function stopJvm(jvm: JvmProcess, graceMs: number = KAFKA_STOP_GRACE_MS): Promise<void> {
  jvm.stopping = true;
  if (!jvm.exitInfo) {
    if (graceMs > 0) jvm.child.kill('SIGTERM');
    if (graceMs <= 0 || !(await withTimeout(jvm.exited, graceMs))) {
      jvm.child.kill('SIGKILL');
      await jvm.exited;
    }
  }
  jvm.watchdog?.kill('SIGKILL');
  promoteCdsDump(jvm);
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
): Promise<JvmProcess> {
  const logOffset = existsSync(layout.logFile) ? statSync(layout.logFile).size : 0;
  const cds = allowCds ? cdsPlan(layout, true) : { args: [] };
  const jvm = spawnJvm(layout, [...baseJvmArgs(layout), ...cds.args], ['kafka.Kafka', serverProperties]);
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
    ? 'Kafka broker hit a fatal error during startup'
    : died
      ? `Kafka broker exited during startup (code ${jvm.exitInfo?.code}, signal ${jvm.exitInfo?.signal}${jvm.exitInfo?.error ? `, ${jvm.exitInfo.error.message}` : ''})`
      : `Kafka broker not ready within ${KAFKA_READY_TIMEOUT_MS} ms`;
  throw new BrokerStartError(
    `${reason}; errors from ${layout.logFile}:\n${errorLines(newLog)}\n--- last lines:\n${logTail(layout.logFile)}`,
    portInUse,
    jvmCrashed && !cds.dumpPath ? cds.archivePath : undefined,
  );
}

function serverPropertiesText(dataDir: string, brokerPort: number, controllerPort: number): string {
  return `${[
    '# Generated by scripts/infra/kafka.ts: single-node KRaft broker for tests.',
    'process.roles=broker,controller',
    `node.id=${KAFKA_NODE_ID}`,
    `controller.quorum.voters=${KAFKA_NODE_ID}@127.0.0.1:${controllerPort}`,
    `listeners=PLAINTEXT://127.0.0.1:${brokerPort},CONTROLLER://127.0.0.1:${controllerPort}`,
    `advertised.listeners=PLAINTEXT://127.0.0.1:${brokerPort}`,
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=PLAINTEXT',
    'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
    `log.dirs=${dataDir}`,
    'offsets.topic.replication.factor=1',
    'transaction.state.log.replication.factor=1',
    'transaction.state.log.min.isr=1',
    'auto.create.topics.enable=true',
    'num.partitions=3',
    'group.initial.rebalance.delay.ms=0',
    // Small, test-friendly footprint.
    'num.network.threads=2',
    'num.io.threads=4',
    'log.segment.bytes=67108864',
  ].join('\n')}\n`;
}

const LOG4J_PROPERTIES = `${[
  '# Generated by scripts/infra/kafka.ts: everything to stdout, which is redirected to the broker log file.',
  'log4j.rootLogger=INFO, stdout',
  'log4j.appender.stdout=org.apache.log4j.ConsoleAppender',
  'log4j.appender.stdout.layout=org.apache.log4j.PatternLayout',
  'log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n',
  'log4j.logger.kafka.request.logger=WARN',
  'log4j.logger.kafka.network.RequestChannel$=WARN',
  'log4j.logger.kafka.authorizer.logger=WARN',
  'log4j.logger.state.change.logger=WARN',
].join('\n')}\n`;

/**
 * Starts a single-node Kafka 3.9 broker (KRaft, broker+controller in one JVM) on free 127.0.0.1 ports,
 * with a fresh temp data dir, and resolves once a kafkajs admin client can describe the cluster.
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

  const workDir = mkdtempSync(path.join(os.tmpdir(), 'kafka-broker-'));
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
      logFile: path.join(logDir, 'kafka-broker.log'),
      log4jFile: path.join(workDir, 'log4j.properties'),
    };
    const dataDir = path.join(workDir, 'data');
    const serverProperties = path.join(workDir, 'server.properties');
    writeFileSync(layout.log4jFile, LOG4J_PROPERTIES);

    const onUnexpectedExit = (jvm: JvmProcess): void => {
      const info = { code: jvm.exitInfo?.code ?? null, signal: jvm.exitInfo?.signal ?? null, logFile: layout.logFile };
      if (opts.onUnexpectedExit) opts.onUnexpectedExit(info);
      else log(`broker JVM exited unexpectedly (code ${info.code}, signal ${info.signal}); see ${info.logFile}`);
    };

    let brokerPort = 0;
    let formatMs = 0;
    let allowCds = true;
    for (let attempt = 1; ; attempt += 1) {
      const [pickedBrokerPort, controllerPort] = await freePorts(2);
      brokerPort = pickedBrokerPort ?? 0;
      writeFileSync(serverProperties, serverPropertiesText(dataDir, brokerPort, controllerPort ?? 0));
      if (attempt === 1) {
        const formatStartMs = Date.now();
        await formatStorage(layout, serverProperties, randomClusterId());
        formatMs = Date.now() - formatStartMs;
      }
      try {
        live.jvm = await launchBroker(layout, serverProperties, brokerPort, onUnexpectedExit, allowCds);
        break;
      } catch (error) {
        // Failure policy: retry only the two recoverable causes (a picked port was grabbed meanwhile, or a
        // broken CDS archive crashed the JVM); anything else, or too many attempts, is reported as is.
        if (!(error instanceof BrokerStartError) || attempt >= KAFKA_START_ATTEMPTS) throw error;
        if (error.usedCdsArchive) {
          discardCdsArchive(error.usedCdsArchive);
          allowCds = false;
        } else if (!error.portInUse) {
          throw error;
        }
        log(`broker start attempt ${attempt} failed (${error.portInUse ? 'port in use' : 'CDS archive'}); retrying`);
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
          if (stopped) throw new Error('restart() called after stop()');
          const restartStartMs = Date.now();
          if (live.jvm) await stopJvm(live.jvm);
          live.jvm = undefined;
          writeFileSync(layout.logFile, `\n===== ${new Date().toISOString()} restart requested by scripts/infra/kafka.ts =====\n`, {
            flag: 'a',
          });
          live.jvm = await launchBroker(layout, serverProperties, brokerPort, onUnexpectedExit, allowCds);
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

async function main(argv: string[]): Promise<void> {
  const command = argv[0];
  if (command === 'fetch') {
    process.stdout.write(`${await ensureKafkaJars()}\n`);
    return;
  }
  if (command === 'start') {
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
            log('broker stopped');
            process.exit(0);
          },
          (error: unknown) => {
            log(`stop failed: ${(error as Error).message}`);
            process.exit(1);
          },
        );
    };
    process.on('SIGINT', shutdown);
    process.on('SIGTERM', shutdown);
    const broker = await brokerPromise;
    if (stopping) return;
    process.stdout.write(`KAFKA_BROKERS=${broker.brokers}\n`);
    log('running in the foreground; send SIGINT (Ctrl-C) or SIGTERM to stop');
    return;
  }
  process.stderr.write('usage: npx tsx scripts/infra/kafka.ts <start|fetch>\n');
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
