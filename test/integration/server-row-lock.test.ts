/**
 * lockServer (services/servers/secret-store.ts): the server row lock that serialises one server's secret and
 * settings changes, taken inside a model-API transaction without raw SQL. While a transaction holds it, every
 * other locker of that server must wait (probed here with NOWAIT, so nothing waits on a clock); it ends with the
 * transaction; an unknown server, or an id that is not a uuid, is unknown_server.
 */
import anyTest, { type TestFn } from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { lockServer } from "../../services/servers/secret-store.js";
import { DomainError } from "../../services/shared/rpc/errors.js";
import { runSql } from "../../services/shared/adapters/sql/executor.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";

const test = anyTest as TestFn<{ db: TestDatabase }>;

/** SQLSTATE lock_not_available: a NOWAIT lock request met a lock held by another transaction. */
const PG_LOCK_NOT_AVAILABLE = "55P03";

test.before(async (t) => {
  t.context = { db: await createTestDatabase({ maxConnections: 3 }) };
});
test.after.always(async (t) => {
  await t.context.db?.drop();
});

/** Whether another connection could take the row lock lockServer takes, without waiting: "free" or "held". */
async function lockerSees(db: TestDatabase, serverId: string): Promise<"free" | "held"> {
  try {
    await runSql(db.prisma, Prisma.sql`SELECT 1 FROM servers WHERE id = ${serverId}::uuid FOR NO KEY UPDATE NOWAIT`);
    return "free";
  } catch (error) {
    // Failure policy: only "lock not available" means held; anything else fails the test.
    if ((error as { code?: unknown }).code === PG_LOCK_NOT_AVAILABLE) return "held";
    throw error;
  }
}

test("lockServer holds the server row for the rest of its transaction: another locker of that server must wait, and may lock it after the commit", async (t) => {
  const { db } = t.context;
  const server = await db.prisma.server.create({ data: { name: "locked" } });
  const other = await db.prisma.server.create({ data: { name: "other" } });
  const seen = await db.prisma.$transaction(async (tx) => {
    await lockServer(tx, server.id);
    return { same: await lockerSees(db, server.id), other: await lockerSees(db, other.id) };
  });
  t.deepEqual(seen, { same: "held", other: "free" }, "only the locked server's row is held");
  t.is(await lockerSees(db, server.id), "free", "the lock ends with the transaction");
  t.like(await db.prisma.server.findUniqueOrThrow({ where: { id: server.id } }), { id: server.id, name: "locked" }, "the row is unchanged");
});

test("lockServer of an unknown server, or of an id that is not a uuid, is unknown_server and locks nothing", async (t) => {
  const { db } = t.context;
  for (const id of ["00000000-0000-4000-8000-000000000000", "not-a-uuid"]) {
    const error = await t.throwsAsync(db.prisma.$transaction((tx) => lockServer(tx, id)));
    t.true(error instanceof DomainError && error.kind === "unknown_server", id);
  }
});
