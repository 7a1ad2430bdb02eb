/** Watching a starting broker: TCP and kafkajs readiness probes, and the log excerpts quoted in errors. */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import net from "node:net";
import { Kafka, logLevel } from "kafkajs";

/** Per-probe TCP connect timeout while waiting for the listener. */
const KAFKA_TCP_PROBE_TIMEOUT_MS = 500;
/** kafkajs timeouts used by the readiness probe. */
const KAFKA_PROBE_CONNECTION_TIMEOUT_MS = 1_000;
const KAFKA_PROBE_REQUEST_TIMEOUT_MS = 2_000;
/** How much of the broker log is quoted in startup errors. */
const KAFKA_LOG_TAIL_BYTES = 8_192;
const KAFKA_LOG_TAIL_LINES = 40;
const KAFKA_ERROR_LINES_MAX = 15;
/** Log lines quoted as the likely cause of a failed start. */
const KAFKA_ERROR_LINE_PATTERN = /\] (ERROR|FATAL) |^Caused by: |^Exception in thread|A fatal error has been detected/;

export function tcpProbe(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(KAFKA_TCP_PROBE_TIMEOUT_MS, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

export async function describeClusterOnce(brokers: string): Promise<boolean> {
  const admin = new Kafka({
    clientId: "local-kafka-ready-probe",
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

export function readLogSince(logFile: string, offset: number): string {
  let fd: number | undefined;
  try {
    fd = openSync(logFile, "r");
    const length = Math.max(0, statSync(logFile).size - offset);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, offset);
    return buffer.toString("utf8");
  } catch {
    // Failure policy: the log is only used for diagnostics; an unreadable log yields no extra detail.
    return "";
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** The first ERROR/FATAL/exception lines of a log excerpt: usually the real cause, unlike the shutdown tail. */
export function errorLines(logText: string): string {
  const lines = logText.split("\n").filter((line) => KAFKA_ERROR_LINE_PATTERN.test(line));
  return lines.length > 0 ? lines.slice(0, KAFKA_ERROR_LINES_MAX).join("\n") : "(no ERROR lines)";
}

export function logTail(logFile: string): string {
  let fd: number | undefined;
  try {
    fd = openSync(logFile, "r");
    const size = statSync(logFile).size;
    const length = Math.min(size, KAFKA_LOG_TAIL_BYTES);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    return buffer.toString("utf8").split("\n").slice(-KAFKA_LOG_TAIL_LINES).join("\n");
  } catch (error) {
    // Failure policy: the tail only decorates an error message; say why it is missing instead of failing.
    return `(could not read ${logFile}: ${(error as Error).message})`;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
