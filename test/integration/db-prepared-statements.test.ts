/**
 * services/shared/adapters/db.ts names every SQL text Prisma sends (bounded), so node-postgres prepares
 * it once per connection and PostgreSQL parses it once instead of on every execution.
 */
import test from "ava";
import { createStatementNamer } from "../../services/shared/adapters/db.js";
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
