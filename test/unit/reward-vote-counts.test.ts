/**
 * What a counted vote does to a voter's reward state (issue 31): the ISO week a vote falls in, around year boundaries
 * too, and the totals, month, week and streak countRewardVote computes (a replay changes nothing).
 */
import test from "ava";
import { countRewardVote } from "../../services/rewards/domain/count-reward-vote.js";
import type { VoterRewardState } from "../../services/rewards/reward-queue-store.js";
import { isoWeekOf } from "../../services/shared/values/period.js";

const at = (iso: string) => new Date(iso);

test("the ISO week runs Monday to Sunday and belongs to the year of its Thursday: New Year's days can be in the other year's week", (t) => {
  const cases: Array<[string, string]> = [
    ["2026-12-31T23:59:59.999Z", "2026-W53"], // a Thursday: 2026 began on a Thursday, so it has 53 weeks
    ["2027-01-01T00:00:00.000Z", "2026-W53"], // a Friday: still 2026's last week
    ["2027-01-03T23:59:59.999Z", "2026-W53"], // a Sunday: the week's last day
    ["2027-01-04T00:00:00.000Z", "2027-W01"], // a Monday: 2027's first week starts
    ["2024-12-30T00:00:00.000Z", "2025-W01"], // a Monday in December in next year's first week
    ["2021-01-03T12:00:00.000Z", "2020-W53"],
    ["2025-12-29T00:00:00.000Z", "2026-W01"],
    ["2026-11-29T12:00:00.000Z", "2026-W48"],
    ["1970-01-01T00:00:00.000Z", "1970-W01"],
    ["1969-12-29T00:00:00.000Z", "1970-W01"], // before the epoch too
  ];
  for (const [instant, week] of cases) t.is(isoWeekOf(at(instant)), week, instant);
});

const state = (over: Partial<VoterRewardState> = {}): VoterRewardState => ({
  lastCountedAt: at("2026-12-30T10:00:00Z"),
  total: 41,
  month: "2026-12",
  monthTotal: 9,
  week: "2026-W53",
  weekTotal: 2,
  streak: { lastDay: at("2026-12-30T00:00:00Z"), days: 6 },
  ...over,
});

test("a heart counted at or before the state's last counted heart is a replay: it changes nothing", (t) => {
  t.deepEqual(countRewardVote(state(), at("2026-12-30T10:00:00Z"), 1), { kind: "replay" });
  t.deepEqual(countRewardVote(state(), at("2026-12-29T10:00:00Z"), 1), { kind: "replay" });
});

test("a voter's first counted vote starts every count at 1 and the streak at day 1", (t) => {
  const counted = countRewardVote(null, at("2026-12-31T10:00:00Z"), 0);
  t.like(counted, {
    kind: "counted",
    totals: { all: 1, month: 1, week: 1 },
    state: { total: 1, month: "2026-12", monthTotal: 1, week: "2026-W53", weekTotal: 1, streak: { days: 1 } },
    streak: { extended: true },
  });
});

test("a vote in the same month and ISO week adds one to each total and extends the streak on the next day", (t) => {
  const counted = countRewardVote(state(), at("2026-12-31T10:00:00Z"), 0);
  t.like(counted, { kind: "counted", totals: { all: 42, month: 10, week: 3 }, state: { lastCountedAt: at("2026-12-31T10:00:00Z"), streak: { days: 7 } } });
});

test("the month total starts again at 1 in a new UTC month while the ISO week that spans New Year keeps counting", (t) => {
  const counted = countRewardVote(state(), at("2027-01-01T10:00:00Z"), 1);
  t.like(counted, { kind: "counted", totals: { all: 42, month: 1, week: 3 }, state: { month: "2027-01", week: "2026-W53" } });
  // One missed day (the 31st) inside a grace of 1: the streak goes on.
  t.like(counted, { streak: { extended: true, streak: { days: 7 } } });
});

test("the week total starts again at 1 on the Monday of a new ISO week", (t) => {
  const counted = countRewardVote(state({ month: "2027-01", monthTotal: 3 }), at("2027-01-04T10:00:00Z"), 7);
  t.like(counted, { kind: "counted", totals: { all: 42, month: 4, week: 1 }, state: { week: "2027-W01" } });
});

test("a vote after the grace ran out starts the streak again and says how long the lost one was", (t) => {
  const counted = countRewardVote(state(), at("2027-01-02T10:00:00Z"), 1);
  t.like(counted, { kind: "counted", streak: { extended: true, lostDays: 6, streak: { days: 1 } } });
});
