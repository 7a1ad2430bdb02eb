import test from "ava";
import { validateEvent } from "../../gateway/validate-event.js";
import { toApplyEventCommand } from "../../services/referral/domain/commands.js";
import {
  decideReversalEffect,
  isPastAttributionWindow,
  toStoredReason,
  type ReversalEffect,
  type StoredReason,
} from "../../services/referral/domain/reversal-rules.js";
import { REVERSAL_REASONS } from "../../services/shared/values/contract.js";
import { cutField, maxCharsOf } from "../../services/shared/values/field-rules.js";

const SERVER_ID = "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f";
const BOUND = maxCharsOf("reason");

// ---- R1: reasons ----

const reasonCases: Array<{ sent: string; stored: StoredReason; rule: string }> = [
  ...REVERSAL_REASONS.map((r) => ({ sent: r, stored: { reason: r, text: null }, rule: `known reason ${r} is stored as itself` })),
  { sent: "  Chargeback ", stored: { reason: "chargeback", text: null }, rule: "a known reason is matched trimmed and case-insensitively" },
  { sent: "", stored: { reason: null, text: null }, rule: "empty: no reason" },
  { sent: "   ", stored: { reason: null, text: null }, rule: "blank: no reason" },
  { sent: "friendly fraud", stored: { reason: "other", text: "friendly fraud" }, rule: "an unknown text is other, with the text" },
  { sent: "5", stored: { reason: "other", text: "5" }, rule: "a non-string sent as its JSON text is other, with that text" },
  { sent: "re\u0000fund", stored: { reason: "refund", text: null }, rule: "NUL characters are removed, never refused" },
  { sent: "y".repeat(BOUND + 50), stored: { reason: "other", text: "y".repeat(BOUND) }, rule: `an unknown text is cut to ${BOUND} characters` },
];
for (const c of reasonCases) {
  test(`toStoredReason: ${c.rule}`, (t) => {
    t.deepEqual(toStoredReason(c.sent), c.stored);
  });
}

test("cutField never splits a surrogate pair at the bound and never throws", (t) => {
  const cut = cutField("reason", `${"a".repeat(BOUND - 1)}😀tail`);
  t.is(cut, "a".repeat(BOUND - 1));
  t.is(cutField("reason", "\u0000".repeat(5)), "");
});

const gatewayReasonCases: Array<{ reason: unknown; forwarded: string; rule: string }> = [
  { reason: "refund", forwarded: "refund", rule: "a string is forwarded as sent" },
  { reason: undefined, forwarded: "", rule: "absent -> none" },
  { reason: null, forwarded: "", rule: "null -> none (absent)" },
  { reason: 42, forwarded: "42", rule: "a number -> its JSON text" },
  { reason: { code: "x" }, forwarded: '{"code":"x"}', rule: "an object -> its JSON text" },
  { reason: "z".repeat(5_000), forwarded: "z".repeat(BOUND), rule: "a long string is cut before forwarding" },
];
for (const c of gatewayReasonCases) {
  test(`validateEvent: reversed reason never a 400: ${c.rule}`, (t) => {
    const body = { event: "reversed", token: "tok", server_id: SERVER_ID, server_event_id: "e1", ...(c.reason === undefined ? {} : { reason: c.reason }) };
    const result = validateEvent(body);
    if (result.kind !== "ok") return t.fail(result.error);
    t.is(result.value.reason ?? "", c.forwarded);
  });
}

test("validateEvent: reason is ignored on registered and qualified", (t) => {
  const result = validateEvent({ event: "qualified", token: "tok", server_id: SERVER_ID, server_event_id: "e1", reason: "refund" });
  t.is(result.kind === "ok" ? result.value.reason : "invalid", undefined);
});

test("toApplyEventCommand: the reason is stored for reversed only", (t) => {
  const base = { serverId: SERVER_ID, token: "tok", refereeIdentity: "", serverEventId: "e1", ts: 0n, kid: "", reason: "Fraud" };
  t.deepEqual(toApplyEventCommand({ ...base, event: "reversed" }).reason, { reason: "fraud", text: null });
  t.is(toApplyEventCommand({ ...base, event: "qualified" }).reason, undefined);
  t.is(toApplyEventCommand({ ...base, event: "reversed", reason: " " }).reason, undefined);
});

// ---- R2: attribution window ----

const CLICK = new Date("2026-01-01T00:00:00.000Z");
const days = (n: number, from = CLICK) => new Date(from.getTime() + n * 86_400_000);

const windowCases: Array<{ windowDays: number; now: Date; past: boolean; rule: string }> = [
  { windowDays: 90, now: CLICK, past: false, rule: "at the click: inside" },
  { windowDays: 90, now: days(89), past: false, rule: "89 days of 90: inside" },
  { windowDays: 90, now: days(90), past: false, rule: "exactly 90 days: still inside" },
  { windowDays: 90, now: new Date(days(90).getTime() + 1), past: true, rule: "90 days and 1 ms: past" },
  { windowDays: 1, now: days(2), past: true, rule: "window 1, 2 days: past" },
  { windowDays: 365, now: days(300), past: false, rule: "window 365, 300 days: inside" },
];
for (const c of windowCases) {
  test(`isPastAttributionWindow: ${c.rule}`, (t) => {
    t.is(isPastAttributionWindow({ clickedAt: CLICK, windowDays: c.windowDays, now: c.now }), c.past);
  });
}

// ---- R3: lock period ----

const QUALIFIED = new Date("2026-02-01T00:00:00.000Z");
const lockCases: Array<{ from: "registered" | "qualified"; lockDays: number; now: Date; qualifiedAt?: Date | null; effect: ReversalEffect; rule: string }> = [
  { from: "registered", lockDays: 30, now: days(100, QUALIFIED), qualifiedAt: null, effect: "no_credit", rule: "from registered there is no credit" },
  {
    from: "qualified",
    lockDays: 0,
    now: days(1_000, QUALIFIED),
    effect: "remove_credit",
    rule: "no lock (0, the default): a reversal always removes the credit",
  },
  { from: "qualified", lockDays: 30, now: days(29, QUALIFIED), effect: "remove_credit", rule: "inside the lock: removes the credit" },
  { from: "qualified", lockDays: 30, now: new Date(days(30, QUALIFIED).getTime() - 1), effect: "remove_credit", rule: "1 ms before the lock ends: removes" },
  { from: "qualified", lockDays: 30, now: days(30, QUALIFIED), effect: "clawback", rule: "when the lock ends: clawback, the credit stays" },
  { from: "qualified", lockDays: 30, now: days(90, QUALIFIED), effect: "clawback", rule: "after the lock: clawback" },
  {
    from: "qualified",
    lockDays: 30,
    now: days(90, QUALIFIED),
    qualifiedAt: null,
    effect: "remove_credit",
    rule: "qualified without a time: the removal applies",
  },
];
for (const c of lockCases) {
  test(`decideReversalEffect: ${c.rule}`, (t) => {
    const qualifiedAt = c.qualifiedAt === undefined ? QUALIFIED : c.qualifiedAt;
    t.is(decideReversalEffect({ from: c.from, qualifiedAt, lockDays: c.lockDays, now: c.now }), c.effect);
  });
}
