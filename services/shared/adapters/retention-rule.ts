import { Prisma } from "../../../gen/prisma/client.js";
import type { PrismaClient } from "./db.js";
import { executeSql, runSql, type Sql } from "./sql/executor.js";

/**
 * One retention rule: which rows of one table age out, and how to remove (or erase the fields of) a batch
 * of them. The rule's SQL lives in the table's owner module (test/unit/table-owners.test.ts), which exports
 * a factory `(keepSeconds, ...) => RetentionRule`; the runner (services/retention/run-retention.ts) only
 * composes rules, and services/retention/retention-rules.ts lists them in one array. The shape lives in
 * services/shared so that owner modules there (dead-letters.ts) can build rules too.
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
  const [row] = await runSql<{ oldest: Date | null }>(db, read);
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
    removeBatch: (db, now, limit) => executeSql(db, spec.removeDue(cutoffOf(now, spec.keepSeconds), limit)),
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
