import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Envelope } from "../../../gen/proto/events/v1/events_pb.js";
import { isUuid, NIL_UUID } from "../../shared/values/ids.js";
import { periodOf } from "../../shared/values/period.js";
import { GOAL_REACHED_EVENT } from "../../shared/values/event-types.js";
import type { GoalReachedPayload, NewDelivery } from "./delivery-types.js";

/**
 * A reached network goal delivered to owners (issue 31): a `goal.reached` envelope on hearts.events.v1 (one per chosen
 * server, services/rewards/count-goal-votes.ts) becomes a delivery to each endpoint of that server subscribed to it
 * and a pull delivery when the server's pull API offers it, stored, signed and sent as a `period.closed` is (its event
 * id is the dedup key). The body's fields, in the order sent, are built here once.
 */

/** What decoding a goal.reached envelope gave: a delivery to store, or why it cannot be one (poison). */
export type DecodedGoalReached = { kind: "delivery"; delivery: NewDelivery } | { kind: "poison"; error: string };

/** A `goal.reached` envelope as the delivery the consumer stores: the nil heart id and voter, the body as its payload. Pure. */
export function toGoalReachedDelivery(envelope: Envelope): DecodedGoalReached {
  if (envelope.type !== GOAL_REACHED_EVENT || envelope.payload.case !== "goalReached") {
    return { kind: "poison", error: `${envelope.type} without a goalReached payload` };
  }
  const p = envelope.payload.value;
  const serverId = p.serverId || envelope.serverId;
  if (!isUuid(serverId) || !isUuid(p.goalId) || envelope.eventId === "" || p.round < 1 || p.reachedAt === undefined) {
    return { kind: "poison", error: "goal.reached without a server_id, goal_id, event_id, round or reached_at" };
  }
  const reachedAt = timestampDate(p.reachedAt);
  const payload: GoalReachedPayload = {
    event: GOAL_REACHED_EVENT,
    event_id: envelope.eventId,
    server_id: serverId,
    goal_id: p.goalId,
    name: p.name,
    round: p.round,
    target: p.target,
    payees: p.payees,
    server_ids: [...p.serverIds],
    reached_at: reachedAt.toISOString(),
  };
  return {
    kind: "delivery",
    delivery: {
      heartId: NIL_UUID,
      serverId,
      eventType: GOAL_REACHED_EVENT,
      username: "",
      voterIdentity: "",
      period: periodOf(reachedAt),
      streakDay: null,
      countedAt: reachedAt,
      event: { eventId: envelope.eventId, payload },
    },
  };
}
