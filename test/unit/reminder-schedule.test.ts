/** When vote reminders leave (services/reminders/domain/reminder-schedule.ts): pure, the clock passed in. */
import test from "ava";
import { randomUUID } from "node:crypto";
import { HEART_COOLDOWN_MS } from "../../services/hearts/domain/streak.js";
import {
  decideReminder,
  MAX_REMINDER_ATTEMPTS,
  normalizeEmail,
  reminderJitterMs,
  retryAfterFailure,
} from "../../services/reminders/domain/reminder-schedule.js";

const WINDOW_SECONDS = 900;

test("10,000 reminders due in the same minute leave spread over the whole jitter window, none outside it", (t) => {
  const minute = Date.parse("2026-12-01T00:00:00.000Z");
  const buckets = new Array<number>(15).fill(0);
  for (let i = 0; i < 10_000; i += 1) {
    // Hearts cast in the same minute (a month-start wave), each on its own subscription.
    const heartAt = new Date(minute + (i % 60_000));
    const jitter = reminderJitterMs(randomUUID(), heartAt, WINDOW_SECONDS);
    t.true(jitter >= 0 && jitter < WINDOW_SECONDS * 1000);
    buckets[Math.floor(jitter / 60_000)]! += 1;
  }
  // Uniform: each of the window's 15 minutes gets about 667; none gets more than twice its share (no spike).
  for (const n of buckets) t.true(n > 333 && n < 1_333, `a minute of the window got ${n}`);
});

test("the jitter is the same for the same subscription and heart, and 0 with a window of 0", (t) => {
  const id = randomUUID();
  const heartAt = new Date("2026-12-01T10:00:00.000Z");
  t.is(reminderJitterMs(id, heartAt, WINDOW_SECONDS), reminderJitterMs(id, heartAt, WINDOW_SECONDS));
  t.is(reminderJitterMs(id, heartAt, 0), 0);
});

test("a heart not reminded yet is sent at heart + cooldown + jitter; before then it waits until exactly then", (t) => {
  const id = randomUUID();
  const heartAt = new Date("2026-12-01T10:00:00.000Z");
  const due = new Date(heartAt.getTime() + HEART_COOLDOWN_MS + reminderJitterMs(id, heartAt, WINDOW_SECONDS));
  const facts = { id, lastCountedAt: heartAt, remindedHeartAt: null, attempts: 0 };
  t.deepEqual(decideReminder(facts, new Date(due.getTime() - 1), HEART_COOLDOWN_MS, WINDOW_SECONDS), { kind: "wait", at: due });
  t.deepEqual(decideReminder(facts, due, HEART_COOLDOWN_MS, WINDOW_SECONDS), { kind: "send", heartAt });
});

test("a heart already reminded, or no counted heart, is looked at again one cooldown later (never sent twice)", (t) => {
  const heartAt = new Date("2026-12-01T10:00:00.000Z");
  const now = new Date("2026-12-03T10:00:00.000Z");
  const later = { kind: "wait", at: new Date(now.getTime() + HEART_COOLDOWN_MS) };
  t.deepEqual(
    decideReminder({ id: randomUUID(), lastCountedAt: heartAt, remindedHeartAt: heartAt, attempts: 0 }, now, HEART_COOLDOWN_MS, WINDOW_SECONDS),
    later,
  );
  t.deepEqual(decideReminder({ id: randomUUID(), lastCountedAt: null, remindedHeartAt: null, attempts: 0 }, now, HEART_COOLDOWN_MS, WINDOW_SECONDS), later);
});

test("a temporary failure is retried later, and given up after MAX_REMINDER_ATTEMPTS", (t) => {
  const now = new Date("2026-12-01T10:00:00.000Z");
  t.like(retryAfterFailure(0, now), { kind: "retry" });
  t.deepEqual(retryAfterFailure(MAX_REMINDER_ATTEMPTS - 1, now), { kind: "give_up" });
});

test("an opt-in address is one plain e-mail address: trimmed, domain lower-cased; lists, names and header tricks refused", (t) => {
  t.is(normalizeEmail(" Steve@Example.COM "), "Steve@example.com");
  for (const bad of [
    "",
    "steve",
    "steve@",
    "@example.com",
    "a@b",
    "a@example.com, b@example.com",
    "Steve <s@example.com>",
    "a@example.com\r\nBcc: x@y.z",
    `${"a".repeat(250)}@example.com`,
  ]) {
    t.is(normalizeEmail(bad), undefined, bad);
  }
});
