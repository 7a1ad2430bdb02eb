import test from "ava";
import { DomainError } from "../../services/shared/values/domain-error.js";
import { PLATFORM_ID_TEXT, normalizePlatformId, requirePlatformId, toPlatformIds, type PlatformIdField } from "../../services/shared/values/player-ids.js";

/** [field, as sent, normal form or null for refused]. */
const CASES: Array<[PlatformIdField, string, string | null]> = [
  // SteamID64: 17 digits, individual-account range only.
  ["steam_id", "76561197960265728", "76561197960265728"],
  ["steam_id", "76561198012345678", "76561198012345678"],
  ["steam_id", "76561202255233023", "76561202255233023"],
  ["steam_id", " 76561198012345678 ", "76561198012345678"],
  ["steam_id", "76561197960265727", null],
  ["steam_id", "76561202255233024", null],
  ["steam_id", "7656119801234567", null],
  ["steam_id", "765611980123456789", null],
  ["steam_id", "STEAM_0:1:12345", null],
  ["steam_id", "7656119801234567a", null],
  ["steam_id", "", null],
  // Discord snowflake: 17-20 digits.
  ["discord_id", "80351110224678912", "80351110224678912"],
  ["discord_id", "12345678901234567890", "12345678901234567890"],
  ["discord_id", "8035111022467891", null],
  ["discord_id", "123456789012345678901", null],
  ["discord_id", "-80351110224678912", null],
  ["discord_id", "8035111022467891x", null],
  // Minecraft UUID: 32 hex, dashes optional, stored lower-case with dashes.
  ["minecraft_uuid", "069a79f444e94726a5befca90e38aaf5", "069a79f4-44e9-4726-a5be-fca90e38aaf5"],
  ["minecraft_uuid", "069A79F4-44E9-4726-A5BE-FCA90E38AAF5", "069a79f4-44e9-4726-a5be-fca90e38aaf5"],
  ["minecraft_uuid", "069a79f4-44e9-4726-a5be-fca90e38aaf5", "069a79f4-44e9-4726-a5be-fca90e38aaf5"],
  ["minecraft_uuid", "069a79f444e94726a5befca90e38aaf", null],
  ["minecraft_uuid", "069a79f4-44e94726-a5be-fca90e38aaf5", null],
  ["minecraft_uuid", "g69a79f444e94726a5befca90e38aaf5", null],
  ["minecraft_uuid", "Notch", null],
  // account_id: opaque, 1..128 printable characters.
  ["account_id", "42", "42"],
  ["account_id", "Player One@realm", "Player One@realm"],
  ["account_id", "a".repeat(128), "a".repeat(128)],
  ["account_id", "a".repeat(129), null],
  ["account_id", "", null],
  ["account_id", "   ", null],
  ["account_id", "ab\u0000c", null],
  ["account_id", "ab\nc", null],
  ["account_id", "ab\u007fc", null],
];

for (const [field, raw, expected] of CASES) {
  test(`${field} ${JSON.stringify(raw.length > 40 ? `${raw.slice(0, 20)}...(${raw.length})` : raw)} -> ${expected === null ? "refused" : JSON.stringify(expected)}`, (t) => {
    t.is(normalizePlatformId(field, raw), expected);
    if (expected === null) {
      const error = t.throws(() => requirePlatformId(field, raw), { instanceOf: DomainError });
      t.is(error?.kind, "invalid_argument");
      t.is(error?.message, PLATFORM_ID_TEXT[field]);
      t.true(error?.message.startsWith(`${field} `), "the text names the field");
    }
  });
}

test("CastHeart's ids: empty means not given; a malformed one is refused naming its field", (t) => {
  t.deepEqual(toPlatformIds({ steamId: "", discordId: "", minecraftUuid: "", accountId: "" }), {
    steamId: null,
    discordId: null,
    minecraftUuid: null,
    accountId: null,
  });
  t.deepEqual(toPlatformIds({ steamId: "76561198012345678", discordId: "", minecraftUuid: "069A79F444E94726A5BEFCA90E38AAF5", accountId: "x" }), {
    steamId: "76561198012345678",
    discordId: null,
    minecraftUuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5",
    accountId: "x",
  });
  t.throws(() => toPlatformIds({ steamId: "", discordId: "12", minecraftUuid: "", accountId: "" }), { message: /^discord_id / });
});
