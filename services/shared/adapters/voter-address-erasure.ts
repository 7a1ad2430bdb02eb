import { Prisma } from "../../../gen/prisma/client.js";
import { cutoffOf, readOldestAge, type RetentionRule } from "./retention-rule.js";
import { executeSql, type Sql } from "./sql/executor.js";

/**
 * "This row still holds a voter's address": the predicate of the partial indexes hearts_address_held_idx and
 * referral_clicks_address_held_idx (migration 20261201200000_voter_address_erasure), written exactly so, so that the
 * planner reads those indexes. An erased row (ip, subnet and user_agent all NULL) leaves them.
 */
export const ADDRESS_HELD = Prisma.sql`(ip IS NOT NULL OR subnet IS NOT NULL OR user_agent IS NOT NULL)`;

/**
 * The retention rule that erases voters' addresses from one table (hearts or referral_clicks, issue 30): rows made
 * more than `keepSeconds` ago lose their IP, subnet and user agent. The table's owner module passes the erasing
 * statement (`erase(cutoff, limit)`, its only write), so the write stays there (test/unit/table-owners.test.ts);
 * this builds the rule around it. The oldest-age gauge reads one entry of the table's partial index.
 */
export function addressErasureRule(opts: {
  name: string;
  table: "hearts" | "referral_clicks";
  keepSeconds: number;
  erase: (cutoff: Date, limit: number) => Sql;
}): RetentionRule {
  const table = Prisma.raw(opts.table);
  return {
    name: opts.name,
    table: opts.table,
    removeBatch: (db, now, limit) => executeSql(db, opts.erase(cutoffOf(now, opts.keepSeconds), limit)),
    oldestAge: (db, now) => readOldestAge(db, Prisma.sql`SELECT min(created_at) AS oldest FROM ${table} WHERE ${ADDRESS_HELD}`, now),
  };
}
