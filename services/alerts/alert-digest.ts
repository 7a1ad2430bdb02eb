import type { MailMessage } from "../shared/adapters/mailer.js";
import { DISCORD_CONTENT_MAX_CHARS } from "../shared/values/discord-template.js";

/**
 * The digest messages of owner alerts (docs/owner-alerts.md): every alert of one owner that fired within the digest
 * window goes out as ONE e-mail and ONE Discord message. Each alert line carries its dashboard link (absolute, on the
 * dashboard's base URL); a digest longer than a message may hold lists the first ones and says how many more wait on
 * the dashboard. Plain text from the alerts' own title and text: no secret and no voter's address is ever in them.
 */

/** An alert as a digest shows it. */
export interface DigestLine {
  title: string;
  detail: string;
  /** The dashboard path (alert-kinds.ts). */
  link: string;
}

/** Alerts an e-mail digest lists in full; the rest are counted. */
export const MAIL_DIGEST_LISTED = 50;
/** Alerts a Discord digest lists; the rest are counted (a message holds 2,000 characters). */
export const DISCORD_DIGEST_LISTED = 8;

const absolute = (baseUrl: string, path: string) => `${baseUrl.replace(/\/+$/, "")}${path}`;
const countOf = (n: number) => (n === 1 ? "1 alert" : `${n} alerts`);

/** The e-mail digest of `lines` (at least one) to `to`. */
export function digestMail(q: { to: string; lines: readonly DigestLine[]; dashboardBaseUrl: string }): MailMessage {
  const listed = q.lines.slice(0, MAIL_DIGEST_LISTED);
  const more = q.lines.length - listed.length;
  const text = [
    `${countOf(q.lines.length)} about your servers:`,
    "",
    ...listed.flatMap((l) => [`* ${l.title}`, `  ${l.detail}`, `  ${absolute(q.dashboardBaseUrl, l.link)}`, ""]),
    ...(more > 0 ? [`... and ${countOf(more)} more on the dashboard: ${absolute(q.dashboardBaseUrl, "/dashboard/")}`, ""] : []),
    "You get these alerts because they are switched on in your dashboard's alert settings.",
  ].join("\n");
  const subject = q.lines.length === 1 ? q.lines[0]!.title : `${countOf(q.lines.length)} about your servers`;
  return { to: q.to, subject, text };
}

/**
 * The Discord webhook message of `lines` (at least one): mentions off; at most DISCORD_DIGEST_LISTED lines, fewer when
 * long ones would pass Discord's content limit, and the count of the rest always fits.
 */
export function digestDiscordMessage(q: { lines: readonly DigestLine[]; dashboardBaseUrl: string }): {
  content: string;
  allowed_mentions: { parse: string[] };
} {
  const head = `**${countOf(q.lines.length)} about your servers**`;
  const tailOf = (more: number) => (more > 0 ? `\n... and ${countOf(more)} more: <${absolute(q.dashboardBaseUrl, "/dashboard/")}>` : "");
  // The longest tail any count can need, kept free while lines are added.
  const reserve = tailOf(q.lines.length).length;
  let content = head;
  let listed = 0;
  for (const l of q.lines.slice(0, DISCORD_DIGEST_LISTED)) {
    const line = `\n- ${l.title} <${absolute(q.dashboardBaseUrl, l.link)}>`;
    if (content.length + line.length + reserve > DISCORD_CONTENT_MAX_CHARS) break;
    content += line;
    listed += 1;
  }
  return { content: content + tailOf(q.lines.length - listed), allowed_mentions: { parse: [] } };
}
