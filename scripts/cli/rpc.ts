/**
 * The CLI's clients of the referral service: the project's generated Connect clients over THE
 * service transport (services/shared/rpc/service-transport.ts: Connect over HTTP/2, bearer token), as
 * every other tool uses them. Failures become CliErrors that say what to do; the token never appears.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { createRpcClients, type RpcClients } from "../../services/shared/rpc/service-clients.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import type { CliConfig } from "./config.js";
import { CLI_RUN } from "./name.js";
import { CliError } from "./output.js";

/** A deadline per call: a referral service that hangs is reported, not waited on forever. */
const RPC_TIMEOUT_MS = 15_000;

export function createClients(config: CliConfig): RpcClients {
  return createRpcClients(createServiceTransport(config.apiUrl, config.token()));
}

/** Calls `fn`; a ConnectError becomes a CliError naming the cause and the fix. */
export async function callRpc<T>(
  config: CliConfig,
  what: string,
  fn: (opts: { timeoutMs: number }) => Promise<T>,
  hints: { notFound?: string; failedPrecondition?: string } = {},
): Promise<T> {
  try {
    return await fn({ timeoutMs: RPC_TIMEOUT_MS });
  } catch (error) {
    // Failure policy: every RPC failure is reported with its cause and what to try; nothing is retried.
    throw describeRpcError(error, config, what, hints);
  }
}

function describeRpcError(error: unknown, config: CliConfig, what: string, hints: { notFound?: string; failedPrecondition?: string }): CliError {
  if (error instanceof CliError) return error;
  const connect = ConnectError.from(error);
  const unreachable = /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ECONNRESET|socket hang up/i.test(`${connect.message} ${String(connect.cause ?? "")}`);
  if (unreachable || (connect.code === Code.Unavailable && !connect.rawMessage.includes("retry"))) {
    return new CliError(`${what}: cannot reach the referral service at ${config.apiUrl}`, {
      hint: "is `npm start` running? Otherwise pass --api-url or set REFERRAL_SERVICE_URL",
    });
  }
  switch (connect.code) {
    case Code.Unauthenticated:
      return new CliError(`${what}: the referral service refused the service token from ${config.tokenSource()} (unauthenticated)`, {
        hint: "pass a valid token with --token or SERVICE_TOKEN (mint one with `npm run tokens -- create --name cli --scopes admin`)",
      });
    case Code.PermissionDenied:
      return new CliError(`${what}: ${connect.rawMessage}`, {
        hint: "use a token with the scope admin (`npm run tokens -- create --name cli --scopes admin`)",
      });
    case Code.DeadlineExceeded:
      return new CliError(`${what}: the referral service at ${config.apiUrl} did not answer within ${RPC_TIMEOUT_MS / 1000} s`);
    case Code.NotFound:
      return new CliError(`${what}: ${connect.rawMessage}`, { hint: hints.notFound ?? `check the server id (\`${CLI_RUN} servers list\` shows them)` });
    case Code.FailedPrecondition:
      return new CliError(`${what}: ${connect.rawMessage}`, { hint: hints.failedPrecondition });
    default:
      return new CliError(`${what}: ${connect.rawMessage} (${Code[connect.code]})`);
  }
}
