import test from "ava";
import {
  DEFAULT_RETRY_SCHEDULE,
  RETRY_AFTER_CAP_MS,
  decideRetry,
  parseRetryAfter,
  parseRetrySchedule,
  scheduleSpanMs,
} from "../../services/delivery/pipeline/retry-schedule.js";

const S = 1000;
const M = 60 * S;
const H = 60 * M;
const middle = () => 0.5; // no jitter
const lowest = () => 0; // -20 %
const highest = () => 0.999999; // ~ +20 %

test("default schedule: 10 s, 30 s, 2 m, 10 m, 30 m, 1 h, 3 h, 6 h, 12 h, 24 h (about two days)", (t) => {
  const schedule = parseRetrySchedule(DEFAULT_RETRY_SCHEDULE);
  t.deepEqual(schedule.delaysMs, [10 * S, 30 * S, 2 * M, 10 * M, 30 * M, 1 * H, 3 * H, 6 * H, 12 * H, 24 * H]);
  const span = scheduleSpanMs(schedule);
  t.true(span > 46 * H && span < 48 * H, `${span / H} h`);
});

test("schedule parsing accepts ms/s/m/h/d so tests can compress it", (t) => {
  t.deepEqual(parseRetrySchedule("100ms, 200ms,1.5s,1d").delaysMs, [100, 200, 1500, 86_400_000]);
});

test("schedule parsing names every bad entry", (t) => {
  const error = t.throws(() => parseRetrySchedule("10s,ten,0s,5x"));
  t.regex(error?.message ?? "", /"ten".*"0s".*"5x"/);
  t.throws(() => parseRetrySchedule(""));
});

test("retry n waits the schedule's n-th delay (1-based attempts)", (t) => {
  const schedule = parseRetrySchedule("10s,30s,2m");
  t.deepEqual(decideRetry(schedule, 1, { random: middle }), { kind: "retry", delayMs: 10 * S });
  t.deepEqual(decideRetry(schedule, 2, { random: middle }), { kind: "retry", delayMs: 30 * S });
  t.deepEqual(decideRetry(schedule, 3, { random: middle }), { kind: "retry", delayMs: 2 * M });
});

test("after the last scheduled retry fails the delivery gives up (attempts = delays + 1)", (t) => {
  const schedule = parseRetrySchedule("10s,30s,2m");
  t.deepEqual(decideRetry(schedule, 4, { random: middle }), { kind: "give_up" });
});

test("jitter spreads each delay over +/-20 %", (t) => {
  const schedule = parseRetrySchedule("100s");
  const low = decideRetry(schedule, 1, { random: lowest });
  const high = decideRetry(schedule, 1, { random: highest });
  t.deepEqual(low, { kind: "retry", delayMs: 80 * S });
  t.true(high.kind === "retry" && high.delayMs > 119 * S && high.delayMs <= 120 * S);
});

test("Retry-After later than the schedule pushes the retry later", (t) => {
  const schedule = parseRetrySchedule("10s");
  t.deepEqual(decideRetry(schedule, 1, { random: middle, retryAfterMs: 90 * S }), { kind: "retry", delayMs: 90 * S });
});

test("Retry-After earlier than the schedule never brings the retry forward", (t) => {
  const schedule = parseRetrySchedule("10m");
  t.deepEqual(decideRetry(schedule, 1, { random: middle, retryAfterMs: 5 * S }), { kind: "retry", delayMs: 10 * M });
});

test("Retry-After is capped (24 h by default)", (t) => {
  const schedule = parseRetrySchedule("10s");
  t.is(schedule.retryAfterCapMs, RETRY_AFTER_CAP_MS);
  t.deepEqual(decideRetry(schedule, 1, { random: middle, retryAfterMs: 7 * 24 * H }), { kind: "retry", delayMs: 24 * H });
});

test("Retry-After does not extend the number of attempts", (t) => {
  const schedule = parseRetrySchedule("10s");
  t.deepEqual(decideRetry(schedule, 2, { random: middle, retryAfterMs: 60 * S }), { kind: "give_up" });
});

const now = new Date("2026-03-10T12:00:00.000Z");
const retryAfterCases: [string | undefined, number | undefined][] = [
  ["120", 120 * S],
  [" 0 ", 0],
  ["Tue, 10 Mar 2026 12:05:00 GMT", 5 * M],
  ["Tue, 10 Mar 2026 11:00:00 GMT", 0],
  ["-5", undefined],
  ["1.5", undefined],
  ["soon", undefined],
  ["2026-03-10T12:05:00Z", undefined],
  [undefined, undefined],
];
for (const [value, expected] of retryAfterCases) {
  test(`Retry-After parsing: ${JSON.stringify(value)} -> ${expected}`, (t) => {
    t.is(parseRetryAfter(value, now), expected);
  });
}
