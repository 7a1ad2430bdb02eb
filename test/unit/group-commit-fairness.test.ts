/**
 * Fair, bounded admission of the group-commit queue (services/shared/runtime/group-commit.ts; issue 18):
 * per-key quotas of the queue (one busy IP cannot fill it) and a bound on every item's whole wait,
 * behind its own key too.
 */
import test from "ava";
import { Busy, recorder } from "../helpers/group-commit-recorder.js";
import { createGroupCommit } from "../../services/shared/runtime/group-commit.js";

test.serial("quotas: a key past its share of the queue is refused at once (the refused item never runs); other keys are still admitted", async (t) => {
  const r = recorder<{ ip: string; n: number }>((i) => ({ ok: true, value: `${i.ip}${i.n}` }));
  const q = createGroupCommit<{ ip: string; n: number }, string>({
    runBatch: r.runBatch,
    keysOf: (i) => [i.ip],
    quotasOf: (i) => [{ key: i.ip, max: 3 }],
    maxBatch: 10,
    maxQueue: 100,
    overloaded: (ms) => new Busy(ms),
  });
  r.hold();
  // Settled at once: a refusal is a rejected promise from the moment of submission.
  const hot = Promise.allSettled(Array.from({ length: 10 }, (_, n) => q.submit({ ip: "hot", n })));
  const others = Array.from({ length: 20 }, (_, n) => q.submit({ ip: `other-${n}`, n }));
  await new Promise((resolve) => setImmediate(resolve));
  r.release();
  const hotSettled = await hot;
  t.is(hotSettled.filter((s) => s.status === "rejected" && s.reason instanceof Busy).length, 7, "3 queued, 7 refused at once");
  t.is((await Promise.all(others)).length, 20, "every other key was admitted and ran");
  t.false(
    r.batches.flat().some((i) => i.ip === "hot" && i.n >= 3),
    "refused items never ran",
  );
  t.is(q.stats().refusedByQuota, 7);
});

test.serial(
  "maxTotalWaitMs: an item waiting behind earlier items of its own key is refused once its whole wait reaches the limit, even with no batch ending",
  async (t) => {
    const batches: number[][] = [];
    const q = createGroupCommit<number, string>({
      // The first batch takes 3 s: far longer than the limit.
      runBatch: async (items) => {
        batches.push([...items]);
        await new Promise((resolve) => setTimeout(resolve, 3_000));
        return items.map((n) => ({ ok: true, value: String(n) }));
      },
      keysOf: () => ["same"],
      maxBatch: 10,
      maxQueue: 10,
      maxQueueWaitMs: 3_000,
      maxTotalWaitMs: 300,
      overloaded: (ms) => new Busy(ms),
    });
    const first = q.submit(0);
    await new Promise((resolve) => setImmediate(resolve));
    const started = Date.now();
    const second = q.submit(1);
    await t.throwsAsync(second, { instanceOf: Busy });
    const waited = Date.now() - started;
    t.true(waited >= 290 && waited < 2_500, `refused after ${waited} ms, while the first batch still runs`);
    t.is(await first, "0");
    t.deepEqual(batches, [[0]]);
    t.is(q.stats().refusedByTotalWait, 1);
  },
);
