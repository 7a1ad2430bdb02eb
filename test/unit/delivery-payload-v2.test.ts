/**
 * Payload version 2 of the reward callback body (services/delivery/pipeline/send-callback.ts buildHeartEventBody):
 * every version-1 field first, unchanged, then payload_version, cast_at and the known ids; the
 * version-1 body stays the contract's. Both shapes are checked against the OpenAPI document.
 */
import test from "ava";
import { buildHeartEventBody, type HeartEventFields } from "../../services/delivery/pipeline/send-callback.js";
import { TEST_CALLBACK_PLATFORM_IDS } from "../../services/delivery/rpc/send-test-callback.js";
import { NO_PLATFORM_IDS, normalizePlatformId, type PlatformIdField } from "../../services/shared/values/player-ids.js";
import { validateHeartEvent, validateHeartEventV2 } from "../integration/openapi-validate.js";

const v1: HeartEventFields = {
  event: "heart.counted",
  serverId: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
  username: "Steve_42",
  heartId: "3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b",
  period: "2026-01",
  streakDay: 3,
};
const castAt = new Date("2026-01-01T00:00:00.900Z");
const nextEligibleAt = new Date("2026-01-02T00:00:00.900Z");

test("payload v2: every v1 field unchanged, then payload_version, cast_at, next_eligible_at and the given ids (unix seconds)", (t) => {
  const body = buildHeartEventBody(
    {
      ...v1,
      v2: {
        castAt,
        nextEligibleAt,
        platformIds: {
          steamId: "76561197960287930",
          discordId: "80351110224678912",
          minecraftUuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5",
          accountId: "acct 7",
        },
      },
    },
    1767225605,
  );
  t.is(
    body,
    '{"event":"heart.counted","server_id":"7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f","username":"Steve_42","heart_id":"3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b",' +
      '"period":"2026-01","timestamp":1767225605,"streak_day":3,"payload_version":2,"cast_at":1767225600,"next_eligible_at":1767312000,' +
      '"steam_id":"76561197960287930","discord_id":"80351110224678912","minecraft_uuid":"069a79f4-44e9-4726-a5be-fca90e38aaf5","account_id":"acct 7"}',
  );
  t.deepEqual(validateHeartEventV2(JSON.parse(body)).errors, []);
  t.false(validateHeartEvent(JSON.parse(body)).valid, "a version-2 body is not the contract's body");
});

test("payload v2: an id the vote did not give and an unknown next eligible time are omitted, never null", (t) => {
  const body = buildHeartEventBody(
    { ...v1, v2: { castAt, nextEligibleAt: null, platformIds: { ...NO_PLATFORM_IDS, discordId: "80351110224678912" } } },
    1767225605,
  );
  const parsed = JSON.parse(body) as Record<string, unknown>;
  t.deepEqual(Object.keys(parsed), [
    "event",
    "server_id",
    "username",
    "heart_id",
    "period",
    "timestamp",
    "streak_day",
    "payload_version",
    "cast_at",
    "discord_id",
  ]);
  t.false(body.includes("null"));
  t.deepEqual(validateHeartEventV2(parsed).errors, []);
});

test("payload v1 (no v2 fields): the contract's body, which the version-2 schema refuses (no payload_version)", (t) => {
  const body = buildHeartEventBody(v1, 1767225605);
  t.is(
    body,
    '{"event":"heart.counted","server_id":"7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f","username":"Steve_42","heart_id":"3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b","period":"2026-01","timestamp":1767225605,"streak_day":3}',
  );
  t.deepEqual(validateHeartEvent(JSON.parse(body)).errors, []);
  t.false(validateHeartEventV2(JSON.parse(body)).valid);
});

test("payload v2: the test callback's sample ids are well-formed platform ids", (t) => {
  const fields: Record<PlatformIdField, string | null> = {
    steam_id: TEST_CALLBACK_PLATFORM_IDS.steamId,
    discord_id: TEST_CALLBACK_PLATFORM_IDS.discordId,
    minecraft_uuid: TEST_CALLBACK_PLATFORM_IDS.minecraftUuid,
    account_id: TEST_CALLBACK_PLATFORM_IDS.accountId,
  };
  for (const [field, value] of Object.entries(fields) as [PlatformIdField, string | null][]) t.is(normalizePlatformId(field, value ?? ""), value, field);
});
