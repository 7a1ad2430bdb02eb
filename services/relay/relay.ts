import { Gauge, Counter, type Registry } from "prom-client";
import type { EventBus } from "../shared/bus.js";
import type { PrismaClient } from "../shared/db.js";
import type { Logger } from "../shared/log.js";

/** Advisory-lock namespace of the relay's per-shard locks (any constant unique to this use). */
const RELAY_LOCK_NAMESPACE = 7_100_101;

/** Settings of one relay instance. */
export interface RelayOptions {
  prisma: PrismaClient;
  bus: EventBus;
  log: Logger;
  /** Rows claimed per transaction. */
  batchSize?: number;
  /** Sleep between polls when the outbox is drained. */
  pollIntervalMs?: number;
  /** Registry for the lag metrics; none when omitted. */
  registry?: Registry;
}

interface OutboxRow {
  id: bigint;
  topic: string;
  key: string;
  payload: Uint8Array;
}

/** What one pass of the relay did. */
export type RelayPass = { kind: "published"; count: number } | { kind: "idle" };

/**
 * The outbox relay. Each pass, in one transaction, it takes the per-shard
 * advisory locks of the unpublished rows it sees (shards held by another
 * instance are skipped), publishes those rows in id order and marks them
 * published. It selects on `published_at IS NULL` rather than a cursor, so a
 * row that commits after a higher id was published is still picked up, and a
 * shard is published by one instance at a time, so one key stays in order.
 * Publishing happens before the commit: a crash in between republishes
 * (at least once); consumers dedupe.
 */
export function createRelay(opts: RelayOptions) {
  const batchSize = opts.batchSize ?? 500;
  const pollIntervalMs = opts.pollIntervalMs ?? 25;
  const { prisma, bus, log } = opts;
  let running = false;
  let loop: Promise<void> | undefined;
  let wake: (() => void) | undefined;

  const published = opts.registry
    ? new Counter({ name: "relay_published_total", help: "Outbox rows published to the bus.", labelNames: ["topic"], registers: [opts.registry] })
    : undefined;
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

  /** Publishes one batch; returns what it did. */
  async function runOnce(): Promise<RelayPass> {
    return prisma.$transaction(
      async (tx) => {
        const rows = await tx.$queryRaw<OutboxRow[]>`
          SELECT id, topic, key, payload FROM outbox
          WHERE published_at IS NULL AND pg_try_advisory_xact_lock(${RELAY_LOCK_NAMESPACE}::int, shard)
          ORDER BY id
          LIMIT ${batchSize}`;
        if (rows.length === 0) return { kind: "idle" } as const;
        // Group consecutive rows by topic so one topic's order is the id order.
        const byTopic = new Map<string, { key: string; value: Uint8Array }[]>();
        for (const row of rows) {
          const list = byTopic.get(row.topic) ?? [];
          list.push({ key: row.key, value: row.payload });
          byTopic.set(row.topic, list);
        }
        for (const [topic, messages] of byTopic) {
          await bus.publish(topic, messages);
          published?.inc({ topic }, messages.length);
        }
        const ids = rows.map((r) => r.id);
        await tx.$executeRaw`UPDATE outbox SET published_at = now() WHERE id = ANY(${ids}::bigint[])`;
        return { kind: "published", count: rows.length } as const;
      },
      { timeout: 60_000, maxWait: 10_000 },
    );
  }

  async function run(): Promise<void> {
    let failures = 0;
    while (running) {
      let pass: RelayPass;
      try {
        pass = await runOnce();
        failures = 0;
      } catch (error) {
        // Failure policy: the transaction rolled back, rows stay unpublished; retry with backoff.
        failures++;
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

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
