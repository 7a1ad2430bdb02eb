import { randomUUID } from "node:crypto";
import { Prisma } from "../../gen/prisma/client.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import type { Mailer } from "../shared/adapters/mailer.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { DependencyUnavailable, DomainError, Overloaded } from "../shared/rpc/errors.js";
import type { ReceiptLinks } from "../hearts/receipt-token.js";
import { TOMBSTONE_PREFIX } from "../shared/values/tombstone.js";
import { BAD_EMAIL_TEXT, DISCORD_REMINDERS_OFF_TEXT, NO_DISCORD_ID_TEXT, REFUSED_EMAIL_TEXT, REMINDERS_OFF_TEXT } from "../shared/values/reminder-texts.js";
import { normalizeEmail } from "./domain/reminder-schedule.js";
import { confirmMail, confirmUrlOf } from "./reminder-mail.js";
import { activateReminder, endReminder, readReminder, readReminderId, upsertDiscordReminder, upsertPendingReminder } from "./reminder-store.js";
import { hashToken, matchesHash, mintConfirmToken, newUnsubscribeNonce, splitReminderToken, type UnsubscribeTokens } from "./reminder-tokens.js";

/** What the reminder use cases need: reminders are on only with a mailer (SMTP_URL). */
export interface ReminderDeps extends CoreDeps {
  /** PUBLIC_BASE_URL, read at each use (links point at the public gateway). */
  publicBaseUrl: string;
  /** Absent without SMTP_URL: opt-ins are refused and nothing is sent. */
  mailer?: Mailer;
  /** DISCORD_BOT_TOKEN is set: Discord DM opt-ins are taken. */
  discordDmReminders?: boolean;
}

/** The process's token readers: receipt links (opt-in) and unsubscribe tokens. */
export interface ReminderTokens {
  receipts: ReceiptLinks;
  unsubscribe: UnsubscribeTokens;
}

/** The one answer for a token that names nothing (wrong, tampered, used for another purpose, or its row is gone). */
export const UNKNOWN_REMINDER_TOKEN_TEXT = "unknown token";
/** The shortest time between two opt-ins (confirm mails) of one voter on one server. */
export const OPT_IN_INTERVAL_MS = 60_000;
/** How long to wait after the mail server could not take the confirmation. */
const MAIL_RETRY_AFTER_MS = 60_000;

/** The heart a receipt token names: its server, voter and Discord id; not_found when it is gone or its voter erased. */
async function readReceiptHeart(
  deps: ReminderDeps,
  heartId: string,
): Promise<{ server_id: string; voter_identity: string; discord_id: string | null; server_name: string }> {
  // Bounded: one heart by primary key and its server by primary key.
  const [heart] = await runSql<{ server_id: string; voter_identity: string; discord_id: string | null; server_name: string }>(
    deps.prisma,
    Prisma.sql`SELECT h.server_id, h.voter_identity, h.discord_id, s.name AS server_name FROM hearts h JOIN servers s ON s.id = h.server_id WHERE h.id = ${heartId}::uuid`,
  );
  // An erased voter's heart names a tombstone, no voter: nothing to remind (the receipt shows no form either).
  if (heart === undefined || heart.voter_identity.startsWith(TOMBSTONE_PREFIX)) throw new DomainError("not_found", UNKNOWN_REMINDER_TOKEN_TEXT);
  return heart;
}

/**
 * Opt-in from a receipt page: the receipt token names one heart, hence its server and voter; their one subscription
 * becomes pending with this address (an earlier one's address is replaced and must be confirmed again) and the confirm
 * link is mailed. A 5xx refusal of the confirmation ends the subscription as bounced; a temporary one is unavailable
 * (the voter tries again; the pending row waits for a confirm that cannot come and is replaced by the next opt-in).
 */
export async function subscribeReminder(
  deps: ReminderDeps,
  tokens: ReminderTokens,
  req: { receiptToken: string; email: string },
): Promise<{ serverName: string }> {
  const heartId = tokens.receipts.heartIdOf(req.receiptToken);
  if (heartId === undefined) throw new DomainError("not_found", UNKNOWN_REMINDER_TOKEN_TEXT);
  if (deps.mailer === undefined) throw new DomainError("failed_precondition", REMINDERS_OFF_TEXT);
  const email = normalizeEmail(req.email);
  if (email === undefined) throw new DomainError("invalid_argument", BAD_EMAIL_TEXT);
  const heart = await readReceiptHeart(deps, heartId);
  const now = deps.now();
  // The confirm token names the row's id, so a second opt-in keeps the row's id (two opt-ins racing: the later one wins).
  const id = (await readReminderId(deps.prisma, heart.server_id, heart.voter_identity)) ?? randomUUID();
  const { token, hash } = mintConfirmToken(id);
  // At most one opt-in (one confirm mail) per voter and server per OPT_IN_INTERVAL_MS: a receipt link cannot be used to
  // flood an address with confirm mails.
  const written = await upsertPendingReminder(deps.prisma, {
    id,
    serverId: heart.server_id,
    voterIdentity: heart.voter_identity,
    email,
    confirmHash: hash,
    nonce: newUnsubscribeNonce(),
    now,
    notChangedSince: new Date(now.getTime() - OPT_IN_INTERVAL_MS),
  });
  if (written === undefined) throw new Overloaded(OPT_IN_INTERVAL_MS);
  const sent = await deps.mailer.send(confirmMail({ to: email, serverName: heart.server_name, confirmUrl: confirmUrlOf(deps.publicBaseUrl, token) }));
  if (!sent.ok && sent.kind === "permanent") {
    await endReminder(deps.prisma, { id, state: "bounced", now });
    throw new DomainError("invalid_argument", REFUSED_EMAIL_TEXT);
  }
  if (!sent.ok) throw new DependencyUnavailable(MAIL_RETRY_AFTER_MS, "the e-mail could not be sent right now; try again in a minute");
  return { serverName: heart.server_name };
}

/**
 * Discord DM opt-in from a receipt page: the receipt token names one heart, hence its server, its voter and the Discord
 * user id it carried; their one subscription becomes an active DM reminder at once (the token proves the voter, and a
 * DM reaches only that Discord account, so there is no confirm step). Throttled per voter and server as e-mail opt-ins.
 */
export async function subscribeDiscordReminder(deps: ReminderDeps, tokens: ReminderTokens, req: { receiptToken: string }): Promise<{ serverName: string }> {
  const heartId = tokens.receipts.heartIdOf(req.receiptToken);
  if (heartId === undefined) throw new DomainError("not_found", UNKNOWN_REMINDER_TOKEN_TEXT);
  if (deps.discordDmReminders !== true) throw new DomainError("failed_precondition", DISCORD_REMINDERS_OFF_TEXT);
  const heart = await readReceiptHeart(deps, heartId);
  if (heart.discord_id === null) throw new DomainError("failed_precondition", NO_DISCORD_ID_TEXT);
  const now = deps.now();
  const id = (await readReminderId(deps.prisma, heart.server_id, heart.voter_identity)) ?? randomUUID();
  const written = await upsertDiscordReminder(deps.prisma, {
    id,
    serverId: heart.server_id,
    voterIdentity: heart.voter_identity,
    discordId: heart.discord_id,
    nonce: newUnsubscribeNonce(),
    now,
    notChangedSince: new Date(now.getTime() - OPT_IN_INTERVAL_MS),
  });
  if (written === undefined) throw new Overloaded(OPT_IN_INTERVAL_MS);
  return { serverName: heart.server_name };
}

/** The confirm link's POST: pending -> active. A GET never gets here (the gateway shows a button). */
export async function confirmReminder(deps: ReminderDeps, req: { token: string }): Promise<{ serverName: string }> {
  const parts = splitReminderToken(req.token);
  const row = parts && (await readReminder(deps.prisma, parts.id));
  if (row === undefined || !matchesHash(req.token, row.confirm_token_hash)) {
    // Confirming twice (a double click) finds the hash cleared: an active row whose id the token names is confirmed already.
    throw new DomainError("not_found", UNKNOWN_REMINDER_TOKEN_TEXT);
  }
  await activateReminder(deps.prisma, { id: row.id, confirmHash: hashToken(req.token), now: deps.now() });
  return { serverName: row.server_name };
}

/** One-click unsubscribe (the link's POST, or a mail client's RFC 8058 POST): the subscription ends, never mailed again. */
export async function unsubscribeReminder(deps: ReminderDeps, tokens: ReminderTokens, req: { token: string }): Promise<{ serverName: string }> {
  const parts = splitReminderToken(req.token);
  const row = parts && (await readReminder(deps.prisma, parts.id));
  if (parts === undefined || row === undefined || !tokens.unsubscribe.matches(row.id, row.unsubscribe_nonce, parts.secret)) {
    throw new DomainError("not_found", UNKNOWN_REMINDER_TOKEN_TEXT);
  }
  await endReminder(deps.prisma, { id: row.id, state: "unsubscribed", now: deps.now() });
  return { serverName: row.server_name };
}
