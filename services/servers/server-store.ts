import type { CoreDeps } from "../shared/adapters/deps.js";
import type { HeldReleaseDeps } from "./held-release.js";
import { DomainError, unknownServer } from "../shared/rpc/errors.js";
import type { CallbackEndpoint, Server } from "../../gen/prisma/client.js";
import { isUuid } from "../shared/values/ids.js";
import type { VotifierSettings } from "./domain/votifier-settings.js";
import { activeSecretWhere } from "./domain/secret-policy.js";
import { insertSecret, lockServer } from "./secret-store.js";
import { requiredText } from "../shared/values/contract.js";
import { updateEndpoint } from "./endpoint-store.js";
import type { EndpointEventType } from "../shared/values/event-types.js";

/** A server as its RPCs answer it: with its default endpoint (the callback settings of the Server message). */
export type ServerRecord = Server & { endpoints: CallbackEndpoint[] };

/** The include that reads a server with its default endpoint (ServerRecord). */
export const WITH_DEFAULT_ENDPOINT = { endpoints: { where: { isDefault: true } } } as const;

/** CreateServer: a named server with referrals off until the owner enables them (its default endpoint is created with it). */
export async function createServer(deps: CoreDeps, input: { name: string; registrationUrl: string | null; ownerId?: string | null }): Promise<ServerRecord> {
  return deps.prisma.server.create({
    data: { name: input.name, registrationUrl: input.registrationUrl, ownerId: input.ownerId ?? null, createdAt: deps.now() },
    include: WITH_DEFAULT_ENDPOINT,
  });
}

/** GetServer (404 `unknown server`). */
export async function getServer(deps: CoreDeps, serverId: string): Promise<ServerRecord> {
  const server = isUuid(serverId) ? await deps.prisma.server.findUnique({ where: { id: serverId }, include: WITH_DEFAULT_ENDPOINT }) : null;
  if (!server) throw unknownServer();
  return server;
}

/** ListServers, oldest first; only `ownerId`'s servers when given. */
export async function listServers(deps: CoreDeps, ownerId?: string): Promise<ServerRecord[]> {
  return deps.prisma.server.findMany({
    where: ownerId === undefined ? {} : { ownerId },
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
    include: WITH_DEFAULT_ENDPOINT,
  });
}

/** Updates some fields of an existing server (404 `unknown server`). */
export async function updateServer(
  deps: CoreDeps,
  serverId: string,
  data: { referralsEnabled?: boolean; registrationUrl?: string | null; attributionWindowDays?: number; lockDays?: number },
): Promise<ServerRecord> {
  if (!isUuid(serverId)) throw unknownServer();
  const updated = await deps.prisma.server.updateMany({ where: { id: serverId }, data });
  if (updated.count !== 1) throw unknownServer();
  return getServer(deps, serverId);
}

/**
 * SetCallbackSettings: stores the (already validated) callback URL and the Standard Webhooks
 * opt-ins (`publicKeySignatures` undefined: unchanged) on the server's default endpoint, or on the
 * endpoint `endpointId` (updateEndpoint). Setting a URL clears the endpoint's disable and creates
 * its callback secret when it has none; an empty URL removes the default endpoint's callback.
 */
export async function setCallbackSettings(
  deps: CoreDeps & HeldReleaseDeps,
  serverId: string,
  input: { callbackUrl: string | null; standardWebhooks: boolean; publicKeySignatures?: boolean; endpointId?: string },
): Promise<ServerRecord> {
  await updateEndpoint(deps, serverId, input.endpointId ?? "", {
    url: input.callbackUrl,
    standardWebhooks: input.standardWebhooks,
    ...(input.publicKeySignatures === undefined ? {} : { publicKeySignatures: input.publicKeySignatures }),
  });
  return getServer(deps, serverId);
}

/**
 * SetVotifierSettings: stores host, port, service name and the token sealed with
 * SECRETS_KEY, or clears them all (null: the transport is off; pending Votifier
 * deliveries are held). A null token keeps the stored one; there must be one.
 * Settings stored release the server's held Votifier deliveries in the same transaction.
 */
export async function setVotifierSettings(deps: CoreDeps & HeldReleaseDeps, serverId: string, settings: VotifierSettings | null): Promise<ServerRecord> {
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    if (settings === null) {
      return tx.server.update({
        where: { id: serverId },
        data: { votifierHost: null, votifierPort: null, votifierServiceName: null, votifierToken: null },
        include: WITH_DEFAULT_ENDPOINT,
      });
    }
    if (settings.token === null) {
      const stored = await tx.server.findUniqueOrThrow({ where: { id: serverId }, select: { votifierToken: true } });
      if (stored.votifierToken === null) throw new DomainError("invalid_argument", requiredText("votifier token"));
    }
    await deps.releaseHeld(tx, { serverId, transport: "votifier" });
    return tx.server.update({
      where: { id: serverId },
      data: {
        votifierHost: settings.host,
        votifierPort: settings.port,
        votifierServiceName: settings.serviceName,
        ...(settings.token === null ? {} : { votifierToken: deps.secretBox.seal(settings.token) }),
      },
      include: WITH_DEFAULT_ENDPOINT,
    });
  });
}

/**
 * SetPullEventTypes: what the pull API offers (checked by the caller with endpoint-store's
 * toEventTypes, the same rule as an endpoint's). `heart.counted` keeps the hearts list; the
 * `referral.*` types add those events to POST /api/pull/events. Only events published while the
 * pull API is on and the type is chosen are offered.
 */
export async function setPullEventTypes(deps: CoreDeps, serverId: string, eventTypes: readonly EndpointEventType[]): Promise<ServerRecord> {
  if (!isUuid(serverId)) throw unknownServer();
  const updated = await deps.prisma.server.updateMany({ where: { id: serverId }, data: { pullEventTypes: [...eventTypes] } });
  if (updated.count !== 1) throw unknownServer();
  return getServer(deps, serverId);
}

/**
 * SetPullEnabled: turns the signed pull API on or off. Turning it on creates a
 * pull secret when none is active (under the server row lock, so two calls create
 * one). Only hearts counted while it is on are offered for pulling.
 */
export async function setPullEnabled(deps: CoreDeps, serverId: string, enabled: boolean): Promise<ServerRecord> {
  const now = deps.now();
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    const server = await tx.server.update({ where: { id: serverId }, data: { pullEnabled: enabled }, include: WITH_DEFAULT_ENDPOINT });
    if (enabled) {
      const active = await tx.serverSecret.count({
        where: { serverId, purpose: "pull", ...activeSecretWhere(now) },
      });
      if (active === 0) await insertSecret(deps, tx, serverId, "pull", now);
    }
    return server;
  });
}
