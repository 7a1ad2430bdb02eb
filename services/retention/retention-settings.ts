import type { EnvReader } from "../shared/runtime/config.js";
import type { FraudRules } from "../hearts/domain/fraud-rules.js";
import { readAddressSettings } from "../shared/runtime/address-settings.js";
import { readKafkaTopicRetentionHours } from "../shared/runtime/process-config.js";
import { CLAIM_HOLD_DAYS } from "../servers/claim-settings.js";
import { HEART_COOLDOWN_MS } from "../hearts/domain/streak.js";
import { ATTRIBUTION_WINDOW_DAYS, LOCK_DAYS } from "../servers/domain/referral-settings.js";

/** Seconds in an hour and in a day: the units the age-limit settings are given in. */
const HOUR_SECONDS = 3_600;
const DAY_SECONDS = 24 * HOUR_SECONDS;

/**
 * The retention runner's settings: the loop's pace, the batch bounds, and each kind of data's age limit (in
 * seconds here, whatever unit its setting is given in). Documented in the README's settings table.
 */
export interface RetentionSettings {
  /** RETENTION_ENABLED (default true): false runs no pass at all. */
  enabled: boolean;
  /** Seconds between two passes (RETENTION_INTERVAL_SECONDS, default 60). */
  intervalSeconds: number;
  /** Rows one statement removes at most (RETENTION_BATCH_ROWS, default 1,000). */
  batchRows: number;
  /** Rows one rule removes at most in one pass (RETENTION_PASS_MAX_ROWS, default 10,000): the pass's budget per rule. */
  passMaxRows: number;
  /**
   * Most of the time a pass spends in its statements, in percent (RETENTION_DUTY_PERCENT, default 10): after a
   * statement of d ms the pass waits d x (100 / percent - 1) ms, so a catch-up of years of rows is spread out
   * instead of competing with the hot paths. 100: no wait.
   */
  dutyPercent: number;
  /** Published outbox rows: kept this long after publishing (RETENTION_PUBLISHED_OUTBOX_SECONDS, default 300). */
  publishedOutboxSeconds: number;
  /** Attempts' request/response exchanges: kept this long after their delivery was delivered or failed (RETENTION_ATTEMPT_EXCHANGE_DAYS, default 30). */
  attemptExchangeSeconds: number;
  /** Dead letters: kept this long (RETENTION_DEAD_LETTER_DAYS, default 30). */
  deadLetterSeconds: number;
  /** Dashboard login links and sessions: kept this long after they expire (RETENTION_DASHBOARD_EXPIRED_HOURS, default 24). */
  dashboardExpiredSeconds: number;
  /** Expired claim-ledger rows: kept this long after they expired (RETENTION_EXPIRED_CLAIM_DAYS, default 30). */
  expiredClaimSeconds: number;
  /**
   * The identity rules' set (heart_address_voters): kept this long after the voter last counted from the address,
   * the longest identity window (FRAUD_RULES) plus RETENTION_ADDRESS_VOTERS_MARGIN_HOURS (default 24).
   */
  addressVotersSeconds: number;
  /**
   * Voters' IP, subnet and user agent on hearts and referral clicks: kept this long, then erased (ADDRESS_RETENTION_HOURS,
   * default 48; services/shared/runtime/address-settings.ts).
   */
  voterAddressSeconds: number;
  /**
   * Ended deliveries (delivered, failed, withdrawn) with their attempts: kept this long after they ended
   * (RETENTION_DELIVERY_DAYS, default 90, at least 8 and more than KAFKA_TOPIC_RETENTION_HOURS plus a day: readDeliveryDays).
   */
  deliverySeconds: number;
  /**
   * Hearts (with their claim-ledger rows and payouts) and voter states: kept this long after the heart was cast / the
   * voter last counted (RETENTION_HEART_DAYS, default 400: a year and a month). Never shorter than heartWindowsDays.
   */
  heartSeconds: number;
  /**
   * Referral clicks that never registered anyone: kept this long after the click (RETENTION_CLICK_DAYS, default 400),
   * at least MIN_HISTORY_DAYS so no server's attribution window still lets such a click register.
   */
  clickSeconds: number;
  /**
   * Referrals not held for review, with their clicks, events and credit: kept this long after their last change
   * (RETENTION_REFERRAL_DAYS, default 400), at least MIN_HISTORY_DAYS so a qualified referral is past every server's
   * lock before it goes (a reversal then is only a clawback record; the credit stays counted).
   */
  referralSeconds: number;
  /**
   * Acknowledged reward queue entries: kept this long after their acknowledgement (RETENTION_REWARD_QUEUE_ACKED_DAYS,
   * default 90, at least 8 and more than KAFKA_TOPIC_RETENTION_HOURS plus a day: an entry's key is what keeps a replayed
   * vote from queueing its rewards again, so it stays until the topic forgot the vote).
   */
  rewardQueueAckedSeconds: number;
  /** Ended (unsubscribed, bounced) vote reminders with their address: kept this long after they ended (RETENTION_REMINDER_DAYS, default 30). */
  endedReminderSeconds: number;
  /** Owner alerts (the dashboard list, digests sent): kept this long after they fired (RETENTION_OWNER_ALERT_DAYS, default 90). */
  ownerAlertSeconds: number;
}

/**
 * The shortest RETENTION_HEART_DAYS allowed, in whole days: longer than every window a heart still matters to (the
 * longest claim hold window a server may set, the cooldown, the streak's day gap, the fraud rules' windows), so the
 * hearts' retention never removes a heart, ledger row or voter state a claim, a cast's cooldown or streak, or a fraud
 * rule could still read.
 */
export function heartWindowsDays(fraudRules: FraudRules): number {
  const windowsMs = [
    CLAIM_HOLD_DAYS.max * DAY_SECONDS * 1000,
    HEART_COOLDOWN_MS,
    // A streak continues on the day after the last counted day: two UTC days at most.
    2 * DAY_SECONDS * 1000,
    fraudRules.ipIdentities.windowMinutes * 60_000,
    fraudRules.subnetIdentities.windowMinutes * 60_000,
    fraudRules.ipVelocity.windowSeconds * 1000,
  ];
  return Math.floor(Math.max(...windowsMs) / (DAY_SECONDS * 1000)) + 1;
}

/**
 * The shortest age limit of referral clicks and referrals, in days: one day more than the longest attribution window
 * and the longest lock a server can set (services/servers/domain/referral-settings.ts). Every anti-abuse window that
 * reads clicks is within ADDRESS_RETENTION_HOURS (at most 366 days, checked at start), so it is within this too; and the
 * fan-out windows read linked clicks only, which the click rule never removes.
 */
export const MIN_HISTORY_DAYS = Math.max(ATTRIBUTION_WINDOW_DAYS.max, LOCK_DAYS.max) + 1;

/**
 * Reads the retention settings (problems recorded on `r`, reported with the process's others). `fraudRules`
 * are the process's own: the identity set is kept as long as their longest identity window reaches.
 */
export function readRetentionSettings(r: EnvReader, fraudRules: FraudRules): RetentionSettings {
  const longestIdentityWindowSeconds = Math.max(fraudRules.ipIdentities.windowMinutes, fraudRules.subnetIdentities.windowMinutes) * 60;
  return {
    enabled: r.bool("RETENTION_ENABLED", true),
    intervalSeconds: r.int("RETENTION_INTERVAL_SECONDS", 60, { min: 1, max: DAY_SECONDS }),
    batchRows: r.int("RETENTION_BATCH_ROWS", 1_000, { min: 1, max: 10_000 }),
    passMaxRows: r.int("RETENTION_PASS_MAX_ROWS", 10_000, { min: 1, max: 1_000_000 }),
    dutyPercent: r.int("RETENTION_DUTY_PERCENT", 10, { min: 1, max: 100 }),
    publishedOutboxSeconds: r.int("RETENTION_PUBLISHED_OUTBOX_SECONDS", 300, { min: 0, max: 30 * DAY_SECONDS }),
    attemptExchangeSeconds: r.int("RETENTION_ATTEMPT_EXCHANGE_DAYS", 30, { min: 1, max: 3_650 }) * DAY_SECONDS,
    deadLetterSeconds: r.int("RETENTION_DEAD_LETTER_DAYS", 30, { min: 1, max: 3_650 }) * DAY_SECONDS,
    dashboardExpiredSeconds: r.int("RETENTION_DASHBOARD_EXPIRED_HOURS", 24, { min: 0, max: 24 * 3_650 }) * HOUR_SECONDS,
    expiredClaimSeconds: r.int("RETENTION_EXPIRED_CLAIM_DAYS", 30, { min: 1, max: 3_650 }) * DAY_SECONDS,
    addressVotersSeconds: longestIdentityWindowSeconds + r.int("RETENTION_ADDRESS_VOTERS_MARGIN_HOURS", 24, { min: 0, max: 24 * 365 }) * HOUR_SECONDS,
    voterAddressSeconds: readAddressSettings(r).retentionHours * HOUR_SECONDS,
    deliverySeconds: readDeliveryDays(r) * DAY_SECONDS,
    heartSeconds: readHeartDays(r, fraudRules) * DAY_SECONDS,
    clickSeconds: r.int("RETENTION_CLICK_DAYS", 400, { min: MIN_HISTORY_DAYS, max: 3_650 }) * DAY_SECONDS,
    referralSeconds: r.int("RETENTION_REFERRAL_DAYS", 400, { min: MIN_HISTORY_DAYS, max: 3_650 }) * DAY_SECONDS,
    rewardQueueAckedSeconds: readReplaySafeDays(r, "RETENTION_REWARD_QUEUE_ACKED_DAYS", "its rewards would be queued (and paid) again") * DAY_SECONDS,
    endedReminderSeconds: r.int("RETENTION_REMINDER_DAYS", 30, { min: 1, max: 3_650 }) * DAY_SECONDS,
    ownerAlertSeconds: r.int("RETENTION_OWNER_ALERT_DAYS", 90, { min: 1, max: 3_650 }) * DAY_SECONDS,
  };
}

/** The margin by which kept deliveries must outlast the topics' messages: clock skew and Kafka's segment roll (createTopics' segment.ms). */
const REPLAY_MARGIN_HOURS = 24;

/**
 * RETENTION_DELIVERY_DAYS (default 90, min 8), checked against KAFKA_TOPIC_RETENTION_HOURS: a delivery's dedup key
 * is what makes a replayed Kafka message add nothing (a consumer group that lost its offsets reads the topic from
 * its beginning), so a delivery may be removed only once the topic has forgotten its message. A problem is recorded
 * unless RETENTION_DELIVERY_DAYS x 24 > KAFKA_TOPIC_RETENTION_HOURS + 24.
 */
function readDeliveryDays(r: EnvReader): number {
  return readReplaySafeDays(r, "RETENTION_DELIVERY_DAYS", "it would be delivered (and paid) again");
}

/**
 * A number of days (default 90, min 8) a row whose key refuses a replayed heart event is kept: a problem is recorded
 * unless days x 24 > KAFKA_TOPIC_RETENTION_HOURS + REPLAY_MARGIN_HOURS. `replayed` says what a replay past it would do.
 */
function readReplaySafeDays(r: EnvReader, name: string, replayed: string): number {
  const days = r.int(name, 90, { min: 8, max: 3_650 });
  const topicHours = readKafkaTopicRetentionHours(r);
  if (days * 24 <= topicHours + REPLAY_MARGIN_HOURS)
    r.problem(
      `${name} (${days}) must outlast KAFKA_TOPIC_RETENTION_HOURS (${topicHours}) by more than ${REPLAY_MARGIN_HOURS} hours: ` +
        `a heart event replayed from Kafka after its row was removed: ${replayed}; raise it, or shorten the topics' retention`,
    );
  return days;
}

/** RETENTION_HEART_DAYS, refused (a problem saying why) when not longer than every window a heart matters to. */
function readHeartDays(r: EnvReader, fraudRules: FraudRules): number {
  const days = r.int("RETENTION_HEART_DAYS", 400, { max: 3_650 });
  const least = heartWindowsDays(fraudRules);
  if (days < least) {
    r.problem(
      `RETENTION_HEART_DAYS must be >= ${least} (longer than the longest claim hold window, cooldown, streak and fraud window a heart matters to), got ${days}`,
    );
  }
  return days;
}
