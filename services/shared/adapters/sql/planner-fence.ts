import { Prisma } from "../../../../gen/prisma/client.js";

/**
 * The planner settings that keep a statement index-led whatever the statistics say: no sequential scan, no bitmap
 * scan, no sort. A statement whose bound rests on walking an index in order (`ORDER BY <index key> LIMIT n`) reads n
 * entries only when the plan is that walk; with stale or skewed statistics the planner may instead read every matching
 * row and sort them (a bitmap or sequential scan under a top-N sort), which is exactly the unbounded read. These
 * settings make the walk the only plan left (a disabled path is still used when nothing else can run, so a statement
 * without a usable index still runs).
 *
 * PostgreSQL plans a statement before it runs, so a statement cannot fence itself: FENCE_INDEX_LED_PLANS runs just
 * before the fenced statement in the same transaction (set_config's third argument: local to the transaction), and
 * the fenced statement lifts the fence as it runs (restoreDefaultPlansCte), so the statements after it plan as usual.
 * The test helper test/helpers/rows-read.ts replays a fence before every later statement it measures.
 */
export const FENCE_INDEX_LED_PLANS = Prisma.sql`
    SELECT /* planner-fence */ set_config('enable_seqscan', 'off', true) AS seqscan, set_config('enable_bitmapscan', 'off', true) AS bitmapscan,
           set_config('enable_sort', 'off', true) AS sort`;

/**
 * A MATERIALIZED CTE (named `planner_restored`) that puts the three settings back to the session's own values as the
 * statement holding it runs: the statement must reference it (`CROSS JOIN planner_restored`) so it is evaluated.
 */
export const restoreDefaultPlansCte = Prisma.sql`planner_restored AS MATERIALIZED (
      SELECT set_config('enable_seqscan', (SELECT reset_val FROM pg_settings WHERE name = 'enable_seqscan'), true) AS seqscan,
             set_config('enable_bitmapscan', (SELECT reset_val FROM pg_settings WHERE name = 'enable_bitmapscan'), true) AS bitmapscan,
             set_config('enable_sort', (SELECT reset_val FROM pg_settings WHERE name = 'enable_sort'), true) AS sort
    )`;
