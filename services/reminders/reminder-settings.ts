import type { EnvReader } from "../shared/runtime/config.js";
import { DEFAULT_REMINDER_JITTER_SECONDS } from "./domain/reminder-schedule.js";
import { createReminderLoop, DEFAULT_REMINDER_BATCH_ROWS, DEFAULT_REMINDER_INTERVAL_SECONDS } from "./send-reminders.js";
import { createUnsubscribeTokens } from "./reminder-tokens.js";
import { createMailer, type Mailer } from "../shared/adapters/mailer.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import type { Logger } from "../shared/runtime/log.js";
import type { SecretBox } from "../shared/runtime/secrets.js";

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

/** A process's vote reminders: the mailer the RPCs use and the sender loop, both absent without SMTP_URL. */
export interface ProcessReminders {
  mailer: Mailer | undefined;
  start(): void;
  /** Stops the loop (waiting for a pass in progress) and closes the SMTP connections. */
  stop(): Promise<void>;
}

/**
 * The vote reminders of the process that owns vote_reminders (the referral service, or `npm start`): with SMTP_URL a
 * mailer and the sender loop; without it nothing (opt-ins are refused, nothing is sent, no loop runs).
 */
export function createProcessReminders(deps: {
  db: PrismaClient;
  secretBox: SecretBox;
  publicBaseUrl: string;
  settings: ReminderSettings;
  log: Logger;
  now: () => Date;
}): ProcessReminders {
  const { settings } = deps;
  if (settings.smtpUrl === undefined) return { mailer: undefined, start: () => undefined, stop: async () => undefined };
  const mailer = createMailer({ smtpUrl: settings.smtpUrl, from: settings.mailFrom });
  const loop = createReminderLoop({
    db: deps.db,
    mailer,
    unsubscribe: createUnsubscribeTokens(deps.secretBox),
    publicBaseUrl: deps.publicBaseUrl,
    jitterSeconds: settings.jitterSeconds,
    batchRows: settings.batchRows,
    intervalSeconds: settings.intervalSeconds,
    log: deps.log,
    now: deps.now,
  });
  return {
    mailer,
    start: () => loop.start(),
    async stop() {
      await loop.stop();
      mailer.close();
    },
  };
}
