/**
 * The check/claim API's pure parts (gateway/handle-vote-claim.ts): which plugin query is which action,
 * which id kind, what answers `0` without a call; the memory of keys seen working; and the plugin
 * harness's encoders against frozen vectors (PHP urlencode and .NET Uri.EscapeDataString outputs).
 */
import test from "ava";
import { PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import { MAX_CLAIM_KEY_CHARS, createKnownClaimKeys, parseVoteQuery } from "../../gateway/handle-vote-claim.js";
import { escapeDataString, fivemUrls, phpUrlencode } from "../../scripts/harness/plugin-clients.js";

const K = "vck_0123456789abcdef";
const STEAM = "76561198000000001";

const ASKS: ReadonlyArray<[title: string, query: string, action: "check" | "claim", kind: PlayerIdKind, value: string]> = [
  ["rust-servers.net check", `object=votes&element=claim&key=${K}&steamid=${STEAM}`, "check", PlayerIdKind.STEAM_ID, STEAM],
  ["rust-servers.net claim", `action=post&object=votes&element=claim&key=${K}&steamid=${STEAM}`, "claim", PlayerIdKind.STEAM_ID, STEAM],
  ["EasyVoteExtended's rust-servers.net claim", `action=custom&object=plugin&element=reward&key=${K}&steamid=${STEAM}`, "claim", PlayerIdKind.STEAM_ID, STEAM],
  [
    "rust-servers.net check by username (PHP urlencode)",
    `object=votes&element=claim&key=${K}&username=steve+o%27neil`,
    "check",
    PlayerIdKind.USERNAME,
    "steve o'neil",
  ],
  ["status family check", `action=status&key=${K}&steamid=${STEAM}`, "check", PlayerIdKind.STEAM_ID, STEAM],
  ["status family claim with server=", `action=claim&key=${K}&server=42&steamid=${STEAM}`, "claim", PlayerIdKind.STEAM_ID, STEAM],
  ["FiveM discord with customid=", `action=status&key=${K}&discordid=123456789012345678&customid=abc`, "check", PlayerIdKind.DISCORD_ID, "123456789012345678"],
  [
    "Minecraft uuid",
    `action=claim&key=${K}&uuid=069a79f4-44e9-4726-a5be-fca90e38aaf5`,
    "claim",
    PlayerIdKind.MINECRAFT_UUID,
    "069a79f4-44e9-4726-a5be-fca90e38aaf5",
  ],
  ["account id", `action=status&key=${K}&accountid=acc-9`, "check", PlayerIdKind.ACCOUNT_ID, "acc-9"],
  ["EscapeDataString username", `action=status&key=${K}&username=Steve%20O%27Neil`, "check", PlayerIdKind.USERNAME, "Steve O'Neil"],
  ["upper-case action", `ACTION=x&action=STATUS&key=${K}&steamid=${STEAM}`, "check", PlayerIdKind.STEAM_ID, STEAM],
];

for (const [title, query, action, kind, value] of ASKS) {
  test(`${title} -> ${action} by ${PlayerIdKind[kind]}`, (t) => {
    t.deepEqual(parseVoteQuery(query, false), { kind: "ask", action, json: false, key: K, player: { kind, value } });
  });
}

test("format=json or the JSON path asks for the JSON answer", (t) => {
  t.like(parseVoteQuery(`action=status&key=${K}&steamid=${STEAM}&format=json`, false), { kind: "ask", json: true });
  t.like(parseVoteQuery(`object=votes&element=claim&key=${K}&username=steve`, true), { kind: "ask", json: true });
  t.like(parseVoteQuery("", true), { kind: "unanswerable", json: true });
});

const UNANSWERABLE: ReadonlyArray<[query: string, outcome: string]> = [
  [`key=${K}&steamid=${STEAM}`, "unknown_action"],
  [`action=count&key=${K}&steamid=${STEAM}`, "unknown_action"],
  [`action=post&key=${K}&steamid=${STEAM}`, "unknown_action"],
  [`object=servers&element=detail&key=${K}`, "unknown_action"],
  [`action=status&steamid=${STEAM}`, "missing_key"],
  [`action=status&key=&steamid=${STEAM}`, "missing_key"],
  [`action=status&key=${"k".repeat(MAX_CLAIM_KEY_CHARS + 1)}&steamid=${STEAM}`, "key_too_long"],
  [`action=status&key=${K}`, "missing_player_id"],
  [`action=status&key=${K}&steamid=`, "missing_player_id"],
  [`action=status&key=${K}&steamid=${STEAM}&username=steve`, "several_player_ids"],
  [`action=status&key=${K}&username=${"a".repeat(513)}`, "player_id_too_long"],
];

for (const [query, outcome] of UNANSWERABLE) {
  test(`${query.slice(0, 60)} -> 0 without a call (${outcome})`, (t) => {
    t.deepEqual(parseVoteQuery(query, false), { kind: "unanswerable", json: false, outcome });
  });
}

test("known claim keys: remembered until the TTL, renewed by use, forgotten on demand, held as digests", (t) => {
  let now = 0;
  const known = createKnownClaimKeys({ ttlMs: 1_000, now: () => now });
  t.false(known.has(K));
  known.remember(K);
  t.true(known.has(K));
  t.false(known.has(`${K}x`));
  now = 900;
  known.remember(K);
  now = 1_800;
  t.true(known.has(K), "renewed at 900");
  now = 1_901;
  t.false(known.has(K), "expired 1000 ms after its last right answer");
  known.remember(K);
  known.forget(K);
  t.false(known.has(K));
});

// Frozen vectors: PHP 8.3 `urlencode(...)` and .NET 8 `Uri.EscapeDataString(...)`, run on these strings.
test("PHP urlencode vectors", (t) => {
  t.is(phpUrlencode("steve o'neil"), "steve+o%27neil");
  t.is(phpUrlencode("a~b*c(d)!e-f_g.h"), "a%7Eb%2Ac%28d%29%21e-f_g.h");
  t.is(phpUrlencode("née+§"), "n%C3%A9e%2B%C2%A7");
});

test(".NET Uri.EscapeDataString vectors", (t) => {
  t.is(escapeDataString("Steve O'Neil"), "Steve%20O%27Neil");
  t.is(escapeDataString("a~b*c(d)!e-f_g.h"), "a~b%2Ac%28d%29%21e-f_g.h");
  t.is(escapeDataString("vck_AZaz09-_"), "vck_AZaz09-_");
});

test("the FiveM script's URLs: steam hex identifier to SteamID64 decimal, nothing encoded, customid the licence", (t) => {
  const urls = fivemUrls(
    { apiUrl: "http://list.test/api/votes", serverKey: K, identifier: "steam" },
    { steam: "steam:110000100000001", license: "license:abc123" },
  );
  t.deepEqual(urls, {
    status: `http://list.test/api/votes?action=status&key=${K}&steamid=76561197960265729&customid=abc123`,
    claim: `http://list.test/api/votes?action=claim&key=${K}&steamid=76561197960265729&customid=abc123`,
  });
});
