import { Prisma } from "../../../gen/prisma/client.js";
import type { PrismaClient } from "./db.js";
import { executeSql, planEachRun, runSql, type Sql } from "./sql/executor.js";

/**
 * One retention rule: which rows of one table age out, and how to remove (or erase the fields of) a batch
 * of them. The rule's SQL lives in the table's owner module (test/unit/table-owners.test.ts), which exports
 * a factory `(keepSeconds, ...) => RetentionRule`; the runner (services/retention/run-retention.ts) only
 * composes rules, and services/retention/retention-rules.ts lists them in one array. The shape lives in
 * services/shared so that owner modules there (dead-letters.ts) can build rules too.
 *
 * Every statement a rule runs is planned with its values each time (planEachRun, in statementRule, windowRule and
 * readOldestAge): which index holds the due rows depends on the cutoff, which a generic plan cannot see (forced to
 * one, the hearts' address erasure walked every erased heart's entry of the table's age key: 20,500 rows for a batch
 * of 100), and a batch runs rarely enough that planning it each time costs nothing that shows.
 */
export interface RetentionRule {
  /** Stable name: the `rule` label of the oldest-age gauge and the key of the pass's log line. */
  readonly name: string;
  /** The table the rule removes rows from (or erases fields in): the `table` label of the removed-rows counter. */
  readonly table: string;
  /**
   * Removes (or erases) at most `limit` rows that are past the rule's age limit at `now`, in ONE short
   * statement (its own implicit transaction); how many rows it removed. 0 means nothing is due: the runner
   * stops asking for this pass. Removing a row twice is impossible (a second call finds it gone), so a rule
   * is idempotent and safe to run beside another instance of itself.
   */
  removeBatch(db: PrismaClient, now: Date, limit: number): Promise<number>;
  /**
   * Age in seconds at `now` of the oldest row the rule governs (removed or not yet due), or null when the
   * table holds none: the gauge that shows whether retention keeps up (about the age limit when it does).
   * One index read (the index that starts at the age column), never a scan.
   */
  oldestAge(db: PrismaClient, now: Date): Promise<number | null>;
}

/** Seconds between `from` and `now`, never negative: the oldest-age gauge's value. */
export function ageSeconds(now: Date, from: Date): number {
  return Math.max(0, (now.getTime() - from.getTime()) / 1000);
}

/** The instant before which a row kept `keepSeconds` is past its age limit at `now`. */
export function cutoffOf(now: Date, keepSeconds: number): Date {
  return new Date(now.getTime() - keepSeconds * 1000);
}

/**
 * Runs a rule's oldest-row read (`read` returns one row with `oldest`, a timestamptz or NULL) and answers
 * its age at `now` in seconds, or null when the table holds no such row.
 */
export async function readOldestAge(db: PrismaClient, read: Sql, now: Date): Promise<number | null> {
  const [row] = await runSql<{ oldest: Date | null }>(db, planEachRun(read));
  return row?.oldest ? ageSeconds(now, row.oldest) : null;
}

/** What a rule whose batch is one statement gives (statementRule): its SQL, written in the table's owner module. */
export interface StatementRuleSpec {
  name: string;
  table: string;
  /** How long a row is kept (from the rule's age column). */
  keepSeconds: number;
  /** The statement that removes (or erases) at most `limit` rows whose age column is before `cut`; its command tag counts them. */
  removeDue(cut: Date, limit: number): Sql;
  /** The read of the oldest age-column value the rule governs, as column `oldest` (NULL when none). */
  oldest: Sql;
}

/** A RetentionRule whose batch is the one statement `spec.removeDue` builds. */
export function statementRule(spec: StatementRuleSpec): RetentionRule {
  return {
    name: spec.name,
    table: spec.table,
    removeBatch: (db, now, limit) => executeSql(db, planEachRun(spec.removeDue(cutoffOf(now, spec.keepSeconds), limit))),
    oldestAge: (db, now) => readOldestAge(db, spec.oldest, now),
  };
}

/** A window rule's cursor: the last row a window read, by (age column, id). */
export interface WindowCursor<Id> {
  at: Date;
  id: Id;
}

/**
 * The rows of `table` a retention batch takes: at most `limit` rows matching `due` whose age column (`column`) is before
 * `cut`, oldest first, read through the index on the column's age key (partial to `due` where the table has one), and
 * locked for the statement's writes; rows another writer holds are skipped (the next pass takes them), so a batch never
 * waits on a hot path. `columns` are what the statement needs of each (its primary key, and what else it deletes by).
 * The one form of this read: the batch rules compose it, each in its table's owner module.
 */
export function oldestDueRowsSql(q: { table: string; columns: Sql; due: Sql; column: Sql; cut: Date; limit: number }): Sql {
  return Prisma.sql`SELECT ${q.columns} FROM ${Prisma.raw(q.table)} WHERE ${q.due} AND ${ageKeySql(q.column)} < ${ageKeyOf(q.cut)}
    ORDER BY ${ageKeySql(q.column)} LIMIT ${q.limit}::int FOR UPDATE SKIP LOCKED`;
}

/**
 * A rule deleting the rows of `table` whose `column` (a timestamptz) is older than the age limit, oldest first, through
 * the index on the column's age key (ageKeySql; one per such table, in its migration). Built by the table's owner
 * module, which names its own table and primary key (`key`): the shape lives here once, the write stays with its owner.
 * Each batch reads at most `limit` entries of the age-key index and their rows, and deletes those; a row moved forward
 * meanwhile (its column rewritten) keeps itself by the DELETE's own condition, checked again on the row it waited for.
 */
export function ageKeyDeleteRule(spec: { name: string; table: string; key: Sql; column: Sql; keepSeconds: number; due?: Sql }): RetentionRule {
  const t = Prisma.raw(spec.table);
  // The rows the rule governs at all (the age-key index is partial to them where the table has rows that never age out).
  const due = spec.due ?? Prisma.sql`TRUE`;
  return statementRule({
    name: spec.name,
    table: spec.table,
    keepSeconds: spec.keepSeconds,
    // Bounded: at most `limit` entries of the age-key index and their rows.
    removeDue: (cut, limit) => Prisma.sql`DELETE FROM ${t} WHERE ${spec.column} < ${cut}::timestamptz AND ${due}
      AND (${spec.key}) IN (SELECT ${spec.key} FROM ${t}
        WHERE ${due} AND ${ageKeySql(spec.column)} < ${ageKeyOf(cut)} ORDER BY ${ageKeySql(spec.column)} LIMIT ${limit}::int)`,
    // One entry of the age-key index.
    oldest: Prisma.sql`SELECT ${oldestOfAgeKey(spec.column)} AS oldest FROM ${t} WHERE ${due}`,
  });
}

/** What a window rule gives (windowRule): its window statement and oldest-row read, written in the table's owner module. */
export interface WindowRuleSpec<Id> {
  name: string;
  table: string;
  /** How long a row is kept (from the rule's age column). */
  keepSeconds: number;
  /** The cursor before every row: where each cycle over the due rows starts. */
  start: WindowCursor<Id>;
  /**
   * ONE statement: reads the window of at most `limit` rows after `from` in (age column, id) order whose age column is
   * before `cut`, removes (or erases) the due ones among them, and answers one row: `removed`, `seen` (the window's
   * size), `last_at` and `last_id` (the window's last row; NULL when empty).
   */
  removeWindow(cut: Date, from: WindowCursor<Id>, limit: number): Sql;
  /** The read of the oldest age-column value the rule governs, as column `oldest` (NULL when none). */
  oldest: Sql;
}

/** Windows one removeBatch of a window rule reads at most, looking for one with due rows. */
const WINDOWS_PER_BATCH = 10;

/**
 * A RetentionRule for a table whose rows past the age limit may still have to stay (a pending delivery keeps them):
 * rows are read in (age column, id) order from a cursor the rule keeps between batches, a window of at most `limit`
 * rows per statement, so the rows that stay are stepped over, never read again by every batch; past the last row
 * before the cut the cursor starts over. A call reads at most WINDOWS_PER_BATCH windows and returns at the first that
 * removed rows (0: it reached the end, or read that many windows of rows that stay; the next pass goes on from there).
 */
export function windowRule<Id>(spec: WindowRuleSpec<Id>): RetentionRule {
  let after: WindowCursor<Id> | null = null;
  return {
    name: spec.name,
    table: spec.table,
    async removeBatch(db, now, limit) {
      const cut = cutoffOf(now, spec.keepSeconds);
      for (let window = 0; window < WINDOWS_PER_BATCH; window++) {
        const [row] = await runSql<{ removed: bigint; seen: bigint; last_at: Date | null; last_id: Id | null }>(
          db,
          planEachRun(spec.removeWindow(cut, after ?? spec.start, limit)),
        );
        const removed = Number(row?.removed ?? 0);
        const atEnd = Number(row?.seen ?? 0) < limit || row?.last_at == null || row.last_id == null;
        after = atEnd ? null : { at: row.last_at!, id: row.last_id! };
        if (removed > 0 || atEnd) return removed;
      }
      return 0;
    },
    oldestAge: (db, now) => readOldestAge(db, spec.oldest, now),
  };
}

/**
 * A retention rule's age key for `column` (a timestamptz): the column in UTC as a timestamp, the expression its
 * index is built on where a hot path reads the same table by a key and a recent time range
 * (migration 20261201400000_retention_age_keys). A plain (age column) index there is a trap: for a range the
 * statistics think small (a fresh histogram, a quiet hour) the planner takes it for the hot path's read, which then
 * reads every row of the window across all keys. An expression the hot paths never write cannot be chosen for them.
 * Compare with ageKeyOf(cutoff), order by it, and read the oldest with oldestOfAgeKey.
 */
export function ageKeySql(column: Sql): Sql {
  return Prisma.sql`(${column} AT TIME ZONE 'UTC')`;
}

/** The age key of an instant (the cutoff a rule compares the column's age key with). */
export function ageKeyOf(at: Date): Sql {
  return Prisma.sql`(${at}::timestamptz AT TIME ZONE 'UTC')`;
}

/** The oldest row's instant from the minimum of an age key (one entry of its index). */
export function oldestOfAgeKey(column: Sql): Sql {
  return Prisma.sql`(min(${ageKeySql(column)}) AT TIME ZONE 'UTC')`;
}
