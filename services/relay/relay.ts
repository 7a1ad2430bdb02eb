import { Gauge, Counter, type Registry } from "prom-client";
import { RejectedMessagesError, type EventBus } from "../shared/bus.js";
import type { PrismaClient } from "../shared/db.js";
import { createDeadLetterCounter, moveOutboxRowsToDeadLetters, type PoisonRow } from "../shared/dead-letters.js";
import type { Logger } from "../shared/log.js";

/** Advisory-lock namespace of the relay's per-shard locks (any constant unique to this use). */
const RELAY_LOCK_NAMESPACE = 7_100_101;
/** Default of RELAY_STUCK_AFTER_MS: readiness fails after this long without progress while rows wait. */
export const DEFAULT_RELAY_STUCK_AFTER_MS = 60_000;
/** Default of RELAY_BATCH_SIZE: rows claimed per transaction. */
export const DEFAULT_RELAY_BATCH_SIZE = 500;
/** Default of RELAY_POLL_INTERVAL_MS: sleep between polls when the outbox is drained. */
export const DEFAULT_RELAY_POLL_INTERVAL_MS = 25;
/** Longest last-error text quoted by the readiness check. */
const MAX_ERROR_CHARS = 300;

/** Settings of one relay instance. */
export interface RelayOptions {
  prisma: PrismaClient;
  bus: EventBus;
  log: Logger;
  /** Rows claimed per transaction. */
  batchSize?: number;
  /** Sleep between polls when the outbox is drained. */
  pollIntervalMs?: number;
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

interface OutboxRow {
  id: bigint;
  topic: string;
  key: string;
  payload: Uint8Array;
}

/** What one pass of the relay did: `count` rows handled, of which `deadLettered` were set aside. */
export type RelayPass = { kind: "published"; count: number; deadLettered: number } | { kind: "idle" };

/**
 * The outbox relay. Each pass, in one transaction, it takes the per-shard
 * advisory locks of the unpublished rows it sees (shards held by another
 * instance are skipped), publishes those rows in id order and marks them
 * published. It selects on `published_at IS NULL` rather than a cursor, so a
 * row that commits after a higher id was published is still picked up, and a
 * shard is published by one instance at a time, so one key stays in order.
 * Publishing happens before the commit: a crash in between republishes
 * (at least once); consumers dedupe.
 *
 * Poison isolation: when the bus refuses a batch for what its messages are
 * (RejectedMessagesError: too large, invalid record), the batch is bisected,
 * each half published in order, down to the single rows the bus refuses; those
 * are moved to `dead_letters` in the same transaction that marks the rest
 * published, so one bad row never holds back the other servers' events. Any
 * other error (broker down) rolls the pass back and is retried, never dead-lettered.
 */
export function createRelay(opts: RelayOptions) {
  const batchSize = opts.batchSize ?? DEFAULT_RELAY_BATCH_SIZE;
  const pollIntervalMs = opts.pollIntervalMs ?? DEFAULT_RELAY_POLL_INTERVAL_MS;
  const stuckAfterMs = opts.stuckAfterMs ?? DEFAULT_RELAY_STUCK_AFTER_MS;
  const nowMs = opts.nowMs ?? Date.now;
  const { prisma, bus, log } = opts;
  let running = false;
  /** When a pass last succeeded (published, set aside or found nothing to do). */
  let lastProgressAt = nowMs();
  let lastError: string | undefined;
  let loop: Promise<void> | undefined;
  let wake: (() => void) | undefined;

  const published = opts.registry
    ? new Counter({ name: "relay_published_total", help: "Outbox rows published to the bus.", labelNames: ["topic"], registers: [opts.registry] })
    : undefined;
  const deadLetters = opts.registry ? createDeadLetterCounter(opts.registry) : undefined;
  if (opts.registry) {
    new Gauge({
      name: "relay_lag_rows",
      help: "Outbox rows not yet published.",
      registers: [opts.registry],
      async collect() {
        const [row] = await prisma.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM outbox WHERE published_at IS NULL`;
        this.set(Number(row?.n ?? 0));
      },
    });
    new Gauge({
      name: "relay_lag_seconds",
      help: "Age of the oldest unpublished outbox row, in seconds (0 when none).",
      registers: [opts.registry],
      async collect() {
        const [row] = await prisma.$queryRaw<{ age: number | null }[]>`
          SELECT EXTRACT(EPOCH FROM (now() - min(created_at)))::float8 AS age FROM outbox WHERE published_at IS NULL`;
        this.set(Math.max(0, row?.age ?? 0));
      },
    });
  }

  /**
   * Publishes `rows` (one topic, id order) and returns the rows the bus refused.
   * On a refusal it bisects: the left half, then the right half, so the order holds;
   * a single refused row is poison. Retryable errors propagate (the pass rolls back).
   */
  async function publishIsolating(topic: string, rows: OutboxRow[]): Promise<PoisonRow[]> {
    try {
      await bus.publish(topic, rows.map((r) => ({ key: r.key, value: r.payload })));
      published?.inc({ topic }, rows.length);
      return [];
    } catch (error) {
      if (!(error instanceof RejectedMessagesError)) throw error;
      // Failure policy: the bus refuses these messages for what they are; find the refused rows by bisection and set them aside.
      if (rows.length === 1) return [{ id: rows[0]!.id, code: error.code, reason: error.message }];
      const middle = Math.ceil(rows.length / 2);
      const left = await publishIsolating(topic, rows.slice(0, middle));
      const right = await publishIsolating(topic, rows.slice(middle));
      return [...left, ...right];
    }
  }

  /** Publishes one batch; returns what it did. */
  async function runOnce(): Promise<RelayPass> {
    const pass = await prisma.$transaction(
      async (tx) => {
        const rows = await tx.$queryRaw<OutboxRow[]>`
          SELECT id, topic, key, payload FROM outbox
          WHERE published_at IS NULL AND pg_try_advisory_xact_lock(${RELAY_LOCK_NAMESPACE}::int, shard)
          ORDER BY id
          LIMIT ${batchSize}`;
        if (rows.length === 0) return { kind: "idle" } as const;
        // Group rows by topic so one topic's order is the id order.
        const byTopic = new Map<string, OutboxRow[]>();
        for (const row of rows) {
          const list = byTopic.get(row.topic) ?? [];
          list.push(row);
          byTopic.set(row.topic, list);
        }
        const poison: PoisonRow[] = [];
        for (const [topic, topicRows] of byTopic) poison.push(...(await publishIsolating(topic, topicRows)));
        const poisonIds = new Set(poison.map((p) => p.id));
        const ids = rows.filter((r) => !poisonIds.has(r.id)).map((r) => r.id);
        if (ids.length > 0) await tx.$executeRaw`UPDATE outbox SET published_at = now() WHERE id = ANY(${ids}::bigint[])`;
        const moved = await moveOutboxRowsToDeadLetters(tx, poison);
        for (const p of poison) {
          const row = rows.find((r) => r.id === p.id)!;
          log.error({ outboxId: String(p.id), topic: row.topic, key: row.key, bytes: row.payload.length, code: p.code }, "outbox row refused by the bus; moved to dead_letters");
        }
        return { kind: "published", count: rows.length, moved } as const;
      },
      { timeout: 60_000, maxWait: 10_000 },
    );
    lastProgressAt = nowMs();
    lastError = undefined;
    if (pass.kind === "idle") return pass;
    // Counted after the commit, so a rolled-back pass counts nothing.
    for (const { topic, code } of pass.moved) deadLetters?.inc({ source: "relay", topic, code });
    return { kind: "published", count: pass.count, deadLettered: pass.moved.length };
  }

  /**
   * Readiness: throws (with the reason) when the relay is stuck, that is no pass has
   * succeeded for `stuckAfterMs` while the oldest unpublished row is older than that.
   * A relay with nothing to do, or one that keeps making progress through a backlog, is fine.
   */
  async function checkProgress(): Promise<void> {
    const sinceProgressMs = nowMs() - lastProgressAt;
    if (sinceProgressMs <= stuckAfterMs) return;
    const [row] = await prisma.$queryRaw<{ n: bigint; age: number | null }[]>`
      SELECT count(*) AS n, EXTRACT(EPOCH FROM (now() - min(created_at)))::float8 AS age FROM outbox WHERE published_at IS NULL`;
    const waiting = Number(row?.n ?? 0);
    const oldestMs = (row?.age ?? 0) * 1000;
    if (waiting === 0 || oldestMs <= stuckAfterMs) return;
    const error = lastError ? `; last error: ${lastError}` : running ? "; a pass is still running" : "; the relay is not running";
    throw new Error(`relay stuck: no progress for ${Math.round(sinceProgressMs / 1000)} s while ${waiting} outbox rows wait (oldest ${Math.round(oldestMs / 1000)} s)${error}`);
  }

  async function run(): Promise<void> {
    let failures = 0;
    while (running) {
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
        if (pass.count >= batchSize) continue;
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, pollIntervalMs);
      });
    }
  }

  return {
    runOnce,
    checkProgress,
    /** Starts the polling loop. */
    start() {
      if (running) return;
      running = true;
      loop = run();
    },
    /** Nudges the loop to poll now (the embedded mode calls it after a write). */
    poke() {
      wake?.();
    },
    /** Stops polling and waits for the in-flight pass to finish (commit or roll back). */
    async stop() {
      running = false;
      wake?.();
      await loop;
    },
  };
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
