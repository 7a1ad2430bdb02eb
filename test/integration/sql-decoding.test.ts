/**
 * The one decoding of raw SQL (services/shared/adapters/sql/decode.ts): one statement returns a column of each SQL type the
 * services read, and each arrives as the one TypeScript type the table there names, whether the statement runs on
 * its own (runSql), in a transaction (runSqlTransaction) or as a count of changed rows (executeSql).
 */
import anyTest, { type TestFn } from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { executeSql, runSql, runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";

const test = anyTest as TestFn<{ db: TestDatabase }>;

test.before(async (t) => {
  t.context = { db: await createTestDatabase({ maxConnections: 2 }) };
});
test.after.always(async (t) => {
  await t.context.db?.drop();
});

/** Every type at once; values beyond 2^53 and a zone other than UTC where they would show a second decoder. */
const EVERY_TYPE = Prisma.sql`
  SELECT 9007199254740993::bigint AS big, count(*) AS n, ARRAY[1, 9007199254740993]::bigint[] AS bigs,
         '{}'::bigint[] AS no_bigs, 7::int AS small, 2.5::float8 AS ratio, 12.50::numeric AS exact,
         '2026-11-29 10:00:00.123+02'::timestamptz AS at, '2026-11-29 08:00:00.123'::timestamp AS naive,
         '2026-11-29'::date AS day, '{"a": 1, "at": "2026-11-29T08:00:00Z"}'::jsonb AS doc, '[1, 2]'::json AS list,
         '\\x0102'::bytea AS bytes, '6f9619ff-8b86-d011-b42d-00cf4fc964ff'::uuid AS id, true AS flag, NULL::bigint AS nothing
  FROM (VALUES (1), (2)) AS v(x)`;

const EXPECTED = {
  big: 9007199254740993n,
  n: 2n,
  bigs: [1n, 9007199254740993n],
  no_bigs: [],
  small: 7,
  ratio: 2.5,
  exact: "12.50",
  at: new Date("2026-11-29T08:00:00.123Z"),
  naive: new Date("2026-11-29T08:00:00.123Z"),
  day: new Date("2026-11-29T00:00:00Z"),
  doc: { a: 1, at: "2026-11-29T08:00:00Z" },
  list: [1, 2],
  bytes: Buffer.from([1, 2]),
  id: "6f9619ff-8b86-d011-b42d-00cf4fc964ff",
  flag: true,
  nothing: null,
};

test("runSql decodes bigint and count as bigint, timestamptz, timestamp and date as Date (UTC), JSON parsed, numeric as exact text", async (t) => {
  const [row] = await runSql<Record<string, unknown>>(t.context.db.prisma, EVERY_TYPE);
  t.deepEqual(row, EXPECTED);
});

test("a transaction's statements decode the same way as runSql's (one decoder on both paths)", async (t) => {
  const [row] = await runSqlTransaction(t.context.db.prisma, (tx) => tx.query<Record<string, unknown>>(EVERY_TYPE), { timeoutMs: 10_000 });
  t.deepEqual(row, EXPECTED);
});

test.serial("a session and a process in other time zones decode timestamp and date the same (never the session's or the machine's zone)", async (t) => {
  const zone = process.env.TZ;
  // Node applies a changed TZ at once: a decoder that read `timestamp` or `date` in the machine's zone would shift them.
  process.env.TZ = "Asia/Tokyo";
  t.teardown(() => {
    if (zone === undefined) delete process.env.TZ;
    else process.env.TZ = zone;
  });
  const [row] = await runSqlTransaction(
    t.context.db.prisma,
    async (tx) => {
      await tx.query(Prisma.sql`SET LOCAL TIME ZONE 'America/Los_Angeles'`);
      return tx.query<{ at: Date; naive: Date; day: Date }>(
        Prisma.sql`SELECT '2026-11-29 08:00:00Z'::timestamptz AS at, '2026-11-29 08:00:00'::timestamp AS naive, '2026-11-29'::date AS day`,
      );
    },
    { timeoutMs: 10_000 },
  );
  t.deepEqual(row, { at: new Date("2026-11-29T08:00:00Z"), naive: new Date("2026-11-29T08:00:00Z"), day: new Date("2026-11-29T00:00:00Z") });
});

test("executeSql and a transaction's execute return the count of changed rows", async (t) => {
  const { prisma } = t.context.db;
  await executeSql(prisma, Prisma.sql`CREATE TABLE decode_probe (k int PRIMARY KEY)`);
  t.is(await executeSql(prisma, Prisma.sql`INSERT INTO decode_probe VALUES (1), (2), (3)`), 3);
  const changed = await runSqlTransaction(prisma, (tx) => tx.execute(Prisma.sql`DELETE FROM decode_probe WHERE k > ${1}::int`), { timeoutMs: 10_000 });
  t.is(changed, 2);
});
