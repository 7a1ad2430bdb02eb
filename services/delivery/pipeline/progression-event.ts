import type { SqlTx } from "../../shared/adapters/sql/executor.js";
import { periodOf } from "../../shared/values/period.js";
import type { HeartRewardCounts, ProgressionEvent } from "../../rewards/queue-vote-rewards.js";
import type { NewDelivery, RewardCountsPayload } from "./delivery-types.js";
import { insertEventDeliveries } from "./insert-deliveries.js";

/**
 * Progression events delivered to owners (issue 31): a `streak.extended`, `streak.lost` or `milestone.reached` made
 * where a counted heart is counted into its voter's reward state (services/rewards/queue-vote-rewards.ts) becomes a
 * delivery to each endpoint of its server subscribed to that type, and a pull delivery when the pull API offers it,
 * stored in the transaction of the counts (insertEventDeliveries), then signed and sent like a referral event (its
 * body, progression-events.ts, with `timestamp` added per attempt).
 */

/** A progression event as the delivery stored for it: its heart, voter and time; its event id is the dedup key. Pure. */
export function toProgressionDelivery(e: ProgressionEvent): NewDelivery {
  return {
    heartId: e.heart.heartId,
    serverId: e.heart.serverId,
    eventType: e.payload.event,
    username: e.heart.player.username,
    voterIdentity: e.heart.voterIdentity,
    period: periodOf(e.heart.countedAt),
    streakDay: null,
    countedAt: e.heart.countedAt,
    event: { eventId: e.payload.event_id, payload: e.payload },
  };
}

/** Stores a batch's progression events in the reward transaction `tx` (queueVoteRewards' StoreProgressionEvents). */
export async function storeProgressionEvents(tx: SqlTx, events: readonly ProgressionEvent[]): Promise<void> {
  await insertEventDeliveries(tx, events.map(toProgressionDelivery));
}

/** A heart's reward counts as payload version 3 names them (stored as its delivery's payload). Pure. */
export function toRewardCountsPayload(c: HeartRewardCounts): RewardCountsPayload {
  return { weight: c.weight, month_total: c.monthTotal, total: c.total, reward_streak: c.rewardStreak };
}
