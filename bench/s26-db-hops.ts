/**
 * What one database round trip costs through each client path the vote -> callback hops use, one call at a
 * time with random gaps (idle): Prisma `$queryRaw` (what the consumer's insert and the relay's statements ran on
 * before the one executor), the executor's `runSql` (services/shared/adapters/sql/executor.ts), a Prisma interactive
 * transaction of one statement (the relay's pass: BEGIN, statements, COMMIT) and runSqlTransaction of one statement
 * (CastHeart's batch). The Prisma paths stay on Prisma on purpose: they measure Prisma itself.
 * Usage: DATABASE_URL=... npx tsx bench/s26-db-hops.ts [count]
 */
import { Prisma } from "../gen/prisma/client.js";
import { createPrisma } from "../services/shared/adapters/db.js";
import { runSql, runSqlTransaction } from "../services/shared/adapters/sql/executor.js";

const count = Number(process.argv[2] ?? 100);
const prisma = createPrisma(process.env.DATABASE_URL ?? "");
const one = Prisma.sql`SELECT 1 AS x`;
const paths: Record<string, () => Promise<unknown>> = {
  queryRaw: () => prisma.$queryRaw(one),
  runSql: () => runSql(prisma, one),
  prismaTx1: () => prisma.$transaction((tx) => tx.$queryRaw(one)),
  runSqlTx1: () => runSqlTransaction(prisma, (tx) => tx.query(one), { timeoutMs: 10_000 }),
};
const times: Record<string, number[]> = Object.fromEntries(Object.keys(paths).map((k) => [k, []]));
for (const f of Object.values(paths)) for (let i = 0; i < 20; i++) await f();
for (let i = 0; i < count; i++) {
  for (const [k, f] of Object.entries(paths)) {
    await new Promise((r) => setTimeout(r, 5 + Math.random() * 30));
    const t0 = performance.now();
    await f();
    times[k]!.push(performance.now() - t0);
  }
}
const q = (a: number[], p: number) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))]!;
console.log(JSON.stringify(Object.fromEntries(Object.entries(times).map(([k, v]) => [k, { p50: +q(v, 0.5).toFixed(2), p90: +q(v, 0.9).toFixed(2) }]))));
await prisma.$disconnect();
process.exit(0);
