import test from "ava";
import { createFailureLimiter, type FailureLimiter } from "../../gateway/failure-limiter.js";

/** Admits and ends one request; returns the wait when limited, 0 when admitted. */
function attempt(limiter: FailureLimiter, serverId: string, failed: boolean): number {
  const admission = limiter.admit(serverId);
  if (admission.kind === "limited") return admission.retryAfterSeconds;
  admission.done(failed);
  return 0;
}

test("per-server limit: once a server reaches it, its requests wait until the window ends; other servers are unaffected", (t) => {
  let clock = 5_000;
  const limiter = createFailureLimiter({ windowMs: 60_000, perServer: 3, global: 0, now: () => clock });
  for (let i = 0; i < 3; i++) t.is(attempt(limiter, "a", true), 0);
  clock = 10_000;
  t.is(attempt(limiter, "a", false), 55, "Retry-After is the rest of the window (which began with the first request), in whole seconds");
  t.is(attempt(limiter, "b", true), 0);
  clock = 65_000;
  t.is(attempt(limiter, "a", true), 0, "a new window starts afresh");
});

test("successful requests never count", (t) => {
  const limiter = createFailureLimiter({ windowMs: 60_000, perServer: 3, global: 3, now: () => 0 });
  for (let i = 0; i < 1000; i++) t.is(attempt(limiter, "a", false), 0);
});

test("a concurrent burst cannot slip past the limit: requests in flight count until they end", (t) => {
  const limiter = createFailureLimiter({ windowMs: 60_000, perServer: 5, global: 0, now: () => 0 });
  const admitted = Array.from({ length: 20 }, () => limiter.admit("a")).filter((a) => a.kind === "admitted");
  t.is(admitted.length, 5);
  for (const a of admitted) if (a.kind === "admitted") a.done(false);
  t.is(limiter.admit("a").kind, "admitted", "the slots are free again once they ended without failing");
});

test("global limit: failures spread over many servers still stop at the global count", (t) => {
  const limiter = createFailureLimiter({ windowMs: 10_000, perServer: 100, global: 5, now: () => 0 });
  for (let i = 0; i < 5; i++) attempt(limiter, `server-${i}`, true);
  t.is(attempt(limiter, "fresh", false), 10);
});

test("a limit of 0 is off", (t) => {
  const limiter = createFailureLimiter({ windowMs: 1_000, perServer: 0, global: 0, now: () => 0 });
  for (let i = 0; i < 10_000; i++) attempt(limiter, "a", true);
  t.is(attempt(limiter, "a", true), 0);
});

test("per-source limit: a source past it waits; other sources, even for the same server, are unaffected", (t) => {
  const limiter = createFailureLimiter({ windowMs: 60_000, perServer: 0, perSource: 3, global: 0, now: () => 0 });
  for (let i = 0; i < 3; i++) {
    const admission = limiter.admit(`random-${i}`, "203.0.113.7");
    if (admission.kind === "admitted") admission.done(true);
  }
  t.is(limiter.admit("another", "203.0.113.7").kind, "limited", "the forger's source is limited whatever server it names");
  t.is(limiter.admit("random-0", "198.51.100.1").kind, "admitted", "another source is not");
  t.is(limiter.admit("random-0").kind, "admitted", "a request without a source is counted per server and overall only");
});
