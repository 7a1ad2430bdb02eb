import type { PlatformIds } from "../../shared/values/player-ids.js";
import { REFERRAL_EVENT_TYPES } from "../../shared/values/event-types.js";
import type { ProgressionPayload } from "../../rewards/domain/progression-events.js";

/**
 * The delivery pipeline's value types: what the consumer turns a message into before it is stored
 * (insert-deliveries.ts), and a referral event's body (referral-event.ts builds it). In a module of their own, so the
 * decoders, the statements and the senders that share them need not import each other.
 */

/** A counted heart (or a referral event), as the consumer turns it into deliveries. */
export interface NewDelivery {
  heartId: string;
  serverId: string;
  eventType: string;
  username: string;
  voterIdentity: string;
  period: string;
  streakDay: number | null;
  countedAt: Date;
  /** The voter's platform ids and pass-through account id (absent or null: not given). */
  platformIds?: PlatformIds;
  /** When the voter may count again (absent or null: the event had none). */
  nextEligibleAt?: Date | null;
  /**
   * An event with a body of its own: a referral event (referral-event.ts; its envelope event id), a closed period
   * (period-closed-event.ts; its envelope event id) or a progression event (its id named by the vote): the event id is the dedup key of its deliveries (one per subscribed endpoint),
   * the payload its body fields. Absent for a heart (dedup key: heart_id).
   */
  event?: { eventId: string; payload: EventPayload };
  /**
   * An event sent later than it was made (heart.eligible: when its voter may vote again): its deliveries are due then,
   * not at once (insertEventDeliveries). Absent: due when stored.
   */
  dueAt?: Date;
  /** A counted heart on a server with reward rules: what the rules counted (payload version 3), stored as its payload. */
  rewardCounts?: RewardCountsPayload;
}

/**
 * What the reward rules counted for a counted heart, as payload version 3 sends it (the `payload` column of a
 * `heart.counted` or `heart.test` delivery; null when the heart's server has no saved rules).
 */
export interface RewardCountsPayload {
  weight: number;
  month_total: number;
  total: number;
  reward_streak: number;
}

/** One referral event type. */
export type ReferralEventType = (typeof REFERRAL_EVENT_TYPES)[number];

/** A referral event's body without `timestamp`: the `payload` column of its deliveries. */
export interface ReferralPayload {
  event: ReferralEventType;
  event_id: string;
  server_id: string;
  referral_id: string;
  referrer_identity: string;
  referee_identity: string;
  state: string;
  previous_state: string;
  /** reversed only, when the server sent one: refund, chargeback, fraud, abuse, test or other. */
  reason?: string;
  /** reversed only: the reason as the server sent it, when it was not one of the known values. */
  reason_text?: string;
}

/** One standing of a closed period, in its body: the place (shared by equal counts), the voter's name and votes. */
export interface PeriodStandingPayload {
  place: number;
  username: string;
  votes: number;
}

/** A `period.closed` body without `timestamp`: the `payload` column of its deliveries (period-closed-event.ts). */
export interface PeriodClosedPayload {
  event: "period.closed";
  event_id: string;
  server_id: string;
  /** "week" or "month". */
  kind: string;
  /** "YYYY-MM" or "YYYY-Www". */
  period: string;
  /** The period's half-open UTC range, ISO 8601. */
  starts_at: string;
  ends_at: string;
  standings: PeriodStandingPayload[];
}

/** A `goal.reached` body without `timestamp`: the `payload` column of its deliveries (goal-reached-event.ts). */
export interface GoalReachedPayload {
  event: "goal.reached";
  event_id: string;
  /** The server this delivery is for (one of `server_ids`). */
  server_id: string;
  goal_id: string;
  name: string;
  /** The round reached (1 for the goal's first). */
  round: number;
  target: number;
  /** "voters" or "online". */
  payees: string;
  /** Every server the goal counts. */
  server_ids: string[];
  /** When the vote that reached the target counted, ISO 8601. */
  reached_at: string;
}

/**
 * A `heart.eligible` body without `timestamp` (domain/heart-eligible.ts): the voter of a counted vote may vote again. The
 * `payload` column of its deliveries.
 */
export interface HeartEligiblePayload {
  event: "heart.eligible";
  /** Named by the vote (heartEligibleEventId): a replay of the vote makes the same id. */
  event_id: string;
  server_id: string;
  /** The counted vote (its heart.counted's `heart_id`). */
  heart_id: string;
  username: string;
  /** Unix seconds when the vote counted. */
  cast_at: number;
  /** Unix seconds from when the voter may vote again (the vote's `next_eligible_at`). */
  eligible_at: number;
}

/** Whether a stored event body is a referral outcome's (the pull API's referral fields), not a closed period's or a progression event's. */
export function isReferralPayload(payload: EventPayload): payload is ReferralPayload {
  return (REFERRAL_EVENT_TYPES as readonly string[]).includes(payload.event);
}

/**
 * A stored event body (the `payload` column of an event's deliveries): a referral outcome's, a closed period's, a
 * progression event's, a reached goal's or a heart.eligible's.
 */
export type EventPayload = ReferralPayload | PeriodClosedPayload | ProgressionPayload | GoalReachedPayload | HeartEligiblePayload;
