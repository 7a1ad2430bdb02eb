import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import { AccessService, type DashboardSessionSchema, type OwnerSchema, type ServiceTokenInfoSchema } from "../../gen/proto/access/v1/access_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError } from "../shared/rpc/errors.js";
import { toServerProto } from "../servers/routes.js";
import {
  createLoginLink,
  endSession,
  findLiveSession,
  listSessions,
  redeemLoginLink,
  revokeSessions,
  type DashboardSessionRecord,
} from "./dashboard-sessions.js";
import { assignServer, createOwner, listOwnerServers, type OwnerRecord } from "./owners.js";
import { createServiceToken, listServiceTokens, revokeServiceToken, type ServiceTokenRecord } from "./service-tokens.js";

/** What the access routes need: the core deps plus where login links point (the public gateway). */
export type AccessRouteDeps = CoreDeps & { publicBaseUrl: string; loginLinkBaseUrl?: string };

/**
 * The AccessService routes: service tokens (admin), owners and their servers
 * (admin), owners' dashboard login links and sessions (admin mints and revokes; the
 * gateway, with the `dashboard` scope, redeems, checks and ends them). Token values
 * leave only in the answers of CreateServiceToken, CreateDashboardLoginLink and
 * RedeemDashboardLoginLink.
 */
export function accessRoutes(deps: AccessRouteDeps): (router: ConnectRouter) => void {
  return (router) => {
    router.service(AccessService, {
      async createServiceToken(req) {
        const { record, token } = await createServiceToken(deps.prisma, deps.now(), { name: req.name, scopes: req.scopes });
        return { info: toTokenInfo(record), token };
      },
      async listServiceTokens() {
        return { tokens: (await listServiceTokens(deps.prisma)).map(toTokenInfo) };
      },
      async revokeServiceToken(req) {
        return { info: toTokenInfo(await revokeServiceToken(deps.prisma, deps.now(), req.token)) };
      },

      async createOwner(req) {
        return { owner: toOwnerProto(await createOwner(deps.prisma, deps.now(), { ownerId: req.ownerId, displayName: req.displayName })) };
      },
      async assignServer(req) {
        return { server: toServerProto(await assignServer(deps.prisma, req.serverId, req.ownerId)) };
      },
      async listOwnerServers(req) {
        return { servers: (await listOwnerServers(deps.prisma, req.ownerId)).map(toServerProto) };
      },

      async createDashboardLoginLink(req) {
        const link = await createLoginLink(deps.prisma, deps.now(), {
          ownerId: req.ownerId,
          ttlSeconds: Number(req.ttlSeconds),
          publicBaseUrl: deps.loginLinkBaseUrl ?? deps.publicBaseUrl,
        });
        return { url: link.url, expiresAt: timestampFromDate(link.expiresAt) };
      },
      async redeemDashboardLoginLink(req) {
        const { sessionToken, session } = await redeemLoginLink(deps.prisma, deps.now(), req.loginToken);
        return { sessionToken, session: toSessionProto(session) };
      },
      async getDashboardSession(req) {
        const live = await findLiveSession(deps.prisma, deps.now(), req.sessionToken.trim());
        if (!live) throw new DomainError("not_found", "the dashboard session expired or was revoked (open a new login link)");
        return { session: toSessionProto(live.session), owner: toOwnerProto(live.owner) };
      },
      async endDashboardSession(req) {
        await endSession(deps.prisma, deps.now(), req.sessionToken.trim());
        return {};
      },
      async listDashboardSessions(req) {
        return { sessions: (await listSessions(deps.prisma, req.ownerId)).map(toSessionProto) };
      },
      async revokeDashboardSessions(req) {
        return { revoked: await revokeSessions(deps.prisma, deps.now(), { ownerId: req.ownerId, sessionId: req.sessionId }) };
      },
    });
  };
}

function toTokenInfo(t: ServiceTokenRecord): MessageInitShape<typeof ServiceTokenInfoSchema> {
  return {
    id: t.id,
    name: t.name,
    scopes: t.scopes,
    createdAt: timestampFromDate(t.createdAt),
    revokedAt: t.revokedAt ? timestampFromDate(t.revokedAt) : undefined,
  };
}

function toOwnerProto(o: OwnerRecord): MessageInitShape<typeof OwnerSchema> {
  return { id: o.id, displayName: o.displayName, createdAt: timestampFromDate(o.createdAt) };
}

function toSessionProto(s: DashboardSessionRecord): MessageInitShape<typeof DashboardSessionSchema> {
  return {
    id: s.id,
    ownerId: s.ownerId,
    createdAt: timestampFromDate(s.createdAt),
    expiresAt: timestampFromDate(s.expiresAt),
    revokedAt: s.revokedAt ? timestampFromDate(s.revokedAt) : undefined,
  };
}
