import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Envelope } from "../../../gen/proto/events/v1/events_pb.js";
import { isUuid, NIL_UUID } from "../../shared/values/ids.js";
import { periodOf } from "../../shared/values/period.js";
import { PERIOD_CLOSED_EVENT } from "../../shared/values/event-types.js";
import type { NewDelivery, PeriodClosedPayload } from "./delivery-types.js";

/**
 * A closed week or month delivered to owners (issue 31): a `period.closed` envelope on hearts.events.v1 (the period
 * closer, services/rewards/close-periods.ts) becomes a delivery to each endpoint of its server subscribed to it and a
 * pull delivery when the server's pull API offers it, stored, signed and sent exactly as a referral event is (its
 * event id is the dedup key; the body is the payload with `timestamp` added per attempt). The body's fields, in the
 * order sent, are built here once.
 */

/** What decoding a period.closed envelope gave: a delivery to store, or why it cannot be one (poison). */
export type DecodedPeriodClosed = { kind: "delivery"; delivery: NewDelivery } | { kind: "poison"; error: string };

/**
 * A `period.closed` envelope as the delivery the consumer stores: the nil heart id and voter, the UTC month of the
 * close as its period (what the delivery lists filter by), and the body fields as its payload. Pure.
 */
export function toPeriodClosedDelivery(envelope: Envelope): DecodedPeriodClosed {
  if (envelope.type !== PERIOD_CLOSED_EVENT || envelope.payload.case !== "periodClosed") {
    return { kind: "poison", error: `${envelope.type} without a periodClosed payload` };
  }
  const p = envelope.payload.value;
  const serverId = p.serverId || envelope.serverId;
  if (!isUuid(serverId) || envelope.eventId === "" || p.period === "" || p.startsAt === undefined || p.endsAt === undefined) {
    return { kind: "poison", error: "period.closed without a server_id, event_id, period or range" };
  }
  const occurredAt = envelope.occurredAt ? timestampDate(envelope.occurredAt) : new Date(0);
  const payload: PeriodClosedPayload = {
    event: PERIOD_CLOSED_EVENT,
    event_id: envelope.eventId,
    server_id: serverId,
    kind: p.kind,
    period: p.period,
    starts_at: timestampDate(p.startsAt).toISOString(),
    ends_at: timestampDate(p.endsAt).toISOString(),
    standings: p.standings.map((s) => ({ place: s.place, username: s.username, votes: s.votes })),
  };
  return {
    kind: "delivery",
    delivery: {
      heartId: NIL_UUID,
      serverId,
      eventType: PERIOD_CLOSED_EVENT,
      username: "",
      voterIdentity: "",
      period: periodOf(occurredAt),
      streakDay: null,
      countedAt: occurredAt,
      event: { eventId: envelope.eventId, payload },
    },
  };
}
