/**
 * The progression events of a counted vote (services/rewards/domain/progression-events.ts): streak.extended when the
 * reward streak grows to 2 days or more, streak.lost once when a vote comes after the grace ran out on a streak of 2
 * days or more, milestone.reached per milestone rule reached with its scope, count and rule index; ids named by the
 * vote (a replay makes the same ids).
 */
import test from "ava";
import { nextGraceStreak, type GraceStreak } from "../../services/rewards/domain/grace-streak.js";
import { progressionEventId, progressionEventsOf } from "../../services/rewards/domain/progression-events.js";
import { parseRewardRules, REWARD_RULE_LIMITS, type RewardRules } from "../../services/rewards/domain/reward-rules.js";
import type { CountedVote } from "../../services/rewards/domain/rewards-for-vote.js";
import { isUuid } from "../../services/shared/values/ids.js";

const SERVER = "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f";
const HEART = "3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b";
const AT = new Date("2027-03-10T12:00:00Z");

function rules(json: unknown): RewardRules {
  const parsed = parseRewardRules(json, REWARD_RULE_LIMITS);
  if (!parsed.ok) throw new Error(parsed.errors.join("; "));
  return parsed.rules;
}

/** A vote at AT after a streak of `days` whose last vote day was `daysAgo` days before, with `graceDays`. */
function vote(previous: GraceStreak | null, graceDays: number, totals = { all: 5, month: 5, week: 2 }): CountedVote {
  return { heartId: HEART, countedAt: AT, ids: { player: "Steve" }, totals, streak: nextGraceStreak(previous, AT, graceDays) };
}
const streakOf = (days: number, daysAgo: number): GraceStreak => ({ lastDay: new Date(Date.parse("2027-03-10T00:00:00Z") - daysAgo * 86_400_000), days });
const typesOf = (events: { event: string }[]) => events.map((e) => e.event);

test("streak.extended: the vote makes the reward streak one day longer and at least 2 days; a first vote day or a second vote the same day -> none", (t) => {
  const none = rules({});
  const [extended, ...rest] = progressionEventsOf(none, SERVER, "Steve", vote(streakOf(6, 1), 0));
  t.deepEqual(rest, []);
  t.deepEqual(extended, {
    event: "streak.extended",
    event_id: progressionEventId(HEART, "streak.extended"),
    server_id: SERVER,
    heart_id: HEART,
    username: "Steve",
    cast_at: Math.floor(AT.getTime() / 1000),
    reward_streak: 7,
  });
  t.deepEqual(progressionEventsOf(none, SERVER, "Steve", vote(null, 0)), [], "a first vote: a 1-day streak is not yet one");
  t.deepEqual(progressionEventsOf(none, SERVER, "Steve", vote(streakOf(4, 0), 0)), [], "the same day again: not longer");
});

test("streak.lost: only after a gap beyond the grace, with the lost streak's length; within the grace the streak is extended instead", (t) => {
  const none = rules({});
  // Last vote day 3 days ago = 2 missed days: beyond a grace of 1, within a grace of 2.
  const lost = progressionEventsOf(none, SERVER, "Steve", vote(streakOf(5, 3), 1));
  t.deepEqual(typesOf(lost), ["streak.lost"]);
  t.like(lost[0], { event: "streak.lost", lost_streak: 5, reward_streak: 1, event_id: progressionEventId(HEART, "streak.lost") });
  t.deepEqual(typesOf(progressionEventsOf(none, SERVER, "Steve", vote(streakOf(5, 3), 2))), ["streak.extended"]);
  t.deepEqual(progressionEventsOf(none, SERVER, "Steve", vote(streakOf(1, 3), 0)), [], "a lost 1-day streak is no event");
});

test("milestone.reached: one per milestone rule reached, with its scope, the count and the rule index (every and at)", (t) => {
  const r = rules({
    milestones: [
      { scope: "month", every: 5, reward: { commands: ["give {player} a 1"] } },
      { scope: "all", at: 100, reward: { commands: ["give {player} b 1"] } },
      { scope: "week", at: 2, reward: { commands: ["give {player} c 1"] } },
    ],
  });
  const events = progressionEventsOf(r, SERVER, "Steve", vote(null, 0, { all: 5, month: 5, week: 2 }));
  t.deepEqual(
    events.map((e) => (e.event === "milestone.reached" ? [e.scope, e.count, e.rule_index, e.every, e.at] : e.event)),
    [
      ["month", 5, 0, 5, undefined],
      ["week", 2, 2, undefined, 2],
    ],
  );
  t.is(events[1]!.event_id, progressionEventId(HEART, "milestone.reached", 2));
});

test("event ids: uuids named by the vote, the event and the rule: the same vote gives the same id, another anything else", (t) => {
  const id = progressionEventId(HEART, "milestone.reached", 0);
  t.true(isUuid(id));
  t.is(id, progressionEventId(HEART, "milestone.reached", 0));
  t.not(id, progressionEventId(HEART, "milestone.reached", 1));
  t.not(progressionEventId(HEART, "streak.lost"), progressionEventId(HEART, "streak.extended"));
});
