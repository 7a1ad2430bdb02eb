import type { DiscordRest } from "../shared/adapters/discord-rest.js";
import { readDiscordWebhookUrl, webhookPathOf } from "../shared/values/discord-webhook-url.js";
import type { PostDiscordWebhook } from "./send-alert-digests.js";

/** The longest an alert digest waits for a Discord rate limit before it is retried at the next pass instead. */
export const ALERT_DISCORD_MAX_WAIT_MS = 10_000;

/**
 * Posts alert digests to an owner's Discord webhook through the project's one Discord client (its rate limits, its
 * base URL setting): Execute Webhook on the stored URL's id and token. Refusals Discord means for good (an unknown or
 * deleted webhook, a 4xx other than 429) are permanent; a rate limit past ALERT_DISCORD_MAX_WAIT_MS, a 5xx or no
 * answer are temporary. Reasons never carry the webhook's token (the client describes paths without it).
 */
export function createAlertWebhookPoster(discord: DiscordRest): PostDiscordWebhook {
  return async (webhookUrl, message) => {
    const webhook = readDiscordWebhookUrl(webhookUrl);
    if (webhook === undefined) return { kind: "permanent", reason: "stored webhook URL is not a Discord webhook" };
    const answer = await discord.request({ method: "POST", path: webhookPathOf(webhook), body: message, maxWaitMs: ALERT_DISCORD_MAX_WAIT_MS });
    if (answer.kind === "ok") return { kind: "ok" };
    if (answer.kind === "error") return { kind: answer.status >= 500 ? "temporary" : "permanent", reason: answer.error };
    return { kind: "temporary", reason: answer.error };
  };
}
