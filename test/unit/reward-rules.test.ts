import test from "ava";
import { graceStreakAt, nextGraceStreak } from "../../services/rewards/domain/grace-streak.js";
import { luckyDraw, winsLuckyDraw } from "../../services/rewards/domain/lucky-draw.js";
import { renderCommand } from "../../services/rewards/domain/render-command.js";
import { MAX_COMMAND_BYTES, mostVotesIn, parseRewardRules, type RewardRules } from "../../services/rewards/domain/reward-rules.js";
import { rewardsForVote, weightOf, type CountedVote } from "../../services/rewards/domain/rewards-for-vote.js";

const DAY = 24 * 60 * 60 * 1000;
const limits = { voteCooldownMs: DAY };
const day = (ymd: string) => new Date(`${ymd}T00:00:00.000Z`);

function rulesOf(input: unknown): RewardRules {
  const parsed = parseRewardRules(input, limits);
  if (!parsed.ok) throw new Error(parsed.errors.join("\n"));
  return parsed.rules;
}

function errorsOf(input: unknown): string[] {
  const parsed = parseRewardRules(input, limits);
  return parsed.ok ? [] : parsed.errors;
}

const give = (...commands: string[]) => ({ commands });

test("rules that give nothing are valid, and every list defaults to empty", (t) => {
  const rules = rulesOf({});
  t.deepEqual(rules.perVote, []);
  t.is(rules.weekendWeight, 1);
  t.is(rules.streak.graceDays, 0);
});

test("a full set of rules parses, with onlineOnly true unless said otherwise", (t) => {
  const rules = rulesOf({
    perVote: [give("give {player} diamond 1"), { commands: ["say thanks {player}"], onlineOnly: false }],
    weekendWeight: 2,
    weightWindows: [{ from: "2026-12-24T00:00:00Z", to: "2026-12-27T00:00:00Z", weight: 3 }],
    streak: { graceDays: 1, rewards: [{ day: 7, reward: give("give {player} emerald {streak}") }] },
    milestones: [{ scope: "month", every: 10, reward: give("crate key {player}") }],
    lucky: [{ oneIn: 50, reward: give("give {player} nether_star") }],
    awards: {
      month: [
        { place: 2, reward: give("rank {player} silver") },
        { place: 1, reward: give("rank {player} gold") },
      ],
    },
    referral: { referrer: [give("give {player} gold 5")], referee: [give("give {player} gold 1")], reversal: { referrer: [give("take {player} gold 5")] } },
  });
  t.true(rules.perVote[0]?.onlineOnly);
  t.false(rules.perVote[1]?.onlineOnly);
  t.deepEqual(
    rules.awards.month.map((a) => a.place),
    [1, 2],
  );
  t.is(rules.referral.reversal.referrer.length, 1);
});

test("an unknown placeholder is refused, naming the field and the placeholders there are", (t) => {
  const [error] = errorsOf({ perVote: [give("give {playr} diamond")] });
  t.regex(error ?? "", /^perVote\[0\]\.commands\[0\]: unknown placeholder \{playr\}; the placeholders are \{player\}, /);
});

test("a command over the size bound is refused with its size", (t) => {
  const [error] = errorsOf({ perVote: [give(`say ${"x".repeat(MAX_COMMAND_BYTES)}`)] });
  t.is(error, `perVote[0].commands[0]: ${MAX_COMMAND_BYTES + 4} bytes, over the ${MAX_COMMAND_BYTES}-byte bound of a command`);
});

test("a command with a line break is refused: it would run a second command", (t) => {
  t.deepEqual(errorsOf({ perVote: [give("say hi\nop {player}")] }), [
    "perVote[0].commands[0]: holds a control character (a line break or tab); a command is one line",
  ]);
});

test("a milestone a week or a month can never reach is refused, with the most votes it holds", (t) => {
  t.is(mostVotesIn(7 * DAY, DAY), 7);
  t.is(mostVotesIn(31 * DAY, DAY), 31);
  t.deepEqual(errorsOf({ milestones: [{ scope: "week", at: 8, reward: give("x") }] }), [
    "milestones[0].at: 8 can never be reached: a week holds at most 7 counted votes of one voter",
  ]);
  t.deepEqual(errorsOf({ milestones: [{ scope: "month", every: 40, reward: give("x") }] }), [
    "milestones[0].every: 40 can never be reached: a month holds at most 31 counted votes of one voter",
  ]);
  t.deepEqual(errorsOf({ milestones: [{ scope: "all", at: 100_000, reward: give("x") }] }), []);
  t.deepEqual(errorsOf({ milestones: [{ scope: "all", every: 10, at: 10, reward: give("x") }] }), [
    'milestones[0]: give exactly one of "every" (every Nth vote) and "at" (exactly the Nth vote)',
  ]);
  t.deepEqual(errorsOf({ milestones: [{ scope: "all", at: 0, reward: give("x") }] }), ["milestones[0].at: must be a whole number from 1 to 1000000"]);
});

test("every problem is reported at once, each with its path; bad shapes never throw", (t) => {
  const errors = errorsOf({
    perVote: "give",
    weekendWeight: 11,
    weightWindows: [
      { from: "2026-12-24T00:00:00Z", to: "2026-12-26T00:00:00Z", weight: 2 },
      { from: "2026-12-25T00:00:00Z", to: "2026-12-27T00:00:00Z", weight: 2 },
      { from: "2026-12-24", to: "2026-12-27T00:00:00Z", weight: 2 },
    ],
    lucky: [{ oneIn: 1, reward: give("x") }],
    awards: {
      week: [
        { place: 1, reward: give("a") },
        { place: 1, reward: give("b") },
      ],
    },
    bonus: true,
  });
  t.deepEqual(errors.sort(), [
    "awards.week: place 1 is given twice",
    "lucky[0].oneIn: must be a whole number from 2 to 1000000",
    "perVote: must be a list",
    "rules.bonus: unknown field; the fields are perVote, weekendWeight, weightWindows, streak, milestones, lucky, awards, referral",
    "weekendWeight: must be a whole number from 1 to 10",
    "weightWindows: the windows starting 2026-12-24T00:00:00.000Z and 2026-12-25T00:00:00.000Z overlap",
    "weightWindows[2].from: must be an instant with its offset, such as 2026-12-24T00:00:00Z",
  ]);
  for (const bad of [null, 42, "rules", [], { perVote: [null] }, { streak: { rewards: [{ day: "7" }] } }]) t.false(parseRewardRules(bad, limits).ok);
});

test("the reward streak survives missed days inside the grace and is lost after it", (t) => {
  let step = nextGraceStreak(null, day("2026-05-01"), 1);
  t.deepEqual([step.streak.days, step.extended, step.lostDays], [1, true, 0]);
  // Votes on 7 of 8 days, 2026-05-04 missed: a 7-day streak with grace 1.
  for (const d of ["2026-05-02", "2026-05-03", "2026-05-05", "2026-05-06", "2026-05-07", "2026-05-08"]) step = nextGraceStreak(step.streak, day(d), 1);
  t.is(step.streak.days, 7);
  t.is(graceStreakAt(step.streak, day("2026-05-10"), 1), 7);
  t.is(graceStreakAt(step.streak, day("2026-05-11"), 1), 0);
  // Two missed days with grace 1: lost, a new streak starts.
  const lost = nextGraceStreak(step.streak, day("2026-05-11"), 1);
  t.deepEqual([lost.streak.days, lost.lostDays], [1, 7]);
  // Without grace the same missed day breaks it, as the callback's streak_day does.
  t.is(nextGraceStreak({ lastDay: day("2026-05-02"), days: 2 }, day("2026-05-04"), 0).lostDays, 2);
  // A second vote the same UTC day neither extends nor breaks it.
  t.false(nextGraceStreak({ lastDay: day("2026-05-02"), days: 2 }, new Date("2026-05-02T23:00:00Z"), 0).extended);
});

test("a lucky draw is deterministic per heart and entry, and wins about 1 in N", (t) => {
  t.is(luckyDraw("seed", "heart-1", 0), luckyDraw("seed", "heart-1", 0));
  t.not(luckyDraw("seed", "heart-1", 0), luckyDraw("seed", "heart-1", 1));
  t.not(luckyDraw("seed", "heart-1", 0), luckyDraw("other seed", "heart-1", 0));
  let wins = 0;
  for (let i = 0; i < 20_000; i++) if (winsLuckyDraw("seed", `heart-${i}`, 0, 10)) wins++;
  // 2,000 expected; 6 standard deviations (~255) either side.
  t.true(wins > 1_745 && wins < 2_255, `${wins} wins of 20,000 at 1 in 10`);
});

test("a placeholder value that could split a console command is not substituted", (t) => {
  t.deepEqual(renderCommand("give {player} diamond", { player: "Steve_99" }), { ok: true, command: "give Steve_99 diamond" });
  t.deepEqual(renderCommand("give {player} diamond", { player: "Steve; op Steve" }), {
    ok: false,
    why: "{player} holds characters a command cannot carry safely",
  });
  t.deepEqual(renderCommand("oxide.grant user {steam_id} vip", { player: "Steve" }), { ok: false, why: "the vote carries no {steam_id}" });
  t.deepEqual(renderCommand("say {player} has {total} votes", { player: "Ünal", total: 12 }), { ok: true, command: "say Ünal has 12 votes" });
});

const voteOf = (over: Partial<CountedVote> = {}): CountedVote => ({
  heartId: "0192f0a0-0000-7000-8000-000000000001",
  countedAt: new Date("2026-05-06T12:00:00Z"), // a Wednesday
  ids: { player: "Steve" },
  totals: { all: 25, month: 6, week: 3 },
  streak: { streak: { lastDay: day("2026-05-06"), days: 4 }, extended: true, lostDays: 0 },
  ...over,
});

test("a counted vote gives its per-vote rewards, repeated by its weight on the weekend and in an event window", (t) => {
  const rules = rulesOf({
    perVote: [give("give {player} diamond {weight}")],
    weekendWeight: 2,
    weightWindows: [{ from: "2026-05-06T00:00:00Z", to: "2026-05-07T00:00:00Z", weight: 3 }],
  });
  t.is(weightOf(rules, new Date("2026-05-09T12:00:00Z")), 2); // Saturday
  t.is(weightOf(rules, new Date("2026-05-05T12:00:00Z")), 1); // Tuesday
  const { entries, weight } = rewardsForVote(rules, voteOf(), "seed");
  t.is(weight, 3);
  t.deepEqual(
    entries.map((e) => [e.key, e.reason, e.commands[0]]),
    [0, 1, 2].map((n) => [`0192f0a0-0000-7000-8000-000000000001:vote:0:${n}`, "vote", "give Steve diamond 3"]),
  );
});

test("streak rewards fire on the vote that reaches their day (and every day-th with repeat), milestones on their count", (t) => {
  const rules = rulesOf({
    streak: {
      graceDays: 1,
      rewards: [
        { day: 7, reward: give("streak7 {player}") },
        { day: 3, repeat: true, reward: give("every3 {streak}") },
      ],
    },
    milestones: [
      { scope: "month", every: 10, reward: give("month10 {month_total}") },
      { scope: "all", at: 100, reward: give("hundred") },
    ],
  });
  const at = (days: number, extended: boolean, totals = { all: 99, month: 10, week: 2 }) =>
    rewardsForVote(rules, voteOf({ totals, streak: { streak: { lastDay: day("2026-05-06"), days }, extended, lostDays: 0 } }), "seed").entries.map(
      (e) => e.commands[0],
    );
  t.deepEqual(at(7, true), ["streak7 Steve", "month10 10"]);
  t.deepEqual(at(6, true), ["every3 6", "month10 10"]);
  // A vote that did not extend the streak (same day) gives no streak reward, even on day 7.
  t.deepEqual(at(7, false), ["month10 10"]);
  t.deepEqual(at(5, true, { all: 100, month: 11, week: 3 }), ["hundred"]);
});

test("the same vote always gives the same entries and keys; a reward it cannot render is skipped with why", (t) => {
  const rules = rulesOf({ perVote: [give("oxide.grant user {steam_id} voter")], lucky: [{ oneIn: 2, reward: give("give {player} apple") }] });
  const first = rewardsForVote(rules, voteOf(), "seed");
  t.deepEqual(rewardsForVote(rules, voteOf(), "seed"), first);
  t.deepEqual(first.skipped, [{ key: "0192f0a0-0000-7000-8000-000000000001:vote:0:0", reason: "vote", why: "the vote carries no {steam_id}" }]);
  const withSteam = rewardsForVote(rules, voteOf({ ids: { player: "Steve", steam_id: "76561198000000001" } }), "seed");
  t.deepEqual(withSteam.entries[0]?.commands, ["oxide.grant user 76561198000000001 voter"]);
  t.is(
    withSteam.entries.some((e) => e.reason === "lucky"),
    winsLuckyDraw("seed", "0192f0a0-0000-7000-8000-000000000001", 0, 2),
  );
});
