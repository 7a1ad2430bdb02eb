import type { EnvReader } from "../shared/runtime/config.js";
import { DEFAULT_REMINDER_JITTER_SECONDS } from "./domain/reminder-schedule.js";
import { DEFAULT_REMINDER_BATCH_ROWS, DEFAULT_REMINDER_INTERVAL_SECONDS } from "./send-reminders.js";

/** E-mail vote reminders' settings (docs/reminders.md); `smtpUrl` undefined: reminders are off (no form, nothing sent). */
export interface ReminderSettings {
  /** SMTP_URL (`smtp://user:pass@host:587` or `smtps://...`); a secret, never logged. */
  smtpUrl: string | undefined;
  /** MAIL_FROM: the From of every message. */
  mailFrom: string;
  /** REMINDER_JITTER_SECONDS: reminders leave within this window after the voter may vote again (default 900). */
  jitterSeconds: number;
  /** REMINDER_INTERVAL_SECONDS: the sender's wait between passes. */
  intervalSeconds: number;
  /** REMINDER_BATCH_ROWS: subscriptions one pass claims at most. */
  batchRows: number;
}

/** Reads the reminder settings; a SMTP_URL that is not smtp:// or smtps:// is a problem (named without its value). */
export function readReminderSettings(r: EnvReader): ReminderSettings {
  const smtpUrl = r.optionalString("SMTP_URL");
  if (smtpUrl !== undefined && !/^smtps?:\/\/[^/]+/.test(smtpUrl)) r.problem("SMTP_URL must be an smtp:// or smtps:// URL");
  const mailFrom = r.string("MAIL_FROM", "Vote reminders <reminders@localhost>");
  return {
    smtpUrl,
    mailFrom,
    jitterSeconds: r.int("REMINDER_JITTER_SECONDS", DEFAULT_REMINDER_JITTER_SECONDS, { min: 0, max: 86_400 }),
    intervalSeconds: r.int("REMINDER_INTERVAL_SECONDS", DEFAULT_REMINDER_INTERVAL_SECONDS, { min: 1, max: 3_600 }),
    batchRows: r.int("REMINDER_BATCH_ROWS", DEFAULT_REMINDER_BATCH_ROWS, { min: 1, max: 10_000 }),
  };
}
