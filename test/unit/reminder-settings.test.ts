/** Vote reminders' settings (services/reminders/reminder-settings.ts): off without SMTP_URL, defaults, refusals that never echo a password. */
import test from "ava";
import { createProcessReminders, readReminderSettings } from "../../services/reminders/reminder-settings.js";
import { createDiscordRest } from "../../services/shared/adapters/discord-rest.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createSecretBox } from "../../services/shared/runtime/secrets.js";
import { createEnvReader } from "../../services/shared/runtime/config.js";

test("without SMTP_URL reminders are off; the defaults are a 900 s jitter window, 15 s between passes, 100 rows a pass", (t) => {
  const r = createEnvReader({});
  t.like(r.finish(readReminderSettings(r)), { smtpUrl: undefined, jitterSeconds: 900, intervalSeconds: 15, batchRows: 100 });
});

test("a SMTP_URL that is not smtp:// or smtps:// is refused without its password; a negative jitter is refused", (t) => {
  const r = createEnvReader({ SMTP_URL: "http://user:s3cret-pass@mail.example", REMINDER_JITTER_SECONDS: "-1" });
  readReminderSettings(r);
  const error = t.throws(() => r.finish({}));
  t.regex(error!.message, /SMTP_URL must be an smtp:\/\/ or smtps:\/\/ URL/);
  t.regex(error!.message, /REMINDER_JITTER_SECONDS/);
  t.false(error!.message.includes("s3cret-pass"));
  const ok = createEnvReader({ SMTP_URL: "smtps://user:pw@mail.example:465", REMINDER_JITTER_SECONDS: "0" });
  t.like(ok.finish(readReminderSettings(ok)), { smtpUrl: "smtps://user:pw@mail.example:465", jitterSeconds: 0 });
});

test("DISCORD_BOT_TOKEN alone turns Discord DM reminders on (no mailer) and runs the sender; with neither setting nothing runs", async (t) => {
  const deps = {
    db: {} as never,
    secretBox: createSecretBox(Buffer.alloc(32, 1)),
    publicBaseUrl: "http://gateway.example",
    discord: createDiscordRest({ baseUrl: "http://127.0.0.1:9" }),
    log: createLogger("test", "silent"),
    now: () => new Date(),
  };
  const r = createEnvReader({ DISCORD_BOT_TOKEN: "bot-token-secret" });
  const settings = r.finish(readReminderSettings(r));
  t.is(settings.discordBotToken, "bot-token-secret");
  const on = createProcessReminders({ ...deps, settings });
  t.like(on, { mailer: undefined, discordDm: true });
  const none = createEnvReader({});
  t.like(createProcessReminders({ ...deps, settings: none.finish(readReminderSettings(none)) }), { mailer: undefined, discordDm: false });
  await deps.discord.close();
});
