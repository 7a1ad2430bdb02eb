import type { CallbackEndpoint } from "../../gen/prisma/client.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError, unknownServer } from "../shared/rpc/errors.js";
import { isUuid } from "../shared/values/ids.js";
import { isEndpointEventType, type EndpointEventType } from "../shared/values/event-types.js";
import {
  checkDiscordTemplate,
  defaultDiscordTemplate,
  describeTemplateError,
  renderDiscordTemplate,
  SAMPLE_DISCORD_VALUES,
} from "../shared/values/discord-template.js";
import { type DiscordWebhook, notADiscordWebhookText, readDiscordWebhookUrl } from "../shared/values/discord-webhook-url.js";
import { findEndpoint, insertDiscordEndpoint, writeDiscordTemplates } from "./endpoint-store.js";
import { lockServer } from "./secret-store.js";

/**
 * Discord endpoints (docs/discord.md): a callback endpoint whose events post to a Discord channel through the owner's
 * Discord webhook instead of a signed HTTP callback. The owner pastes the webhook URL; only Discord's hosts and the
 * path /api/webhooks/{id}/{token} are accepted. The id and host are kept to show and to call; the token is sealed with
 * SECRETS_KEY and never returned by any RPC (nor echoed in an error). Templates per event type are checked at save
 * time (an error names its line and column).
 */

/** The refusal of a URL that is not a Discord webhook's (it never repeats the URL: it may hold a token). */
export const NOT_A_DISCORD_WEBHOOK = notADiscordWebhookText("webhook_url");

/** Takes a pasted Discord webhook URL apart (readDiscordWebhookUrl), or refuses it (invalid_argument, NOT_A_DISCORD_WEBHOOK). */
export function parseDiscordWebhookUrl(raw: string): DiscordWebhook {
  const webhook = readDiscordWebhookUrl(raw);
  if (webhook === undefined) throw new DomainError("invalid_argument", NOT_A_DISCORD_WEBHOOK);
  return webhook;
}

/** Templates by event type, each checked: an unknown event type or a template error is refused (with its line). */
export function toDiscordTemplates(raw: readonly { eventType: string; template: string }[]): Record<string, string> {
  const templates: Record<string, string> = {};
  for (const { eventType, template } of raw) {
    const type = eventType.trim();
    if (!isEndpointEventType(type)) throw new DomainError("invalid_argument", `templates: unknown event type "${type.slice(0, 64)}"`);
    const check = checkDiscordTemplate(template);
    if (!check.ok) throw new DomainError("invalid_argument", describeTemplateError(type, check));
    templates[type] = template;
  }
  return templates;
}

/** CreateDiscordEndpoint: a non-default endpoint posting to the webhook, its token sealed. */
export async function createDiscordEndpoint(
  deps: CoreDeps,
  serverId: string,
  input: { webhook: DiscordWebhook; eventTypes: EndpointEventType[]; templates: Record<string, string>; embed: boolean },
): Promise<CallbackEndpoint> {
  const now = deps.now();
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    const sealedToken = deps.secretBox.seal(input.webhook.token);
    return insertDiscordEndpoint(
      tx,
      serverId,
      {
        eventTypes: input.eventTypes,
        webhookId: input.webhook.id,
        webhookHost: input.webhook.host,
        sealedToken,
        templates: input.templates,
        embed: input.embed,
      },
      now,
    );
  });
}

/** SetDiscordTemplates: replaces a Discord endpoint's templates (failed_precondition on a callback endpoint). */
export async function setDiscordTemplates(
  deps: CoreDeps,
  serverId: string,
  rawEndpointId: string,
  templates: Record<string, string>,
  embed?: boolean,
): Promise<CallbackEndpoint> {
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    const endpoint = await findEndpoint(tx, serverId, rawEndpointId);
    if (endpoint.discordWebhookId === null) throw new DomainError("failed_precondition", "not a Discord endpoint");
    return writeDiscordTemplates(tx, endpoint.id, templates, embed);
  });
}

/** The templates stored on an endpoint (an event type without one: the default). */
export function storedDiscordTemplates(endpoint: Pick<CallbackEndpoint, "discordTemplates">): Record<string, string> {
  const raw = endpoint.discordTemplates;
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) return {};
  return Object.fromEntries(Object.entries(raw).filter((e): e is [string, string] => typeof e[1] === "string"));
}

/**
 * PreviewDiscordMessage: `template` (checked like a saved one), else the endpoint's for the event type, else the
 * default, rendered for a sample event of server `serverName`.
 */
export async function previewDiscordMessage(deps: CoreDeps, serverId: string, q: { eventType: string; template: string; endpointId: string }): Promise<string> {
  const server = isUuid(serverId) ? await deps.prisma.server.findUnique({ where: { id: serverId }, select: { name: true } }) : null;
  if (!server) throw unknownServer();
  const eventType = q.eventType.trim() || "heart.counted";
  if (!isEndpointEventType(eventType)) throw new DomainError("invalid_argument", `event_type: unknown event type "${eventType.slice(0, 64)}"`);
  let template = q.template;
  if (template === "") {
    const endpoint = q.endpointId.trim() === "" ? undefined : await findEndpoint(deps.prisma, serverId, q.endpointId);
    template = (endpoint ? storedDiscordTemplates(endpoint)[eventType] : undefined) ?? defaultDiscordTemplate(eventType);
  } else {
    const check = checkDiscordTemplate(template);
    if (!check.ok) throw new DomainError("invalid_argument", describeTemplateError(eventType, check));
  }
  return renderDiscordTemplate(template, eventType, { ...SAMPLE_DISCORD_VALUES, event: eventType, server: server.name });
}
