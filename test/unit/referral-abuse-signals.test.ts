/** The referral anti-abuse rules (services/referral/domain/abuse-signals.ts), table by table. */
import test from "ava";
import {
  abuseWindowsAt,
  AbuseRulesError,
  DEFAULT_ABUSE_RULES,
  decideReview,
  detectSignals,
  foldSignals,
  isCounted,
  loadAbuseRules,
  type AbuseFacts,
  type ReviewState,
} from "../../services/referral/domain/abuse-signals.js";
import { csvCell } from "../../services/referral/list-referrals.js";

const quiet: AbuseFacts = {
  stage: "registered",
  referrerIdentity: "alex",
  refereeIdentity: "sam",
  clickAddressKnown: true,
  referrerSharesIp: false,
  referrerSharesSubnet: false,
  otherRefereesFromIp: 0,
  otherRefereesFromSubnet: 0,
  clicksFromIp: 1,
  refereeHearts: 0,
};

const SIGNAL_TABLE: Array<[string, Partial<AbuseFacts>, string[]]> = [
  ["an ordinary registration raises nothing", {}, []],
  ["referee = referrer (case-insensitive) -> self_referral", { refereeIdentity: "ALEX" }, ["self_referral"]],
  ["click or referee hearts from the referrer's heart IP -> self_referral_ip", { referrerSharesIp: true, referrerSharesSubnet: true }, ["self_referral_ip"]],
  ["only the subnet shared -> self_referral_subnet", { referrerSharesSubnet: true }, ["self_referral_subnet"]],
  ["3 referees from one IP (the limit) -> nothing", { otherRefereesFromIp: 2 }, []],
  ["4 referees from one IP -> ip_fanout", { otherRefereesFromIp: 3 }, ["ip_fanout"]],
  ["11 referees from one subnet -> subnet_fanout", { otherRefereesFromSubnet: 10 }, ["subnet_fanout"]],
  ["10 clicks around the click (the limit) -> nothing", { clicksFromIp: 10 }, []],
  ["11 clicks around the click -> click_velocity", { clicksFromIp: 11 }, ["click_velocity"]],
  ["no click address: address counts are not judged", { clickAddressKnown: false, otherRefereesFromIp: 50, clicksFromIp: 50 }, []],
  ["no hearts at registered -> nothing (judged at qualified only)", { refereeHearts: 0 }, []],
  ["no hearts at qualified -> no_activity", { stage: "qualified", refereeHearts: 0 }, ["no_activity"]],
  ["a heart before qualified -> nothing", { stage: "qualified", refereeHearts: 1 }, []],
  [
    "a farm: one IP, many referees, fast clicks, no hearts",
    { stage: "qualified", otherRefereesFromIp: 19, otherRefereesFromSubnet: 19, clicksFromIp: 20 },
    ["ip_fanout", "subnet_fanout", "click_velocity", "no_activity"],
  ],
];

for (const [title, facts, codes] of SIGNAL_TABLE) {
  test(`signals: ${title}`, (t) => {
    t.deepEqual(detectSignals({ ...quiet, ...facts }, DEFAULT_ABUSE_RULES).codes, codes);
  });
}

test("signals: details say what was seen against which limit", (t) => {
  const found = detectSignals({ ...quiet, otherRefereesFromIp: 4 }, DEFAULT_ABUSE_RULES);
  t.deepEqual(found.details.ip_fanout, { referees: 5, max: 3, windowMinutes: 1440 });
});

test("signals: a limit of 0 or a false flag turns its signal off", (t) => {
  const rules = loadAbuseRules(
    JSON.stringify({ selfReferral: { enabled: false }, ipFanout: { maxReferees: 0 }, clickVelocity: { maxClicks: 0 }, noActivity: { minHearts: 0 } }),
  );
  t.deepEqual(detectSignals({ ...quiet, stage: "qualified", refereeIdentity: "alex", otherRefereesFromIp: 99, clicksFromIp: 99 }, rules).codes, []);
});

const FOLD_TABLE: Array<[string, ReviewState, string[], string[], "off" | "loose" | "strict", ReviewState, string[]]> = [
  ["loose: flagged at the mint -> held", "none", [], ["ip_fanout"], "loose", "held", ["ip_fanout"]],
  ["strict: flagged at the mint -> declined", "none", [], ["ip_fanout"], "strict", "declined", ["ip_fanout"]],
  ["off: signals kept, nothing held", "none", [], ["ip_fanout"], "off", "none", ["ip_fanout"]],
  ["unflagged stays unflagged", "none", [], [], "loose", "none", []],
  [
    "an approval survives a later signal; codes accumulate in table order",
    "approved",
    ["ip_fanout"],
    ["no_activity", "self_referral"],
    "loose",
    "approved",
    ["self_referral", "ip_fanout", "no_activity"],
  ],
  ["held stays held", "held", ["ip_fanout"], ["no_activity"], "strict", "held", ["ip_fanout", "no_activity"]],
];

for (const [title, review, before, found, mode, toReview, toSignals] of FOLD_TABLE) {
  test(`fold: ${title}`, (t) => {
    const after = foldSignals({ signals: before, details: {}, review }, { codes: found as never, details: {} }, mode);
    t.is(after.review, toReview);
    t.deepEqual(after.signals, toSignals);
  });
}

test("review: approve/decline flagged referrals, idempotent, unflagged refused", (t) => {
  t.deepEqual(decideReview("held", "approve"), { kind: "changed", to: "approved" });
  t.deepEqual(decideReview("held", "decline"), { kind: "changed", to: "declined" });
  t.deepEqual(decideReview("declined", "approve"), { kind: "changed", to: "approved" });
  t.deepEqual(decideReview("approved", "decline"), { kind: "changed", to: "declined" });
  t.deepEqual(decideReview("approved", "approve"), { kind: "unchanged" });
  t.deepEqual(decideReview("declined", "decline"), { kind: "unchanged" });
  t.deepEqual(decideReview("none", "approve"), { kind: "not_flagged" });
});

test("counted: unflagged and approved only", (t) => {
  t.deepEqual((["none", "held", "approved", "declined"] as const).filter(isCounted), ["none", "approved"]);
});

test("windows: the fan-out windows end at the clock passed in", (t) => {
  const now = new Date("2026-11-27T12:00:00Z");
  const w = abuseWindowsAt(DEFAULT_ABUSE_RULES, now);
  t.is(w.ipFanoutSince.toISOString(), "2026-11-26T12:00:00.000Z");
  t.is(w.velocitySeconds, 60);
});

test("loadAbuseRules: a subset overrides the defaults; every problem is reported at once", (t) => {
  const rules = loadAbuseRules('{"ipFanout":{"maxReferees":7}}');
  t.is(rules.ipFanout.maxReferees, 7);
  t.is(rules.ipFanout.windowMinutes, DEFAULT_ABUSE_RULES.ipFanout.windowMinutes);
  t.is(DEFAULT_ABUSE_RULES.ipFanout.maxReferees, 3);
  const error = t.throws(() => loadAbuseRules('{"nope":{},"ipFanout":{"maxReferees":-1,"x":1},"selfReferral":{"enabled":"yes"}}'), {
    instanceOf: AbuseRulesError,
  });
  t.is(error?.problems.length, 4);
  t.throws(() => loadAbuseRules("{"), { instanceOf: AbuseRulesError });
});

test("export CSV cells: quoted when they hold a comma, quote or line break; formula-looking text defused", (t) => {
  t.is(csvCell("plain"), "plain");
  t.is(csvCell("a,b"), '"a,b"');
  t.is(csvCell('say "hi"'), '"say ""hi"""');
  t.is(csvCell("two\nlines"), '"two\nlines"');
  t.is(csvCell("=HYPERLINK(1)"), "'=HYPERLINK(1)");
  t.is(csvCell("-1,2"), `"'-1,2"`);
});
