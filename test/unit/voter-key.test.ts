import test from "ava";
import { hashVoterKey, toVoterKey } from "../../services/voter-data/voter-key.js";
import { fromProtoKeyKind, PROTO_KEY_KIND, VOTER_KEY_KINDS } from "../../services/shared/values/voter-key-kinds.js";

test("a voter's key is in normal form: a username as given, a platform id as CastHeart stores it", (t) => {
  const cases: Array<[string, string, string]> = [
    ["username", "Steve", "Steve"],
    ["steam_id", " 76561198000004711 ", "76561198000004711"],
    ["minecraft_uuid", "069A79F444E94726A5BEFCA90E38AAF5", "069a79f4-44e9-4726-a5be-fca90e38aaf5"],
    ["discord_id", "80351110224678912", "80351110224678912"],
    ["account_id", "acct-1", "acct-1"],
  ];
  for (const [kind, raw, value] of cases) t.deepEqual(toVoterKey(kind, raw), { kind, value }, `${kind} ${raw}`);
});

test("a key of an unknown kind, an empty username or a malformed platform id is refused, naming the field", (t) => {
  t.throws(() => toVoterKey("email", "a@b"), { message: /^key_kind must be one of username, steam_id/ });
  t.throws(() => toVoterKey("username", "  "), { message: "key is required" });
  t.throws(() => toVoterKey("steam_id", "123"), { message: /^steam_id must be a SteamID64/ });
});

test("the audit's hash of a key: the same for every spelling of the same voter, never the key itself", (t) => {
  const hash = hashVoterKey(toVoterKey("username", "Steve"));
  t.is(hash, hashVoterKey(toVoterKey("username", "STEVE")), "a username case-insensitively, as the hearts rules compare it");
  t.is(
    hashVoterKey(toVoterKey("minecraft_uuid", "069A79F444E94726A5BEFCA90E38AAF5")),
    hashVoterKey(toVoterKey("minecraft_uuid", "069a79f4-44e9-4726-a5be-fca90e38aaf5")),
  );
  t.not(hash, hashVoterKey(toVoterKey("account_id", "Steve")), "the kind is part of what is hashed");
  t.regex(hash, /^[0-9a-f]{64}$/);
  t.false(hash.includes("steve"));
});

test("every key kind has its enum value, and the enum value reads back as the kind", (t) => {
  for (const kind of VOTER_KEY_KINDS) t.is(fromProtoKeyKind(PROTO_KEY_KIND[kind]), kind);
  t.is(fromProtoKeyKind(0), "");
});
