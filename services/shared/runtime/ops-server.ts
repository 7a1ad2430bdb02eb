import http from "node:http";
import type { AddressInfo } from "node:net";
import { createOpsHandler, type ReadinessCheck } from "./health.js";
import { sendJson } from "./send-json.js";
import type { Logger } from "./log.js";
import type { Metrics } from "./metrics.js";
import { CONTRACT_ERRORS, ERROR_TEXT } from "../values/contract.js";

/**
 * A small HTTP/1.1 server with /healthz, /readyz and /metrics, for processes
 * whose main port is not HTTP/1.1 (the relay, the delivery service, and the
 * referral service, whose RPC port speaks HTTP/2 only).
 */
export function createOpsServer(opts: {
  checks: ReadinessCheck[];
  metrics: Metrics;
  isDraining?: () => boolean;
  answerWithinMs?: number;
  /** Logs each check's change between ok and down once. */
  log?: Logger;
  nowMs?: () => number;
}) {
  const ops = createOpsHandler(opts);
  const server = http.createServer((req, res) => {
    ops(req, res).then(
      (handled) => {
        if (!handled) sendJson(res, CONTRACT_ERRORS.notFound.status, { error: ERROR_TEXT.notFound });
      },
      () => {
        // Failure policy: an ops endpoint failing answers 500 rather than hanging the probe.
        if (!res.headersSent) sendJson(res, CONTRACT_ERRORS.internal.status, { error: ERROR_TEXT.internal });
      },
    );
  });
  return {
    server,
    listen: (port: number, host = "127.0.0.1") =>
      new Promise<number>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
      }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
