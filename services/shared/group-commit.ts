/**
 * Group commit: concurrent requests that each need a small write are applied
 * together, so one transaction (one round trip set, one commit, one WAL flush)
 * carries many of them.
 *
 * - `submit(item)` queues the item and resolves with ITS outcome; `runBatch`
 *   returns one outcome per item, so one item's failure (a 404, a 422) never
 *   fails its neighbours.
 * - Batching adds no waiting when idle: a batch starts on the next turn of the
 *   event loop, with everything queued by then (up to `maxBatch`); while
 *   `maxInFlight` batches are running, arrivals queue and form the next batch.
 * - Items sharing a key (`keysOf`) never run in one batch nor in two batches at
 *   once: the later item waits for the earlier one's batch to finish, and items
 *   of one key run in the order they were submitted. The batch body may therefore
 *   assume its items touch disjoint rows.
 * - Bounded: beyond `maxQueue` waiting items, or for an item that waited longer
 *   than `maxQueueWaitMs` for capacity (time spent behind an earlier item of its
 *   own key does not count), `overloaded(retryAfterMs)` is thrown to the caller and
 *   the item is never run (nothing is written for it), so callers get a clear,
 *   retryable answer before any deadline of theirs fires.
 */

/**
 * The admission wait of the request paths (CastHeart, ApplyEvent): an item that waited this long
 * for capacity is refused (`overloaded`, a retryable resource_exhausted with a hint) instead of run.
 * Issue #8: the busiest hour must not queue votes for seconds, and overload is answered before any
 * internal timeout fires. At the measured batch times (tens of ms per batch of up to 128 under
 * load) this is several batches of queue: it rides out a slow commit or a GC pause, yet a caller
 * learns of a sustained overload within half a second instead of after 3 s of queueing.
 */
export const ADMISSION_MAX_QUEUE_WAIT_MS = 500;

/** One item's result, in the order of the batch. */
export type ItemOutcome<O> = { ok: true; value: O } | { ok: false; error: unknown };

/** Settings of a group-commit queue. */
export interface GroupCommitOptions<I, O> {
  /**
   * Applies a batch (at least one item) and returns exactly one outcome per item, in order.
   * When it throws, every item of the batch fails with that error (the body decides whether
   * to fall back to one-by-one work before throwing).
   */
  runBatch(items: readonly I[]): Promise<ItemOutcome<O>[]>;
  /** Keys an item conflicts on (for example its token); none when omitted. */
  keysOf?(item: I): readonly string[];
  /** Most items in one batch. */
  maxBatch: number;
  /** Most items waiting (not yet in a running batch); beyond it `submit` refuses at once. */
  maxQueue: number;
  /** Batches running at the same time (each holds one database connection). Default 1. */
  maxInFlight?: number;
  /** An item that waited this long is refused instead of run. Default: no limit. */
  maxQueueWaitMs?: number;
  /** The error a refused item is rejected with (overload; retryable after the hint). */
  overloaded(retryAfterMs: number): Error;
  /** The clock (ms). Default Date.now. */
  now?: () => number;
}

/** Counters for metrics and tests. */
export interface GroupCommitStats {
  batches: number;
  items: number;
  refused: number;
  largestBatch: number;
  queued: number;
  inFlight: number;
}

/** A running queue. */
export interface GroupCommit<I, O> {
  submit(item: I): Promise<O>;
  stats(): GroupCommitStats;
  /** Resolves once nothing is queued or running (new submissions are still accepted). */
  drain(): Promise<void>;
}

interface Pending<I, O> {
  item: I;
  keys: readonly string[];
  at: number;
  resolve(value: O): void;
  reject(error: unknown): void;
}

/** Creates a group-commit queue (see the file comment). */
export function createGroupCommit<I, O>(opts: GroupCommitOptions<I, O>): GroupCommit<I, O> {
  const now = opts.now ?? Date.now;
  const maxInFlight = Math.max(1, opts.maxInFlight ?? 1);
  const maxBatch = Math.max(1, opts.maxBatch);
  const queue: Pending<I, O>[] = [];
  /** Keys held by running batches. */
  const busyKeys = new Set<string>();
  const stats: GroupCommitStats = { batches: 0, items: 0, refused: 0, largestBatch: 0, queued: 0, inFlight: 0 };
  let scheduled = false;
  let drainWaiters: (() => void)[] = [];
  /** Recent batch durations, for the retry hint. */
  let averageBatchMs = 5;

  const retryAfterMs = () => {
    const batchesAhead = Math.ceil(queue.length / maxBatch) / maxInFlight;
    return Math.max(100, Math.ceil((batchesAhead + 1) * averageBatchMs));
  };

  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(pump);
  };

  const settleDrain = () => {
    if (queue.length === 0 && stats.inFlight === 0 && drainWaiters.length > 0) {
      const waiters = drainWaiters;
      drainWaiters = [];
      for (const w of waiters) w();
    }
  };

  function pump(): void {
    scheduled = false;
    while (stats.inFlight < maxInFlight && queue.length > 0) {
      const batch = takeBatch();
      if (batch.length === 0) break; // every queued item waits for a key held by a running batch
      void runOne(batch);
    }
    stats.queued = queue.length;
    settleDrain();
  }

  /** Takes up to maxBatch items in order, skipping (and keeping in order) those whose keys are taken. */
  function takeBatch(): Pending<I, O>[] {
    const batch: Pending<I, O>[] = [];
    const taken = new Set<string>();
    const expired: Pending<I, O>[] = [];
    const cutoff = opts.maxQueueWaitMs === undefined ? -Infinity : now() - opts.maxQueueWaitMs;
    let i = 0;
    while (i < queue.length && batch.length < maxBatch) {
      const p = queue[i]!;
      if (!claimKeys(p.keys, taken, busyKeys)) {
        // Waiting for its own key (an earlier item of the same key) is not waiting for capacity: its clock restarts.
        p.at = now();
        i++;
        continue;
      }
      if (p.at < cutoff) {
        queue.splice(i, 1);
        expired.push(p);
        continue;
      }
      queue.splice(i, 1);
      batch.push(p);
    }
    for (const p of expired) {
      stats.refused++;
      p.reject(opts.overloaded(retryAfterMs()));
    }
    return batch;
  }

  async function runOne(batch: Pending<I, O>[]): Promise<void> {
    stats.inFlight++;
    stats.batches++;
    stats.items += batch.length;
    stats.largestBatch = Math.max(stats.largestBatch, batch.length);
    for (const p of batch) for (const k of p.keys) busyKeys.add(k);
    const started = now();
    try {
      const outcomes = await opts.runBatch(batch.map((p) => p.item));
      if (outcomes.length !== batch.length) throw new Error(`group commit: ${outcomes.length} outcomes for ${batch.length} items`);
      batch.forEach((p, i) => {
        const outcome = outcomes[i]!;
        if (outcome.ok) p.resolve(outcome.value);
        else p.reject(outcome.error);
      });
    } catch (error) {
      // Failure policy: the batch body already fell back to per-item work where it could; what it
      // throws fails every item of the batch with that error (each caller maps it, e.g. to a 500).
      for (const p of batch) p.reject(error);
    } finally {
      const finished = now();
      averageBatchMs = averageBatchMs * 0.8 + (finished - started) * 0.2;
      const released = new Set<string>();
      for (const p of batch) {
        for (const k of p.keys) {
          busyKeys.delete(k);
          released.add(k);
        }
      }
      // Items that waited for these keys start waiting for capacity only now.
      if (released.size > 0) for (const p of queue) if (p.keys.some((k) => released.has(k))) p.at = finished;
      stats.inFlight--;
      schedule();
    }
  }

  return {
    submit(item) {
      if (queue.length >= opts.maxQueue) {
        stats.refused++;
        return Promise.reject(opts.overloaded(retryAfterMs()));
      }
      return new Promise<O>((resolve, reject) => {
        queue.push({ item, keys: opts.keysOf?.(item) ?? [], at: now(), resolve, reject });
        stats.queued = queue.length;
        schedule();
      });
    },
    stats: () => ({ ...stats }),
    drain: () =>
      new Promise<void>((resolve) => {
        drainWaiters.push(resolve);
        settleDrain();
      }),
  };
}

/**
 * The per-key rule of a batch being built, item by item in queue order: true when an item with
 * `keys` may join it (no key taken by an earlier item of this batch or held in `busy`). Either
 * way its keys become taken, so a skipped item's later namesakes never overtake it.
 */
export function claimKeys(keys: readonly string[], taken: Set<string>, busy?: ReadonlySet<string>): boolean {
  const free = !keys.some((k) => taken.has(k) || busy?.has(k) === true);
  for (const k of keys) taken.add(k);
  return free;
}
