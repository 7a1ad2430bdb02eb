import { createEnvReader } from "../shared/runtime/config.js";
import { readDatabaseUrl, readPort, readSecretBox } from "../shared/runtime/process-config.js";
import type { SecretBox } from "../shared/runtime/secrets.js";
import { readFraudRules } from "../hearts/read-fraud-rules.js";
import type { FraudRules } from "../hearts/domain/fraud-rules.js";
import { readAbuseRules } from "../referral/read-abuse-rules.js";
import type { AbuseRules } from "../referral/domain/abuse-signals.js";
import { readAccessSettings, type AccessSettings } from "../access/bootstrap.js";
import { readRetrySchedule } from "../delivery/pipeline/retry-schedule.js";
import type { RetrySchedule } from "../delivery/pipeline/retry-schedule.js";
import { CALLBACK_TIMEOUT_MS } from "../delivery/pipeline/send-callback.js";
import { checkAddressHorizon, readAddressSettings, type AddressSettings } from "../shared/runtime/address-settings.js";
import { readRetentionSettings, type RetentionSettings } from "../retention/retention-settings.js";
import { readReminderSettings, type ReminderSettings } from "../reminders/reminder-settings.js";
import { readAlertSettings, type AlertSettings } from "../alerts/alert-settings.js";
import { BUSY_CHECK_SECONDS, DEFAULT_IDLE_CHECK_SECONDS } from "../rewards/domain/next-check.js";
import { readPeriodCloserSettings, type PeriodCloserSettings } from "../rewards/close-periods.js";
import { readGoalPayerSettings, type GoalPayerSettings } from "../rewards/pay-reached-goals.js";

/** Settings of the referral service process, validated at start. */
export interface ReferralServiceConfig {
  databaseUrl: string;
  secretBox: SecretBox;
  host: string;
  port: number;
  opsPort: number;
  publicBaseUrl: string;
  /** Base of owners' dashboard login links (LOGIN_LINK_BASE_URL; default PUBLIC_BASE_URL). */
  loginLinkBaseUrl: string;
  allowInsecureCallbacks: boolean;
  callbackTimeoutMs: number;
  /** Retry schedule of test callbacks, which are deliveries like any other. */
  retrySchedule: RetrySchedule;
  dbPoolSize: number;
  fraudRules: FraudRules;
  /** Referral anti-abuse thresholds (ABUSE_RULES_JSON / ABUSE_RULES_FILE). */
  abuseRules: AbuseRules;
  /** Service tokens from settings and the development-only ALLOW_UNAUTHENTICATED_RPC. */
  access: AccessSettings;
  /** How long voters' addresses are kept, and the version of the key that pseudonymises them. */
  addresses: AddressSettings;
  /** The retention loop's settings (RETENTION_*): this process runs it. */
  retention: RetentionSettings;
  /** The reward queue's poll interval of a quiet server (REWARD_QUEUE_IDLE_CHECK_SECONDS, default 120; docs/reward-queue.md). */
  rewardQueueIdleCheckSeconds: number;
  /** The period closer's settings (REWARD_PERIOD_*): this process runs it (services/rewards/close-periods.ts). */
  periodCloser: PeriodCloserSettings;
  goalPayer: GoalPayerSettings;
  /** E-mail vote reminders (SMTP_URL, MAIL_FROM, REMINDER_*; docs/reminders.md): this process stores and sends them. */
  reminders: ReminderSettings;
  /** Owner alerts (ALERT_*; docs/owner-alerts.md): this process scans their causes and sends their digests. */
  alerts: AlertSettings;
}

/** Loads and validates every setting; throws ConfigError listing every problem at once. */
export function loadReferralServiceConfig(env: Record<string, string | undefined> = process.env): ReferralServiceConfig {
  const r = createEnvReader(env);
  const config = {
    databaseUrl: readDatabaseUrl(r),
    secretBox: readSecretBox(r),
    host: r.string("HOST", "127.0.0.1"),
    port: readPort(r, "PORT", 8081),
    opsPort: readPort(r, "OPS_PORT", 9081),
    publicBaseUrl: r.string("PUBLIC_BASE_URL", "http://127.0.0.1:8080"),
    loginLinkBaseUrl: r.string("LOGIN_LINK_BASE_URL", r.string("PUBLIC_BASE_URL", "http://127.0.0.1:8080")),
    allowInsecureCallbacks: r.bool("ALLOW_INSECURE_CALLBACKS", false),
    callbackTimeoutMs: r.int("CALLBACK_TIMEOUT_MS", CALLBACK_TIMEOUT_MS, { min: 100, max: 60_000 }),
    retrySchedule: readRetrySchedule(r),
    dbPoolSize: r.int("DB_POOL_SIZE", 20, { min: 1, max: 200 }),
    fraudRules: readFraudRules(r),
    abuseRules: readAbuseRules(r),
    access: readAccessSettings(r),
    addresses: readAddressSettings(r),
    reminders: readReminderSettings(r),
    alerts: readAlertSettings(r),
    rewardQueueIdleCheckSeconds: r.int("REWARD_QUEUE_IDLE_CHECK_SECONDS", DEFAULT_IDLE_CHECK_SECONDS, { min: BUSY_CHECK_SECONDS, max: 3_600 }),
    periodCloser: readPeriodCloserSettings(r),
    goalPayer: readGoalPayerSettings(r),
  };
  const { fraudRules: f, abuseRules: a } = config;
  // Every rule that reads a heart's or a click's address looks back no further than the addresses are kept.
  checkAddressHorizon(r, config.addresses, {
    "fraud ipIdentities": f.ipIdentities.windowMinutes * 60,
    "fraud subnetIdentities": f.subnetIdentities.windowMinutes * 60,
    "fraud ipVelocity": f.ipVelocity.windowSeconds,
    "abuse ipFanout": a.ipFanout.windowMinutes * 60,
    "abuse subnetFanout": a.subnetFanout.windowMinutes * 60,
    "abuse clickVelocity": a.clickVelocity.windowSeconds,
  });
  const retention = readRetentionSettings(r, config.fraudRules);
  return r.finish({ ...config, retention } as ReferralServiceConfig);
}
