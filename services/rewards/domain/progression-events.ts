import { nameBasedId } from "../../shared/values/ids.js";
import { PROGRESSION_EVENT_TYPES } from "../../shared/values/event-types.js";
import type { Milestone, RewardRules } from "./reward-rules.js";
import { type CountedVote, reachesMilestone } from "./rewards-for-vote.js";

/** One progression event type. */
export type ProgressionEventType = (typeof PROGRESSION_EVENT_TYPES)[number];

/**
 * A progression event's body without `timestamp` (set per attempt, the signature's `t`), in the order sent: the fields
 * every progression event has, then its own. Stored as the `payload` of its deliveries.
 */
export type ProgressionPayload = {
  event: ProgressionEventType;
  /** Named by the vote and the event (progressionEventId): a replay of the vote makes the same id. */
  event_id: string;
  server_id: string;
  /** The counted vote that made the event (the heart.counted callback's `heart_id`). */
  heart_id: string;
  username: string;
  /** Unix seconds when the vote counted. */
  cast_at: number;
} & (
  | { event: "streak.extended"; reward_streak: number }
  | { event: "streak.lost"; lost_streak: number; reward_streak: number }
  | { event: "milestone.reached"; scope: Milestone["scope"]; count: number; rule_index: number; every?: number; at?: number }
);

/** The shortest reward streak whose growth or loss is an event: a single vote day is not yet a streak. */
export const PROGRESSION_STREAK_MIN_DAYS = 2;

/** The id of a vote's progression event: the same vote and event always name the same id. */
export function progressionEventId(heartId: string, event: ProgressionEventType, ruleIndex?: number): string {
  return nameBasedId(`${heartId}:${event}${ruleIndex === undefined ? "" : `:${ruleIndex}`}`);
}

/**
 * The progression events of a counted vote on `serverId` under `rules` (issue 31): `streak.lost` when the vote came
 * after the grace ran out and the streak it ended was at least PROGRESSION_STREAK_MIN_DAYS long (so once per lost
 * streak: the vote starts a new one); `streak.extended` when the vote made the reward streak one day longer and at
 * least PROGRESSION_STREAK_MIN_DAYS long; `milestone.reached` for each milestone rule the vote reaches (as the
 * milestone rewards are judged, reachesMilestone), whether or not its reward could be rendered. Pure: the same vote
 * and rules always give the same events with the same ids.
 */
export function progressionEventsOf(rules: RewardRules, serverId: string, username: string, vote: CountedVote): ProgressionPayload[] {
  const common = (event: ProgressionEventType, ruleIndex?: number) => ({
    event_id: progressionEventId(vote.heartId, event, ruleIndex),
    server_id: serverId,
    heart_id: vote.heartId,
    username,
    cast_at: Math.floor(vote.countedAt.getTime() / 1000),
  });
  const events: ProgressionPayload[] = [];
  const days = vote.streak.streak.days;
  if (vote.streak.lostDays >= PROGRESSION_STREAK_MIN_DAYS) {
    events.push({ event: "streak.lost", ...common("streak.lost"), lost_streak: vote.streak.lostDays, reward_streak: days });
  }
  if (vote.streak.extended && days >= PROGRESSION_STREAK_MIN_DAYS) {
    events.push({ event: "streak.extended", ...common("streak.extended"), reward_streak: days });
  }
  rules.milestones.forEach((m, i) => {
    if (!reachesMilestone(m, vote.totals)) return;
    events.push({
      event: "milestone.reached",
      ...common("milestone.reached", i),
      scope: m.scope,
      count: vote.totals[m.scope],
      rule_index: i,
      ...(m.every === undefined ? {} : { every: m.every }),
      ...(m.at === undefined ? {} : { at: m.at }),
    });
  });
  return events;
}

/**
 * `p` with its fields in the order the body sends them (the common fields, then the event's own): a payload read back
 * from its jsonb column comes in the column's own key order. Pure.
 */
export function inProgressionOrder(p: ProgressionPayload): ProgressionPayload {
  const head = { event: p.event, event_id: p.event_id, server_id: p.server_id, heart_id: p.heart_id, username: p.username, cast_at: p.cast_at };
  switch (p.event) {
    case "streak.extended":
      return { ...head, event: p.event, reward_streak: p.reward_streak };
    case "streak.lost":
      return { ...head, event: p.event, lost_streak: p.lost_streak, reward_streak: p.reward_streak };
    case "milestone.reached":
      return {
        ...head,
        event: p.event,
        scope: p.scope,
        count: p.count,
        rule_index: p.rule_index,
        ...(p.every === undefined ? {} : { every: p.every }),
        ...(p.at === undefined ? {} : { at: p.at }),
      };
  }
}

/** True for a progression event type. */
export function isProgressionEventType(value: string): value is ProgressionEventType {
  return (PROGRESSION_EVENT_TYPES as readonly string[]).includes(value);
}
