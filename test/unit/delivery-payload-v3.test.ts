/**
 * Payload version 3 of the reward callback body (services/delivery/pipeline/send-callback.ts buildHeartEventBody):
 * every version-2 field first, in the same order and unchanged except `payload_version` saying 3, then the reward
 * rules' `weight`, `month_total`, `total` and `reward_streak`, each null when the server has no saved rules; versions
 * 1 and 2 are unchanged by it.
 */
import test from "ava";
import { buildHeartEventBody, type HeartEventFields } from "../../services/delivery/pipeline/send-callback.js";
import { NO_PLATFORM_IDS } from "../../services/shared/values/player-ids.js";

const v1: HeartEventFields = {
  event: "heart.counted",
  serverId: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
  username: "Steve_42",
  heartId: "3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b",
  period: "2026-01",
  streakDay: 3,
};
const v2Fields = {
  castAt: new Date("2026-01-01T00:00:00.900Z"),
  nextEligibleAt: new Date("2026-01-02T00:00:00.900Z"),
  platformIds: { ...NO_PLATFORM_IDS, steamId: "76561197960287930" },
};
const T = 1767225605;

test("payload v3: the version-2 fields in their order with payload_version 3, then weight, month_total, total and reward_streak", (t) => {
  const body = buildHeartEventBody({ ...v1, v2: v2Fields, v3: { rewardCounts: { weight: 2, month_total: 10, total: 41, reward_streak: 7 } } }, T);
  t.is(
    body,
    '{"event":"heart.counted","server_id":"7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f","username":"Steve_42","heart_id":"3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b",' +
      '"period":"2026-01","timestamp":1767225605,"streak_day":3,"payload_version":3,"cast_at":1767225600,"next_eligible_at":1767312000,' +
      '"steam_id":"76561197960287930","weight":2,"month_total":10,"total":41,"reward_streak":7}',
  );
  const v2 = JSON.parse(buildHeartEventBody({ ...v1, v2: v2Fields }, T)) as Record<string, unknown>;
  const v3 = JSON.parse(body) as Record<string, unknown>;
  t.deepEqual(Object.keys(v3).slice(0, Object.keys(v2).length), Object.keys(v2), "version 2's fields first, in version 2's order");
  t.like(v3, { ...v2, payload_version: 3 }, "each with version 2's value, but the version");
});

test("payload v3: a server without saved reward rules -> weight, month_total, total and reward_streak are null, present", (t) => {
  const parsed = JSON.parse(buildHeartEventBody({ ...v1, v2: v2Fields, v3: { rewardCounts: null } }, T)) as Record<string, unknown>;
  t.deepEqual(Object.entries(parsed).slice(-4), [
    ["weight", null],
    ["month_total", null],
    ["total", null],
    ["reward_streak", null],
  ]);
  t.is(parsed.payload_version, 3);
});

test("payload v1 and v2 carry no version-3 field and stay byte-identical", (t) => {
  t.is(
    buildHeartEventBody(v1, T),
    '{"event":"heart.counted","server_id":"7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f","username":"Steve_42","heart_id":"3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b","period":"2026-01","timestamp":1767225605,"streak_day":3}',
  );
  t.is(
    buildHeartEventBody({ ...v1, v2: v2Fields }, T),
    '{"event":"heart.counted","server_id":"7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f","username":"Steve_42","heart_id":"3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b",' +
      '"period":"2026-01","timestamp":1767225605,"streak_day":3,"payload_version":2,"cast_at":1767225600,"next_eligible_at":1767312000,"steam_id":"76561197960287930"}',
  );
});
