import { Prisma } from "../../../../gen/prisma/client.js";
import type { SqlTx } from "./executor.js";

/**
 * The planner settings that keep a statement index-led whatever the statistics say: no sequential scan, no bitmap
 * scan, no sort (incremental sorts included: a walk of another index in part of the order, sorted in groups, read the
 * owner alerts' whole waiting backlog for one owner's few). A statement whose bound rests on walking an index in order (`ORDER BY <index key> LIMIT n`) reads n
 * entries only when the plan is that walk; with stale or skewed statistics the planner may instead read every matching
 * row and sort them (a bitmap or sequential scan under a top-N sort), which is exactly the unbounded read. These
 * settings make the walk the only plan left (a disabled path is still used when nothing else can run, so a statement
 * without a usable index still runs).
 *
 * PostgreSQL plans a statement before it runs, so a statement cannot fence itself: fenceIndexLedPlans runs just before
 * the fenced statement in the same transaction (set_config's third argument: local to the transaction) and returns
 * the settings it replaced; the fenced statement puts them back as it runs (restorePlannerCte), so the statements
 * after it plan as usual. The test helper test/helpers/rows-read.ts replays a fence before every later statement it
 * measures (it finds it by the marker comment).
 */
export interface PlannerSettings {
  seqscan: string;
  bitmapscan: string;
  sort: string;
  incrementalSort: string;
}

/** The fence's statement: the settings before (read first, in a subquery the planner keeps apart), then turned off. */
const FENCE_INDEX_LED_PLANS = Prisma.sql`
    SELECT /* planner-fence */ b.seqscan, b.bitmapscan, b.sort, b.incremental_sort AS "incrementalSort",
           set_config('enable_seqscan', 'off', true) AS seqscan_now, set_config('enable_bitmapscan', 'off', true) AS bitmapscan_now,
           set_config('enable_sort', 'off', true) AS sort_now, set_config('enable_incremental_sort', 'off', true) AS incremental_sort_now
    FROM (SELECT current_setting('enable_seqscan') AS seqscan, current_setting('enable_bitmapscan') AS bitmapscan,
                 current_setting('enable_sort') AS sort, current_setting('enable_incremental_sort') AS incremental_sort OFFSET 0) AS b`;

/** PostgreSQL's defaults: what a statement built without a fence restores (nothing changes). */
export const DEFAULT_PLANNER_SETTINGS: PlannerSettings = { seqscan: "on", bitmapscan: "on", sort: "on", incrementalSort: "on" };

/** Fences the transaction's next statement (one round trip); the settings it replaced, for restorePlannerCte. */
export async function fenceIndexLedPlans(tx: SqlTx): Promise<PlannerSettings> {
  const [row] = await tx.query<PlannerSettings>(FENCE_INDEX_LED_PLANS);
  return row ?? DEFAULT_PLANNER_SETTINGS;
}

/**
 * A MATERIALIZED CTE (named `planner_restored`) that puts `before` back as the statement holding it runs: the statement
 * must reference it (`CROSS JOIN planner_restored`) so it is evaluated. (Reading pg_settings' reset values here instead
 * cost about 1 ms a statement: the view lists every setting.)
 */
export function restorePlannerCte(before: PlannerSettings): Prisma.Sql {
  return Prisma.sql`planner_restored AS MATERIALIZED (
      SELECT set_config('enable_seqscan', ${before.seqscan}, true) AS seqscan, set_config('enable_bitmapscan', ${before.bitmapscan}, true) AS bitmapscan,
             set_config('enable_sort', ${before.sort}, true) AS sort, set_config('enable_incremental_sort', ${before.incrementalSort}, true) AS incremental_sort
    )`;
}

/**
 * A MATERIALIZED CTE (named `planner`) that fences the transaction's LATER statements (the one holding it is planned
 * already): sequential and bitmap scans off for the rest of the transaction, sort left on (those statements sort the
 * few rows an index gave them). For a transaction whose every later statement must read a partial index, never the
 * table's history (the relay's pass: services/relay/statements.ts). The statement must reference it (`FROM planner,
 * ...`) so it is evaluated; it costs no round trip of its own.
 */
export function fenceLaterStatementsCte(): Prisma.Sql {
  return Prisma.sql`planner AS MATERIALIZED (
        SELECT set_config('enable_seqscan', 'off', true) AS seqscan, set_config('enable_bitmapscan', 'off', true) AS bitmapscan
      )`;
}
