import { Prisma } from "../../../../gen/prisma/client.js";

/**
 * THE ranking rule, wherever something is ranked by a count (GetRanking's servers by counted hearts in a month, a
 * closed period's voters by counted votes): most first, and equal counts share a rank, the next rank skipping the
 * shared places (1, 2, 2, 4: SQL RANK()). The order of the rows within a shared rank is the caller's, stated beside it.
 */
export function rankByCountSql(count: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`rank() OVER (ORDER BY ${count} DESC)`;
}
