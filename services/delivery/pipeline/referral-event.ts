import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Envelope } from "../../../gen/proto/events/v1/events_pb.js";
import { isUuid, NIL_UUID } from "../../shared/values/ids.js";
import { periodOf } from "../../shared/values/period.js";
import { HEART_ELIGIBLE_EVENT, isProgressionEventType, REFERRAL_EVENT_TYPES } from "../../shared/values/event-types.js";
import { inHeartEligibleOrder } from "./domain/heart-eligible.js";
import type { ReferralOutcome } from "../../rewards/queue-referral-rewards.js";
import type { EventPayload, NewDelivery, ReferralEventType, ReferralPayload } from "./delivery-types.js";
import { inProgressionOrder, type ProgressionPayload } from "../../rewards/domain/progression-events.js";

/**
 * Referral outcomes delivered to owners: a `referral.registered|qualified|reversed` envelope on
 * referrals.events.v1 becomes a delivery to each endpoint of its server subscribed to that type
 * (insert-deliveries.ts), signed and sent like the reward callback (callback-transport.ts). The
 * body's fields, in the order sent, are built here once (toReferralPayload); `timestamp` is added
 * per attempt and equals the signature's `t`.
 */

/** True for a referral event type. */
export function isReferralEventType(value: string): value is ReferralEventType {
  return (REFERRAL_EVENT_TYPES as readonly string[]).includes(value);
}

/** A stored event body's fields in the order sent (a progression event's and a heart.eligible's put back in their order: jsonb keeps its own). */
export function eventBodyFields(payload: EventPayload): EventPayload {
  if (payload.event === HEART_ELIGIBLE_EVENT) return inHeartEligibleOrder(payload);
  return isProgressionEventType(payload.event) ? inProgressionOrder(payload as ProgressionPayload) : payload;
}

/** The body of one attempt of an event with a stored body: its fields (eventBodyFields) with `timestamp` (unix seconds, the signature's `t`) last. */
export function buildEventBody(payload: EventPayload, timestamp: number): string {
  return JSON.stringify({ ...eventBodyFields(payload), timestamp });
}

/** What decoding a referral envelope gave: a delivery to store, or why it cannot be one (poison). */
export type DecodedReferral = { kind: "delivery"; delivery: NewDelivery; reward: ReferralOutcome | null } | { kind: "poison"; error: string };

/**
 * A `referral.*` envelope as the delivery the consumer stores: the nil heart id, the referee
 * identity as its `username` (the dashboard's player search finds it), the UTC month of the
 * transition as its period, and the body fields as its payload; and the outcome its reward rules
 * may give for (`reward`). Pure.
 */
export function toReferralDelivery(envelope: Envelope): DecodedReferral {
  if (!isReferralEventType(envelope.type) || envelope.payload.case !== "referralTransitioned") {
    return { kind: "poison", error: `${envelope.type} without a referralTransitioned payload` };
  }
  const r = envelope.payload.value;
  const serverId = r.serverId || envelope.serverId;
  if (!isUuid(serverId) || !isUuid(r.referralId) || envelope.eventId === "") {
    return { kind: "poison", error: "referral event without a server_id, referral_id or event_id" };
  }
  const occurredAt = envelope.occurredAt ? timestampDate(envelope.occurredAt) : new Date(0);
  const reversed = envelope.type === "referral.reversed";
  const payload: ReferralPayload = {
    event: envelope.type,
    event_id: envelope.eventId,
    server_id: serverId,
    referral_id: r.referralId,
    referrer_identity: r.referrerIdentity,
    referee_identity: r.refereeIdentity,
    state: r.state,
    previous_state: r.previousState,
    ...(reversed && r.reason !== "" ? { reason: r.reason } : {}),
    ...(reversed && r.reasonText !== "" ? { reason_text: r.reasonText } : {}),
  };
  return {
    kind: "delivery",
    reward: rewardOutcomeOf(envelope.type, r.referralId, serverId, r.previousState, r.clawback),
    delivery: {
      heartId: NIL_UUID,
      serverId,
      eventType: envelope.type,
      username: r.refereeIdentity,
      voterIdentity: "",
      period: periodOf(occurredAt),
      streakDay: null,
      countedAt: occurredAt,
      event: { eventId: envelope.eventId, payload },
    },
  };
}

/**
 * The outcome a referral event gives rewards for (services/rewards/queue-referral-rewards.ts): `qualified`, and a
 * reversal from `qualified` after the server's lock (`clawback`); null for the others (a registration, a reversal inside
 * the lock or from `registered`).
 */
function rewardOutcomeOf(type: string, referralId: string, serverId: string, previousState: string, clawback: boolean): ReferralOutcome | null {
  if (type === "referral.qualified") return { referralId, serverId, kind: "qualified" };
  if (type === "referral.reversed" && previousState === "qualified" && clawback) return { referralId, serverId, kind: "clawback" };
  return null;
}
