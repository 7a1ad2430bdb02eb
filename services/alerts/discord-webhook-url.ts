/**
 * A Discord webhook URL as an owner pastes it for alerts: https on Discord's own hosts (discord.com, discordapp.com,
 * ptb. and canary.discord.com) with the path /api/webhooks/{id}/{token} (optionally /api/v10/...). Anything else is
 * refused with WEBHOOK_URL_TEXT, which never repeats the URL (it carries the webhook's token).
 */

/** Discord's hosts a webhook URL may name. */
export const DISCORD_WEBHOOK_HOSTS: readonly string[] = ["discord.com", "discordapp.com", "ptb.discord.com", "canary.discord.com"];

/** The refusal of a URL that is not a Discord webhook. */
export const WEBHOOK_URL_TEXT = "a Discord webhook URL is https://discord.com/api/webhooks/<id>/<token>";

/** The webhook's id and token of a Discord webhook URL, or undefined when it is not one. */
export function parseDiscordWebhookUrl(input: string): { id: string; token: string } | undefined {
  let url: URL;
  try {
    url = new URL(input.trim());
  } catch {
    // Failure policy: not a URL at all is simply not a webhook URL (refused by the caller).
    return undefined;
  }
  if (url.protocol !== "https:" || url.username !== "" || url.password !== "" || url.port !== "") return undefined;
  if (!DISCORD_WEBHOOK_HOSTS.includes(url.hostname.toLowerCase())) return undefined;
  const match = /^\/api(?:\/v\d+)?\/webhooks\/(\d{1,25})\/([A-Za-z0-9_-]{1,100})\/?$/.exec(url.pathname);
  if (!match) return undefined;
  return { id: match[1]!, token: match[2]! };
}

/** The path below Discord's API base URL that executes the webhook. */
export function webhookPathOf(webhook: { id: string; token: string }): string {
  return `/webhooks/${webhook.id}/${webhook.token}`;
}
