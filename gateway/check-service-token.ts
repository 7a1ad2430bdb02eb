import { Code, ConnectError } from "@connectrpc/connect";
import { ConfigError } from "../services/shared/config.js";
import { NIL_UUID } from "../services/shared/ids.js";
import type { Logger } from "../services/shared/log.js";
import type { ReferralServiceClients } from "./clients.js";

/** How long the start-up check keeps asking a referral service that does not answer yet. */
export const TOKEN_CHECK_WAIT_MS = 6_000;
/** Pause between two asks while the referral service is unreachable. */
const TOKEN_CHECK_RETRY_MS = 500;
/** Deadline of one ask. */
const TOKEN_CHECK_CALL_TIMEOUT_MS = 1_500;

/** What the start-up check found. */
export type TokenCheck = "accepted" | "unreachable";

/**
 * At start, before the gateway listens: one cheap authenticated RPC (ResolveSigningKeys of the nil
 * server id, the ingest path's own lookup, scope `ingest`) tells whether the referral service accepts
 * REFERRAL_SERVICE_TOKEN. Refused (wrong or revoked token) or lacking the scope: ConfigError, so the
 * gateway exits 2 with the reason in one line instead of answering 500 to every public request.
 * Unreachable for `waitMs`: logged, and the gateway starts not ready (its /readyz names the cause).
 */
export async function checkServiceToken(
  deps: {
    admin: Pick<ReferralServiceClients["admin"], "resolveSigningKeys" | "getServer">;
    log: Logger;
    referralServiceUrl: string;
    /** DASHBOARD_TOKEN is set: the operator dashboard needs the token's `admin` scope, checked here too (a warning). */
    operatorDashboard?: boolean;
    /** When given, the public receipt pages' scope `receipts` is checked too (a warning: ingest still works without it). */
    hearts?: Pick<ReferralServiceClients["hearts"], "getReceipt">;
  },
  opts: { waitMs?: number; retryMs?: number } = {},
): Promise<TokenCheck> {
  const deadline = Date.now() + (opts.waitMs ?? TOKEN_CHECK_WAIT_MS);
  for (;;) {
    try {
      await deps.admin.resolveSigningKeys({ serverId: NIL_UUID }, { timeoutMs: TOKEN_CHECK_CALL_TIMEOUT_MS });
      deps.log.info({ referralService: deps.referralServiceUrl }, "the referral service accepts the gateway's service token");
      if (deps.operatorDashboard) await warnWithoutOperatorScope(deps);
      if (deps.hearts) await warnWithoutReceiptsScope({ hearts: deps.hearts, log: deps.log });
      return "accepted";
    } catch (error) {
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

/** The one-line reason when `error` is the referral service refusing the token itself; undefined otherwise. */
function refusalOf(error: unknown, url: string): string | undefined {
  if (!(error instanceof ConnectError)) return undefined;
  if (error.code === Code.Unauthenticated) {
    return (
      `REFERRAL_SERVICE_TOKEN is refused by the referral service at ${url} (${error.rawMessage}): ` +
      "it must equal the referral service's GATEWAY_SERVICE_TOKEN, or be a token made with `npm run tokens -- create`"
    );
  }
  if (error.code === Code.PermissionDenied) {
    return (
      `REFERRAL_SERVICE_TOKEN lacks a scope the gateway needs (${error.rawMessage}): ` +
      "give it ingest, pull, claims, clicks:record, dashboard and receipts (GATEWAY_SERVICE_TOKEN_SCOPES or `npm run tokens`)"
    );
  }
  return undefined;
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

/**
 * The voters' receipt pages need the `receipts` scope (a gateway token made before it existed lacks it): a warning at
 * start, not a silent 500 on every receipt. An empty token names no receipt, so the call reads nothing.
 */
async function warnWithoutReceiptsScope(deps: { hearts: Pick<ReferralServiceClients["hearts"], "getReceipt">; log: Logger }): Promise<void> {
  try {
    await deps.hearts.getReceipt({ token: "" }, { timeoutMs: TOKEN_CHECK_CALL_TIMEOUT_MS });
  } catch (error) {
    // Failure policy: only a refusal of the scope is news here (the empty token is never found); anything else is ignored.
    if (error instanceof ConnectError && error.code === Code.PermissionDenied) {
      deps.log.warn(
        "REFERRAL_SERVICE_TOKEN lacks the receipts scope: voters' receipt pages (/receipts/...) will answer 500; " +
          "add receipts to GATEWAY_SERVICE_TOKEN_SCOPES (or make a token with it: `npm run tokens`)",
      );
    }
  }
}
