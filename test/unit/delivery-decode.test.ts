import test from "ava";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { EnvelopeSchema, HeartCountedSchema, OwnerNotificationSchema, ReferralTransitionedSchema } from "../../gen/proto/events/v1/events_pb.js";
import { decodeHeartMessage } from "../../services/delivery/pipeline/consumer.js";

const HEART_ID = "0b8f7e6d-5c4b-4a39-8281-706f5e4d3c2b";
const SERVER_ID = "7f0c2a1e-3b4d-4c5e-8f90-a1b2c3d4e5f6";
const at = new Date("2026-03-10T12:00:00.000Z");

function heartEnvelope(
  overrides: Partial<{
    heartId: string;
    username: string;
    period: string;
    streakDay: number;
    steamId: string;
    discordId: string;
    minecraftUuid: string;
    accountId: string;
    nextEligibleAt: ReturnType<typeof timestampFromDate>;
  }> = {},
) {
  return toBinary(
    EnvelopeSchema,
    create(EnvelopeSchema, {
      eventId: "42",
      type: "heart.counted",
      occurredAt: timestampFromDate(at),
      serverId: SERVER_ID,
      payload: {
        case: "heartCounted",
        value: create(HeartCountedSchema, {
          heartId: HEART_ID,
          serverId: SERVER_ID,
          username: "Steve",
          voterIdentity: "acct-1",
          period: "2026-03",
          countedAt: timestampFromDate(at),
          streakDay: 2,
          ...overrides,
        }),
      },
    }),
  );
}

test("consumer decode: heart.counted becomes a delivery with the heart's fields", (t) => {
  t.deepEqual(decodeHeartMessage(heartEnvelope()), {
    kind: "delivery",
    eventId: "42",
    delivery: {
      heartId: HEART_ID,
      serverId: SERVER_ID,
      eventType: "heart.counted",
      username: "Steve",
      voterIdentity: "acct-1",
      period: "2026-03",
      streakDay: 2,
      countedAt: at,
      platformIds: { steamId: null, discordId: null, minecraftUuid: null, accountId: null },
      nextEligibleAt: null,
    },
  });
});

test("consumer decode: the heart's platform ids, account id and next eligible time go on the delivery", (t) => {
  const next = new Date(at.getTime() + 24 * 3600_000);
  const decoded = decodeHeartMessage(
    heartEnvelope({
      steamId: "76561197960287930",
      discordId: "80351110224678912",
      minecraftUuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5",
      accountId: "acct-42",
      nextEligibleAt: timestampFromDate(next),
    }),
  );
  t.like(decoded, {
    kind: "delivery",
    delivery: {
      platformIds: {
        steamId: "76561197960287930",
        discordId: "80351110224678912",
        minecraftUuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5",
        accountId: "acct-42",
      },
      nextEligibleAt: next,
    },
  });
  // One id given: only it is set, the others stay null (not given).
  t.like(decodeHeartMessage(heartEnvelope({ discordId: "80351110224678912" })), {
    delivery: { platformIds: { steamId: null, discordId: "80351110224678912", minecraftUuid: null, accountId: null } },
  });
});

test("consumer decode: bytes that are not an Envelope are poison (skipped, not retried)", (t) => {
  const decoded = decodeHeartMessage(new Uint8Array([0xff, 0xff, 0xff, 0x01, 0x02]));
  t.like(decoded, { kind: "poison", code: "undecodable" });
});

test("consumer decode: a heart.counted with a non-uuid heart_id is poison", (t) => {
  t.like(decodeHeartMessage(heartEnvelope({ heartId: "nope" })), { kind: "poison", code: "incomplete" });
});

test("consumer decode: a heart.counted without username or period is poison", (t) => {
  t.like(decodeHeartMessage(heartEnvelope({ username: "" })), { kind: "poison", code: "incomplete" });
  t.like(decodeHeartMessage(heartEnvelope({ period: "March" })), { kind: "poison", code: "incomplete" });
});

test("consumer decode: other event types are ignored", (t) => {
  const other = toBinary(
    EnvelopeSchema,
    create(EnvelopeSchema, {
      eventId: "7",
      type: "owner.endpoint_disabled",
      serverId: SERVER_ID,
      payload: { case: "ownerNotification", value: create(OwnerNotificationSchema, { serverId: SERVER_ID }) },
    }),
  );
  t.deepEqual(decodeHeartMessage(other), { kind: "ignored", type: "owner.endpoint_disabled" });
});

test("consumer decode: a referral transition becomes a referral delivery keyed by its event id; without its payload it is poison", (t) => {
  const envelope = (payload: boolean, reason = "") =>
    toBinary(
      EnvelopeSchema,
      create(EnvelopeSchema, {
        eventId: "evt-7",
        type: "referral.reversed",
        serverId: SERVER_ID,
        occurredAt: timestampFromDate(new Date("2026-03-10T12:00:00Z")),
        ...(payload
          ? {
              payload: {
                case: "referralTransitioned" as const,
                value: create(ReferralTransitionedSchema, {
                  referralId: HEART_ID,
                  serverId: SERVER_ID,
                  referrerIdentity: "alice",
                  refereeIdentity: "bob",
                  state: "reversed",
                  previousState: "qualified",
                  reason,
                }),
              },
            }
          : {}),
      }),
    );
  t.like(decodeHeartMessage(envelope(true, "refund")), {
    kind: "delivery",
    eventId: "evt-7",
    delivery: {
      eventType: "referral.reversed",
      serverId: SERVER_ID,
      period: "2026-03",
      event: {
        eventId: "evt-7",
        payload: {
          event: "referral.reversed",
          event_id: "evt-7",
          server_id: SERVER_ID,
          referral_id: HEART_ID,
          referrer_identity: "alice",
          referee_identity: "bob",
          state: "reversed",
          previous_state: "qualified",
          reason: "refund",
        },
      },
    },
  });
  t.like(decodeHeartMessage(envelope(false)), { kind: "poison", code: "incomplete" });
});
