/**
 * services/shared/adapters/db.ts names every SQL text Prisma sends (bounded), so node-postgres prepares
 * it once per connection and PostgreSQL parses it once instead of on every execution.
 */
import test from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { createStatementNamer } from "../../services/shared/adapters/db.js";
import { planEachRun, runSql } from "../../services/shared/adapters/sql/executor.js";
import { createTestDatabase } from "../../scripts/harness/db.js";

test("a statement Prisma sends is a named prepared statement of its connection, reused on the next execution", async (t) => {
  const db = await createTestDatabase({ maxConnections: 1 });
  t.teardown(() => db.drop());
  const prepared = await db.prisma.$transaction(async (tx) => {
    for (let i = 0; i < 2; i++) await tx.$queryRaw`SELECT ${i}::int AS prepared_probe`;
    return tx.$queryRaw<Array<{ name: string; statement: string }>>`SELECT name, statement FROM pg_prepared_statements`;
  });
  const probes = prepared.filter((p) => p.statement.includes("prepared_probe"));
  t.is(probes.length, 1, "one prepared statement for the text, executed twice");
  t.regex(probes[0]?.name ?? "", /^p\d+$/);
});

test("statement names: one per distinct text, stable; past the bound a text runs unnamed", (t) => {
  const name = createStatementNamer(2);
  t.is(name({ sql: "SELECT 1" }), "p1");
  t.is(name({ sql: "SELECT 2" }), "p2");
  t.is(name({ sql: "SELECT 1" }), "p1");
  t.is(name({ sql: "SELECT 3" }), undefined);
});

test("a statement planned each run (planEachRun) is never prepared: run more than five times, it never leaves a prepared statement behind", async (t) => {
  const name = createStatementNamer();
  t.is(name({ sql: planEachRun(Prisma.sql`SELECT 1`).text }), undefined);
  t.is(name({ sql: "SELECT 1" }), "p1", "an unmarked text is named as before");

  const db = await createTestDatabase({ maxConnections: 1 });
  t.teardown(() => db.drop());
  for (let i = 0; i < 7; i++) await runSql(db.prisma, planEachRun(Prisma.sql`SELECT ${i}::int AS each_run_probe`));
  for (let i = 0; i < 7; i++) await runSql(db.prisma, Prisma.sql`SELECT ${i}::int AS named_probe`);
  const prepared = await runSql<{ statement: string }>(db.prisma, Prisma.sql`SELECT statement FROM pg_prepared_statements`);
  t.false(
    prepared.some((p) => p.statement.includes("each_run_probe")),
    "the marked statement ran unnamed (planned with its values each time)",
  );
  t.true(
    prepared.some((p) => p.statement.includes("named_probe")),
    "an unmarked one on the same connection is prepared",
  );
});
