import { DiscordErrorCode, type DiscordRest } from "../shared/adapters/discord-rest.js";
import type { MailResult } from "../shared/adapters/mailer.js";

/**
 * A vote reminder as a Discord DM through the list's bot (docs/reminders.md): Create DM (`POST /users/@me/channels`)
 * then Create Message in that channel, through THE Discord client (its rate limits obeyed there). The answer has the
 * mailer's shape, so the sender treats both channels alike: `permanent` for 50007 (the user takes no DMs from the bot:
 * the subscription ends, as a bounce) or 10013 (unknown user), `temporary` for anything else: a rate limit, a 5xx, no
 * answer, or a refusal that is the list's to fix (tried again later, given up per heart). The bot token and the user id never reach a reason text: it names the Discord status and code only.
 */

/** The list's bot (DISCORD_BOT_TOKEN, a secret) and the process's Discord client. */
export interface ReminderBot {
  rest: DiscordRest;
  botToken: string;
}

/** Discord's JSON code Unknown Channel: a kept DM channel that is gone. */
const UNKNOWN_CHANNEL = DiscordErrorCode.unknownChannel;
/** Discord's JSON code Unknown User. */
const UNKNOWN_USER = DiscordErrorCode.unknownUser;
/** How long one DM call may wait for a rate limit before it is rescheduled (the sender's temporary-failure path). */
const DM_MAX_WAIT_MS = 5_000;

/** The DM's text: the server, that the voter can vote now, and the one-click unsubscribe link. */
export function reminderDmText(q: { serverName: string; unsubscribeUrl: string }): string {
  return [`You can vote for ${q.serverName} again now.`, "", `No more reminders: ${q.unsubscribeUrl}`].join("\n");
}

/**
 * Sends one reminder DM to `discordId`, in `channelId` when the DM channel is known (else Create DM first). Answers the
 * channel it learnt (`learnt`: keep it) or found gone (`learnt: null`: forget it; 10003 Unknown Channel, tried again
 * with a new one next time).
 */
export async function sendReminderDm(
  bot: ReminderBot,
  q: { discordId: string; channelId: string | null; text: string },
): Promise<MailResult & { learnt?: string | null }> {
  if (q.channelId !== null) {
    const sent = await createMessage(bot, q.channelId, q.text);
    if (!sent.ok && sent.code === UNKNOWN_CHANNEL) return { ok: false, kind: "temporary", reason: sent.reason, learnt: null };
    return sent;
  }
  const opened = await bot.rest.request({
    method: "POST",
    path: "/users/@me/channels",
    body: { recipient_id: q.discordId },
    botToken: bot.botToken,
    maxWaitMs: DM_MAX_WAIT_MS,
  });
  const channelId = opened.ok ? (opened.body as { id?: unknown } | undefined)?.id : undefined;
  if (!opened.ok) return failureOf(opened);
  if (typeof channelId !== "string" || !/^\d+$/.test(channelId)) return { ok: false, kind: "temporary", reason: "Discord DM channel without an id" };
  return { ...(await createMessage(bot, channelId, q.text)), learnt: channelId };
}

/** Create Message in a DM channel. */
async function createMessage(bot: ReminderBot, channelId: string, text: string): Promise<MailResult & { code?: number }> {
  const sent = await bot.rest.request({
    method: "POST",
    path: `/channels/${channelId}/messages`,
    // No mentions are parsed: the text is the list's own, never a ping.
    body: { content: text, allowed_mentions: { parse: [] } },
    botToken: bot.botToken,
    maxWaitMs: DM_MAX_WAIT_MS,
  });
  if (!sent.ok) return failureOf(sent);
  const messageId = (sent.body as { id?: unknown } | undefined)?.id;
  return { ok: true, messageId: typeof messageId === "string" ? messageId : "" };
}

/** A Discord refusal in the mailer's terms; the reason carries the status and code, never a token or a user id. */
function failureOf(answer: Exclude<Awaited<ReturnType<DiscordRest["request"]>>, { ok: true }>): MailResult & { code?: number } {
  if (answer.kind === "rateLimited") return { ok: false, kind: "temporary", reason: `Discord rate limit (${answer.scope})` };
  if (answer.kind === "failed") return { ok: false, kind: "temporary", reason: "Discord unreachable" };
  // Only the user's own refusal (50007) or an unknown user (10013) ends the subscription: a bad bot token (401) or
  // any other refusal is the list's to fix, so it is retried (and given up per heart), never ends voters' reminders.
  const permanent = answer.code === DiscordErrorCode.cannotSendToUser || answer.code === UNKNOWN_USER;
  return {
    ok: false,
    kind: permanent ? "permanent" : "temporary",
    reason: `Discord ${answer.status}${answer.code ? ` (${answer.code})` : ""}`,
    code: answer.code,
  };
}
