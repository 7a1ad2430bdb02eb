import { randomUUID } from "node:crypto";
import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { toConnectError } from "./errors.js";
import type { Logger } from "./log.js";
import type { Metrics } from "./metrics.js";
import { ERROR_TEXT } from "./contract.js";

/** Header carrying the request id across the gateway and internal RPCs. */
export const REQUEST_ID_HEADER = "x-request-id";

/**
 * Server interceptor: request id, one log line per RPC, metrics, and the error
 * table (domain errors -> Connect codes; unknown errors -> bare "internal error").
 */
export function createServerInterceptor(log: Logger, metrics: Metrics): Interceptor {
  return (next) => async (req) => {
    const requestId = req.header.get(REQUEST_ID_HEADER) ?? randomUUID();
    const route = `${req.service.typeName}/${req.method.name}`;
    const started = process.hrtime.bigint();
    try {
      const res = await next(req);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.observe(route, "ok", seconds);
      log.debug({ requestId, route, ms: Math.round(seconds * 1000) }, "rpc ok");
      return res;
    } catch (error) {
      const mapped = toConnectError(error);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.observe(route, mapped.code, seconds);
      if (!(error instanceof ConnectError) && mapped.rawMessage === ERROR_TEXT.internal) {
        log.error({ requestId, route, err: error }, "rpc failed with an internal error");
      } else {
        log.info({ requestId, route, code: mapped.code, msg: mapped.rawMessage }, "rpc rejected");
      }
      throw mapped;
    }
  };
}
