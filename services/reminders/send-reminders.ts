import type { Logger } from "../shared/runtime/log.js";
import { createPassLoop, type PassLoop } from "../shared/runtime/pass-loop.js";
import type { Mailer } from "../shared/adapters/mailer.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { HEART_COOLDOWN_MS } from "../hearts/domain/streak.js";
import { decideReminder, reminderLeaseMs, retryAfterFailure } from "./domain/reminder-schedule.js";
import { reminderMail, unsubscribeUrlOf } from "./reminder-mail.js";
import { claimDueReminders, endReminder, recordDmChannel, recordReminderPass, type DueReminder } from "./reminder-store.js";
import type { UnsubscribeTokens } from "./reminder-tokens.js";
import { reminderDmText, sendReminderDm, type ReminderBot } from "./send-reminder-dm.js";
import type { MailResult } from "../shared/adapters/mailer.js";

/** Subscriptions one pass claims at most (REMINDER_BATCH_ROWS). */
export const DEFAULT_REMINDER_BATCH_ROWS = 100;
/** The wait between passes when the last one found less than a batch (REMINDER_INTERVAL_SECONDS). */
export const DEFAULT_REMINDER_INTERVAL_SECONDS = 15;

/** What a sender pass needs. */
export interface ReminderPassDeps {
  db: PrismaClient;
  /** Absent without SMTP_URL: e-mail rows wait (looked at again a cooldown later). */
  mailer?: Mailer;
  /** The list's bot (DISCORD_BOT_TOKEN); absent: Discord DM rows wait likewise. */
  bot?: ReminderBot;
  unsubscribe: UnsubscribeTokens;
  /** PUBLIC_BASE_URL: the unsubscribe links point at the public gateway. */
  publicBaseUrl: string;
  jitterSeconds: number;
  batchRows: number;
  log: Logger;
}

/** What one pass did. */
export interface ReminderPassResult {
  claimed: number;
  sent: number;
  bounced: number;
  retried: number;
}

/**
 * One sender pass at `now`: claims at most `batchRows` due subscriptions (a lease keeps other instances off them), then
 * for each decides (domain/reminder-schedule.ts): a heart not reminded yet and due (+ jitter) is mailed once, and the
 * heart recorded so it is never mailed again; a 5xx refusal ends the subscription as bounced; a temporary failure tries
 * again later, given up after MAX_REMINDER_ATTEMPTS; anything else is looked at again when it can next be due. The
 * address never reaches a log line.
 */
export async function runReminderPass(deps: ReminderPassDeps, now: Date): Promise<ReminderPassResult> {
  const rows = await claimDueReminders(deps.db, { now, leaseUntil: new Date(now.getTime() + reminderLeaseMs(deps.batchRows)), limit: deps.batchRows });
  const result: ReminderPassResult = { claimed: rows.length, sent: 0, bounced: 0, retried: 0 };
  for (const row of rows) {
    const outcome = await passOne(deps, row, now);
    if (outcome !== "waited") result[outcome] += 1;
  }
  return result;
}

async function passOne(deps: ReminderPassDeps, row: DueReminder, now: Date): Promise<"sent" | "bounced" | "retried" | "waited"> {
  const decision = decideReminder(
    { id: row.id, lastCountedAt: row.last_counted_at, remindedHeartAt: row.reminded_heart_at, attempts: row.attempts },
    now,
    HEART_COOLDOWN_MS,
    deps.jitterSeconds,
  );
  if (decision.kind === "wait") {
    await recordReminderPass(deps.db, { id: row.id, nextSendAt: decision.at, attempts: row.attempts, now });
    return "waited";
  }
  const unsubscribeUrl = unsubscribeUrlOf(deps.publicBaseUrl, deps.unsubscribe.mint(row.id, row.unsubscribe_nonce));
  const next = new Date(now.getTime() + HEART_COOLDOWN_MS);
  const sent = await sendOne(deps, row, unsubscribeUrl);
  if (sent === undefined) {
    // Failure policy: the row's channel is switched off on this list now (its setting removed): nothing is sent and the
    // heart stays unreminded; looked at again a cooldown later, in case the setting comes back.
    await recordReminderPass(deps.db, { id: row.id, nextSendAt: next, attempts: row.attempts, now });
    return "waited";
  }
  if (sent.ok) {
    await recordReminderPass(deps.db, { id: row.id, nextSendAt: next, remindedHeartAt: decision.heartAt, attempts: 0, now });
    return "sent";
  }
  if (sent.kind === "permanent") {
    await endReminder(deps.db, { id: row.id, state: "bounced", now });
    deps.log.info({ reminder: row.id, channel: row.channel, reason: sent.reason }, "vote reminder bounced; the subscription is ended");
    return "bounced";
  }
  const retry = retryAfterFailure(row.attempts, now);
  deps.log.warn({ reminder: row.id, channel: row.channel, reason: sent.reason, attempt: row.attempts + 1 }, "vote reminder not sent; retried later");
  if (retry.kind === "give_up") {
    // Failure policy: give this heart up after MAX_REMINDER_ATTEMPTS temporary failures; the next heart is tried afresh.
    await recordReminderPass(deps.db, { id: row.id, nextSendAt: next, remindedHeartAt: decision.heartAt, attempts: 0, now });
  } else {
    await recordReminderPass(deps.db, { id: row.id, nextSendAt: retry.at, attempts: row.attempts + 1, now });
  }
  return "retried";
}

/** Sends one reminder over the row's channel; undefined when that channel is off on this list. */
async function sendOne(deps: ReminderPassDeps, row: DueReminder, unsubscribeUrl: string): Promise<MailResult | undefined> {
  if (row.channel === "discord") {
    if (deps.bot === undefined || row.discord_id === null) return undefined;
    const sent = await sendReminderDm(deps.bot, {
      discordId: row.discord_id,
      channelId: row.discord_channel_id,
      text: reminderDmText({ serverName: row.server_name, unsubscribeUrl }),
    });
    if (sent.learnt !== undefined) await recordDmChannel(deps.db, { id: row.id, channelId: sent.learnt });
    return sent;
  }
  if (deps.mailer === undefined || row.email === null) return undefined;
  return deps.mailer.send(reminderMail({ to: row.email, serverName: row.server_name, unsubscribeUrl }));
}

/** The sender loop of the referral service: start() and stop() (waits for a pass in progress). */
export type ReminderLoop = PassLoop;

/**
 * Runs a sender pass every `intervalSeconds` (timed from the end of the last, so passes never overlap), at once again
 * when a pass claimed a full batch. Several instances at once are safe: rows are claimed with SKIP LOCKED and leased.
 */
export function createReminderLoop(deps: ReminderPassDeps & { intervalSeconds: number; now: () => Date }): ReminderLoop {
  return createPassLoop({
    pass: (now) => runReminderPass(deps, now),
    batchRows: deps.batchRows,
    intervalSeconds: deps.intervalSeconds,
    now: deps.now,
    log: deps.log,
    failureText: "reminder pass failed; retried at the next interval",
  });
}
