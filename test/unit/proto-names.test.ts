/** The name <-> proto enum tables (services/shared/values/proto-names.ts): each read backwards gives the same pairs. */
import test from "ava";
import { DeliveryTransport } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { ReferralEventType } from "../../gen/proto/referral/v1/referral_pb.js";
import {
  ANCHOR_STATE_NAMES,
  ANCHOR_STATE_TO_PROTO,
  DELIVERY_STATUS_NAMES,
  DELIVERY_STATUS_TO_PROTO,
  DELIVERY_TRANSPORT_NAMES,
  DELIVERY_TRANSPORT_TO_PROTO,
  PULL_CLAIM_STATUS_NAMES,
  PULL_CLAIM_STATUS_TO_PROTO,
  REFERRAL_EVENT_NAMES,
  REFERRAL_EVENT_TO_PROTO,
  REVIEW_ACTION_NAMES,
  REVIEW_ACTION_TO_PROTO,
  REVIEW_MODE_NAMES,
  REVIEW_MODE_TO_PROTO,
  REVIEW_STATE_NAMES,
  REVIEW_STATE_TO_PROTO,
  EXPORT_FORMAT_NAMES,
  EXPORT_FORMAT_TO_PROTO,
} from "../../services/shared/values/proto-names.js";

const pairs: [Record<string, number>, Partial<Record<number, string>>][] = [
  [REFERRAL_EVENT_TO_PROTO, REFERRAL_EVENT_NAMES],
  [ANCHOR_STATE_TO_PROTO, ANCHOR_STATE_NAMES],
  [DELIVERY_STATUS_TO_PROTO, DELIVERY_STATUS_NAMES],
  [DELIVERY_TRANSPORT_TO_PROTO, DELIVERY_TRANSPORT_NAMES],
  [PULL_CLAIM_STATUS_TO_PROTO, PULL_CLAIM_STATUS_NAMES],
  [REVIEW_STATE_TO_PROTO, REVIEW_STATE_NAMES],
  [REVIEW_MODE_TO_PROTO, REVIEW_MODE_NAMES],
  [REVIEW_ACTION_TO_PROTO, REVIEW_ACTION_NAMES],
  [EXPORT_FORMAT_TO_PROTO, EXPORT_FORMAT_NAMES],
];

test("every name -> enum table reads backwards to the same names, and UNSPECIFIED has no name", (t) => {
  for (const [toProto, names] of pairs) {
    t.deepEqual(
      Object.entries(names).map(([value, name]) => [name, Number(value)]),
      Object.entries(toProto),
    );
    t.is(names[0], undefined);
  }
  t.is(REFERRAL_EVENT_NAMES[ReferralEventType.QUALIFIED], "qualified");
  t.is(DELIVERY_TRANSPORT_NAMES[DeliveryTransport.PULL], "pull");
});
