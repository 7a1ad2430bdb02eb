/**
 * Period awards (issue 31): the weeks and months a counted vote counts in, and what a closed period's standings give
 * under a server's rules (`awards.week`, `awards.month`). Pure: the closer (services/rewards/close-periods.ts) reads
 * the standings and writes what this decides.
 */
import { isoWeekOf, isoWeekRange, periodOf, periodRange } from "../../shared/values/period.js";
import type { PlaceholderValues } from "./render-command.js";
import type { RewardRules } from "./reward-rules.js";
import { renderRewardEntry, type RewardEntry, type SkippedReward } from "./rewards-for-vote.js";

/** The periods awards are given for: an ISO week (Monday to Sunday, UTC) and a UTC month. */
export const PERIOD_KINDS = ["week", "month"] as const;

/** One kind of period. */
export type PeriodKind = (typeof PERIOD_KINDS)[number];

/** One period: its kind, its key ("2026-W48", "2026-11") and its half-open UTC range. */
export interface RewardPeriod {
  kind: PeriodKind;
  period: string;
  start: Date;
  end: Date;
}

/** The week and the month a vote counted at `at` counts in. */
export function rewardPeriodsOf(at: Date): RewardPeriod[] {
  return PERIOD_KINDS.map((kind) => periodOfKind(kind, kind === "week" ? isoWeekOf(at) : periodOf(at)) as RewardPeriod);
}

/** The period of `kind` keyed `period`, or null when the key is not one of that kind. */
export function periodOfKind(kind: PeriodKind, period: string): RewardPeriod | null {
  const range = kind === "week" ? isoWeekRange(period) : periodRange(period);
  return range === null ? null : { kind, period, ...range };
}

/**
 * One voter's place in a closed period, as the standings read it: `place` by the ranking's rule (voters with as many
 * votes share a place: 1, 2, 2, 4), `position` their 1-based row in the standings' order.
 */
export interface PeriodStanding {
  place: number;
  position: number;
  voterIdentity: string;
  votes: number;
  /** The voter's ids as their latest counted vote of the period named them (`player` is the name). */
  ids: Pick<PlaceholderValues, "player" | "steam_id" | "discord_id" | "minecraft_uuid" | "account_id">;
}

/** The award entries of one placed voter. */
export interface PlacedAward {
  standing: PeriodStanding;
  entries: RewardEntry[];
  skipped: SkippedReward[];
}

/** How many standings a period's close reads: the highest place its awards pay, and never fewer than the event shows. */
export function standingsToRead(rules: RewardRules, kind: PeriodKind, eventTop: number): number {
  return Math.max(eventTop, ...rules.awards[kind].map((a) => a.place));
}

/**
 * What a closed period gives under `rules`: for each standing whose place has an award, one entry keyed
 * `<server id>:<period>:award:<place>:<position>` (the same close always gives the same keys; the position keeps two
 * voters who share a place apart). A place nobody holds (after a tie: 1, 1, 3) pays nobody. `{place}` is the place, and
 * `{week_total}` or `{month_total}` the voter's votes in the period.
 */
export function awardsForPeriod(rules: RewardRules, serverId: string, period: RewardPeriod, standings: readonly PeriodStanding[]): PlacedAward[] {
  const byPlace = new Map(rules.awards[period.kind].map((a) => [a.place, a.reward]));
  const out: PlacedAward[] = [];
  for (const standing of standings) {
    const reward = byPlace.get(standing.place);
    if (reward === undefined) continue;
    const values: PlaceholderValues = { ...standing.ids, place: standing.place, [period.kind === "week" ? "week_total" : "month_total"]: standing.votes };
    const given = renderRewardEntry(`${serverId}:${period.period}:award:${standing.place}:${standing.position}`, "award", reward, values);
    out.push(given.kind === "entry" ? { standing, entries: [given.entry], skipped: [] } : { standing, entries: [], skipped: [given.skipped] });
  }
  return out;
}
