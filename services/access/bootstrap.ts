import { ConfigError, type EnvReader } from "../shared/runtime/config.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import type { Logger } from "../shared/runtime/log.js";
import { readServiceToken } from "../shared/runtime/process-config.js";
import { isScope, type Scope } from "./scopes.js";
import { countActiveServiceTokens, ensureServiceToken } from "./service-tokens.js";

/** The gateway token's scopes unless GATEWAY_SERVICE_TOKEN_SCOPES says otherwise (add admin for the operator dashboard). */
export const DEFAULT_GATEWAY_SCOPES: readonly Scope[] = ["ingest", "pull", "claims", "clicks:record", "dashboard", "receipts"];

/** A token a setting provides, upserted by name at start (only its SHA-256 is stored). */
export interface BootstrapToken {
  name: string;
  token: string;
  scopes: readonly Scope[];
}

/** The referral service's access settings. */
export interface AccessSettings {
  bootstrapTokens: BootstrapToken[];
  /** ALLOW_UNAUTHENTICATED_RPC (development only): calls without a token act as admin. */
  allowUnauthenticated: boolean;
}

/**
 * Reads ADMIN_SERVICE_TOKEN (name "admin", scope admin), GATEWAY_SERVICE_TOKEN (name
 * "gateway", GATEWAY_SERVICE_TOKEN_SCOPES) and ALLOW_UNAUTHENTICATED_RPC.
 */
export function readAccessSettings(r: EnvReader): AccessSettings {
  const bootstrapTokens: BootstrapToken[] = [];
  const admin = readServiceToken(r, "ADMIN_SERVICE_TOKEN", { required: false });
  if (admin !== undefined) bootstrapTokens.push({ name: "admin", token: admin, scopes: ["admin"] });
  const gateway = readServiceToken(r, "GATEWAY_SERVICE_TOKEN", { required: false });
  const gatewayScopes = r.list("GATEWAY_SERVICE_TOKEN_SCOPES", [...DEFAULT_GATEWAY_SCOPES]);
  for (const scope of gatewayScopes) if (!isScope(scope)) r.problem(`GATEWAY_SERVICE_TOKEN_SCOPES: unknown scope "${scope}"`);
  if (gateway !== undefined) bootstrapTokens.push({ name: "gateway", token: gateway, scopes: gatewayScopes.filter(isScope) });
  return { bootstrapTokens, allowUnauthenticated: r.bool("ALLOW_UNAUTHENTICATED_RPC", false) };
}

/**
 * At start: upserts the tokens the settings provide, then refuses to start (ConfigError,
 * exit 2) when no token works and ALLOW_UNAUTHENTICATED_RPC is not set, since nothing
 * could call the service.
 */
export async function bootstrapServiceTokens(prisma: PrismaClient, settings: AccessSettings, log: Logger, now: Date): Promise<void> {
  for (const t of settings.bootstrapTokens) {
    const outcome = await ensureServiceToken(prisma, now, t);
    if (outcome === "revoked") log.warn({ token: t.name }, "the configured service token was revoked; it stays revoked until the setting holds a new token");
    else log.info({ token: t.name, scopes: t.scopes, outcome }, "service token from settings");
  }
  if (settings.allowUnauthenticated) {
    log.warn("ALLOW_UNAUTHENTICATED_RPC is set: calls without a service token act as admin (development only)");
    return;
  }
  if ((await countActiveServiceTokens(prisma)) === 0) {
    throw new ConfigError([
      "no service token is configured, so nothing could call the referral service: set ADMIN_SERVICE_TOKEN and GATEWAY_SERVICE_TOKEN " +
        "(for example $(openssl rand -base64 32)), or create one with `npm run tokens -- create --name <name> --scopes <scopes>`; " +
        "for development only, ALLOW_UNAUTHENTICATED_RPC=true",
    ]);
  }
}
