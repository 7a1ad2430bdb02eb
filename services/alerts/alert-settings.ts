import type { PrismaClient } from "../shared/adapters/db.js";
import type { Mailer } from "../shared/adapters/mailer.js";
import type { EnvReader } from "../shared/runtime/config.js";
import type { Logger } from "../shared/runtime/log.js";
import { createPassLoop, type PassLoop } from "../shared/runtime/pass-loop.js";
import type { SecretBox } from "../shared/runtime/secrets.js";
import { readDiscordApiBaseUrl, type DiscordRest } from "../shared/adapters/discord-rest.js";
import { createAlertWebhookPoster } from "./post-alert-webhook.js";
import { DEFAULT_ALERT_SCAN_BATCH_ROWS, DEFAULT_PLUGIN_SILENT_HOURS, runAlertScan } from "./scan-alert-causes.js";
import { DEFAULT_ALERT_DIGEST_WINDOW_SECONDS, DIGEST_OWNERS_PER_PASS, runAlertDigestPass } from "./send-alert-digests.js";

/** ALERT_INTERVAL_SECONDS' default: the wait between passes of the alert scan and digest sender. */
export const DEFAULT_ALERT_INTERVAL_SECONDS = 60;

/** Owner alerts' settings (docs/owner-alerts.md). */
export interface AlertSettings {
  /** ALERT_DIGEST_WINDOW_SECONDS: alerts of one owner that fire within this window go out as one digest. */
  digestWindowSeconds: number;
  /** ALERT_INTERVAL_SECONDS: the wait between passes. */
  intervalSeconds: number;
  /** ALERT_SCAN_BATCH_ROWS: causes one scan writes at most. */
  scanBatchRows: number;
  /** ALERT_PLUGIN_SILENT_HOURS: a reward plugin not seen for this long gets an alert. */
  pluginSilentHours: number;
  /** DISCORD_API_BASE_URL (development and tests only; production: Discord's), for the Discord digests. */
  discordApiBaseUrl: string;
}

/** Reads the owner alerts' settings. */
export function readAlertSettings(r: EnvReader): AlertSettings {
  return {
    digestWindowSeconds: r.int("ALERT_DIGEST_WINDOW_SECONDS", DEFAULT_ALERT_DIGEST_WINDOW_SECONDS, { min: 0, max: 86_400 }),
    intervalSeconds: r.int("ALERT_INTERVAL_SECONDS", DEFAULT_ALERT_INTERVAL_SECONDS, { min: 1, max: 3_600 }),
    scanBatchRows: r.int("ALERT_SCAN_BATCH_ROWS", DEFAULT_ALERT_SCAN_BATCH_ROWS, { min: 1, max: 10_000 }),
    pluginSilentHours: r.int("ALERT_PLUGIN_SILENT_HOURS", DEFAULT_PLUGIN_SILENT_HOURS, { min: 1, max: 24 * 29 }),
    discordApiBaseUrl: readDiscordApiBaseUrl(r),
  };
}

/**
 * The owner alerts' loop of the process that owns owner_alerts (the referral service, or `npm start`): each pass scans
 * the time causes (one bounded batch) and sends the due digests, on the mailer of SMTP_URL (none: no e-mail) and the
 * process's Discord client. Several instances are safe: causes are keyed, digests taken under a lease.
 */
export function createAlertLoop(deps: {
  db: PrismaClient;
  secretBox: SecretBox;
  mailer: Mailer | undefined;
  /** The process's Discord client (its rate limits are shared by every caller). */
  discord: DiscordRest;
  dashboardBaseUrl: string;
  settings: AlertSettings;
  log: Logger;
  now: () => Date;
}): PassLoop {
  const postDiscordWebhook = createAlertWebhookPoster(deps.discord);
  return createPassLoop({
    intervalSeconds: deps.settings.intervalSeconds,
    now: deps.now,
    pass: async (now) => {
      const scan = await runAlertScan({ db: deps.db, batchRows: deps.settings.scanBatchRows, pluginSilentHours: deps.settings.pluginSilentHours }, now);
      const digests = await runAlertDigestPass({ ...deps, postDiscordWebhook, windowSeconds: deps.settings.digestWindowSeconds }, now);
      const fullScan = Math.max(scan.failing, scan.overlaps, scan.silentPlugins) >= deps.settings.scanBatchRows;
      return { full: fullScan || digests.digests >= DIGEST_OWNERS_PER_PASS };
    },
    log: deps.log,
    failureText: "owner alert pass failed; retried at the next interval",
  });
}
