import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type { PrismaClient } from "../shared/adapters/db.js";
import { CALLER_PRINCIPAL, OWNER_SCOPE } from "../shared/rpc/interceptors.js";
import { DASHBOARD_SESSION_HEADER, ERROR_KIND_HEADER, SESSION_EXPIRED_KIND, TOKEN_SCOPE_KIND } from "../shared/values/wire.js";
import { findLiveSession } from "./dashboard-sessions.js";
import { requireOwned } from "./owners.js";
import { RPC_ACCESS, rpcKey } from "./rpc-access.js";
import { grants } from "./scopes.js";
import type { ServiceCaller, TokenVerifier } from "./service-tokens.js";

/** The wire names the gateway shares (services/shared/values/wire.ts is their home). */
export { DASHBOARD_SESSION_HEADER, SESSION_EXPIRED_KIND } from "../shared/values/wire.js";

/** What the auth interceptor needs. */
export interface AuthDeps {
  prisma: PrismaClient;
  now: () => Date;
  verifyToken: TokenVerifier;
  /** Development only (ALLOW_UNAUTHENTICATED_RPC): a call without `authorization` acts as admin. */
  allowUnauthenticated?: boolean;
}

const BEARER = /^Bearer[ ]+(\S+)[ ]*$/i;
const DEVELOPMENT_CALLER: ServiceCaller = { tokenId: "", name: "unauthenticated (ALLOW_UNAUTHENTICATED_RPC)", scopes: ["admin"] };

/**
 * THE access check of every RPC of every service, for Connect, gRPC and gRPC-Web
 * alike (one router serves all three). In order:
 *
 * 1. `authorization: Bearer <service token>`: missing, malformed, unknown or revoked
 *    -> `unauthenticated`.
 * 2. The RPC's rule in RPC_ACCESS; an RPC without one -> `permission_denied` (fail closed).
 * 3. With `x-dashboard-session`: the token needs `dashboard`, the session must be live
 *    (else `unauthenticated`), the rule's owner policy must allow owners (else
 *    `permission_denied`), and an `owned` resource must belong to the session's owner
 *    (else the resource's own `not_found`). The owner goes into OWNER_SCOPE.
 *    The caller goes into CALLER_PRINCIPAL (`owner:<id>`, or `token:<name>` below), for audit rows.
 * 4. Otherwise the token needs the rule's scope (`admin` holds all) -> `permission_denied`.
 *
 * Tokens are never logged or echoed; messages name the scope, never the token.
 */
export function createAuthInterceptor(deps: AuthDeps): Interceptor {
  return (next) => async (req) => {
    const key = rpcKey(req.service.typeName, req.method.name);
    // Messages avoid the characters gRPC clients leave percent-encoded (":", "/", ",", ";" ...).
    const rpc = `${req.service.typeName}.${req.method.name}`;
    const caller = await authenticate(deps, req.header.get("authorization"));
    const rule = RPC_ACCESS[key];
    if (!rule) throw new ConnectError(`no access rule for ${rpc} (refused until it is added to RPC_ACCESS)`, Code.PermissionDenied);

    const sessionToken = req.header.get(DASHBOARD_SESSION_HEADER);
    if (sessionToken !== null) {
      if (!grants(caller.scopes, "dashboard")) {
        throw new ConnectError(`acting for a dashboard session needs a token with the scope "dashboard"`, Code.PermissionDenied, {
          [ERROR_KIND_HEADER]: TOKEN_SCOPE_KIND,
        });
      }
      const live = await findLiveSession(deps.prisma, deps.now(), sessionToken.trim());
      if (!live) {
        throw new ConnectError("the dashboard session expired or was revoked (open a new login link)", Code.Unauthenticated, {
          [ERROR_KIND_HEADER]: SESSION_EXPIRED_KIND,
        });
      }
      if (rule.owner.kind === "none" || req.stream) throw new ConnectError(`${rpc} is not available to dashboard sessions`, Code.PermissionDenied);
      if (rule.owner.kind === "owned") {
        await requireOwned(deps.prisma, live.owner.id, rule.owner.resource, (req.message as Record<string, unknown>)[rule.owner.field]);
      }
      req.contextValues.set(OWNER_SCOPE, live.owner.id);
      req.contextValues.set(CALLER_PRINCIPAL, `owner:${live.owner.id}`);
      return next(req);
    }
    if (!grants(caller.scopes, rule.scope)) {
      throw new ConnectError(`this token lacks the scope "${rule.scope}" that ${rpc} requires`, Code.PermissionDenied, {
        [ERROR_KIND_HEADER]: TOKEN_SCOPE_KIND,
      });
    }
    req.contextValues.set(CALLER_PRINCIPAL, `token:${caller.name}`);
    return next(req);
  };
}

async function authenticate(deps: AuthDeps, header: string | null): Promise<ServiceCaller> {
  if (header === null || header.trim() === "") {
    if (deps.allowUnauthenticated) return DEVELOPMENT_CALLER;
    throw new ConnectError("missing service token (send the header authorization with the value Bearer <token>)", Code.Unauthenticated);
  }
  const token = BEARER.exec(header)?.[1];
  if (token === undefined) throw new ConnectError("malformed authorization header (expected Bearer <token>)", Code.Unauthenticated);
  const caller = await deps.verifyToken(token);
  if (!caller) throw new ConnectError("invalid or revoked service token", Code.Unauthenticated);
  return caller;
}
