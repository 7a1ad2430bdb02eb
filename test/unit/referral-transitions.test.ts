import test from "ava";
import { IllegalTransition } from "../../services/shared/rpc/errors.js";
import {
  decide,
  REFERRAL_EVENTS,
  REFERRAL_STATES,
  TRANSITIONS,
  type ReferralEventName,
  type ReferralStateName,
} from "../../services/referral/domain/transitions.js";

type Expected = { advanced: ReferralStateName } | { idempotent: ReferralStateName } | { rejectedFrom: ReferralStateName };

/** Every (state, event) pair, written out independently of the table under test. */
const cases: Array<{ from: ReferralStateName; event: ReferralEventName; expected: Expected; rule: string }> = [
  { from: "clicked", event: "registered", expected: { advanced: "registered" }, rule: "clicked + registered -> registered (anchor minted)" },
  { from: "clicked", event: "qualified", expected: { rejectedFrom: "clicked" }, rule: "qualified before registered -> 422 from clicked" },
  { from: "clicked", event: "reversed", expected: { rejectedFrom: "clicked" }, rule: "ruling: reversed while clicked -> 422 from clicked" },
  { from: "registered", event: "registered", expected: { idempotent: "registered" }, rule: "registered + registered (same anchor) -> idempotent registered" },
  { from: "registered", event: "qualified", expected: { advanced: "qualified" }, rule: "registered + qualified -> qualified" },
  { from: "registered", event: "reversed", expected: { advanced: "reversed" }, rule: "ruling: registered + reversed -> reversed" },
  {
    from: "qualified",
    event: "registered",
    expected: { idempotent: "qualified" },
    rule: "qualified + registered (same referrer) -> idempotent, state stays qualified",
  },
  { from: "qualified", event: "qualified", expected: { idempotent: "qualified" }, rule: "qualified + qualified -> idempotent qualified" },
  { from: "qualified", event: "reversed", expected: { advanced: "reversed" }, rule: "ruling: qualified + reversed -> reversed" },
  { from: "reversed", event: "registered", expected: { rejectedFrom: "reversed" }, rule: "ruling: registered on a reversed referral -> 422 from reversed" },
  { from: "reversed", event: "qualified", expected: { rejectedFrom: "reversed" }, rule: "ruling: qualified on a reversed referral -> 422 from reversed" },
  { from: "reversed", event: "reversed", expected: { idempotent: "reversed" }, rule: "ruling: reversed again -> idempotent reversed" },
];

for (const c of cases) {
  test(`decide: ${c.rule}`, (t) => {
    const expected = c.expected;
    if ("rejectedFrom" in expected) {
      const error = t.throws(() => decide(c.from, c.event), { instanceOf: IllegalTransition });
      t.is(error?.from, expected.rejectedFrom);
      t.is(error?.event, c.event);
      t.is(error?.message, "invalid state transition");
    } else if ("advanced" in expected) {
      t.deepEqual(decide(c.from, c.event), { kind: "advanced", from: c.from, to: expected.advanced });
    } else {
      t.deepEqual(decide(c.from, c.event), { kind: "idempotent", state: expected.idempotent });
    }
  });
}

test("the transition table covers every (state, event) pair exactly once and the cases above cover the table", (t) => {
  const tablePairs = REFERRAL_STATES.flatMap((s) => REFERRAL_EVENTS.map((e) => `${s}/${e}`));
  t.deepEqual(Object.keys(TRANSITIONS).sort(), [...REFERRAL_STATES].sort());
  for (const state of REFERRAL_STATES) t.deepEqual(Object.keys(TRANSITIONS[state]).sort(), [...REFERRAL_EVENTS].sort());
  t.deepEqual(cases.map((c) => `${c.from}/${c.event}`).sort(), tablePairs.sort());
});

test("reversed is terminal: no event moves a reversed referral", (t) => {
  for (const event of REFERRAL_EVENTS) {
    const rule = TRANSITIONS.reversed[event];
    t.not(rule.kind, "advance", event);
  }
});
