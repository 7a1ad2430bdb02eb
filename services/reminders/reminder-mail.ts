import { REMINDER_CONFIRM_PREFIX, REMINDER_UNSUBSCRIBE_PREFIX } from "../shared/values/wire.js";
import type { MailMessage } from "../shared/adapters/mailer.js";

/**
 * The two messages of vote reminders (docs/reminders.md), plain text: the confirm link of an opt-in, and the reminder
 * itself with its one-click unsubscribe link in the text and in `List-Unsubscribe` / `List-Unsubscribe-Post` (RFC 8058:
 * a mail client's POST to that URL unsubscribes with no page). Links point at the public gateway (PUBLIC_BASE_URL).
 */

const base = (publicBaseUrl: string) => publicBaseUrl.replace(/\/+$/, "");

/** The confirm link of a token. */
export function confirmUrlOf(publicBaseUrl: string, token: string): string {
  return `${base(publicBaseUrl)}${REMINDER_CONFIRM_PREFIX}${token}`;
}

/** The unsubscribe link of a token. */
export function unsubscribeUrlOf(publicBaseUrl: string, token: string): string {
  return `${base(publicBaseUrl)}${REMINDER_UNSUBSCRIBE_PREFIX}${token}`;
}

/** The opt-in's confirmation message (double opt-in: nothing is sent until its link is followed and confirmed). */
export function confirmMail(q: { to: string; serverName: string; confirmUrl: string }): MailMessage {
  return {
    to: q.to,
    subject: `Confirm vote reminders for ${q.serverName}`,
    text: [
      `Someone asked for an e-mail when they can vote for ${q.serverName} again, with this address.`,
      "",
      `To start the reminders, open this link and press the button: ${q.confirmUrl}`,
      "",
      "If it was not you, ignore this message: nothing more will be sent.",
    ].join("\n"),
  };
}

/** A reminder, with the one-click unsubscribe link in the text and the List-Unsubscribe headers. */
export function reminderMail(q: { to: string; serverName: string; unsubscribeUrl: string }): MailMessage {
  return {
    to: q.to,
    subject: `You can vote for ${q.serverName} again`,
    text: [`You can vote for ${q.serverName} again now.`, "", `No more reminders: ${q.unsubscribeUrl}`].join("\n"),
    headers: { "List-Unsubscribe": `<${q.unsubscribeUrl}>`, "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" },
  };
}
