import test from "ava";
import { type CapAnswer, createServerCaps, FAST_ANSWER_MS, maxServerCap, nextServerCap, toCapAnswer } from "../../services/delivery/pipeline/server-caps.js";
import type { AttemptOutcome } from "../../services/delivery/pipeline/transport.js";

const limits = { base: 4, max: 32 };

const nextCases: { name: string; cap: number; answer: CapAnswer; inFlight: number; expected: number }[] = [
  { name: "fast while every slot is used: one more slot", cap: 4, answer: "fast", inFlight: 4, expected: 5 },
  { name: "fast while over the cap (it was lowered meanwhile): one more slot", cap: 4, answer: "fast", inFlight: 9, expected: 5 },
  { name: "fast with half the slots used: one more slot", cap: 8, answer: "fast", inFlight: 4, expected: 9 },
  { name: "fast with fewer than half the slots used: the cap stays (one at a time never grows)", cap: 4, answer: "fast", inFlight: 1, expected: 4 },
  { name: "fast at the maximum: stays at the maximum", cap: 32, answer: "fast", inFlight: 32, expected: 32 },
  { name: "slow answer: the cap halves", cap: 20, answer: "slow", inFlight: 20, expected: 10 },
  { name: "slow answer near the small cap: never below it", cap: 6, answer: "slow", inFlight: 6, expected: 4 },
  { name: "failed answer: back to the small cap at once", cap: 20, answer: "failed", inFlight: 1, expected: 4 },
  { name: "failed at the small cap: stays", cap: 4, answer: "failed", inFlight: 4, expected: 4 },
  { name: "nothing sent: the cap stays", cap: 12, answer: "none", inFlight: 12, expected: 12 },
];
for (const c of nextCases) {
  test(`nextServerCap: ${c.name}`, (t) => {
    t.is(nextServerCap(c.cap, c.answer, c.inFlight, limits), c.expected);
  });
}

const exchange = { target: "https://r.example/hook", request: { headers: {}, body: "{}" }, response: null, latencyMs: 1, error: null, succeeded: true };
const outcomeCases: { name: string; outcome: AttemptOutcome | undefined; expected: CapAnswer }[] = [
  {
    name: "2xx within FAST_ANSWER_MS is fast",
    outcome: { kind: "delivered", target: "t", statusCode: 200, latencyMs: FAST_ANSWER_MS, exchange },
    expected: "fast",
  },
  {
    name: "2xx slower than FAST_ANSWER_MS is slow",
    outcome: { kind: "delivered", target: "t", statusCode: 200, latencyMs: FAST_ANSWER_MS + 1, exchange },
    expected: "slow",
  },
  { name: "a fast 503 is a failure", outcome: { kind: "failed", target: "t", statusCode: 503, error: "e", latencyMs: 2, exchange }, expected: "failed" },
  { name: "410 is a failure", outcome: { kind: "gone", target: "t", statusCode: 410, error: "e", latencyMs: 2, exchange }, expected: "failed" },
  { name: "held (nothing sent) counts for nothing", outcome: { kind: "held", reason: "no secret" }, expected: "none" },
  { name: "no outcome (the attempt threw) counts for nothing", outcome: undefined, expected: "none" },
];
for (const c of outcomeCases) {
  test(`toCapAnswer: ${c.name}`, (t) => {
    t.is(toCapAnswer(c.outcome), c.expected);
  });
}

test("maxServerCap: a quarter of the concurrency, never below the small cap", (t) => {
  t.is(maxServerCap(128, 4), 32);
  t.is(maxServerCap(32, 4), 8);
  t.is(maxServerCap(8, 4), 4);
});

test("createServerCaps: a server grows one slot per fast answer at its cap, falls back at a failure, and only raised caps are kept", (t) => {
  const caps = createServerCaps({ base: 2, max: 4 });
  t.is(caps.capOf("a"), 2);
  caps.record("a", "fast", 2);
  caps.record("a", "fast", 3);
  caps.record("a", "fast", 4);
  t.is(caps.capOf("a"), 4, "capped at the maximum");
  t.is(caps.capOf("b"), 2, "another server keeps its own small cap");
  t.deepEqual([...caps.raised()], [["a", 4]]);
  caps.record("a", "failed", 4);
  t.is(caps.capOf("a"), 2);
  t.deepEqual([...caps.raised()], [], "a server back at the small cap has no entry");
});
