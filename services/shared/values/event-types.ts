/**
 * THE list of event types a callback endpoint can receive: the reward callback's `heart.counted`,
 * the referral outcomes, the reward rules' progression events and a closed week or month's standings
 * (`period.closed`). Every reader (the endpoint RPCs, the delivery consumer, the dashboard, the CLI,
 * the docs test) imports it from here.
 */
export const ENDPOINT_EVENT_TYPES = [
  "heart.counted",
  "referral.registered",
  "referral.qualified",
  "referral.reversed",
  "streak.extended",
  "streak.lost",
  "milestone.reached",
  "period.closed",
  "goal.reached",
  "heart.eligible",
] as const;

/** One event type an endpoint can subscribe to. */
export type EndpointEventType = (typeof ENDPOINT_EVENT_TYPES)[number];

/** The referral outcomes among them (services/delivery/pipeline/referral-event.ts builds their bodies). */
export const REFERRAL_EVENT_TYPES = ["referral.registered", "referral.qualified", "referral.reversed"] as const satisfies readonly EndpointEventType[];

/**
 * The progression events (issue 31) among them: made where a counted vote is counted into the voter's reward state
 * (services/rewards/domain/progression-events.ts builds their bodies), on servers with saved reward rules.
 */
export const PROGRESSION_EVENT_TYPES = ["streak.extended", "streak.lost", "milestone.reached"] as const satisfies readonly EndpointEventType[];

/** A server's week or month closed: its final standings (services/rewards/close-periods.ts writes it; opt-in per endpoint). */
export const PERIOD_CLOSED_EVENT = "period.closed" satisfies EndpointEventType;

/** Standings a `period.closed` body lists at most (the top of the period; its awards may pay more places). */
export const PERIOD_CLOSED_TOP = 10;

/**
 * A counted vote's voter may vote again (its next eligible time: the vote + HEART_COOLDOWN_MS), so a game can remind in
 * game: one per counted heart, sent at that time (services/delivery/pipeline/domain/heart-eligible.ts; opt-in per endpoint).
 */
export const HEART_ELIGIBLE_EVENT = "heart.eligible" satisfies EndpointEventType;

/** What a new default endpoint receives: exactly the contract's reward callback. */
export const DEFAULT_ENDPOINT_EVENT_TYPES: readonly EndpointEventType[] = ["heart.counted"];

/**
 * The payload versions an endpoint may pin: 1 is the contract's body (the default), 2 adds the
 * cast time, next eligible time, platform ids and account id, 3 adds the reward rules' weight, the
 * voter's month and all-time totals and the reward streak (services/delivery/pipeline/send-callback.ts).
 */
export const PAYLOAD_VERSIONS = [1, 2, 3] as const;

/** True when `value` names an event type an endpoint can receive. */
export function isEndpointEventType(value: string): value is EndpointEventType {
  return (ENDPOINT_EVENT_TYPES as readonly string[]).includes(value);
}

/** True when `value` names a progression event (streak.extended, streak.lost, milestone.reached). */
export function isProgressionEventType(value: string): value is (typeof PROGRESSION_EVENT_TYPES)[number] {
  return (PROGRESSION_EVENT_TYPES as readonly string[]).includes(value);
}

/**
 * A network goal (vote party) reached its target: one per reached round and chosen server (services/rewards/count-goal-votes.ts
 * writes it; opt-in per endpoint, listed in ENDPOINT_EVENT_TYPES).
 */
export const GOAL_REACHED_EVENT = "goal.reached" satisfies EndpointEventType;
