import { nameBasedId } from "../../../shared/values/ids.js";
import { HEART_ELIGIBLE_EVENT } from "../../../shared/values/event-types.js";
import type { HeartEligiblePayload, NewDelivery } from "../delivery-types.js";

/**
 * `heart.eligible` (issue 32): the voter of a counted vote may vote again, so a game can remind them in game. When the
 * delivery consumer stores a batch's counted hearts, it also stores, per heart, one `heart.eligible` delivery to each
 * endpoint of the server subscribed to it (and a pull one when the pull API offers it), due at the heart's
 * `next_eligible_at` (the vote + the 24-hour cooldown, as the hearts service computed it for the receipt and the
 * callback): the dispatcher sends it then, signed and retried like every event. No separate job: the dispatcher's claim
 * is the periodic job, a LIMITed batch by the deliveries' due-time index, and a row not due yet is never read by it.
 */

/** The id of a vote's heart.eligible: the same vote always names the same id (a replayed vote stores nothing new). */
export function heartEligibleEventId(heartId: string): string {
  return nameBasedId(`${heartId}:${HEART_ELIGIBLE_EVENT}`);
}

/** Unix seconds of `at`. */
function unixSeconds(at: Date): number {
  return Math.floor(at.getTime() / 1000);
}

/**
 * The heart.eligible delivery of a counted heart's delivery, due at its next eligible time; undefined when `heart` is
 * not a counted heart or carries no next eligible time. Pure.
 */
export function toHeartEligibleDelivery(heart: NewDelivery): NewDelivery | undefined {
  if (heart.eventType !== "heart.counted" || heart.nextEligibleAt == null) return undefined;
  const payload: HeartEligiblePayload = {
    event: HEART_ELIGIBLE_EVENT,
    event_id: heartEligibleEventId(heart.heartId),
    server_id: heart.serverId,
    heart_id: heart.heartId,
    username: heart.username,
    cast_at: unixSeconds(heart.countedAt),
    eligible_at: unixSeconds(heart.nextEligibleAt),
  };
  return {
    heartId: heart.heartId,
    serverId: heart.serverId,
    eventType: HEART_ELIGIBLE_EVENT,
    username: heart.username,
    voterIdentity: heart.voterIdentity,
    period: heart.period,
    streakDay: null,
    countedAt: heart.countedAt,
    dueAt: heart.nextEligibleAt,
    event: { eventId: payload.event_id, payload },
  };
}

/** A stored heart.eligible body's fields in the order sent (jsonb keeps its own order). Pure. */
export function inHeartEligibleOrder(p: HeartEligiblePayload): HeartEligiblePayload {
  return {
    event: p.event,
    event_id: p.event_id,
    server_id: p.server_id,
    heart_id: p.heart_id,
    username: p.username,
    cast_at: p.cast_at,
    eligible_at: p.eligible_at,
  };
}
