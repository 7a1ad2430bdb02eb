import { Code, ConnectError } from "@connectrpc/connect";
import { ConfigError } from "../services/shared/runtime/config.js";
import { NIL_UUID } from "../services/shared/values/ids.js";
import type { Logger } from "../services/shared/runtime/log.js";
import type { RpcClients } from "../services/shared/rpc/service-clients.js";
import type { ReferralServiceClients } from "./clients.js";

/** How long the start-up check keeps asking a referral service that does not answer yet. */
export const TOKEN_CHECK_WAIT_MS = 6_000;
/** Pause between two asks while the referral service is unreachable. */
const TOKEN_CHECK_RETRY_MS = 500;
/** Deadline of one ask. */
const TOKEN_CHECK_CALL_TIMEOUT_MS = 1_500;

/** What the start-up check found. */
export type TokenCheck = "accepted" | "unreachable";

/** The clients the start-up check asks through (the gateway's own, with its token). */
export interface TokenCheckClients {
  admin: Pick<ReferralServiceClients["admin"], "resolveSigningKeys" | "resolvePullKeys" | "getServer">;
  claims: Pick<ReferralServiceClients["claims"], "checkVote">;
  referral: Pick<ReferralServiceClients["referral"], "recordClick">;
  hearts: Pick<ReferralServiceClients["hearts"], "getReceipt">;
  /** The dashboard's access client (owners' login links and sessions). */
  access: Pick<RpcClients["access"], "getDashboardSession">;
}

/** One scope the gateway's routes need, what needs it, and a call that needs exactly that scope and writes nothing. */
interface RouteScope {
  scope: string;
  routes: string;
  probe(clients: TokenCheckClients, call: { timeoutMs: number }): Promise<unknown>;
}

/**
 * THE gateway's scopes, one row per scope its routes need (DEFAULT_GATEWAY_SCOPES in services/access/bootstrap.ts
 * grants the same list; test/unit/gateway-token-scopes.test.ts holds them equal). Each probe asks with an empty or
 * nil argument: the auth interceptor checks the scope first (permission_denied), then the call finds nothing.
 */
export const GATEWAY_ROUTE_SCOPES: readonly RouteScope[] = [
  { scope: "ingest", routes: "ingest", probe: (c, call) => c.admin.resolveSigningKeys({ serverId: NIL_UUID }, call) },
  { scope: "pull", routes: "the signed pull API", probe: (c, call) => c.admin.resolvePullKeys({ serverId: NIL_UUID }, call) },
  { scope: "claims", routes: "the plugins' check/claim API (/api/votes)", probe: (c, call) => c.claims.checkVote({ claimKey: "" }, call) },
  { scope: "clicks:record", routes: "referral links (/r/...)", probe: (c, call) => c.referral.recordClick({ serverId: NIL_UUID, referrerIdentity: "" }, call) },
  { scope: "dashboard", routes: "the owners' dashboard", probe: (c, call) => c.access.getDashboardSession({ sessionToken: "" }, call) },
  { scope: "receipts", routes: "receipt pages (/receipts/...)", probe: (c, call) => c.hearts.getReceipt({ token: "" }, call) },
];

/**
 * At start, before the gateway listens: one cheap authenticated RPC per scope the gateway's routes need
 * (GATEWAY_ROUTE_SCOPES) tells whether the referral service accepts REFERRAL_SERVICE_TOKEN and lets it do what
 * every route needs. Refused (wrong or revoked token), or lacking any of the scopes: ConfigError naming every missing
 * scope in one line, so the gateway exits 2 instead of starting, reporting ready, and answering those routes with
 * errors. Unreachable for `waitMs`: logged, and the gateway starts not ready (its /readyz names the cause).
 */
export async function checkServiceToken(
  deps: {
    clients: TokenCheckClients;
    log: Logger;
    referralServiceUrl: string;
    /** DASHBOARD_TOKEN is set: the operator dashboard needs the token's `admin` scope, checked here too (a warning). */
    operatorDashboard?: boolean;
  },
  opts: { waitMs?: number; retryMs?: number } = {},
): Promise<TokenCheck> {
  const deadline = Date.now() + (opts.waitMs ?? TOKEN_CHECK_WAIT_MS);
  const call = { timeoutMs: TOKEN_CHECK_CALL_TIMEOUT_MS };
  for (;;) {
    try {
      const missing = await missingScopes(deps.clients, call);
      if (missing.length > 0) throw new ConfigError([lacksScopesText(missing)]);
      deps.log.info({ referralService: deps.referralServiceUrl }, "the referral service accepts the gateway's service token");
      if (deps.operatorDashboard) await warnWithoutOperatorScope({ admin: deps.clients.admin, log: deps.log });
      return "accepted";
    } catch (error) {
      if (error instanceof ConfigError) throw error;
      const refused = refusalOf(error, deps.referralServiceUrl);
      if (refused !== undefined) throw new ConfigError([refused]);
      // Failure policy: the referral service not answering yet (starting, restarting) is not the token's fault:
      // ask again until the wait ends, then start not ready (/readyz shows why) rather than exit.
      if (Date.now() >= deadline) {
        deps.log.warn(
          { referralService: deps.referralServiceUrl, err: error },
          "the referral service did not answer at start, so the service token is not checked yet; the gateway is not ready until it answers",
        );
        return "unreachable";
      }
      await new Promise((resolve) => setTimeout(resolve, opts.retryMs ?? TOKEN_CHECK_RETRY_MS));
    }
  }
}

/**
 * The rows of GATEWAY_ROUTE_SCOPES the token lacks (each probe refused with permission_denied). The ingest probe runs
 * first and alone: its refusal of the token itself, or the service not answering, is thrown to the caller.
 */
async function missingScopes(clients: TokenCheckClients, call: { timeoutMs: number }): Promise<RouteScope[]> {
  const [first, ...rest] = GATEWAY_ROUTE_SCOPES as [RouteScope, ...RouteScope[]];
  const lacks = async (row: RouteScope): Promise<boolean> => {
    try {
      await row.probe(clients, call);
      return false;
    } catch (error) {
      if (error instanceof ConnectError && error.code === Code.PermissionDenied) return true;
      // Failure policy: any other answer (not found, invalid argument) means the scope let the call through.
      if (error instanceof ConnectError && error.code !== Code.Unauthenticated && error.code !== Code.Unavailable && error.code !== Code.DeadlineExceeded)
        return false;
      throw error;
    }
  };
  const lacking = [(await lacks(first)) ? first : undefined];
  for (const [row, missing] of await Promise.all(rest.map(async (row) => [row, await lacks(row)] as const))) lacking.push(missing ? row : undefined);
  return lacking.filter((row): row is RouteScope => row !== undefined);
}

/** The one-line problem of a token lacking scopes: each missing scope with what needs it, and how to fix it. */
function lacksScopesText(missing: readonly RouteScope[]): string {
  const listed = missing.map((row) => `"${row.scope}" (${row.routes})`).join(", ");
  return (
    `REFERRAL_SERVICE_TOKEN lacks scopes the gateway's routes need: ${listed}; ` +
    `give it ${GATEWAY_ROUTE_SCOPES.map((row) => row.scope).join(", ")} (GATEWAY_SERVICE_TOKEN_SCOPES or \`npm run tokens\`)`
  );
}

/** The one-line reason when `error` is the referral service refusing the token itself; undefined otherwise. */
function refusalOf(error: unknown, url: string): string | undefined {
  if (!(error instanceof ConnectError) || error.code !== Code.Unauthenticated) return undefined;
  return (
    `REFERRAL_SERVICE_TOKEN is refused by the referral service at ${url} (${error.rawMessage}): ` +
    "it must equal the referral service's GATEWAY_SERVICE_TOKEN, or be a token made with `npm run tokens -- create`"
  );
}

/** The operator dashboard reads every server: a token that may not (no `read`/`admin`) gets a warning at start, not a silent 403 later. */
async function warnWithoutOperatorScope(deps: { admin: Pick<ReferralServiceClients["admin"], "getServer">; log: Logger }): Promise<void> {
  try {
    await deps.admin.getServer({ serverId: NIL_UUID }, { timeoutMs: TOKEN_CHECK_CALL_TIMEOUT_MS });
  } catch (error) {
    // Failure policy: only a refusal of the scope is news here (the nil server is never found); anything else is ignored.
    if (error instanceof ConnectError && error.code === Code.PermissionDenied) {
      deps.log.warn(
        "DASHBOARD_TOKEN is set, but REFERRAL_SERVICE_TOKEN lacks the admin scope the operator dashboard needs: operators will be refused; " +
          "add admin to GATEWAY_SERVICE_TOKEN_SCOPES (owners' dashboard sessions work without it)",
      );
    }
  }
}
