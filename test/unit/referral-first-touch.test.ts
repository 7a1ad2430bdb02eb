import test from "ava";
import { IllegalTransition } from "../../services/shared/rpc/errors.js";
import { decideRegistration, type AnchorView, type RegistrationDecision } from "../../services/referral/domain/first-touch.js";
import type { AnchorState } from "../../services/referral/domain/transitions.js";

const anchor = (id: string, referrerIdentity: string, state: AnchorState): AnchorView => ({ id, referrerIdentity, state });

type Case = {
  rule: string;
  clickReferrer: string;
  refereeAnchor: AnchorView | null;
  linkedAnchor: AnchorView | null;
  expected: RegistrationDecision | { rejectedFrom: string };
};

const cases: Case[] = [
  {
    rule: "no anchor for the referee and an unused token -> mint",
    clickReferrer: "alice",
    refereeAnchor: null,
    linkedAnchor: null,
    expected: { kind: "mint" },
  },
  {
    rule: "first touch wins: another referrer's registered anchor -> first_touch_conflict",
    clickReferrer: "bob",
    refereeAnchor: anchor("a1", "alice", "registered"),
    linkedAnchor: null,
    expected: { kind: "first_touch_conflict", anchorId: "a1" },
  },
  {
    rule: "first touch wins over a qualified anchor too -> first_touch_conflict",
    clickReferrer: "bob",
    refereeAnchor: anchor("a1", "alice", "qualified"),
    linkedAnchor: null,
    expected: { kind: "first_touch_conflict", anchorId: "a1" },
  },
  {
    rule: "ruling: a reversed anchor still holds first touch -> first_touch_conflict",
    clickReferrer: "bob",
    refereeAnchor: anchor("a1", "alice", "reversed"),
    linkedAnchor: null,
    expected: { kind: "first_touch_conflict", anchorId: "a1" },
  },
  {
    rule: "first-touch conflict is decided before the token-reuse check",
    clickReferrer: "bob",
    refereeAnchor: anchor("a1", "alice", "registered"),
    linkedAnchor: anchor("a2", "bob", "registered"),
    expected: { kind: "first_touch_conflict", anchorId: "a1" },
  },
  {
    rule: "same token, same referee again -> idempotent join without relinking",
    clickReferrer: "alice",
    refereeAnchor: anchor("a1", "alice", "registered"),
    linkedAnchor: anchor("a1", "alice", "registered"),
    expected: { kind: "join", anchorId: "a1", state: "registered", link: false },
  },
  {
    rule: "ruling: same referrer through a different token -> the same anchor (idempotent), link the new click",
    clickReferrer: "alice",
    refereeAnchor: anchor("a1", "alice", "registered"),
    linkedAnchor: null,
    expected: { kind: "join", anchorId: "a1", state: "registered", link: true },
  },
  {
    rule: "registered on a qualified anchor of the same referrer -> idempotent, state qualified",
    clickReferrer: "alice",
    refereeAnchor: anchor("a1", "alice", "qualified"),
    linkedAnchor: anchor("a1", "alice", "qualified"),
    expected: { kind: "join", anchorId: "a1", state: "qualified", link: false },
  },
  {
    rule: "ruling: registered on the same referrer's reversed anchor -> 422 from reversed",
    clickReferrer: "alice",
    refereeAnchor: anchor("a1", "alice", "reversed"),
    linkedAnchor: anchor("a1", "alice", "reversed"),
    expected: { rejectedFrom: "reversed" },
  },
  {
    rule: "a token that already registered another referee cannot mint a second anchor -> 422 from that anchor's state",
    clickReferrer: "alice",
    refereeAnchor: null,
    linkedAnchor: anchor("a2", "alice", "qualified"),
    expected: { rejectedFrom: "qualified" },
  },
  {
    rule: "a token that already registered another referee cannot join a second anchor of the same referrer",
    clickReferrer: "alice",
    refereeAnchor: anchor("a1", "alice", "registered"),
    linkedAnchor: anchor("a2", "alice", "registered"),
    expected: { rejectedFrom: "registered" },
  },
];

for (const c of cases) {
  test(`decideRegistration: ${c.rule}`, (t) => {
    const facts = { clickReferrer: c.clickReferrer, refereeAnchor: c.refereeAnchor, linkedAnchor: c.linkedAnchor };
    if ("rejectedFrom" in c.expected) {
      const error = t.throws(() => decideRegistration(facts), { instanceOf: IllegalTransition });
      t.is(error?.from, c.expected.rejectedFrom);
      t.is(error?.event, "registered");
    } else {
      t.deepEqual(decideRegistration(facts), c.expected);
    }
  });
}
