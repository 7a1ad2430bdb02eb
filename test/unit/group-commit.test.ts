/**
 * The generic group-commit queue (services/shared/runtime/group-commit.ts): batching,
 * per-item outcomes, keys never sharing a batch (and keeping their order), and
 * the bounds (queue length, queue wait) that refuse with the overload error.
 */
import test from "ava";
import { Busy, recorder } from "../helpers/group-commit-recorder.js";
import { claimKeys, createGroupCommit } from "../../services/shared/runtime/group-commit.js";
import { eventually } from "../helpers/eventually.js";

test("items submitted together run as one batch, each caller gets its own outcome (one failure fails no neighbour)", async (t) => {
  const r = recorder<number>((n) => (n === 3 ? { ok: false, error: new Error(`bad ${n}`) } : { ok: true, value: `v${n}` }));
  const q = createGroupCommit<number, string>({ runBatch: r.runBatch, maxBatch: 10, maxQueue: 100, overloaded: (ms) => new Busy(ms) });
  const settled = await Promise.allSettled([1, 2, 3, 4].map((n) => q.submit(n)));
  t.deepEqual(r.batches, [[1, 2, 3, 4]]);
  t.deepEqual(
    settled.map((s) => (s.status === "fulfilled" ? s.value : (s.reason as Error).message)),
    ["v1", "v2", "bad 3", "v4"],
  );
});

test("arrivals while a batch is in flight form the next batch, up to maxBatch", async (t) => {
  const r = recorder<number>((n) => ({ ok: true, value: String(n) }));
  const q = createGroupCommit<number, string>({ runBatch: r.runBatch, maxBatch: 3, maxQueue: 100, overloaded: (ms) => new Busy(ms) });
  r.hold();
  const first = q.submit(0);
  await new Promise((resolve) => setImmediate(resolve));
  const rest = [1, 2, 3, 4, 5, 6, 7].map((n) => q.submit(n));
  r.release();
  await Promise.all([first, ...rest]);
  t.deepEqual(r.batches, [[0], [1, 2, 3], [4, 5, 6], [7]]);
  t.is(q.stats().largestBatch, 3);
});

test("coalesce: a batch beside a running one starts only once minItems wait, or the oldest has waited maxWaitMs", async (t) => {
  const r = recorder<number>((n) => ({ ok: true, value: String(n) }));
  const q = createGroupCommit<number, string>({
    runBatch: r.runBatch,
    maxBatch: 10,
    maxQueue: 100,
    maxInFlight: 2,
    coalesce: { minItems: 3, maxWaitMs: 60_000 },
    overloaded: (ms) => new Busy(ms),
  });
  r.hold();
  const first = q.submit(0); // nothing in flight: starts at once
  await new Promise((resolve) => setImmediate(resolve));
  t.deepEqual(r.batches, [[0]]);
  const gathered = [q.submit(1), q.submit(2)];
  await new Promise((resolve) => setImmediate(resolve));
  t.deepEqual(r.batches, [[0]], "two waiting items gather while the first batch runs");
  const third = q.submit(3);
  await new Promise((resolve) => setImmediate(resolve));
  t.deepEqual(r.batches, [[0], [1, 2, 3]], "the third opens the second slot");
  r.release();
  t.deepEqual(await Promise.all([first, ...gathered, third]), ["0", "1", "2", "3"]);

  const slow = recorder<number>((n) => ({ ok: true, value: String(n) }));
  const timed = createGroupCommit<number, string>({
    runBatch: slow.runBatch,
    maxBatch: 10,
    maxQueue: 100,
    maxInFlight: 2,
    coalesce: { minItems: 3, maxWaitMs: 30 },
    overloaded: (ms) => new Busy(ms),
  });
  slow.hold();
  const stuck = timed.submit(10);
  await new Promise((resolve) => setImmediate(resolve));
  const lone = timed.submit(11);
  await eventually(() => slow.batches.length === 2, { timeoutMs: 2_000 });
  t.deepEqual(slow.batches, [[10], [11]], "a lone item beside a slow batch starts after maxWaitMs");
  slow.release();
  t.deepEqual(await Promise.all([stuck, lone]), ["10", "11"]);
});

test("items sharing a key never share a batch and keep their submission order; other items overtake", async (t) => {
  const r = recorder<{ key: string; n: number }>((i) => ({ ok: true, value: `${i.key}${i.n}` }));
  const q = createGroupCommit<{ key: string; n: number }, string>({
    runBatch: r.runBatch,
    keysOf: (i) => [i.key],
    maxBatch: 10,
    maxQueue: 100,
    maxInFlight: 2,
    overloaded: (ms) => new Busy(ms),
  });
  const items = [
    { key: "a", n: 1 },
    { key: "a", n: 2 },
    { key: "b", n: 1 },
    { key: "a", n: 3 },
    { key: "c", n: 1 },
  ];
  await Promise.all(items.map((i) => q.submit(i)));
  const labels = r.batches.map((b) => b.map((i) => `${i.key}${i.n}`));
  for (const batch of labels) t.is(new Set(batch.map((l) => l[0])).size, batch.length, `one item per key in ${batch.join(",")}`);
  t.deepEqual(
    labels.flat().filter((l) => l.startsWith("a")),
    ["a1", "a2", "a3"],
  );
  t.deepEqual(labels[0], ["a1", "b1", "c1"]);
});

test("beyond maxQueue a submission is refused at once with the overload error; the refused item never runs", async (t) => {
  const r = recorder<number>((n) => ({ ok: true, value: String(n) }));
  const q = createGroupCommit<number, string>({ runBatch: r.runBatch, maxBatch: 1, maxQueue: 2, overloaded: (ms) => new Busy(ms) });
  r.hold();
  const running = q.submit(0);
  await new Promise((resolve) => setImmediate(resolve));
  const queued = [q.submit(1), q.submit(2)];
  const refused = await t.throwsAsync(q.submit(3), { instanceOf: Busy });
  t.true((refused as Busy).retryAfterMs > 0);
  r.release();
  t.deepEqual(await Promise.all([running, ...queued]), ["0", "1", "2"]);
  t.false(r.batches.flat().includes(3));
  t.is(q.stats().refused, 1);
});

test("an item that waited longer than maxQueueWaitMs for capacity is refused instead of run", async (t) => {
  let clock = 0;
  const r = recorder<number>((n) => ({ ok: true, value: String(n) }));
  const q = createGroupCommit<number, string>({
    runBatch: r.runBatch,
    maxBatch: 1,
    maxQueue: 10,
    maxQueueWaitMs: 100,
    now: () => clock,
    overloaded: (ms) => new Busy(ms),
  });
  r.hold();
  const running = q.submit(0);
  await new Promise((resolve) => setImmediate(resolve));
  const late = q.submit(1);
  clock = 500;
  r.release();
  t.is(await running, "0");
  await t.throwsAsync(late, { instanceOf: Busy });
  t.deepEqual(r.batches, [[0]]);
});

test("waiting behind an earlier item of the same key does not count as waiting for capacity", async (t) => {
  let clock = 0;
  const r = recorder<number>((n) => ({ ok: true, value: String(n) }));
  const q = createGroupCommit<number, string>({
    runBatch: r.runBatch,
    keysOf: () => ["same"],
    maxBatch: 10,
    maxQueue: 10,
    maxQueueWaitMs: 100,
    now: () => clock,
    overloaded: (ms) => new Busy(ms),
  });
  r.hold();
  const first = q.submit(0);
  await new Promise((resolve) => setImmediate(resolve));
  const second = q.submit(1);
  await new Promise((resolve) => setImmediate(resolve)); // scanned while its key is busy
  clock = 500;
  await new Promise((resolve) => setImmediate(resolve));
  r.release();
  t.deepEqual(await Promise.all([first, second]), ["0", "1"]);
});

test("a batch body that throws fails every item of that batch with its error; the queue carries on", async (t) => {
  let calls = 0;
  const q = createGroupCommit<number, string>({
    async runBatch(items) {
      calls++;
      if (calls === 1) throw new Error("database gone");
      return items.map((n) => ({ ok: true, value: String(n) }));
    },
    maxBatch: 10,
    maxQueue: 10,
    overloaded: (ms) => new Busy(ms),
  });
  const failed = await Promise.allSettled([q.submit(1), q.submit(2)]);
  t.true(failed.every((s) => s.status === "rejected" && (s.reason as Error).message === "database gone"));
  t.is(await q.submit(3), "3");
});

test("claimKeys: an item joins unless an earlier item (joined or skipped) or a busy batch holds one of its keys", (t) => {
  const taken = new Set<string>();
  const busy = new Set(["b"]);
  const joined = [["a"], ["b", "c"], ["c"], ["a", "d"], ["e"]].map((keys) => claimKeys(keys, taken, busy));
  // ["c"] waits behind the skipped ["b", "c"]: a later item of a key never overtakes an earlier one.
  t.deepEqual(joined, [true, false, false, false, true]);
  t.deepEqual([...taken].sort(), ["a", "b", "c", "d", "e"]);
  t.true(claimKeys(["b"], new Set()), "without a busy set only this batch's keys count");
});
