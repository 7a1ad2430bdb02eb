import test from "ava";
import { createFailureLimiter, type FailureLimiter } from "../../gateway/failure-limiter.js";

/** Admits and ends one request; returns the wait when limited, 0 when admitted. */
function attempt(limiter: FailureLimiter, source: string | undefined, failed: boolean, opts: { global?: boolean } = {}): number {
  const admission = limiter.admit(source, opts);
  if (admission.kind === "limited") return admission.retryAfterSeconds;
  admission.done(failed);
  return 0;
}

test("per-source limit: once a source reaches it, its requests wait until the window ends; other sources are unaffected", (t) => {
  let clock = 5_000;
  const limiter = createFailureLimiter({ windowMs: 60_000, perSource: 3, global: 0, now: () => clock });
  for (let i = 0; i < 3; i++) t.is(attempt(limiter, "203.0.113.7", true), 0);
  clock = 10_000;
  t.is(attempt(limiter, "203.0.113.7", false), 55, "Retry-After is the rest of the window (which began with the first request), in whole seconds");
  t.is(attempt(limiter, "198.51.100.1", true), 0);
  clock = 65_000;
  t.is(attempt(limiter, "203.0.113.7", true), 0, "a new window starts afresh");
});

test("failures are charged to their source, never to anything else: a source past its limit gets no other source's request refused", (t) => {
  const limiter = createFailureLimiter({ windowMs: 60_000, perSource: 3, global: 0, now: () => 0 });
  for (let i = 0; i < 1000; i++) attempt(limiter, `203.0.113.${i % 250}`, true);
  t.is(limiter.admit("198.51.100.1").kind, "admitted", "a fresh source, after a flood of failures from 250 others");
});

test("successful requests never count", (t) => {
  const limiter = createFailureLimiter({ windowMs: 60_000, perSource: 3, global: 3, now: () => 0 });
  for (let i = 0; i < 1000; i++) t.is(attempt(limiter, "a", false, { global: true }), 0);
});

test("a concurrent burst cannot slip past the limit: requests in flight count until they end", (t) => {
  const limiter = createFailureLimiter({ windowMs: 60_000, perSource: 5, now: () => 0 });
  const admitted = Array.from({ length: 20 }, () => limiter.admit("a")).filter((a) => a.kind === "admitted");
  t.is(admitted.length, 5);
  for (const a of admitted) if (a.kind === "admitted") a.done(false);
  t.is(limiter.admit("a").kind, "admitted", "the slots are free again once they ended without failing");
});

test("the global limit counts and refuses only the admissions that ask for it (lookups for server ids not known to exist)", (t) => {
  const limiter = createFailureLimiter({ windowMs: 10_000, perSource: 100, global: 5, now: () => 0 });
  for (let i = 0; i < 5; i++) attempt(limiter, `source-${i}`, true, { global: true });
  const refused = limiter.admit("fresh", { global: true });
  t.deepEqual(refused.kind === "limited" ? [refused.by, refused.retryAfterSeconds] : refused.kind, ["global", 10]);
  t.is(limiter.admit("fresh").kind, "admitted", "a lookup for a known server is never refused by the global limit");
  const spare = createFailureLimiter({ windowMs: 10_000, perSource: 100, global: 5, now: () => 0 });
  for (let i = 0; i < 100; i++) attempt(spare, `other-${i}`, true);
  t.is(spare.admit("fresh", { global: true }).kind, "admitted", "known servers' failures alone never spend the global budget");
});

test("a limit of 0 is off", (t) => {
  const limiter = createFailureLimiter({ windowMs: 1_000, perSource: 0, global: 0, now: () => 0 });
  for (let i = 0; i < 10_000; i++) attempt(limiter, "a", true, { global: true });
  t.is(attempt(limiter, "a", true, { global: true }), 0);
});

test("a source past its limit is refused by the source limit, named as such; a request without a source is counted globally only", (t) => {
  const limiter = createFailureLimiter({ windowMs: 60_000, perSource: 3, global: 10, now: () => 0 });
  for (let i = 0; i < 3; i++) attempt(limiter, "203.0.113.7", true, { global: true });
  const refused = limiter.admit("203.0.113.7");
  t.is(refused.kind === "limited" ? refused.by : refused.kind, "source");
  t.is(limiter.admit(undefined, { global: true }).kind, "admitted");
});

test("with in-flight requests counted apart (pendingPerSource), a source's many concurrent right answers are never refused, and wrong ones still are past the budget", (t) => {
  const limiter = createFailureLimiter({ windowMs: 60_000, perSource: 30, pendingPerSource: 256, now: () => 0 });
  // A host's 200 game servers, each plugin's first call at once from the one address: every key right.
  const burst = Array.from({ length: 200 }, () => limiter.admit("203.0.113.7"));
  t.is(burst.filter((a) => a.kind === "admitted").length, 200);
  for (const a of burst) if (a.kind === "admitted") a.done(false);
  // In flight past the cap: refused, so a burst of guesses stays bounded.
  const flood = Array.from({ length: 300 }, () => limiter.admit("198.51.100.9"));
  t.is(flood.filter((a) => a.kind === "admitted").length, 256);
  for (const a of flood) if (a.kind === "admitted") a.done(true);
  t.is(limiter.admit("198.51.100.9").kind, "limited", "past its wrong-guess budget the source waits for the next window");
  t.is(limiter.admit("203.0.113.7").kind, "admitted", "the host with right keys only is not");
});
