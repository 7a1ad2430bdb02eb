import type { GraceStreakStep } from "./grace-streak.js";
import { winsLuckyDraw } from "./lucky-draw.js";
import { renderCommand, type PlaceholderValues } from "./render-command.js";
import type { Milestone, Reward, RewardRules } from "./reward-rules.js";

/** Why a queue entry was given (the queue API's `reason`); `goal`: a network goal was reached (network-goal.ts). */
export type RewardReason = "vote" | "streak" | "milestone" | "lucky" | "award" | "referral" | "reversal" | "goal";

/** What the rules know about one counted vote. */
export interface CountedVote {
  heartId: string;
  countedAt: Date;
  /** The voter's ids as the heart carried them (`player` is the name; a missing platform id is absent). */
  ids: Pick<PlaceholderValues, "player" | "steam_id" | "discord_id" | "minecraft_uuid" | "account_id">;
  /** The voter's counted votes on the server with this one: all time, this UTC month, this ISO week. */
  totals: { all: number; month: number; week: number };
  streak: GraceStreakStep;
}

/** One queue entry the vote gives: its idempotent key (the same vote always gives the same keys), reason and commands. */
export interface RewardEntry {
  /** `<heart id>:<reason>:<rule index>[:<repeat>]`: a replay of the vote gives the same key, so it is queued once. */
  key: string;
  reason: RewardReason;
  commands: string[];
  onlineOnly: boolean;
}

/** A reward the rules give that could not be queued, and why (shown by the preview, logged without values). */
export interface SkippedReward {
  key: string;
  reason: RewardReason;
  why: string;
}

/** The vote's weight: an event window's weight when one holds `at`, else the weekend weight on a UTC Saturday or Sunday, else 1. */
export function weightOf(rules: RewardRules, at: Date): number {
  const window = rules.weightWindows.find((w) => w.from <= at && at < w.to);
  if (window !== undefined) return window.weight;
  const day = at.getUTCDay();
  return day === 0 || day === 6 ? rules.weekendWeight : 1;
}

/** Whether the vote whose totals (with it) are `totals` reaches milestone `m`: its scope's count is `at`, or a multiple of `every`. */
export function reachesMilestone(m: Milestone, totals: CountedVote["totals"]): boolean {
  const count = totals[m.scope];
  return m.at !== undefined ? count === m.at : count % (m.every as number) === 0;
}

/**
 * One reward as a queue entry under `key`, its commands rendered with `values`; or, when a command needs a value that is
 * missing or unsafe, the reward skipped with why (none of its commands is queued).
 */
export function renderRewardEntry(
  key: string,
  reason: RewardReason,
  reward: Reward,
  values: PlaceholderValues,
): { kind: "entry"; entry: RewardEntry } | { kind: "skipped"; skipped: SkippedReward } {
  const commands: string[] = [];
  for (const template of reward.commands) {
    const rendered = renderCommand(template, values);
    if (!rendered.ok) return { kind: "skipped", skipped: { key, reason, why: rendered.why } };
    commands.push(rendered.command);
  }
  return { kind: "entry", entry: { key, reason, commands, onlineOnly: reward.onlineOnly } };
}

/**
 * Everything a counted vote gives under `rules` (issue 31): the per-vote rewards (`weight` times), the streak rewards
 * reached by this vote, the milestones it hits, and the lucky draws it wins (drawn with `drawSeed`). Pure and
 * deterministic: the same vote and rules always give the same entries with the same keys.
 */
export function rewardsForVote(rules: RewardRules, vote: CountedVote, drawSeed: string): { entries: RewardEntry[]; skipped: SkippedReward[]; weight: number } {
  const weight = weightOf(rules, vote.countedAt);
  const values: PlaceholderValues = {
    ...vote.ids,
    streak: vote.streak.streak.days,
    total: vote.totals.all,
    month_total: vote.totals.month,
    week_total: vote.totals.week,
    weight,
  };
  const entries: RewardEntry[] = [];
  const skipped: SkippedReward[] = [];
  const give = (key: string, reason: RewardReason, reward: Reward) => {
    const given = renderRewardEntry(key, reason, reward, values);
    if (given.kind === "entry") entries.push(given.entry);
    else skipped.push(given.skipped);
  };

  rules.perVote.forEach((reward, i) => {
    for (let n = 0; n < weight; n++) give(`${vote.heartId}:vote:${i}:${n}`, "vote", reward);
  });
  if (vote.streak.extended) {
    const days = vote.streak.streak.days;
    rules.streak.rewards.forEach((s, i) => {
      if (days === s.day || (s.repeat && days % s.day === 0)) give(`${vote.heartId}:streak:${i}`, "streak", s.reward);
    });
  }
  rules.milestones.forEach((m, i) => {
    if (reachesMilestone(m, vote.totals)) give(`${vote.heartId}:milestone:${i}`, "milestone", m.reward);
  });
  rules.lucky.forEach((l, i) => {
    if (winsLuckyDraw(drawSeed, vote.heartId, i, l.oneIn)) give(`${vote.heartId}:lucky:${i}`, "lucky", l.reward);
  });
  return { entries, skipped, weight };
}
