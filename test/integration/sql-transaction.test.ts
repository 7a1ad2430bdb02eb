/**
 * runSqlTransaction (services/shared/adapters/sql/executor.ts), the relay's pass transaction on node-postgres: it commits
 * when the body resolves, rolls back when it throws, and a transaction left open past its timeout is
 * ended (rolled back) with its connection, never committed; the pool stays usable after each. A transaction
 * that gets no connection within its maxWaitMs, or outlives its timeout, fails with TransactionUnavailable
 * (what ApplyEvent answers `resource_exhausted`).
 */
import anyTest, { type TestFn } from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { isUniqueViolation } from "../../services/shared/values/db-errors.js";
import { isTransactionUnavailable, runSqlTransaction, TransactionUnavailable } from "../../services/shared/adapters/sql/executor.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { eventually } from "../helpers/eventually.js";

const test = anyTest as TestFn<{ db: TestDatabase }>;

test.before(async (t) => {
  t.context = { db: await createTestDatabase({ maxConnections: 2 }) };
  await t.context.db.prisma.$executeRawUnsafe("CREATE TABLE tx_probe (label text PRIMARY KEY)");
});
test.after.always(async (t) => {
  await t.context.db?.drop();
});

async function labels(db: TestDatabase): Promise<string[]> {
  const rows = await db.prisma.$queryRaw<{ label: string }[]>`SELECT label FROM tx_probe ORDER BY label`;
  return rows.map((r) => r.label);
}

test.serial("commits what the body wrote when it resolves, and rolls all of it back when it throws", async (t) => {
  const { db } = t.context;
  const value = await runSqlTransaction(
    db.prisma,
    async (tx) => {
      await tx.query(Prisma.sql`INSERT INTO tx_probe VALUES (${"kept-1"}), (${"kept-2"})`);
      const [row] = await tx.query<{ n: bigint }>(Prisma.sql`SELECT count(*) AS n FROM tx_probe`);
      return row?.n;
    },
    { timeoutMs: 10_000 },
  );
  t.is(value, 2n, "the body reads its own writes");
  await t.throwsAsync(
    runSqlTransaction(
      db.prisma,
      async (tx) => {
        await tx.query(Prisma.sql`INSERT INTO tx_probe VALUES (${"gone"})`);
        throw new Error("the body failed");
      },
      { timeoutMs: 10_000 },
    ),
    { message: "the body failed" },
  );
  t.deepEqual(await labels(db), ["kept-1", "kept-2"]);
});

test.serial(
  "a body that catches a failed statement's error and resolves is not told it committed: the transaction was aborted, nothing of it stays",
  async (t) => {
    const { db } = t.context;
    await t.throwsAsync(
      runSqlTransaction(
        db.prisma,
        async (tx) => {
          await tx.query(Prisma.sql`INSERT INTO tx_probe VALUES (${"aborted-1"})`);
          // Failure policy (of this test's body): the duplicate key's error is swallowed, as careless code might.
          await tx.query(Prisma.sql`INSERT INTO tx_probe VALUES (${"aborted-1"})`).catch(() => undefined);
          return "resolved";
        },
        { timeoutMs: 10_000 },
      ),
      { message: /rolled back at COMMIT \(ROLLBACK\)/ },
    );
    t.false((await labels(db)).includes("aborted-1"));
  },
);

test.serial("a transaction still open after its timeout is ended and rolled back: the body's next statement fails, nothing commits", async (t) => {
  const { db } = t.context;
  let release: () => void = () => {};
  const stalled = new Promise<void>((resolve) => {
    release = resolve;
  });
  const pass = runSqlTransaction(
    db.prisma,
    async (tx) => {
      await tx.query(Prisma.sql`INSERT INTO tx_probe VALUES (${"timed-out"})`);
      await stalled; // a send that hangs
      await tx.query(Prisma.sql`INSERT INTO tx_probe VALUES (${"after-timeout"})`);
    },
    { timeoutMs: 300 },
  );
  setTimeout(release, 1_000);
  const error = await t.throwsAsync(pass, { message: /still open after 300 ms/ });
  t.true(isTransactionUnavailable(error), "a timed-out transaction is recognised as unavailable (nothing committed)");
  t.deepEqual(await labels(db), ["kept-1", "kept-2"], "neither row of the timed-out transaction committed");
  // The pool hands out working connections afterwards (the closed one is not reused).
  for (let i = 0; i < 3; i++) await runSqlTransaction(db.prisma, (tx) => tx.query(Prisma.sql`SELECT 1`), { timeoutMs: 10_000 });
  t.pass();
});

test.serial("a statement cut off by the timeout fails with TransactionUnavailable, not the driver's closed-connection error", async (t) => {
  const { db } = t.context;
  const pass = runSqlTransaction(
    db.prisma,
    async (tx) => {
      await tx.query(Prisma.sql`INSERT INTO tx_probe VALUES (${"cut-off"})`);
      await tx.query(Prisma.sql`SELECT pg_sleep(5)`);
    },
    { timeoutMs: 300 },
  );
  await t.throwsAsync(pass, { instanceOf: TransactionUnavailable, message: /still open after 300 ms/ });
  t.deepEqual(await labels(db), ["kept-1", "kept-2"], "nothing of the cut-off transaction committed");
});

test.serial("no pooled connection within maxWaitMs: TransactionUnavailable, the body never runs, and the pool recovers", async (t) => {
  const { db } = t.context;
  // The pool has 2 connections: two open transactions hold both.
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const holders = [0, 1].map(() => runSqlTransaction(db.prisma, () => held, { timeoutMs: 10_000 }));
  let ran = false;
  const waiting = runSqlTransaction(
    db.prisma,
    async (tx) => {
      ran = true;
      await tx.query(Prisma.sql`INSERT INTO tx_probe VALUES (${"never"})`);
    },
    { timeoutMs: 10_000, maxWaitMs: 200 },
  );
  const error = await t.throwsAsync(waiting, { instanceOf: TransactionUnavailable, message: /no database connection within 200 ms/ });
  t.true(isTransactionUnavailable(error));
  t.false(ran, "the body never ran");
  release();
  await Promise.all(holders);
  // The connection that arrived late went back to the pool: both connections serve transactions again.
  await Promise.all([0, 1].map(() => runSqlTransaction(db.prisma, (tx) => tx.query(Prisma.sql`SELECT 1`), { timeoutMs: 10_000, maxWaitMs: 1_000 })));
  t.deepEqual(await labels(db), ["kept-1", "kept-2"]);
});

test.serial("a unique violation inside it (node-postgres's own error, SQLSTATE in code) is recognised as Prisma's is, and rolls back", async (t) => {
  const { db } = t.context;
  const raw = await t.throwsAsync(
    runSqlTransaction(
      db.prisma,
      async (tx) => {
        await tx.query(Prisma.sql`INSERT INTO tx_probe VALUES (${"dup-new"})`);
        await tx.query(Prisma.sql`INSERT INTO tx_probe VALUES (${"kept-1"})`);
      },
      { timeoutMs: 10_000 },
    ),
  );
  t.true(isUniqueViolation(raw), String(raw));
  const viaPrisma = await t.throwsAsync(db.prisma.$executeRaw`INSERT INTO tx_probe VALUES (${"kept-1"})`);
  t.true(isUniqueViolation(viaPrisma), String(viaPrisma));
  t.deepEqual(await labels(db), ["kept-1", "kept-2"]);
});

test.serial(
  "a connection the database cuts while a transaction holds it (and sends nothing) fails that transaction and crashes nothing; the pool recovers",
  async (t) => {
    const { db } = t.context;
    let cut: () => void = () => undefined;
    const wasCut = new Promise<void>((resolve) => {
      cut = resolve;
    });
    let pidOf: (pid: number) => void = () => undefined;
    const pid = new Promise<number>((resolve) => {
      pidOf = resolve;
    });
    const held = runSqlTransaction(
      db.prisma,
      async (tx) => {
        const [row] = await tx.query<{ pid: number }>(Prisma.sql`SELECT pg_backend_pid() AS pid`);
        pidOf(row!.pid);
        // Idle inside the transaction while the database ends the connection: node-postgres then emits 'error' on a
        // checked-out client, which the pool does not listen to (an unhandled 'error' event ends the process).
        await wasCut;
        await tx.query(Prisma.sql`SELECT 1`);
      },
      { timeoutMs: 20_000 },
    );
    const target = await pid;
    await db.prisma.$queryRaw`SELECT pg_terminate_backend(${target}::int)`;
    await eventually(async () => {
      const [row] = await db.prisma.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM pg_stat_activity WHERE pid = ${target}::int`;
      return row?.n === 0n;
    });
    // The client learns of the cut from its socket: let its events run before the body goes on.
    await new Promise<void>((resolve) => setImmediate(resolve));
    cut();
    await t.throwsAsync(held);
    t.deepEqual(await db.prisma.$queryRaw<{ one: number }[]>`SELECT 1 AS one`, [{ one: 1 }], "the pool opens a new connection");
  },
);
