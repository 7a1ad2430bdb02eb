import type { CallbackEndpoint } from "../../gen/prisma/client.js";
import { validateCallbackUrl } from "../shared/values/callback-url.js";
import { oneOfText, requiredText } from "../shared/values/contract.js";
import type { PrismaClient, Tx } from "../shared/adapters/db.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError, unknownServer } from "../shared/rpc/errors.js";
import { ENDPOINT_EVENT_TYPES, PAYLOAD_VERSIONS, isEndpointEventType, type EndpointEventType } from "../shared/values/event-types.js";
import { boundField } from "../shared/values/field-rules.js";
import { isUuid } from "../shared/values/ids.js";
import { activeSecretWhere } from "./domain/secret-policy.js";
import type { HeldReleaseDeps } from "./held-release.js";
import { insertSecret, lockServer, type SecretWithValue } from "./secret-store.js";

/**
 * Callback endpoints: where a server's signed events go. Every server has one DEFAULT endpoint
 * (`is_default`; created with the server by a trigger in the callback_endpoints migration, without a
 * URL, subscribed to heart.counted): SetCallbackSettings sets its URL and opt-ins, and every callback
 * RPC without an endpoint_id acts on it, so a server with only its default endpoint behaves exactly
 * as the contract's single callback. CreateEndpoint adds others, each with its own secrets, health
 * and disable. An endpoint is always looked up within its server (an owner never reaches another
 * server's endpoint through its own server id).
 */

export type { CallbackEndpoint as EndpointRecord };

/** The text of an endpoint id that names no live endpoint of the server. */
export const UNKNOWN_ENDPOINT_TEXT = "unknown endpoint";

/**
 * The live endpoint `rawEndpointId` of server `serverId`, or its default endpoint when the id is
 * empty: unknown_server (404) for no such server, not_found `unknown endpoint` for an id that
 * names no live endpoint of that server.
 */
export async function findEndpoint(prisma: PrismaClient | Tx, serverId: string, rawEndpointId: string): Promise<CallbackEndpoint> {
  if (!isUuid(serverId) || (await prisma.server.count({ where: { id: serverId } })) !== 1) throw unknownServer();
  const endpointId = rawEndpointId.trim();
  if (endpointId !== "" && !isUuid(endpointId)) throw new DomainError("not_found", UNKNOWN_ENDPOINT_TEXT);
  const endpoint = await prisma.callbackEndpoint.findFirst({
    where: { serverId, deletedAt: null, ...(endpointId === "" ? { isDefault: true } : { id: endpointId }) },
  });
  if (!endpoint) throw new DomainError("not_found", UNKNOWN_ENDPOINT_TEXT);
  return endpoint;
}

/** A server's live endpoints: the default one first, then the others oldest first. */
export async function listEndpoints(deps: CoreDeps, serverId: string): Promise<CallbackEndpoint[]> {
  if (!isUuid(serverId) || (await deps.prisma.server.count({ where: { id: serverId } })) !== 1) throw unknownServer();
  const rows = await deps.prisma.callbackEndpoint.findMany({ where: { serverId, deletedAt: null }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
  return [...rows.filter((e) => e.isDefault), ...rows.filter((e) => !e.isDefault)];
}

/** The checked event types of an endpoint: at least one, each known, no repeats (in the list's order). */
export function toEventTypes(raw: readonly string[]): EndpointEventType[] {
  const trimmed = raw.map((t) => t.trim());
  if (trimmed.length === 0) throw new DomainError("invalid_argument", requiredText("event_types"));
  const unknown = trimmed.find((t) => !isEndpointEventType(t));
  if (unknown !== undefined) throw new DomainError("invalid_argument", oneOfText("event_types", ENDPOINT_EVENT_TYPES));
  return ENDPOINT_EVENT_TYPES.filter((t) => trimmed.includes(t));
}

/** The checked payload version: 0 (unset) means 1; only the versions of PAYLOAD_VERSIONS are accepted. */
export function toPayloadVersion(raw: number): number {
  const version = raw === 0 ? 1 : raw;
  if (!(PAYLOAD_VERSIONS as readonly number[]).includes(version)) {
    throw new DomainError("invalid_argument", oneOfText("payload_version", PAYLOAD_VERSIONS.map(String)));
  }
  return version;
}

/** The checked URL of an endpoint (the callback URL's rules; required). */
export function toEndpointUrl(raw: string, opts: { allowInsecure: boolean }): string {
  const value = boundField("callback_url", raw).trim();
  if (value === "") throw new DomainError("invalid_argument", requiredText("url"));
  const checked = validateCallbackUrl(value, opts);
  if (!checked.ok) throw new DomainError("invalid_argument", checked.error);
  return checked.url.toString();
}

/** What CreateEndpoint stores (checked). */
export interface NewEndpoint {
  url: string;
  eventTypes: EndpointEventType[];
  payloadVersion: number;
  standardWebhooks: boolean;
  publicKeySignatures: boolean;
}

/** CreateEndpoint: a non-default endpoint with its first callback secret, whose value is returned once. */
export async function createEndpoint(deps: CoreDeps, serverId: string, input: NewEndpoint): Promise<{ endpoint: CallbackEndpoint } & SecretWithValue> {
  const now = deps.now();
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    const endpoint = await tx.callbackEndpoint.create({ data: { serverId, ...input, createdAt: now } });
    const secret = await insertSecret(deps, tx, serverId, "callback", now, endpoint.id);
    return { endpoint, ...secret };
  });
}

/** What a Discord endpoint stores (services/servers/discord-endpoint.ts checks it): the webhook's token already sealed. */
export interface NewDiscordEndpoint {
  eventTypes: EndpointEventType[];
  webhookId: string;
  webhookHost: string;
  sealedToken: string;
  templates: Record<string, string>;
  /** Post as an embed's description instead of the content. */
  embed: boolean;
}

/** Inserts a Discord endpoint (non-default, no URL, no callback secret) in the caller's transaction. */
export async function insertDiscordEndpoint(tx: Tx, serverId: string, input: NewDiscordEndpoint, now: Date): Promise<CallbackEndpoint> {
  return tx.callbackEndpoint.create({
    data: {
      serverId,
      eventTypes: input.eventTypes,
      discordWebhookId: input.webhookId,
      discordWebhookHost: input.webhookHost,
      discordWebhookToken: input.sealedToken,
      discordTemplates: input.templates,
      discordEmbed: input.embed,
      createdAt: now,
    },
  });
}

/** Replaces a Discord endpoint's templates (and, when given, its embed choice) in the caller's transaction. */
export async function writeDiscordTemplates(tx: Tx, endpointId: string, templates: Record<string, string>, embed?: boolean): Promise<CallbackEndpoint> {
  return tx.callbackEndpoint.update({
    where: { id: endpointId },
    data: { discordTemplates: templates, ...(embed === undefined ? {} : { discordEmbed: embed }) },
  });
}

/** What UpdateEndpoint changes (checked; undefined: unchanged). */
export interface EndpointChange {
  url?: string | null;
  eventTypes?: EndpointEventType[];
  payloadVersion?: number;
  standardWebhooks?: boolean;
  publicKeySignatures?: boolean;
}

/**
 * Changes an endpoint's settings. Setting a URL clears a disable (as SetCallbackSettings always
 * did) and, when the endpoint has no active callback secret, creates one in the same transaction
 * (the server row lock keeps two concurrent calls from creating two); its held deliveries are
 * released to the dispatcher in that transaction. Only the default endpoint may be without a URL
 * (null: its callbacks are held).
 */
export async function updateEndpoint(
  deps: CoreDeps & HeldReleaseDeps,
  serverId: string,
  rawEndpointId: string,
  change: EndpointChange,
): Promise<CallbackEndpoint> {
  const now = deps.now();
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    const endpoint = await findEndpoint(tx, serverId, rawEndpointId);
    if (change.url === null && !endpoint.isDefault && endpoint.discordWebhookId === null) throw new DomainError("invalid_argument", requiredText("url"));
    if (change.url !== undefined && endpoint.discordWebhookId !== null)
      throw new DomainError("failed_precondition", "a Discord endpoint has no callback URL: create a new Discord endpoint for another webhook");
    const updated = await tx.callbackEndpoint.update({
      where: { id: endpoint.id },
      data: {
        ...(change.url === undefined ? {} : { url: change.url }),
        ...(change.url ? { disabledAt: null, disabledReason: null } : {}),
        ...(change.eventTypes === undefined ? {} : { eventTypes: change.eventTypes }),
        ...(change.payloadVersion === undefined ? {} : { payloadVersion: change.payloadVersion }),
        ...(change.standardWebhooks === undefined ? {} : { standardWebhooks: change.standardWebhooks }),
        ...(change.publicKeySignatures === undefined ? {} : { publicKeySignatures: change.publicKeySignatures }),
      },
    });
    if (change.url) {
      const active = await tx.serverSecret.count({ where: { serverId, endpointId: endpoint.id, purpose: "callback", ...activeSecretWhere(now) } });
      if (active === 0) await insertSecret(deps, tx, serverId, "callback", now, endpoint.id);
      await deps.releaseHeld(tx, { serverId, endpointId: endpoint.id });
    }
    return updated;
  });
}

/**
 * DeleteEndpoint: marks a non-default endpoint deleted. It receives nothing more and its pending
 * deliveries are no longer sent (the claim skips a deleted endpoint); its deliveries and attempts
 * stay readable. The default endpoint cannot be deleted (clear its URL instead).
 */
export async function deleteEndpoint(deps: CoreDeps, serverId: string, rawEndpointId: string): Promise<void> {
  const endpoint = await findEndpoint(deps.prisma, serverId, rawEndpointId);
  if (endpoint.isDefault)
    throw new DomainError("failed_precondition", "the default endpoint cannot be deleted: clear its URL in the callback settings instead");
  await deps.prisma.callbackEndpoint.updateMany({ where: { id: endpoint.id, deletedAt: null }, data: { deletedAt: deps.now() } });
}

/**
 * Turns a disabled (auto-disabled or 410 Gone) endpoint back on, with a fresh auto-disable period
 * (its old run of failures ends first, so a failure in between cannot re-disable it at once), and
 * releases its held deliveries to the dispatcher, under the server row lock.
 */
export async function enableEndpoint(deps: CoreDeps & HeldReleaseDeps, serverId: string, rawEndpointId: string): Promise<CallbackEndpoint> {
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    const endpoint = await findEndpoint(tx, serverId, rawEndpointId);
    await tx.callbackHealth.updateMany({ where: { endpointId: endpoint.id }, data: { failingSince: null } });
    const enabled = await tx.callbackEndpoint.update({ where: { id: endpoint.id }, data: { disabledAt: null, disabledReason: null } });
    await deps.releaseHeld(tx, { serverId, endpointId: endpoint.id });
    return enabled;
  });
}
