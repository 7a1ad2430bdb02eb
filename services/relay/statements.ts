import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import type { SqlTx } from "../shared/adapters/sql/executor.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { fenceLaterStatementsCte } from "../shared/adapters/sql/planner-fence.js";
import { statementRule, type RetentionRule } from "../shared/adapters/retention-rule.js";

/**
 * Every SQL statement of the relay, one named function each, so relay.ts reads as steps. Within a
 * pass the order is: lockShardsOfNextRows, then markPublishedAndClaim (repeatedly, pipelined with
 * the sends), then markPublished for the last batch; refused rows go to `dead_letters` through
 * moveOutboxRowsToDeadLetters (services/shared/adapters/dead-letters.ts, shared with the delivery consumer).
 * The lag reads serve the metrics and the readiness check, outside any pass.
 *
 * Every read selects on `published_at IS NULL` (the partial index of unpublished ids), never on a
 * cursor kept between passes, so a row that commits after a higher id was published is not skipped.
 */

/** Advisory-lock namespace of the relay's per-shard locks (any constant unique to this use). */
export const RELAY_LOCK_NAMESPACE = 7_100_101;

/** An outbox row as a claim returns it: what is sent to the bus. */
export interface OutboxRow {
  id: bigint;
  topic: string;
  key: string;
  payload: Uint8Array;
}

/**
 * The shard-lock statement: takes, for the transaction, the advisory locks of the shards among the
 * next `window` unpublished rows above `afterId` that no other instance holds
 * (`pg_try_advisory_xact_lock`, so a shard held elsewhere is skipped, never waited for), and returns
 * the shards it holds. Locks are re-entrant: a shard this transaction holds already is returned again.
 *
 * It also sets the transaction's planner settings (the materialized `planner` CTE of fenceLaterStatementsCte, evaluated whenever
 * a shard is locked, so before any claim): the claims must read the partial index of unpublished ids,
 * never the published history, because right after a burst stale statistics can make a sequential
 * scan and sort of the whole table look cheaper (figures: bench/results/ANALYSIS.md, "Figures moved
 * out of code comments"). The settings ride on this statement rather than one of their own: one
 * round trip less per pass.
 */
export async function lockShardsOfNextRows(tx: SqlTx, afterId: bigint, window: number): Promise<number[]> {
  const locked = await tx.query<{ shard: number }>(Prisma.sql`
      WITH ${fenceLaterStatementsCte()}
      SELECT shard FROM planner, (
        SELECT DISTINCT shard FROM (
          SELECT shard FROM outbox WHERE published_at IS NULL AND id > ${afterId}::bigint ORDER BY id LIMIT ${window}::int
        ) AS next_rows
      ) AS shards
      WHERE pg_try_advisory_xact_lock(${RELAY_LOCK_NAMESPACE}::int, shard)`);
  return locked.map((r) => r.shard);
}

/** What markPublishedAndClaim marks and reads. */
export interface ClaimAfterLocks {
  /** Sent rows of the previous batch, marked published by the same statement. */
  markIds: bigint[];
  /** Shards the pass held before this claim's locks: read above `afterId` only. */
  heldBefore: number[];
  /** The last id the pass has claimed: rows of `heldBefore` at or below it are in flight, marked, or committed late (next pass). */
  afterId: bigint;
  /** Shards the pass has just taken: read from their lowest unpublished row. */
  taken: number[];
  /** Most rows returned (at least 1). */
  limit: number;
}

/**
 * The claim-after-locks read, a statement of its own that runs after lockShardsOfNextRows: marks
 * `markIds` published and returns up to `limit` unpublished rows in id order, of the shards held
 * before above `afterId` and of the shards just taken from their lowest row, never a row it marks.
 *
 * Why a statement of its own, after the locks: its snapshot is taken after the locks were granted,
 * so every pass that held one of those shards before has committed and its rows read as published
 * (a lock taken inside the reading statement can be granted after that statement's snapshot, and the
 * other instance's just-published rows would be published again). Why the just-taken shards read
 * from their lowest row: a shard skipped earlier in the pass because another instance held it must
 * never start above the rows that instance left.
 *
 * Why never a row it marks: the read does not see its own statement's UPDATE, so the rows being
 * marked still read as unpublished. They lie at or below `afterId`, except after a batch drawn from a
 * just-taken shard's old rows: that batch ends below the batch before it (the one being marked), and
 * without the exclusion that batch's rows above `afterId` were claimed and published a second time
 * (the "published twice" of issue 28; ARCHITECTURE.md, "The relay's claim"). Only those ids are sent
 * to the exclusion (`markedAboveCursor`), so it costs nothing while the cursor only rises.
 */
export async function markPublishedAndClaim(tx: SqlTx, c: ClaimAfterLocks): Promise<OutboxRow[]> {
  const markedAboveCursor = c.markIds.filter((id) => id > c.afterId);
  return tx.query<OutboxRow>(Prisma.sql`
      WITH marked AS (UPDATE outbox SET published_at = now() WHERE id = ANY(${c.markIds}::bigint[]))
      SELECT id, topic, key, payload FROM outbox
      WHERE published_at IS NULL
        AND ((shard = ANY(${c.heldBefore}::int[]) AND id > ${c.afterId}::bigint) OR shard = ANY(${c.taken}::int[]))
        AND id <> ALL(${markedAboveCursor}::bigint[])
      ORDER BY id
      LIMIT ${c.limit}::int`);
}

/** Marks sent rows published (in the pass's transaction: a rolled-back pass leaves them unpublished). */
export async function markPublished(tx: SqlTx, ids: bigint[]): Promise<void> {
  await tx.query(Prisma.sql`UPDATE outbox SET published_at = now() WHERE id = ANY(${ids}::bigint[])`);
}

/** Lag: how many outbox rows wait to be published (the `relay_lag_rows` gauge). */
export async function countUnpublished(prisma: PrismaClient): Promise<number> {
  const [row] = await runSql<{ n: bigint }>(prisma, Prisma.sql`SELECT count(*) AS n FROM outbox WHERE published_at IS NULL`);
  return Number(row?.n ?? 0);
}

/** Lag: the age of the oldest unpublished outbox row in seconds, 0 when none (the `relay_lag_seconds` gauge). */
export async function oldestUnpublishedAgeSeconds(prisma: PrismaClient): Promise<number> {
  const [row] = await runSql<{ age: number | null }>(
    prisma,
    Prisma.sql`SELECT EXTRACT(EPOCH FROM (now() - min(created_at)))::float8 AS age FROM outbox WHERE published_at IS NULL`,
  );
  return Math.max(0, row?.age ?? 0);
}

/** Lag, both at once (the readiness check): rows waiting, and the oldest one's age in milliseconds (0 when none). */
export async function readUnpublishedLag(prisma: PrismaClient): Promise<{ waiting: number; oldestMs: number }> {
  const [row] = await runSql<{ n: bigint; age: number | null }>(
    prisma,
    Prisma.sql`SELECT count(*) AS n, EXTRACT(EPOCH FROM (now() - min(created_at)))::float8 AS age FROM outbox WHERE published_at IS NULL`,
  );
  return { waiting: Number(row?.n ?? 0), oldestMs: (row?.age ?? 0) * 1000 };
}

/**
 * Retention of published outbox rows (services/retention): a row published longer than `keepSeconds` ago is
 * removed. Only published rows are ever read or removed (`published_at IS NOT NULL`, through the partial index
 * on published_at), so the relay's claim, which reads unpublished rows only, is unchanged: a row the relay has
 * marked in a pass not yet committed reads as unpublished here and stays.
 */
export function publishedOutboxRetention(keepSeconds: number): RetentionRule {
  return statementRule({
    name: "published_outbox",
    table: "outbox",
    keepSeconds,
    // Reads at most `limit` entries of the published_at index and their rows; deletes those.
    removeDue: (cut, limit) => Prisma.sql`DELETE FROM outbox WHERE published_at < ${cut}::timestamptz AND id IN (
      SELECT id FROM outbox WHERE published_at IS NOT NULL AND published_at < ${cut}::timestamptz ORDER BY published_at LIMIT ${limit}::int)`,
    // One entry of the published_at index.
    oldest: Prisma.sql`SELECT min(published_at) AS oldest FROM outbox WHERE published_at IS NOT NULL`,
  });
}
