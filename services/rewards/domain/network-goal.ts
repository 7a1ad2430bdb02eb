/**
 * A network goal (vote party, issue 31): an owner's target of counted votes across chosen servers, the rewards paid
 * each time it is reached, and who is paid. This module is the goal's one definition: its shape and bounds, the
 * validation that turns an owner's request into a goal or into errors naming the field, how counted votes fill the
 * rounds, and the queue entries a reached round gives. Pure: no I/O.
 */
import { createHash } from "node:crypto";
import { isUuid } from "../../shared/values/ids.js";
import type { PlaceholderValues } from "./render-command.js";
import { placeholdersOf, type Placeholder, type Reward, RULE_FIELDS } from "./reward-rules.js";
import { renderRewardEntry, type RewardEntry, type SkippedReward } from "./rewards-for-vote.js";

/**
 * Who a reached goal pays: `voters`, every voter who voted on a chosen server in the round (once each, on the server
 * of their latest vote in it); `online`, the players on each chosen server when its plugin runs the entry (one entry
 * per server, for no player in particular: its commands address the players online, such as `give @a`).
 */
export const GOAL_PAYEES = ["voters", "online"] as const;
/** Who a reached goal pays. */
export type GoalPayees = (typeof GOAL_PAYEES)[number];

/** Most servers one goal counts. */
export const MAX_GOAL_SERVERS = 20;
/** Largest target of counted votes. */
export const MAX_GOAL_TARGET = 1_000_000;
/** Longest goal name, in characters. */
export const MAX_GOAL_NAME_CHARS = 100;
/** Most rewards a goal pays each payee. */
export const MAX_GOAL_REWARDS = 10;
/** Largest rewards document accepted, in bytes (far above what the rewards' own bounds allow). */
export const MAX_GOAL_REWARDS_JSON_BYTES = 64 * 1024;

/** The placeholders a `voters` goal's commands may use: the payee's name and ids (of their latest vote in the round). */
export const GOAL_VOTER_PLACEHOLDERS: readonly Placeholder[] = ["player", "steam_id", "discord_id", "minecraft_uuid", "account_id"];

/** A goal as an owner defines it. */
export interface NetworkGoalDefinition {
  name: string;
  /** Lower-case server ids, each once. */
  serverIds: string[];
  target: number;
  payees: GoalPayees;
  rewards: Reward[];
}

/** What an owner sent: the RPC's fields as they came. */
export interface NetworkGoalInput {
  name: string;
  serverIds: readonly string[];
  target: number;
  payees: string;
  rewardsJson: string;
}

/** The result of parsing a goal: the goal, or every problem found (each names its field). */
export type ParsedGoal = { ok: true; goal: NetworkGoalDefinition } | { ok: false; errors: string[] };

/** Parses and validates a goal: every problem is collected, each naming its field (`rewards[0].commands[1]`). */
export function parseNetworkGoal(input: NetworkGoalInput): ParsedGoal {
  const errors: string[] = [];
  const name = input.name.trim();
  if (name === "") errors.push("name: required");
  else if ([...name].length > MAX_GOAL_NAME_CHARS) errors.push(`name: at most ${MAX_GOAL_NAME_CHARS} characters`);
  else if (/\p{Cc}/u.test(name)) errors.push("name: holds a control character");

  const serverIds = [...new Set(input.serverIds.map((id) => id.trim().toLowerCase()))];
  if (serverIds.length === 0) errors.push("server_ids: at least one server is required");
  if (serverIds.length > MAX_GOAL_SERVERS) errors.push(`server_ids: at most ${MAX_GOAL_SERVERS} servers (got ${serverIds.length})`);
  serverIds.forEach((id, i) => {
    if (!isUuid(id)) errors.push(`server_ids[${i}]: not a server id (a uuid)`);
  });

  const target = RULE_FIELDS.integer(input.target, "target", 1, MAX_GOAL_TARGET, errors);
  const payees = (GOAL_PAYEES as readonly string[]).includes(input.payees) ? (input.payees as GoalPayees) : undefined;
  if (payees === undefined) errors.push(`payees: must be ${GOAL_PAYEES.map((p) => `"${p}"`).join(" or ")}`);

  const rewards = rewardsOf(input.rewardsJson, payees, errors);
  if (errors.length > 0 || target === undefined || payees === undefined) return { ok: false, errors };
  return { ok: true, goal: { name, serverIds, target, payees, rewards } };
}

function rewardsOf(json: string, payees: GoalPayees | undefined, errors: string[]): Reward[] {
  if (Buffer.byteLength(json, "utf8") > MAX_GOAL_REWARDS_JSON_BYTES) {
    errors.push(`rewards_json: over ${MAX_GOAL_REWARDS_JSON_BYTES} bytes`);
    return [];
  }
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    // Failure policy: a caller's broken JSON is their error, answered as such; the parser's message may quote the input.
    errors.push("rewards_json: not valid JSON");
    return [];
  }
  if (!Array.isArray(value) || value.length === 0) {
    errors.push("rewards: must be a list of at least one reward");
    return [];
  }
  if (value.length > MAX_GOAL_REWARDS) {
    errors.push(`rewards: at most ${MAX_GOAL_REWARDS} entries (got ${value.length})`);
    return [];
  }
  const rewards = RULE_FIELDS.rewards(value, "rewards", errors);
  rewards.forEach((reward, i) =>
    reward.commands.forEach((command, c) => {
      for (const name of placeholdersOf(command)) {
        if (payees === "online")
          errors.push(`rewards[${i}].commands[${c}]: {${name}} cannot be used when the goal pays the players online; such a command names no player`);
        else if (!GOAL_VOTER_PLACEHOLDERS.includes(name as Placeholder))
          errors.push(
            `rewards[${i}].commands[${c}]: {${name}} cannot be used in a goal reward; it may use ${GOAL_VOTER_PLACEHOLDERS.map((p) => `{${p}}`).join(", ")}`,
          );
      }
    }),
  );
  return rewards;
}

/** A goal's counter: the round counted now and its counted votes. */
export interface GoalCounter {
  round: number;
  progress: number;
}

/**
 * Counts `hearts` new counted votes (in their order) into `counter` with target `target`: the round each vote counts
 * in, the rounds reached (each once; several when the batch holds more than a target's worth), and the counter after.
 * `reachedBy` holds the index of the vote that reached each. The vote that reaches the target counts in the round it reaches; the votes after it count toward the next round
 * (none is dropped, so a vote party of 50 reached by 53 votes starts the next one at 3). Pure.
 */
export function countGoalVotes(
  counter: GoalCounter,
  target: number,
  hearts: number,
): { roundOf: number[]; reached: number[]; reachedBy: number[]; after: GoalCounter } {
  let { round, progress } = counter;
  const roundOf: number[] = [];
  const reached: number[] = [];
  const reachedBy: number[] = [];
  for (let i = 0; i < hearts; i++) {
    roundOf.push(round);
    progress += 1;
    // A target lowered below the progress is reached by the next vote.
    if (progress >= target) {
      reached.push(round);
      reachedBy.push(i);
      round += 1;
      progress = 0;
    }
  }
  return { roundOf, reached, reachedBy, after: { round, progress } };
}

/**
 * The idempotent key of a goal's entry: `<goal id>:goal:<round>:<payee>:<reward index>`, the payee being a digest of
 * the voter's identity (the identity itself is never written into a key) or `online`. A payer that runs a page twice
 * queues nothing twice.
 */
export function goalEntryKey(goalId: string, round: number, voterIdentity: string | null, index: number): string {
  const payee = voterIdentity === null ? "online" : createHash("sha256").update(voterIdentity).digest("hex").slice(0, 32);
  return `${goalId}:goal:${round}:${payee}:${index}`;
}

/**
 * The entries a reached round gives one payee: a voter (`voter` with the identity and the values of their latest
 * vote) or, with `voter` null, the players online on a server (entries not held for any one player: online_only is
 * false, so the plugin runs them at its next poll, for whoever is on). A reward whose command needs a value that is
 * missing or unsafe is skipped, as a vote's is.
 */
export function goalEntriesFor(
  goal: { id: string; rewards: readonly Reward[] },
  round: number,
  voter: { identity: string; ids: PlaceholderValues } | null,
): { entries: RewardEntry[]; skipped: SkippedReward[] } {
  const entries: RewardEntry[] = [];
  const skipped: SkippedReward[] = [];
  goal.rewards.forEach((reward, i) => {
    const given = renderRewardEntry(goalEntryKey(goal.id, round, voter?.identity ?? null, i), "goal", reward, voter?.ids ?? {});
    if (given.kind === "skipped") skipped.push(given.skipped);
    else entries.push(voter === null ? { ...given.entry, onlineOnly: false } : given.entry);
  });
  return { entries, skipped };
}
