/**
 * runSqlTransaction (services/shared/adapters/sql/executor.ts) sends BEGIN in the first statement's network round trip
 * (one Sync, one ReadyForQuery), with the statement's parameters still bound, never written into the SQL.
 * Counted on the wire: the clients here reach PostgreSQL through a TCP relay that counts the server's
 * ReadyForQuery messages, one per round trip. Whatever fails (the first statement, its Parse, a later
 * statement) leaves nothing committed and the connection serving the next transaction.
 */
import net from "node:net";
import anyTest, { type TestFn } from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { createPrisma, type PrismaClient } from "../../services/shared/adapters/db.js";
import { isUniqueViolation } from "../../services/shared/values/db-errors.js";
import { runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";

interface WireCounter {
  url: string;
  /** ReadyForQuery messages the server sent so far (over every connection through the relay). */
  readyForQuery(): number;
  close(): Promise<void>;
}

/** A TCP relay in front of `url`'s server that counts the server's ReadyForQuery ('Z') messages. */
async function startWireCounter(url: string): Promise<WireCounter> {
  const target = new URL(url);
  let count = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    // Server messages: a type byte and a 4-byte length (counting itself), possibly split across chunks.
    let pending = Buffer.alloc(0);
    upstream.on("data", (chunk: Buffer) => {
      client.write(chunk);
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 5) {
        const length = pending.readUInt32BE(1);
        if (pending.length < 1 + length) break;
        if (pending[0] === 0x5a) count++;
        pending = pending.subarray(1 + length);
      }
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("close", close).on("error", close);
    upstream.on("close", close).on("error", close);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const proxied = new URL(url);
  proxied.hostname = "127.0.0.1";
  proxied.port = String((server.address() as net.AddressInfo).port);
  return {
    url: proxied.toString(),
    readyForQuery: () => count,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const test = anyTest as TestFn<{ db: TestDatabase; wire: WireCounter; named: PrismaClient; unnamed: PrismaClient }>;

test.before(async (t) => {
  const db = await createTestDatabase({ maxConnections: 1 });
  await db.prisma.$executeRawUnsafe("CREATE TABLE rt_probe (label text PRIMARY KEY, n bigint, at timestamptz, tags text[], body bytea)");
  const wire = await startWireCounter(db.url);
  // One connection each, so every transaction of a client runs on the connection of the one before.
  const named = createPrisma(wire.url, { maxConnections: 1 });
  const unnamed = createPrisma(wire.url, { maxConnections: 1, namedStatements: false });
  t.context = { db, wire, named, unnamed };
  // Connected before counting: a connection's startup ends with a ReadyForQuery of its own.
  for (const prisma of [named, unnamed]) await runSqlTransaction(prisma, (tx) => tx.query(Prisma.sql`SELECT 1`), { timeoutMs: 10_000 });
});
test.after.always(async (t) => {
  await t.context.named?.$disconnect();
  await t.context.unnamed?.$disconnect();
  await t.context.wire?.close();
  await t.context.db?.drop();
});

async function labels(db: TestDatabase): Promise<string[]> {
  const rows = await db.prisma.$queryRaw<{ label: string }[]>`SELECT label FROM rt_probe ORDER BY label`;
  return rows.map((r) => r.label);
}

/** Runs `run` and returns how many round trips (ReadyForQuery messages) it took. */
async function roundTrips(wire: WireCounter, run: () => Promise<unknown>): Promise<number> {
  const before = wire.readyForQuery();
  await run();
  return wire.readyForQuery() - before;
}

for (const variant of ["named", "unnamed"] as const) {
  test.serial(`${variant} statements: a transaction of two statements takes three round trips (BEGIN rides with the first), and commits both`, async (t) => {
    const { db, wire } = t.context;
    const prisma = t.context[variant];
    await db.prisma.$executeRaw`DELETE FROM rt_probe`;
    const at = new Date("2024-05-15T12:34:56.789Z");
    const body = Buffer.from([0, 1, 0x27, 0x5c, 255]);
    const label = `${variant}-o'brien\\ "quoted" ünïcødé 🎲`;
    const run = () =>
      runSqlTransaction(
        prisma,
        async (tx) => {
          const [inserted] = await tx.query<{ label: string }>(
            Prisma.sql`INSERT INTO rt_probe VALUES (${label}, ${9007199254740993n}, ${at}, ${["a,b", "c'd", null]}::text[], ${body}) RETURNING label`,
          );
          const [read] = await tx.query<{ n: bigint; at: Date; tags: Array<string | null>; body: Buffer }>(
            Prisma.sql`SELECT n, at, tags, body FROM rt_probe WHERE label = ${label}`,
          );
          return { inserted: inserted?.label, read };
        },
        { timeoutMs: 10_000 },
      );
    // The first run may prepare named statements; the second runs on prepared ones. Both take three round trips.
    let result: Awaited<ReturnType<typeof run>> | undefined;
    t.is(
      await roundTrips(wire, async () => {
        result = await run();
      }),
      3,
    );
    t.is(result?.inserted, label, "the first statement's rows come back, and only its own");
    t.deepEqual(result?.read, { n: 9007199254740993n, at, tags: ["a,b", "c'd", null], body });
    await prisma.$executeRaw`DELETE FROM rt_probe WHERE label = ${label}`;
    t.is(
      await roundTrips(wire, async () => {
        result = await run();
      }),
      3,
    );
    t.deepEqual(await labels(db), [label]);
    await db.prisma.$executeRaw`DELETE FROM rt_probe`;
  });

  test.serial(
    `${variant} statements: a first statement that fails (unique violation) is rolled back with BEGIN, and the connection serves the next transaction`,
    async (t) => {
      const { db } = t.context;
      const prisma = t.context[variant];
      await db.prisma.$executeRaw`DELETE FROM rt_probe`;
      await db.prisma.$executeRaw`INSERT INTO rt_probe (label) VALUES ('taken')`;
      const error = await t.throwsAsync(
        runSqlTransaction(
          prisma,
          async (tx) => {
            await tx.query(Prisma.sql`INSERT INTO rt_probe (label) VALUES (${"taken"})`);
            await tx.query(Prisma.sql`INSERT INTO rt_probe (label) VALUES (${"never"})`);
          },
          { timeoutMs: 10_000 },
        ),
      );
      t.true(isUniqueViolation(error), String(error));
      // A later statement failing rolls back the first statement's write (it ran inside the transaction).
      await t.throwsAsync(
        runSqlTransaction(
          prisma,
          async (tx) => {
            await tx.query(Prisma.sql`INSERT INTO rt_probe (label) VALUES (${"rolled-back"})`);
            await tx.query(Prisma.sql`INSERT INTO rt_probe (label) VALUES (${"taken"})`);
          },
          { timeoutMs: 10_000 },
        ),
      );
      const [row] = await runSqlTransaction(prisma, (tx) => tx.query<{ n: number }>(Prisma.sql`SELECT count(*)::int AS n FROM rt_probe`), {
        timeoutMs: 10_000,
      });
      t.is(row?.n, 1);
      t.deepEqual(await labels(db), ["taken"]);
      await db.prisma.$executeRaw`DELETE FROM rt_probe`;
    },
  );
}

test.serial("a first statement whose Parse fails (no such table) opens nothing; once the table exists the same text runs on that connection", async (t) => {
  const { db, named } = t.context;
  const probe = () =>
    runSqlTransaction(named, (tx) => tx.query<{ n: number }>(Prisma.sql`SELECT count(*)::int AS n FROM rt_later WHERE ${1}::int = 1`), { timeoutMs: 10_000 });
  await t.throwsAsync(probe(), { message: /rt_later/ });
  await db.prisma.$executeRawUnsafe("CREATE TABLE rt_later (x int)");
  t.deepEqual(await probe(), [{ n: 0 }], "the failed Parse was not recorded as a prepared statement of the connection");
});

test.serial("a body that sends no statement takes no round trip", async (t) => {
  const { wire, named } = t.context;
  t.is(await roundTrips(wire, () => runSqlTransaction(named, async () => "nothing", { timeoutMs: 10_000 })), 0);
});
