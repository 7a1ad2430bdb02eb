/** A network goal's definition, validation and rounds (services/rewards/domain/network-goal.ts), table-driven. */
import test from "ava";
import { countGoalVotes, goalEntriesFor, goalEntryKey, parseNetworkGoal, type NetworkGoalInput } from "../../services/rewards/domain/network-goal.js";

const S1 = "7f0c2a1e-0000-4000-8000-000000000001";
const S2 = "7f0c2a1e-0000-4000-8000-000000000002";
const valid: NetworkGoalInput = { name: "Party", serverIds: [S1, S2], target: 50, payees: "voters", rewardsJson: '[{"commands":["give {player} cake 1"]}]' };

test("a valid goal parses: names trimmed, server ids lower-cased and kept once, rewards online-only by default", (t) => {
  const parsed = parseNetworkGoal({ ...valid, name: "  Party ", serverIds: [S1, S2.toUpperCase(), S1] });
  t.deepEqual(parsed, {
    ok: true,
    goal: { name: "Party", serverIds: [S1, S2], target: 50, payees: "voters", rewards: [{ commands: ["give {player} cake 1"], onlineOnly: true }] },
  });
});

const refusals: Array<[string, Partial<NetworkGoalInput>, string[]]> = [
  ["no name, no servers", { name: " ", serverIds: [] }, ["name: required", "server_ids: at least one server is required"]],
  ["a server id that is not a uuid", { serverIds: [S1, "abc"] }, ["server_ids[1]: not a server id (a uuid)"]],
  [
    "too many servers",
    { serverIds: Array.from({ length: 21 }, (_, i) => `7f0c2a1e-0000-4000-8000-${String(i).padStart(12, "0")}`) },
    ["server_ids: at most 20 servers (got 21)"],
  ],
  ["a target of 0", { target: 0 }, ["target: must be a whole number from 1 to 1000000"]],
  ["unknown payees", { payees: "everyone" }, ['payees: must be "voters" or "online"']],
  ["broken JSON", { rewardsJson: "[" }, ["rewards_json: not valid JSON"]],
  ["no rewards", { rewardsJson: "[]" }, ["rewards: must be a list of at least one reward"]],
  [
    "a vote's placeholder in a goal reward",
    { rewardsJson: '[{"commands":["give {player} cake {streak}"]}]' },
    ["rewards[0].commands[0]: {streak} cannot be used in a goal reward; it may use {player}, {steam_id}, {discord_id}, {minecraft_uuid}, {account_id}"],
  ],
  [
    "a player's placeholder when the goal pays the players online",
    { payees: "online" },
    ["rewards[0].commands[0]: {player} cannot be used when the goal pays the players online; such a command names no player"],
  ],
  [
    "an unknown placeholder (the rules' own check)",
    { rewardsJson: '[{"commands":["give {playr} cake"]}]' },
    ["rewards[0].commands[0]: unknown placeholder {playr}"],
  ],
];
for (const [what, input, errors] of refusals) {
  test(`refused with every problem named: ${what}`, (t) => {
    const parsed = parseNetworkGoal({ ...valid, ...input });
    if (parsed.ok) return t.fail("parsed");
    for (const e of errors)
      t.true(
        parsed.errors.some((got) => got.startsWith(e)),
        `${e} in ${JSON.stringify(parsed.errors)}`,
      );
  });
}

test("the vote that reaches the target counts in the round it reaches; the votes after it count toward the next round", (t) => {
  t.deepEqual(countGoalVotes({ round: 1, progress: 3 }, 5, 4), { roundOf: [1, 1, 2, 2], reached: [1], reachedBy: [1], after: { round: 2, progress: 2 } });
  t.deepEqual(countGoalVotes({ round: 4, progress: 0 }, 2, 5), {
    roundOf: [4, 4, 5, 5, 6],
    reached: [4, 5],
    reachedBy: [1, 3],
    after: { round: 6, progress: 1 },
  });
  t.deepEqual(
    countGoalVotes({ round: 2, progress: 9 }, 5, 1),
    { roundOf: [2], reached: [2], reachedBy: [0], after: { round: 3, progress: 0 } },
    "a target lowered below the progress",
  );
  t.deepEqual(countGoalVotes({ round: 1, progress: 0 }, 5, 0), { roundOf: [], reached: [], reachedBy: [], after: { round: 1, progress: 0 } });
});

test("a goal's entry keys name the goal, round and payee (a digest, never the voter's identity); online entries are not held for a player", (t) => {
  const key = goalEntryKey("g", 3, "voter@example.org", 0);
  t.regex(key, /^g:goal:3:[0-9a-f]{32}:0$/);
  t.false(key.includes("voter@example.org"));
  t.is(goalEntryKey("g", 3, null, 1), "g:goal:3:online:1");
  const goal = { id: "g", rewards: [{ commands: ["give {player} cake 1"], onlineOnly: true }] };
  t.deepEqual(goalEntriesFor(goal, 1, { identity: "v", ids: { player: "Ann" } }).entries[0]?.commands, ["give Ann cake 1"]);
  t.deepEqual(goalEntriesFor(goal, 1, { identity: "v", ids: { player: "A nn" } }).skipped.length, 1, "an unsafe name skips the reward");
  t.false(goalEntriesFor({ id: "g", rewards: [{ commands: ["give @a cake 1"], onlineOnly: true }] }, 1, null).entries[0]?.onlineOnly);
});
