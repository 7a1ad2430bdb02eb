import type { EnvReader } from "../shared/runtime/config.js";
import { DEFAULT_REMINDER_JITTER_SECONDS } from "./domain/reminder-schedule.js";
import { createReminderLoop, DEFAULT_REMINDER_BATCH_ROWS, DEFAULT_REMINDER_INTERVAL_SECONDS } from "./send-reminders.js";
import { createUnsubscribeTokens } from "./reminder-tokens.js";
import { createMailer, type Mailer } from "../shared/adapters/mailer.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import type { Logger } from "../shared/runtime/log.js";
import type { SecretBox } from "../shared/runtime/secrets.js";
import type { DiscordRest } from "../shared/adapters/discord-rest.js";

/**
 * Vote reminders' settings (docs/reminders.md): `smtpUrl` undefined: e-mail reminders are off; `discordBotToken`
 * undefined: Discord DM reminders are off (no offer, nothing sent).
 */
export interface ReminderSettings {
  /** SMTP_URL (`smtp://user:pass@host:587` or `smtps://...`); a secret, never logged. */
  smtpUrl: string | undefined;
  /** DISCORD_BOT_TOKEN: the list's own Discord bot, which sends DM reminders; a secret, never logged. */
  discordBotToken: string | undefined;
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
    discordBotToken: r.optionalString("DISCORD_BOT_TOKEN"),
    mailFrom,
    jitterSeconds: r.int("REMINDER_JITTER_SECONDS", DEFAULT_REMINDER_JITTER_SECONDS, { min: 0, max: 86_400 }),
    intervalSeconds: r.int("REMINDER_INTERVAL_SECONDS", DEFAULT_REMINDER_INTERVAL_SECONDS, { min: 1, max: 3_600 }),
    batchRows: r.int("REMINDER_BATCH_ROWS", DEFAULT_REMINDER_BATCH_ROWS, { min: 1, max: 10_000 }),
  };
}

/** A process's vote reminders: the mailer the RPCs use (absent without SMTP_URL), whether DMs are on, and the sender loop. */
export interface ProcessReminders {
  mailer: Mailer | undefined;
  /** DISCORD_BOT_TOKEN is set: the receipt page offers Discord DM reminders and the sender sends them. */
  discordDm: boolean;
  start(): void;
  /** Stops the loop (waiting for a pass in progress) and closes the SMTP connections. */
  stop(): Promise<void>;
}

/**
 * The vote reminders of the process that owns vote_reminders (the referral service, or `npm start`): with SMTP_URL a
 * mailer, with DISCORD_BOT_TOKEN DMs through the process's Discord client, and with either the sender loop; with
 * neither nothing (opt-ins are refused, nothing is sent, no loop runs).
 */
export function createProcessReminders(deps: {
  db: PrismaClient;
  secretBox: SecretBox;
  publicBaseUrl: string;
  settings: ReminderSettings;
  /** The process's one Discord client (used only with DISCORD_BOT_TOKEN). */
  discord: DiscordRest;
  log: Logger;
  now: () => Date;
}): ProcessReminders {
  const { settings } = deps;
  const discordDm = settings.discordBotToken !== undefined;
  if (settings.smtpUrl === undefined && !discordDm) return { mailer: undefined, discordDm, start: () => undefined, stop: async () => undefined };
  const mailer = settings.smtpUrl === undefined ? undefined : createMailer({ smtpUrl: settings.smtpUrl, from: settings.mailFrom });
  const loop = createReminderLoop({
    db: deps.db,
    ...(mailer ? { mailer } : {}),
    ...(settings.discordBotToken !== undefined ? { bot: { rest: deps.discord, botToken: settings.discordBotToken } } : {}),
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
    discordDm,
    start: () => loop.start(),
    async stop() {
      await loop.stop();
      mailer?.close();
    },
  };
}
