import { randomUUID } from "node:crypto";
import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";
import { toConnectError } from "./errors.js";
import type { Logger } from "../runtime/log.js";
import type { Metrics } from "../runtime/metrics.js";
import { ERROR_TEXT } from "../values/contract.js";
import { REQUEST_ID_HEADER } from "../values/wire.js";

/** Header carrying the request id across the gateway and internal RPCs (services/shared/values/wire.ts is its home). */
export { REQUEST_ID_HEADER } from "../values/wire.js";

/**
 * The owner an RPC runs for, set by the auth interceptor (services/access/auth-interceptor.ts) when
 * the call acts for a dashboard session; undefined for service tokens (which see every server).
 * Handlers of RPCs with the `own` owner policy narrow their answers to this owner's servers. It lives
 * here, beside the server interceptor, so the service folders that read it do not import services/access.
 */
export const OWNER_SCOPE = createContextKey<string | undefined>(undefined, { description: "owner id of the dashboard session" });

/**
 * Who calls an RPC, as the access layer names the caller (set by the auth interceptor): `owner:<owner id>` for a
 * dashboard session, `token:<token name>` for a service token. What audit rows record (services/voter-data).
 */
export const CALLER_PRINCIPAL = createContextKey<string>("unknown", { description: "the caller, as the audit names it" });

/**
 * Server interceptor: request id, one log line per RPC, metrics, and the error
 * table (domain errors -> Connect codes; the database unavailable -> Unavailable;
 * unknown errors -> bare "internal error"). A line has one `msg` (what happened);
 * a refusal's text goes under `reason`, so JSON tools that keep one key per name
 * lose neither.
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
      const thrownHere = !(error instanceof ConnectError);
      if (thrownHere && mapped.rawMessage === ERROR_TEXT.internal) {
        log.error({ requestId, route, err: error }, "rpc failed with an internal error");
      } else if (thrownHere && mapped.code === Code.Unavailable) {
        log.warn({ requestId, route, code: mapped.code, reason: mapped.rawMessage, err: error }, "rpc refused: a dependency is unavailable");
      } else {
        log.info({ requestId, route, code: mapped.code, reason: mapped.rawMessage }, "rpc rejected");
      }
      throw mapped;
    }
  };
}
