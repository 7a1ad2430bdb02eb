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
 * - Fair (opt-in, `quotasOf`): an item names quota keys (its IP, its subnet, its
 *   server), each with a most-queued count; a submission whose quota key already
 *   has that many items waiting is refused at once with `overloaded`, so one busy
 *   key holds a bounded share of the queue and everyone else is still admitted.
 * - Bounded for every caller (opt-in, `maxTotalWaitMs`): an item that has waited
 *   this long since it was submitted - for capacity or behind earlier items of its
 *   own key - is refused with `overloaded`, checked by a timer too, so no caller
 *   waits longer whatever shares its keys.
 * - Coalescing (opt-in, `coalesce`): the first batch still starts at once, but a
 *   further one (up to `maxInFlight`) starts only once `minItems` wait or the
 *   oldest waiting item has waited `maxWaitMs`; until then arrivals gather for the
 *   next batch. At low concurrency the batches stay few and full instead of many
 *   and small (each batch has a fixed cost: a transaction, its round trips); under
 *   load the extra slots open at once.
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

/**
 * The whole wait of a CastHeart, from submission to its batch: capacity plus the time behind earlier
 * casts sharing its voter row, IP or subnet (issue 18: one busy IP's casts run one per round and
 * waited 10-20 s). The per-address share of the queue (32 casts, cast-heart-batch.ts) keeps that
 * wait short in practice and refuses the rest at once; this is the hard bound behind it. It is
 * longer than the capacity wait because casts of one key run one per round: 20 casts of one voter
 * at once (tests/integration hearts-batch, hearts-cast) take 20 rounds, which on a loaded machine
 * exceeded 1 s; 3 s still answers every caller far inside the gateway's 10 s RPC deadline.
 */
export const ADMISSION_MAX_TOTAL_WAIT_MS = 3_000;

/** A quota key of an item: at most `max` items naming `key` wait in the queue at once. */
export interface QueueQuota {
  key: string;
  max: number;
}

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
  /** An item that waited this long for capacity is refused instead of run. Default: no limit. */
  maxQueueWaitMs?: number;
  /**
   * An item that waited this long since `submit`, for capacity or behind its own keys, is refused
   * instead of run (checked on every pump and by a timer). Default: no limit.
   */
  maxTotalWaitMs?: number;
  /** The item's quota keys: a submission is refused at once when one of them already has `max` items waiting. None when omitted. */
  quotasOf?(item: I): readonly QueueQuota[];
  /** The error a refused item is rejected with (overload; retryable after the hint). */
  overloaded(retryAfterMs: number): Error;
  /**
   * When a batch beyond the first in flight may start (see the file comment): at once when `minItems` items
   * wait, else once the oldest waiting item has waited `maxWaitMs`. Default: at once (every free slot is used).
   */
  coalesce?: { minItems: number; maxWaitMs: number };
  /** The clock (ms). Default Date.now. */
  now?: () => number;
}

/** Counters for metrics and tests. */
export interface GroupCommitStats {
  batches: number;
  items: number;
  refused: number;
  /** Of `refused`: submissions refused at once because a quota key of theirs was full. */
  refusedByQuota: number;
  /** Of `refused`: items that waited `maxTotalWaitMs`. */
  refusedByTotalWait: number;
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
  quotas: readonly QueueQuota[];
  /** When the item started waiting for capacity (restarts while it waits behind its own key). */
  at: number;
  /** When it was submitted (the total wait). */
  submittedAt: number;
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
  const stats: GroupCommitStats = { batches: 0, items: 0, refused: 0, refusedByQuota: 0, refusedByTotalWait: 0, largestBatch: 0, queued: 0, inFlight: 0 };
  /** Items waiting per quota key. */
  const queuedByQuota = new Map<string, number>();
  let expiryTimer: NodeJS.Timeout | undefined;
  let coalesceTimer: NodeJS.Timeout | undefined;
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

  const countQuotas = (p: Pending<I, O>, delta: number) => {
    for (const q of p.quotas) {
      const value = (queuedByQuota.get(q.key) ?? 0) + delta;
      if (value > 0) queuedByQuota.set(q.key, value);
      else queuedByQuota.delete(q.key);
    }
  };
  /** Takes the item at `index` out of the queue (into a batch, or refused). */
  const removeAt = (index: number): Pending<I, O> => {
    const [p] = queue.splice(index, 1);
    countQuotas(p!, -1);
    return p!;
  };

  /** Refuses every item that waited maxTotalWaitMs since submission (the queue keeps submission order: they are its head). */
  function expireOverdue(): void {
    if (opts.maxTotalWaitMs === undefined) return;
    const at = now();
    const expired: Pending<I, O>[] = [];
    while (queue.length > 0 && at - queue[0]!.submittedAt >= opts.maxTotalWaitMs) expired.push(removeAt(0));
    for (const p of expired) {
      stats.refused++;
      stats.refusedByTotalWait++;
      p.reject(opts.overloaded(retryAfterMs()));
    }
  }

  /** Arms a timer for the head's deadline, so the total wait is bounded even while no batch ends and nothing arrives. */
  function armExpiry(): void {
    if (opts.maxTotalWaitMs === undefined) return;
    if (expiryTimer !== undefined) clearTimeout(expiryTimer);
    expiryTimer = undefined;
    if (queue.length === 0) return;
    expiryTimer = setTimeout(
      () => {
        expiryTimer = undefined;
        schedule();
      },
      Math.max(1, queue[0]!.submittedAt + opts.maxTotalWaitMs - now()),
    );
  }

  /** True when a batch may start beside the ones in flight now (always for the first one; see `coalesce`). */
  function mayStartBatch(): boolean {
    const coalesce = opts.coalesce;
    if (coalesce === undefined || stats.inFlight === 0 || queue.length >= coalesce.minItems) return true;
    const waitedMs = now() - queue[0]!.submittedAt;
    if (waitedMs >= coalesce.maxWaitMs) return true;
    // The waiting items gather for the batch after the running one, but wait at most maxWaitMs for it.
    if (coalesceTimer === undefined) {
      coalesceTimer = setTimeout(() => {
        coalesceTimer = undefined;
        schedule();
      }, coalesce.maxWaitMs - waitedMs);
    }
    return false;
  }

  function pump(): void {
    scheduled = false;
    expireOverdue();
    while (stats.inFlight < maxInFlight && queue.length > 0 && mayStartBatch()) {
      const batch = takeBatch();
      if (batch.length === 0) break; // every queued item waits for a key held by a running batch
      void runOne(batch);
    }
    stats.queued = queue.length;
    armExpiry();
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
        expired.push(removeAt(i));
        continue;
      }
      batch.push(removeAt(i));
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
      const quotas = opts.quotasOf?.(item) ?? [];
      const full = quotas.find((q) => (queuedByQuota.get(q.key) ?? 0) >= q.max);
      if (full !== undefined) {
        // One busy key (an IP, a subnet, a server) holds at most its share of the queue: the caller over it is refused at
        // once, with a hint of how long that key's queue takes to run (items sharing a conflict key run one per batch).
        stats.refused++;
        stats.refusedByQuota++;
        return Promise.reject(opts.overloaded(Math.max(retryAfterMs(), Math.ceil(full.max * averageBatchMs))));
      }
      return new Promise<O>((resolve, reject) => {
        const at = now();
        const pending: Pending<I, O> = { item, keys: opts.keysOf?.(item) ?? [], quotas, at, submittedAt: at, resolve, reject };
        queue.push(pending);
        countQuotas(pending, 1);
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
