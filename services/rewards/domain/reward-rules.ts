/**
 * A server's reward rules (issue 31): what the list gives a voter for a counted vote, a streak, a milestone, a lucky
 * draw, a period placement or a referral, as game commands with placeholders that a game plugin runs from the
 * server's reward queue. This module is the rules' one definition: their shape, their bounds, and the validation
 * that turns an owner's JSON into rules or into errors that name the field and say what is wrong. Pure: no I/O.
 */
import { HEART_COOLDOWN_MS } from "../../hearts/domain/streak.js";

/** Placeholders a command may use, and what each is replaced with (services/rewards/domain/render-command.ts). */
export const PLACEHOLDERS = {
  player: "the voter's name as the vote gave it",
  steam_id: "the voter's SteamID64",
  discord_id: "the voter's Discord user id",
  minecraft_uuid: "the voter's Minecraft UUID",
  account_id: "the voter's account id on the list",
  streak: "the voter's daily streak with this vote, grace days included",
  total: "the voter's counted votes on this server, all time, with this one",
  month_total: "the voter's counted votes this UTC month, with this one",
  week_total: "the voter's counted votes this ISO week (Monday to Sunday, UTC), with this one",
  weight: "the vote's weight (1, or the list's weekend or event multiplier)",
  place: "a period award's placement (1 = first)",
} as const;

/** A placeholder's name, as written between braces in a command: `{player}`. */
export type Placeholder = keyof typeof PLACEHOLDERS;

/** Longest command template, in UTF-8 bytes: a game console line, with room for its placeholders' values. */
export const MAX_COMMAND_BYTES = 512;
/** Most commands in one reward. */
export const MAX_COMMANDS = 20;
/** Most entries of each list (milestones, streak rewards, lucky draws, placements). */
export const MAX_ENTRIES = 50;
/** Most event windows with a weight. */
export const MAX_WEIGHT_WINDOWS = 20;
/** Largest weight of a vote (weekend or event multiplier). */
export const MAX_WEIGHT = 10;
/** Most missed UTC days a streak survives. */
export const MAX_GRACE_DAYS = 7;
/** Largest milestone count, streak day or lucky 1-in-N. */
export const MAX_COUNT = 1_000_000;
/** Most places a period award pays. */
export const MAX_PLACES = 100;

/** One reward: the commands a plugin runs, and whether it waits for the player to be online. */
export interface Reward {
  commands: string[];
  /** Run only while the player is on the game server (held until they join); default true. */
  onlineOnly: boolean;
}

/** A milestone on a voter's counted votes: every Nth, or exactly the Nth, of all time, this month or this week. */
export interface Milestone {
  scope: "all" | "month" | "week";
  /** Exactly one of `every` and `at` is set. */
  every?: number;
  at?: number;
  reward: Reward;
}

/** A streak reward: on reaching `day` (and every `day` days after when `repeat`). */
export interface StreakReward {
  day: number;
  repeat: boolean;
  reward: Reward;
}

/** A window of UTC time in which a vote weighs `weight` (an event; the weekend has its own setting). */
export interface WeightWindow {
  from: Date;
  to: Date;
  weight: number;
}

/** A period award: the voters placed 1st..Nth in a week or month, paid once when it closes. */
export interface PlaceAward {
  place: number;
  reward: Reward;
}

/** The rules of one server. Every list may be empty: rules that give nothing are valid. */
export interface RewardRules {
  /** Given for every counted vote (repeated `weight` times). */
  perVote: Reward[];
  /** Weight of a vote cast on a Saturday or Sunday (UTC); 1 = no weekend bonus. */
  weekendWeight: number;
  weightWindows: WeightWindow[];
  streak: { graceDays: number; rewards: StreakReward[] };
  milestones: Milestone[];
  lucky: Array<{ oneIn: number; reward: Reward }>;
  awards: { week: PlaceAward[]; month: PlaceAward[] };
  referral: { referrer: Reward[]; referee: Reward[]; reversal: { referrer: Reward[]; referee: Reward[] } };
}

/** What validation knows about the server: its vote cooldown bounds how many votes a week or month can hold. */
export interface RuleLimits {
  voteCooldownMs: number;
}

/** The limits every server's rules are judged by: one counted vote per identity per HEART_COOLDOWN_MS. */
export const REWARD_RULE_LIMITS: RuleLimits = { voteCooldownMs: HEART_COOLDOWN_MS };

/** The result of parsing an owner's rules: the rules, or every problem found (each names its field). */
export type ParsedRules = { ok: true; rules: RewardRules } | { ok: false; errors: string[] };

const WEEK_MS = 7 * 24 * 60 * 60 * 1000;
const LONGEST_MONTH_MS = 31 * 24 * 60 * 60 * 1000;

/** The most counted votes a period of `periodMs` can hold with one vote per `cooldownMs`. */
export function mostVotesIn(periodMs: number, cooldownMs: number): number {
  return Math.floor((periodMs - 1) / cooldownMs) + 1;
}

/**
 * Parses and validates an owner's rules (already decoded from JSON). Bad input is never a crash: every problem is an
 * error naming its path (`milestones[2].at`), collected so the owner fixes them all at once.
 */
export function parseRewardRules(input: unknown, limits: RuleLimits): ParsedRules {
  const errors: string[] = [];
  const root = record(input, "rules", errors);
  if (root === undefined) return { ok: false, errors };
  known(root, "rules", ["perVote", "weekendWeight", "weightWindows", "streak", "milestones", "lucky", "awards", "referral"], errors);

  const perVote = rewards(root.perVote, "perVote", errors);
  const weekendWeight = integer(root.weekendWeight ?? 1, "weekendWeight", 1, MAX_WEIGHT, errors);
  const weightWindows = list(root.weightWindows, "weightWindows", MAX_WEIGHT_WINDOWS, errors).map((w, i) => weightWindow(w, `weightWindows[${i}]`, errors));
  const sorted = weightWindows.filter((w): w is WeightWindow => w !== undefined).sort((a, b) => a.from.getTime() - b.from.getTime());
  for (let i = 1; i < sorted.length; i++) {
    const [a, b] = [sorted[i - 1] as WeightWindow, sorted[i] as WeightWindow];
    if (b.from < a.to) errors.push(`weightWindows: the windows starting ${a.from.toISOString()} and ${b.from.toISOString()} overlap`);
  }

  const streakIn = root.streak === undefined ? {} : record(root.streak, "streak", errors);
  if (streakIn !== undefined) known(streakIn, "streak", ["graceDays", "rewards"], errors);
  const graceDays = integer(streakIn?.graceDays ?? 0, "streak.graceDays", 0, MAX_GRACE_DAYS, errors);
  const streakRewards = list(streakIn?.rewards, "streak.rewards", MAX_ENTRIES, errors).map((s, i) => streakReward(s, `streak.rewards[${i}]`, errors));

  const weekMost = mostVotesIn(WEEK_MS, limits.voteCooldownMs);
  const monthMost = mostVotesIn(LONGEST_MONTH_MS, limits.voteCooldownMs);
  const milestones = list(root.milestones, "milestones", MAX_ENTRIES, errors).map((m, i) =>
    milestone(m, `milestones[${i}]`, { week: weekMost, month: monthMost }, errors),
  );
  const lucky = list(root.lucky, "lucky", MAX_ENTRIES, errors).map((l, i) => {
    const path = `lucky[${i}]`;
    const r = record(l, path, errors);
    if (r === undefined) return undefined;
    known(r, path, ["oneIn", "reward"], errors);
    const oneIn = integer(r.oneIn, `${path}.oneIn`, 2, MAX_COUNT, errors);
    const reward = oneReward(r.reward, `${path}.reward`, errors);
    return oneIn === undefined || reward === undefined ? undefined : { oneIn, reward };
  });

  const awardsIn = root.awards === undefined ? {} : record(root.awards, "awards", errors);
  if (awardsIn !== undefined) known(awardsIn, "awards", ["week", "month"], errors);
  const awards = { week: places(awardsIn?.week, "awards.week", errors), month: places(awardsIn?.month, "awards.month", errors) };

  const referralIn = root.referral === undefined ? {} : record(root.referral, "referral", errors);
  if (referralIn !== undefined) known(referralIn, "referral", ["referrer", "referee", "reversal"], errors);
  const reversalIn = referralIn?.reversal === undefined ? {} : record(referralIn.reversal, "referral.reversal", errors);
  if (reversalIn !== undefined) known(reversalIn, "referral.reversal", ["referrer", "referee"], errors);

  const rules: RewardRules = {
    perVote,
    weekendWeight: weekendWeight ?? 1,
    weightWindows: sorted,
    streak: { graceDays: graceDays ?? 0, rewards: defined(streakRewards) },
    milestones: defined(milestones),
    lucky: defined(lucky),
    awards,
    referral: {
      referrer: rewards(referralIn?.referrer, "referral.referrer", errors),
      referee: rewards(referralIn?.referee, "referral.referee", errors),
      reversal: {
        referrer: rewards(reversalIn?.referrer, "referral.reversal.referrer", errors),
        referee: rewards(reversalIn?.referee, "referral.reversal.referee", errors),
      },
    },
  };
  refuseVotePlaceholdersInReferrals(rules.referral, errors);
  return errors.length > 0 ? { ok: false, errors } : { ok: true, rules };
}

/** The placeholders a command template names, in order of appearance (each `{name}`). */
export function placeholdersOf(template: string): string[] {
  return [...template.matchAll(/\{([^{}]*)\}/g)].map((m) => m[1] as string);
}

function defined<T>(values: Array<T | undefined>): T[] {
  return values.filter((v): v is T => v !== undefined);
}

function record(value: unknown, path: string, errors: string[]): Record<string, unknown> | undefined {
  if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  errors.push(`${path}: must be an object`);
  return undefined;
}

function known(value: Record<string, unknown>, path: string, fields: readonly string[], errors: string[]): void {
  for (const key of Object.keys(value)) if (!fields.includes(key)) errors.push(`${path}.${key}: unknown field; the fields are ${fields.join(", ")}`);
}

function list(value: unknown, path: string, most: number, errors: string[]): unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    errors.push(`${path}: must be a list`);
    return [];
  }
  if (value.length > most) {
    errors.push(`${path}: at most ${most} entries (got ${value.length})`);
    return [];
  }
  return value;
}

function integer(value: unknown, path: string, min: number, max: number, errors: string[]): number | undefined {
  if (typeof value === "number" && Number.isInteger(value) && value >= min && value <= max) return value;
  errors.push(`${path}: must be a whole number from ${min} to ${max}`);
  return undefined;
}

function command(value: unknown, path: string, errors: string[]): string | undefined {
  if (typeof value !== "string" || value.trim() === "") {
    errors.push(`${path}: must be a non-empty command`);
    return undefined;
  }
  const before = errors.length;
  const bytes = Buffer.byteLength(value, "utf8");
  if (bytes > MAX_COMMAND_BYTES) errors.push(`${path}: ${bytes} bytes, over the ${MAX_COMMAND_BYTES}-byte bound of a command`);
  // A console line is one line: a line break would let a command run a second, unchecked one.
  if (/\p{Cc}/u.test(value)) errors.push(`${path}: holds a control character (a line break or tab); a command is one line`);
  for (const name of placeholdersOf(value)) {
    if (!(name in PLACEHOLDERS))
      errors.push(
        `${path}: unknown placeholder {${name}}; the placeholders are ${Object.keys(PLACEHOLDERS)
          .map((p) => `{${p}}`)
          .join(", ")}`,
      );
  }
  return errors.length === before ? value : undefined;
}

function oneReward(value: unknown, path: string, errors: string[]): Reward | undefined {
  const r = record(value, path, errors);
  if (r === undefined) return undefined;
  known(r, path, ["commands", "onlineOnly"], errors);
  const commandsIn = list(r.commands, `${path}.commands`, MAX_COMMANDS, errors);
  if (r.commands !== undefined && commandsIn.length === 0 && Array.isArray(r.commands)) errors.push(`${path}.commands: must hold at least one command`);
  if (r.commands === undefined) errors.push(`${path}.commands: required`);
  if (r.onlineOnly !== undefined && typeof r.onlineOnly !== "boolean") errors.push(`${path}.onlineOnly: must be true or false`);
  const commands = commandsIn.map((c, i) => command(c, `${path}.commands[${i}]`, errors));
  return commands.every((c) => c !== undefined) && commands.length > 0 ? { commands: commands as string[], onlineOnly: r.onlineOnly !== false } : undefined;
}

function rewards(value: unknown, path: string, errors: string[]): Reward[] {
  return defined(list(value, path, MAX_ENTRIES, errors).map((r, i) => oneReward(r, `${path}[${i}]`, errors)));
}

function weightWindow(value: unknown, path: string, errors: string[]): WeightWindow | undefined {
  const r = record(value, path, errors);
  if (r === undefined) return undefined;
  known(r, path, ["from", "to", "weight"], errors);
  const from = instant(r.from, `${path}.from`, errors);
  const to = instant(r.to, `${path}.to`, errors);
  const weight = integer(r.weight, `${path}.weight`, 1, MAX_WEIGHT, errors);
  if (from === undefined || to === undefined || weight === undefined) return undefined;
  if (to <= from) {
    errors.push(`${path}: ends (${to.toISOString()}) before it starts (${from.toISOString()})`);
    return undefined;
  }
  return { from, to, weight };
}

function instant(value: unknown, path: string, errors: string[]): Date | undefined {
  // An instant with its offset (ISO 8601 / RFC 3339): a window in "local time" would move with the reader's zone.
  if (typeof value === "string" && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(value)) {
    const at = new Date(value);
    if (!Number.isNaN(at.getTime())) return at;
  }
  errors.push(`${path}: must be an instant with its offset, such as 2026-12-24T00:00:00Z`);
  return undefined;
}

function streakReward(value: unknown, path: string, errors: string[]): StreakReward | undefined {
  const r = record(value, path, errors);
  if (r === undefined) return undefined;
  known(r, path, ["day", "repeat", "reward"], errors);
  const day = integer(r.day, `${path}.day`, 1, MAX_COUNT, errors);
  if (r.repeat !== undefined && typeof r.repeat !== "boolean") errors.push(`${path}.repeat: must be true or false`);
  const reward = oneReward(r.reward, `${path}.reward`, errors);
  return day === undefined || reward === undefined ? undefined : { day, repeat: r.repeat === true, reward };
}

function milestone(value: unknown, path: string, most: { week: number; month: number }, errors: string[]): Milestone | undefined {
  const r = record(value, path, errors);
  if (r === undefined) return undefined;
  known(r, path, ["scope", "every", "at", "reward"], errors);
  const scope = r.scope;
  if (scope !== "all" && scope !== "month" && scope !== "week") {
    errors.push(`${path}.scope: must be "all", "month" or "week"`);
    return undefined;
  }
  if ((r.every === undefined) === (r.at === undefined)) {
    errors.push(`${path}: give exactly one of "every" (every Nth vote) and "at" (exactly the Nth vote)`);
    return undefined;
  }
  const field = r.every === undefined ? "at" : "every";
  const count = integer(r[field], `${path}.${field}`, 1, MAX_COUNT, errors);
  const reward = oneReward(r.reward, `${path}.reward`, errors);
  if (count === undefined || reward === undefined) return undefined;
  // A week or a month holds a bounded number of counted votes (one per cooldown): a milestone past it never fires.
  const bound = scope === "all" ? Number.POSITIVE_INFINITY : most[scope];
  if (count > bound) {
    errors.push(`${path}.${field}: ${count} can never be reached: a ${scope} holds at most ${bound} counted votes of one voter`);
    return undefined;
  }
  return { scope, ...(field === "every" ? { every: count } : { at: count }), reward };
}

function places(value: unknown, path: string, errors: string[]): PlaceAward[] {
  const out = defined(
    list(value, path, MAX_PLACES, errors).map((p, i) => {
      const at = `${path}[${i}]`;
      const r = record(p, at, errors);
      if (r === undefined) return undefined;
      known(r, at, ["place", "reward"], errors);
      const place = integer(r.place, `${at}.place`, 1, MAX_PLACES, errors);
      const reward = oneReward(r.reward, `${at}.reward`, errors);
      return place === undefined || reward === undefined ? undefined : { place, reward };
    }),
  );
  const seen = new Set<number>();
  for (const p of out) {
    if (seen.has(p.place)) errors.push(`${path}: place ${p.place} is given twice`);
    seen.add(p.place);
  }
  return out.sort((a, b) => a.place - b.place);
}

/** The placeholders a referral reward may use: a referral names its two players, and knows nothing of a vote. */
export const REFERRAL_REWARD_PLACEHOLDERS: readonly Placeholder[] = ["player"];

/**
 * A referral reward is given for a referral, not a vote: its commands may name only the player (`{player}`, the
 * referrer's or the referee's identity as the game server sent it). A vote's placeholder there is refused, naming the
 * command, rather than skipped at every referral.
 */
function refuseVotePlaceholdersInReferrals(referral: RewardRules["referral"], errors: string[]): void {
  const lists: Array<[string, Reward[]]> = [
    ["referral.referrer", referral.referrer],
    ["referral.referee", referral.referee],
    ["referral.reversal.referrer", referral.reversal.referrer],
    ["referral.reversal.referee", referral.reversal.referee],
  ];
  for (const [path, rewards] of lists) {
    rewards.forEach((reward, i) =>
      reward.commands.forEach((command, c) => {
        for (const name of placeholdersOf(command)) {
          if (!REFERRAL_REWARD_PLACEHOLDERS.includes(name as Placeholder))
            errors.push(
              `${path}[${i}].commands[${c}]: {${name}} cannot be used in a referral reward; it may use {player} (the referrer's or the referee's identity)`,
            );
        }
      }),
    );
  }
}

/**
 * The rules' field validators, for a network goal's definition (network-goal.ts): its rewards are the rules' rewards,
 * validated and worded the same way (each error names its path).
 */
export const RULE_FIELDS = { record, known, list, integer, rewards } as const;
