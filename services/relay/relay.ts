import { Gauge, Counter, type Registry } from "prom-client";
import { RejectedMessagesError, type EventBus } from "../shared/adapters/bus.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { runSqlTransaction, type SqlTx } from "../shared/adapters/sql/executor.js";
import { createDeadLetterCounter, moveOutboxRowsToDeadLetters, type PoisonRow } from "../shared/adapters/dead-letters.js";
import type { Logger } from "../shared/runtime/log.js";
import { createCommitListener } from "./commit-listener.js";
import {
  countUnpublished,
  lockShardsOfNextRows,
  markPublished,
  markPublishedAndClaim,
  oldestUnpublishedAgeSeconds,
  readUnpublishedLag,
  type OutboxRow,
} from "./statements.js";

/** Default of RELAY_STUCK_AFTER_MS: readiness fails after this long without progress while rows wait. */
export const DEFAULT_RELAY_STUCK_AFTER_MS = 60_000;
/** Longest last-error text quoted by the readiness check. */
const MAX_ERROR_CHARS = 300;
/** Default of `batchSize`: rows claimed, and sent to the bus, at a time. */
export const DEFAULT_RELAY_BATCH_SIZE = 2_000;
/** Default of `pollIntervalMs`: the poll while commit notifications are not known to arrive. */
export const DEFAULT_RELAY_POLL_INTERVAL_MS = 25;
/** Default of `notifications.safetyPollIntervalMs`: the poll kept as a safety net while notifications arrive. */
export const DEFAULT_RELAY_SAFETY_POLL_INTERVAL_MS = 1_000;
/**
 * Shortest time from one pass's start to the next one's when commits keep waking the relay: at idle
 * a commit is published at once (the last pass began long ago); under a stream of commits the
 * passes take what committed meanwhile together instead of one pass per commit, which costs the
 * relay much more CPU per ingested event (figures: bench/results/ANALYSIS.md).
 */
export const RELAY_MIN_PASS_GAP_MS = 20;
/** A pass stops claiming more batches after this long, then commits (progress is durable, shards change hands). */
const PASS_BUDGET_MS = 1_000;
/** A pass whose transaction is still open after this long (a hung send) is ended and rolled back, then retried. */
const PASS_TIMEOUT_MS = 60_000;
/** A pass that gets no pooled connection within this long fails (and is retried with backoff). */
const PASS_MAX_WAIT_MS = 10_000;

/** Settings of one relay instance. */
export interface RelayOptions {
  prisma: PrismaClient;
  bus: EventBus;
  log: Logger;
  /** Rows claimed (and sent to the bus) at a time; a pass handles several batches. Default DEFAULT_RELAY_BATCH_SIZE. */
  batchSize?: number;
  /** Sleep between polls when the outbox is drained and no commit notifications arrive. Default DEFAULT_RELAY_POLL_INTERVAL_MS. */
  pollIntervalMs?: number;
  /**
   * Wake on commit: LISTEN on this database for the outbox trigger's notifications
   * (OUTBOX_COMMITTED_CHANNEL); while they are known to arrive, the poll slows to
   * `safetyPollIntervalMs` (default DEFAULT_RELAY_SAFETY_POLL_INTERVAL_MS). Without it (or where
   * notifications do not arrive: embedded PGlite) the relay polls every `pollIntervalMs`.
   */
  notifications?: { databaseUrl: string; safetyPollIntervalMs?: number };
  /** Registry for the lag and dead-letter metrics; none when omitted. */
  registry?: Registry;
  /**
   * `checkProgress` fails when no pass has succeeded for this long while the oldest
   * unpublished row is older than this. Default DEFAULT_RELAY_STUCK_AFTER_MS.
   */
  stuckAfterMs?: number;
  /** The clock (milliseconds); tests may step it. */
  nowMs?: () => number;
}

/** What one pass of the relay did: `count` rows handled, of which `deadLettered` were set aside. */
export type RelayPass = { kind: "published"; count: number; deadLettered: number } | { kind: "idle" };

/**
 * The outbox relay. A pass is one transaction: it takes the per-shard advisory locks of the shards
 * among the next unpublished rows (shards held by another instance are skipped), then claims up to
 * `batchSize` unpublished rows of its shards in id order (claimBatch), sends them to the bus and
 * marks them published; while the backlog lasts it goes on with the next batch in the same
 * transaction, for up to PASS_BUDGET_MS, then commits. It selects on `published_at IS NULL` (a
 * partial index) rather than a cursor kept between passes, so a row that commits after a higher id
 * was published is picked up by the next pass; and a shard is published by one instance at a time,
 * so one key stays in order. Publishing happens before the commit: a crash in between republishes
 * (at least once); consumers dedupe. The SQL is in statements.ts.
 *
 * Pipelining: while batch N is being sent, the claim of batch N+1 runs (shard locks from the rows
 * above batch N's last id; the advisory locks are the transaction's, so it keeps its shards), and
 * its statement marks batch N-1 published. Sends stay one at a time and in id order, and a failed
 * send stops the pass before anything after it is sent, so a key's order holds.
 *
 * Poison isolation: when the bus refuses a batch for what its messages are
 * (RejectedMessagesError: too large, invalid record), the batch is bisected,
 * each half published in order, down to the single rows the bus refuses; those
 * are moved to `dead_letters` in the same transaction that marks the rest
 * published, so one bad row never holds back the other servers' events. Any
 * other error (broker down) rolls the pass back and is retried, never dead-lettered.
 *
 * Waking: with `notifications`, a commit that writes outbox rows wakes the loop at once (LISTEN);
 * notifications that arrive during a pass are coalesced into one more pass.
 */
export function createRelay(opts: RelayOptions) {
  const batchSize = opts.batchSize ?? DEFAULT_RELAY_BATCH_SIZE;
  const pollIntervalMs = opts.pollIntervalMs ?? DEFAULT_RELAY_POLL_INTERVAL_MS;
  const safetyPollIntervalMs = opts.notifications?.safetyPollIntervalMs ?? DEFAULT_RELAY_SAFETY_POLL_INTERVAL_MS;
  const stuckAfterMs = opts.stuckAfterMs ?? DEFAULT_RELAY_STUCK_AFTER_MS;
  const nowMs = opts.nowMs ?? Date.now;
  const { prisma, bus, log } = opts;
  let running = false;
  /** stop() was called: a pass in progress stops claiming more batches. */
  let stopping = false;
  /** When a pass last succeeded (published, set aside or found nothing to do). */
  let lastProgressAt = nowMs();
  let lastError: string | undefined;
  let loop: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  /** A commit notification arrived since the current pass began: run another pass before sleeping. */
  let notified = false;
  const listener = opts.notifications
    ? createCommitListener({
        databaseUrl: opts.notifications.databaseUrl,
        prisma,
        log,
        onCommit: () => {
          notified = true;
          wake?.();
        },
      })
    : undefined;
  const metrics = opts.registry ? createRelayMetrics(opts.registry, prisma) : undefined;
  const pass: PassDeps = {
    batchSize,
    log,
    publish: (rows) => publishBatch(bus, rows, metrics?.published),
    isStopping: () => stopping,
  };

  /** Runs one pass (one transaction, one or more batches); returns what it did. */
  async function runOnce(): Promise<RelayPass> {
    // On node-postgres, as ApplyEvent's rounds (runSqlTransaction): at idle, the pass stands between a commit and its event.
    const done = await runSqlTransaction(prisma, (tx) => runPass(tx, pass), { timeoutMs: PASS_TIMEOUT_MS, maxWaitMs: PASS_MAX_WAIT_MS });
    lastProgressAt = nowMs();
    lastError = undefined;
    if (done.count === 0) return { kind: "idle" };
    // Counted after the commit, so a rolled-back pass counts nothing.
    for (const { topic, code } of done.moved) metrics?.deadLetters.inc({ source: "relay", topic, code });
    return { kind: "published", count: done.count, deadLettered: done.moved.length };
  }

  /**
   * Readiness: throws (with the reason) when the relay is stuck, that is no pass has
   * succeeded for `stuckAfterMs` while the oldest unpublished row is older than that.
   * A relay with nothing to do, or one that keeps making progress through a backlog, is fine.
   */
  async function checkProgress(): Promise<void> {
    const sinceProgressMs = nowMs() - lastProgressAt;
    if (sinceProgressMs <= stuckAfterMs) return;
    const { waiting, oldestMs } = await readUnpublishedLag(prisma);
    if (waiting === 0 || oldestMs <= stuckAfterMs) return;
    const error = lastError ? `; last error: ${lastError}` : running ? "; a pass is still running" : "; the relay is not running";
    throw new Error(
      `relay stuck: no progress for ${Math.round(sinceProgressMs / 1000)} s while ${waiting} outbox rows wait (oldest ${Math.round(oldestMs / 1000)} s)${error}`,
    );
  }

  async function run(): Promise<void> {
    let failures = 0;
    let lastPassStartedAt = Number.NEGATIVE_INFINITY;
    while (running) {
      const gapMs = lastPassStartedAt + RELAY_MIN_PASS_GAP_MS - Date.now();
      if (gapMs > 0) await sleep(gapMs);
      lastPassStartedAt = Date.now();
      notified = false;
      let pass: RelayPass;
      try {
        pass = await runOnce();
        failures = 0;
      } catch (error) {
        // Failure policy: the transaction rolled back, rows stay unpublished; retry with backoff (checkProgress reports it when it lasts).
        failures++;
        lastError = describeError(error);
        log.warn({ err: error, failures }, "relay pass failed; retrying");
        await sleep(Math.min(5_000, 200 * 2 ** Math.min(failures, 5)));
        continue;
      }
      if (pass.kind === "published") {
        log.debug({ count: pass.count }, "relay published");
        // A pass ends on its budget with the backlog not drained: go on at once.
        if (pass.count >= batchSize) continue;
      }
      // Notifications that arrived during the pass: their rows may have committed after its claim.
      if (notified || !running) continue;
      const sleepMs = listener?.active() ? safetyPollIntervalMs : pollIntervalMs;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, sleepMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
  }

  return {
    runOnce,
    checkProgress,
    /** True while commit notifications are known to arrive (the loop wakes on commit and polls only as a safety net). */
    wakesOnCommit: () => listener?.active() ?? false,
    /** Starts the loop (and, with `notifications`, listening for commits). */
    start() {
      if (running) return;
      running = true;
      stopping = false;
      listener?.start();
      // The first commit after a start is published without waiting for the producer's connection.
      bus.connectPublisher?.().catch((error: unknown) => {
        // Failure policy: the first publish connects again (and a pass that cannot publish is retried with backoff).
        log.warn({ err: error }, "could not connect to the bus ahead of the first publish; the first publish connects");
      });
      loop = run();
    },
    /** Nudges the loop to poll now (the embedded mode calls it after a write). */
    poke() {
      notified = true;
      wake?.();
    },
    /** Stops the loop and waits for the in-flight pass to finish (commit or roll back). */
    async stop() {
      running = false;
      stopping = true;
      wake?.();
      await loop;
      stopping = false;
      await listener?.stop();
    },
  };
}

/** What one pass needs from its relay. */
interface PassDeps {
  batchSize: number;
  log: Logger;
  /** Sends one batch to the bus; returns the rows the bus refused (publishBatch). */
  publish: (rows: OutboxRow[]) => Promise<PoisonRow[]>;
  /** stop() was called: claim no more batches. */
  isStopping: () => boolean;
}

/** What a pass did, known at its commit: rows handled, and the refused rows moved to `dead_letters`. */
interface PassResult {
  count: number;
  moved: { topic: string; code: string }[];
}

/**
 * One pass, inside its transaction: claims a batch, then, while the backlog lasts and the budget is
 * not spent, sends batch N while the next statement marks batch N-1 published and claims batch N+1;
 * sets refused rows aside; marks the last batch published.
 */
async function runPass(tx: SqlTx, deps: PassDeps): Promise<PassResult> {
  const startedAt = performance.now();
  let count = 0;
  const moved: PassResult["moved"] = [];
  /** The shards this pass holds the locks of. */
  const held = new Set<number>();
  let current = await claimBatch(tx, [], 0n, deps.batchSize, held);
  /** Sent rows of the previous batch, to be marked published by the next statement. */
  let toMark: bigint[] = [];
  while (current.length > 0) {
    const lastId = current[current.length - 1]!.id;
    const more = current.length >= deps.batchSize && !deps.isStopping() && performance.now() - startedAt < PASS_BUDGET_MS;
    // The send of this batch and the statement marking the previous one (and claiming the next) run together.
    const statement = toMark.length > 0 || more ? claimBatch(tx, toMark, lastId, more ? deps.batchSize : 0, held) : Promise.resolve([]);
    const [sent, claimed] = await Promise.allSettled([deps.publish(current), statement]);
    // Failure policy: either failing fails the pass (the transaction rolls back, rows stay unpublished); both settled first, so no statement runs on a finished transaction.
    if (sent.status === "rejected") throw sent.reason;
    if (claimed.status === "rejected") throw claimed.reason;
    const poison = sent.value;
    if (poison.length > 0) {
      moved.push(...(await setAsidePoison(tx, poison, current, deps.log)));
      const poisonIds = new Set(poison.map((p) => p.id));
      toMark = current.filter((r) => !poisonIds.has(r.id)).map((r) => r.id);
    } else {
      toMark = current.map((r) => r.id);
    }
    count += current.length;
    current = claimed.value;
  }
  if (toMark.length > 0) await markPublished(tx, toMark);
  return { count, moved };
}

/**
 * Claims the next batch: first the shard locks (lockNewShards), then, in a statement of its own
 * (markPublishedAndClaim, whose comment says why the order matters), the rows. That statement marks
 * `markIds` published (rows at or below `afterId`) and returns up to `limit` unpublished rows in id
 * order: of the shards this pass held before, the rows above `afterId`; of the shards it has just
 * taken, every row from the lowest. `limit` 0 only marks; so does a pass that holds no shard.
 */
async function claimBatch(tx: SqlTx, markIds: bigint[], afterId: bigint, limit: number, held: Set<number>): Promise<OutboxRow[]> {
  const heldBefore = [...held];
  const taken = limit > 0 ? await lockNewShards(tx, afterId, limit, held) : [];
  if (limit === 0 || held.size === 0) {
    if (markIds.length > 0) await markPublished(tx, markIds);
    return [];
  }
  return markPublishedAndClaim(tx, { markIds, heldBefore, afterId, taken, limit });
}

/**
 * Takes the shard locks of the shards among the next `window` unpublished rows above `afterId` that
 * no other instance holds (lockShardsOfNextRows), adds them to `held` and returns the ones this
 * transaction did not hold before.
 */
async function lockNewShards(tx: SqlTx, afterId: bigint, window: number, held: Set<number>): Promise<number[]> {
  const taken = (await lockShardsOfNextRows(tx, afterId, window)).filter((shard) => !held.has(shard));
  for (const shard of taken) held.add(shard);
  return taken;
}

/** Moves the rows the bus refused (of the batch `sent`) to `dead_letters` in the pass's transaction, logging each. */
async function setAsidePoison(tx: SqlTx, poison: PoisonRow[], sent: OutboxRow[], log: Logger): Promise<PassResult["moved"]> {
  const moved = await moveOutboxRowsToDeadLetters(tx, poison);
  for (const p of poison) {
    const row = sent.find((r) => r.id === p.id)!;
    log.error(
      { outboxId: String(p.id), topic: row.topic, key: row.key, bytes: row.payload.length, code: p.code },
      "outbox row refused by the bus; moved to dead_letters",
    );
  }
  return moved;
}

/** Publishes one batch (grouped by topic, so one topic's order is the id order); returns the refused rows. */
async function publishBatch(bus: EventBus, rows: OutboxRow[], published: PublishedCounter | undefined): Promise<PoisonRow[]> {
  const byTopic = new Map<string, OutboxRow[]>();
  for (const row of rows) {
    const list = byTopic.get(row.topic);
    if (list) list.push(row);
    else byTopic.set(row.topic, [row]);
  }
  const poison: PoisonRow[] = [];
  for (const [topic, topicRows] of byTopic) poison.push(...(await publishIsolating(bus, topic, topicRows, published)));
  return poison;
}

/**
 * Publishes `rows` (one topic, id order) and returns the rows the bus refused.
 * On a refusal it bisects: the left half, then the right half, so the order holds;
 * a single refused row is poison. Retryable errors propagate (the pass rolls back).
 */
async function publishIsolating(bus: EventBus, topic: string, rows: OutboxRow[], published: PublishedCounter | undefined): Promise<PoisonRow[]> {
  try {
    await bus.publish(
      topic,
      rows.map((r) => ({ key: r.key, value: r.payload })),
    );
    published?.inc({ topic }, rows.length);
    return [];
  } catch (error) {
    if (!(error instanceof RejectedMessagesError)) throw error;
    // Failure policy: the bus refuses these messages for what they are; find the refused rows by bisection and set them aside.
    if (rows.length === 1) return [{ id: rows[0]!.id, code: error.code, reason: error.message }];
    const middle = Math.ceil(rows.length / 2);
    const left = await publishIsolating(bus, topic, rows.slice(0, middle), published);
    const right = await publishIsolating(bus, topic, rows.slice(middle), published);
    return [...left, ...right];
  }
}

type PublishedCounter = Counter<"topic">;

/** The relay's metrics in `registry`: rows published by topic, dead letters, and the lag gauges (read when scraped). */
function createRelayMetrics(registry: Registry, prisma: PrismaClient) {
  const published: PublishedCounter = new Counter({
    name: "relay_published_total",
    help: "Outbox rows published to the bus.",
    labelNames: ["topic"],
    registers: [registry],
  });
  const deadLetters = createDeadLetterCounter(registry);
  new Gauge({
    name: "relay_lag_rows",
    help: "Outbox rows not yet published.",
    registers: [registry],
    async collect() {
      this.set(await countUnpublished(prisma));
    },
  });
  new Gauge({
    name: "relay_lag_seconds",
    help: "Age of the oldest unpublished outbox row, in seconds (0 when none).",
    registers: [registry],
    async collect() {
      this.set(await oldestUnpublishedAgeSeconds(prisma));
    },
  });
  return { published, deadLetters };
}

/**
 * A short description of a pass failure for the readiness reason: the innermost
 * cause's error type or code (kafkajs wraps the broker's error) and message.
 * Bus and database error texts carry no secrets.
 */
function describeError(error: unknown): string {
  let e = error as { name?: string; message?: string; type?: string; code?: string; cause?: unknown };
  for (let depth = 0; e.cause instanceof Error && depth < 5; depth++) e = e.cause as typeof e;
  const kind = e.type ?? e.code ?? e.name ?? "Error";
  return `${kind}: ${String(e.message ?? error)}`.slice(0, MAX_ERROR_CHARS);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
