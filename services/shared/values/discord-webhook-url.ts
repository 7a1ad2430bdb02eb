/**
 * THE rule of a Discord webhook URL as an owner pastes it (the Discord destination's endpoints, owner alerts' Discord
 * channel): https on Discord's own hosts, no user, port, query or fragment, and the path
 * /api[/vN]/webhooks/{id}/{token}. Everything else is not one: a URL to any other host could receive what the service
 * posts, so callers refuse it with a text that never repeats the URL (it carries the webhook's token).
 */

/** The hosts a Discord webhook URL may name. */
export const DISCORD_WEBHOOK_HOSTS: readonly string[] = [
  "discord.com",
  "discordapp.com",
  "ptb.discord.com",
  "canary.discord.com",
  "ptb.discordapp.com",
  "canary.discordapp.com",
];

/**
 * The one refusal of a value of `field` that is not a Discord webhook URL: what one looks like, never the value pasted
 * (it may be a real webhook's URL with its token).
 */
export function notADiscordWebhookText(field: string): string {
  return `${field} must be a Discord webhook URL: https://discord.com/api/webhooks/{id}/{token} (hosts discord.com, discordapp.com, ptb. or canary.)`;
}

/** A Discord webhook URL taken apart. */
export interface DiscordWebhook {
  /** The host as pasted (lower case), one of DISCORD_WEBHOOK_HOSTS. */
  host: string;
  id: string;
  token: string;
}

/** The webhook of a Discord webhook URL, or undefined when `raw` is not one. Pure. */
export function readDiscordWebhookUrl(raw: string): DiscordWebhook | undefined {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    // Failure policy: not a URL at all is simply not a webhook URL (the caller refuses it).
    return undefined;
  }
  if (url.protocol !== "https:" || url.username !== "" || url.password !== "" || url.port !== "" || url.search !== "" || url.hash !== "") {
    return undefined;
  }
  const host = url.hostname.toLowerCase();
  if (!DISCORD_WEBHOOK_HOSTS.includes(host)) return undefined;
  const match = /^\/api(?:\/v\d{1,2})?\/webhooks\/(\d{1,25})\/([A-Za-z0-9_-]{1,100})\/?$/.exec(url.pathname);
  if (!match) return undefined;
  return { host, id: match[1]!, token: match[2]! };
}

/** The path below Discord's API base URL that executes the webhook. */
export function webhookPathOf(webhook: { id: string; token: string }): string {
  return `/webhooks/${webhook.id}/${webhook.token}`;
}
