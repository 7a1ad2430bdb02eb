import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaClient, type Prisma as PrismaNs } from "../../gen/prisma/client.js";

export { PrismaClient };
export type { Prisma } from "../../gen/prisma/client.js";

/** Distinct SQL texts prepared as named statements at most; texts beyond it run unnamed (parsed each time). */
export const MAX_NAMED_STATEMENTS = 500;

/**
 * Names each distinct SQL text once (`p1`, `p2`, ...), so node-postgres prepares it once per
 * connection and PostgreSQL parses it once and may reuse its plan, instead of parsing and
 * planning every execution afresh. Bounded: Prisma writes a new text for each length of an
 * `IN (...)` list, so only the first MAX_NAMED_STATEMENTS texts are named; the rest stay unnamed.
 */
export function createStatementNamer(limit = MAX_NAMED_STATEMENTS): (query: { sql: string }) => string | undefined {
  const names = new Map<string, string>();
  return ({ sql }) => {
    const known = names.get(sql);
    if (known !== undefined) return known;
    // Failure policy: past the bound a statement simply runs unnamed, as it did before naming existed.
    if (names.size >= limit) return undefined;
    const name = `p${names.size + 1}`;
    names.set(sql, name);
    return name;
  };
}

/**
 * The one PrismaClient factory: every process and test builds its client here. `namedStatements`
 * (default on) must be off where pooled connections share one session - the embedded PGlite
 * socket serves every connection from one backend, so two connections preparing `p7` collide
 * (42P05 "prepared statement already exists").
 */
export function createPrisma(databaseUrl: string, opts: { maxConnections?: number; namedStatements?: boolean } = {}): PrismaClient {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: opts.maxConnections ?? 10,
    // Failure policy: fail fast rather than queue forever when the database is gone.
    connectionTimeoutMillis: 10_000,
  });
  // Failure policy: node-postgres drops an idle connection that fails (the database restarted) and opens a new one for the
  // next query; the error needs a listener so it is not thrown as an unhandled 'error' event before Prisma adds its own.
  pool.on("error", () => undefined);
  const nameOf = opts.namedStatements === false ? undefined : createStatementNamer();
  const adapter = new PrismaPg(pool, {
    disposeExternalPool: true,
    ...(nameOf ? { statementNameGenerator: nameOf as (query: { sql: string }) => string } : {}),
  });
  const client = new PrismaClient({ adapter });
  rawPools.set(client, { pool, nameOf });
  return client;
}

/** The node-postgres pool (and statement namer) under each client createPrisma made: what runSql runs on. */
const rawPools = new WeakMap<PrismaClient, { pool: pg.Pool; nameOf: ((query: { sql: string }) => string | undefined) | undefined }>();

/**
 * Runs ONE statement, written as a `Prisma.sql` template, straight on the client's node-postgres pool (the
 * pool Prisma itself uses: same connections, same limit, same named statements), without Prisma's query
 * engine. For the hot paths only (CastHeart's read and write, the claim ledger's check and claim): there Prisma's per-call work (the
 * query compiler, serialising every array parameter) cost more CPU than the driver's own work (figures:
 * ARCHITECTURE.md, CastHeart's group commit). Rows come as node-postgres parses them: bigint and numeric as strings,
 * timestamptz as Date. A client made elsewhere (none in this code) falls back to `$queryRaw`.
 */
export async function runSql<T>(prisma: PrismaClient, sql: PrismaNs.Sql): Promise<T[]> {
  const raw = rawPools.get(prisma);
  if (raw === undefined) return prisma.$queryRaw<T[]>(sql);
  const result = await raw.pool.query<T & pg.QueryResultRow>({ name: raw.nameOf?.({ sql: sql.text }), text: sql.text, values: sql.values });
  return result.rows;
}

/** Runs statements inside a transaction of runSqlTransaction (each one a `Prisma.sql` template, as runSql takes). */
export interface SqlTx {
  query<T>(sql: PrismaNs.Sql): Promise<T[]>;
}

/**
 * runSqlTransaction's refusal: no pooled connection within `maxWaitMs`, or the transaction still open after
 * `timeoutMs` (ended with its connection, rolled back). Nothing of the transaction committed.
 */
export class TransactionUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TransactionUnavailable";
  }
}

/**
 * True when a transaction never ran or expired, so nothing of it committed: runSqlTransaction's
 * TransactionUnavailable, or Prisma's P2028 (an interactive transaction that got no connection within
 * its maxWait, or expired before its commit).
 */
export function isTransactionUnavailable(error: unknown): boolean {
  return error instanceof TransactionUnavailable || (error as { code?: unknown })?.code === "P2028";
}

/**
 * Runs `body` in ONE transaction on a connection of the client's node-postgres pool (as runSql, without
 * Prisma's query engine and its interactive-transaction machinery): BEGIN, the body's statements, COMMIT when
 * it resolves, ROLLBACK when it throws. A transaction still open after `timeoutMs` is ended by closing its
 * connection (the database rolls it back), and it fails with TransactionUnavailable. With `maxWaitMs`, a
 * transaction that gets no pooled connection by then fails with TransactionUnavailable too (Prisma's
 * `maxWait`; without it the pool's own connection timeout applies). For the relay's passes (a pass at idle is
 * what stands between a commit and its event in Kafka) and ApplyEvent's rounds. Rows come as runSql says. A
 * client made elsewhere falls back to Prisma's interactive transaction.
 */
export async function runSqlTransaction<T>(prisma: PrismaClient, body: (tx: SqlTx) => Promise<T>, opts: { timeoutMs: number; maxWaitMs?: number }): Promise<T> {
  const raw = rawPools.get(prisma);
  if (raw === undefined) {
    return prisma.$transaction((tx) => body({ query: <R>(sql: PrismaNs.Sql) => tx.$queryRaw<R[]>(sql) }), {
      timeout: opts.timeoutMs,
      ...(opts.maxWaitMs === undefined ? {} : { maxWait: opts.maxWaitMs }),
    });
  }
  const client = await connectWithin(raw.pool, opts.maxWaitMs);
  let broken: Error | undefined;
  let expired: TransactionUnavailable | undefined;
  const timer = setTimeout(() => {
    expired = new TransactionUnavailable(`transaction still open after ${opts.timeoutMs} ms; its connection was closed`);
    broken = expired;
    // Failure policy: closing the connection ends the transaction (rolled back by the database); the body's next statement fails.
    void client.end().catch(() => undefined);
  }, opts.timeoutMs);
  const tx: SqlTx = {
    query: async <R>(sql: PrismaNs.Sql) => {
      if (broken) throw broken;
      const result = await client.query<R & pg.QueryResultRow>({ name: raw.nameOf?.({ sql: sql.text }), text: sql.text, values: sql.values });
      return result.rows;
    },
  };
  try {
    await client.query("BEGIN");
    const value = await body(tx);
    if (broken) throw broken;
    await client.query("COMMIT");
    return value;
  } catch (error) {
    // Failure policy: roll back and rethrow; a connection that cannot roll back (lost, closed) is destroyed, not reused.
    broken ??= await client.query("ROLLBACK").then(
      () => undefined,
      (rollbackError: unknown) => (rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError))),
    );
    // A statement cut off by the timeout fails with the driver's "connection terminated": the cause is the timeout.
    throw expired ?? error;
  } finally {
    clearTimeout(timer);
    client.release(broken ?? false);
  }
}

/** A pooled connection, or TransactionUnavailable once `maxWaitMs` passed without one (the late one goes back to the pool). */
async function connectWithin(pool: pg.Pool, maxWaitMs: number | undefined): Promise<pg.PoolClient> {
  if (maxWaitMs === undefined) return pool.connect();
  const connecting = pool.connect();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TransactionUnavailable(`no database connection within ${maxWaitMs} ms`)), maxWaitMs);
  });
  try {
    return await Promise.race([connecting, late]);
  } catch (error) {
    // Failure policy: a connection that arrives after the wait is returned to the pool unused; a failed connect is already reported.
    connecting.then(
      (client) => client.release(),
      () => undefined,
    );
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** The transaction client handed to interactive-transaction callbacks. */
export type Tx = Parameters<Parameters<PrismaClient["$transaction"]>[0]>[0];

/** PostgreSQL SQLSTATE codes the code classifies on (never on message text). */
export const PG_UNIQUE_VIOLATION = "23505";
export const PG_SERIALIZATION_FAILURE = "40001";

/**
 * True when `error` is a unique-constraint violation: Prisma's (P2002, or SQLSTATE 23505 in its driver-adapter
 * error) or node-postgres's own (runSql, runSqlTransaction: SQLSTATE 23505 in `code`).
 */
export function isUniqueViolation(error: unknown): boolean {
  const e = error as { code?: string; meta?: { driverAdapterError?: { cause?: { originalCode?: string; kind?: string } } } };
  if (e?.code === "P2002" || e?.code === PG_UNIQUE_VIOLATION) return true;
  const cause = e?.meta?.driverAdapterError?.cause;
  return cause?.originalCode === PG_UNIQUE_VIOLATION || cause?.kind === "UniqueConstraintViolation";
}

/** Checks the database answers; used by /readyz. */
export async function pingDatabase(prisma: PrismaClient): Promise<void> {
  await prisma.$queryRaw`SELECT 1`;
}
