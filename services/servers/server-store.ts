import type { CoreDeps } from "../shared/deps.js";
import { DomainError, unknownServer } from "../shared/errors.js";
import type { Server } from "../../gen/prisma/client.js";
import { isUuid } from "../shared/ids.js";
import type { VotifierSettings } from "./domain/votifier-settings.js";
import { activeSecretWhere } from "./domain/secret-policy.js";
import { insertSecret, lockServer } from "./secret-store.js";
import { requiredText } from "../shared/contract.js";

export type { Server as ServerRecord };

/** CreateServer: a named server with referrals off until the owner enables them. */
export async function createServer(deps: CoreDeps, input: { name: string; registrationUrl: string | null; ownerId?: string | null }): Promise<Server> {
  return deps.prisma.server.create({
    data: { name: input.name, registrationUrl: input.registrationUrl, ownerId: input.ownerId ?? null, createdAt: deps.now() },
  });
}

/** GetServer (404 `unknown server`). */
export async function getServer(deps: CoreDeps, serverId: string): Promise<Server> {
  const server = isUuid(serverId) ? await deps.prisma.server.findUnique({ where: { id: serverId } }) : null;
  if (!server) throw unknownServer();
  return server;
}

/** ListServers, oldest first; only `ownerId`'s servers when given. */
export async function listServers(deps: CoreDeps, ownerId?: string): Promise<Server[]> {
  return deps.prisma.server.findMany({ where: ownerId === undefined ? {} : { ownerId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
}

/** Updates some fields of an existing server (404 `unknown server`). */
export async function updateServer(
  deps: CoreDeps,
  serverId: string,
  data: {
    referralsEnabled?: boolean;
    registrationUrl?: string | null;
    callbackDisabledAt?: null;
    callbackDisabledReason?: null;
    attributionWindowDays?: number;
    lockDays?: number;
  },
): Promise<Server> {
  if (!isUuid(serverId)) throw unknownServer();
  const updated = await deps.prisma.server.updateMany({ where: { id: serverId }, data });
  if (updated.count !== 1) throw unknownServer();
  return getServer(deps, serverId);
}

/**
 * SetCallbackSettings: stores the (already validated) callback URL and the
 * Standard Webhooks opt-ins (`publicKeySignatures` undefined: unchanged). Setting a URL clears a callback disable; an empty
 * URL removes the callback. When a URL is set and the server has no active
 * callback secret, one is created in the same transaction (the server row lock
 * keeps two concurrent calls from creating two).
 */
export async function setCallbackSettings(
  deps: CoreDeps,
  serverId: string,
  input: { callbackUrl: string | null; standardWebhooks: boolean; publicKeySignatures?: boolean },
): Promise<Server> {
  const now = deps.now();
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    const server = await tx.server.update({
      where: { id: serverId },
      data: {
        callbackUrl: input.callbackUrl,
        standardWebhooks: input.standardWebhooks,
        ...(input.publicKeySignatures === undefined ? {} : { publicKeySignatures: input.publicKeySignatures }),
        ...(input.callbackUrl !== null ? { callbackDisabledAt: null, callbackDisabledReason: null } : {}),
      },
    });
    if (input.callbackUrl !== null) {
      const active = await tx.serverSecret.count({
        where: { serverId, purpose: "callback", ...activeSecretWhere(now) },
      });
      if (active === 0) await insertSecret(deps, tx, serverId, "callback", now);
    }
    return server;
  });
}

/**
 * SetVotifierSettings: stores host, port, service name and the token sealed with
 * SECRETS_KEY, or clears them all (null: the transport is off; pending Votifier
 * deliveries are held). A null token keeps the stored one; there must be one.
 */
export async function setVotifierSettings(deps: CoreDeps, serverId: string, settings: VotifierSettings | null): Promise<Server> {
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    if (settings === null) {
      return tx.server.update({
        where: { id: serverId },
        data: { votifierHost: null, votifierPort: null, votifierServiceName: null, votifierToken: null },
      });
    }
    if (settings.token === null) {
      const stored = await tx.server.findUniqueOrThrow({ where: { id: serverId }, select: { votifierToken: true } });
      if (stored.votifierToken === null) throw new DomainError("invalid_argument", requiredText("votifier token"));
    }
    return tx.server.update({
      where: { id: serverId },
      data: {
        votifierHost: settings.host,
        votifierPort: settings.port,
        votifierServiceName: settings.serviceName,
        ...(settings.token === null ? {} : { votifierToken: deps.secretBox.seal(settings.token) }),
      },
    });
  });
}

/**
 * SetPullEnabled: turns the signed pull API on or off. Turning it on creates a
 * pull secret when none is active (under the server row lock, so two calls create
 * one). Only hearts counted while it is on are offered for pulling.
 */
export async function setPullEnabled(deps: CoreDeps, serverId: string, enabled: boolean): Promise<Server> {
  const now = deps.now();
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    const server = await tx.server.update({ where: { id: serverId }, data: { pullEnabled: enabled } });
    if (enabled) {
      const active = await tx.serverSecret.count({
        where: { serverId, purpose: "pull", ...activeSecretWhere(now) },
      });
      if (active === 0) await insertSecret(deps, tx, serverId, "pull", now);
    }
    return server;
  });
}
