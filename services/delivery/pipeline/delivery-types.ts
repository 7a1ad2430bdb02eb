import type { PlatformIds } from "../../shared/values/player-ids.js";
import type { REFERRAL_EVENT_TYPES } from "../../shared/values/event-types.js";
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
   * An event with a body of its own: a referral event (referral-event.ts; its envelope event id) or a progression
   * event (its id named by the vote): the event id is the dedup key of its deliveries (one per subscribed endpoint),
   * the payload its body fields. Absent for a heart (dedup key: heart_id).
   */
  event?: { eventId: string; payload: EventPayload };
  /** A counted heart on a server with reward rules: what the rules counted (payload version 3), stored as its payload. */
  rewardCounts?: RewardCountsPayload;
}

/** A stored event body (the `payload` column of an event's deliveries): a referral or a progression event's. */
export type EventPayload = ReferralPayload | ProgressionPayload;

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
