import type pg from "pg";
import { Prisma } from "../../../../gen/prisma/client.js";
import { SQL_TYPES } from "./decode.js";
import { queryAfterBegin } from "./pg-internals.js";

/**
 * THE executor of raw SQL: every statement written as SQL (a `Prisma.sql` template, parameters bound, never
 * written into the text) runs here, on the node-postgres pool under the PrismaClient that createPrisma made
 * (services/shared/adapters/db.ts: the same connections, connection limit and named statements), without Prisma's query
 * engine, and every row is decoded one way (decode.ts, SQL_TYPES). The Prisma model API stays for plain CRUD.
 *
 * - runSql / executeSql: one statement, in its own implicit transaction;
 * - runSqlTransaction: several statements in one transaction on one connection (SqlTx).
 */
export type Sql = Prisma.Sql;

/** Runs statements: a transaction's (runSqlTransaction's body), or the pool's one statement at a time (sqlOf). */
export interface SqlTx {
  /** Runs one statement; its rows, decoded as decode.ts says. */
  query<T>(sql: Sql): Promise<T[]>;
  /** Runs one statement; how many rows it inserted, updated or deleted (its command tag's count). */
  execute(sql: Sql): Promise<number>;
}

/** The comment a statement planned with its values on every run starts with (planEachRun): the statement namer never names it. */
export const PLANNED_EACH_RUN = "/* planned-each-run */";

/**
 * `sql`, planned with its parameters' values every time it runs: never prepared under a name, so PostgreSQL never
 * caches a generic plan for it (a named statement may switch to one, planned without the values, after five runs).
 * For a statement whose right plan depends on a value a generic plan cannot see, such as a retention batch's cutoff (which rows are
 * due decides which index holds them) and that runs rarely enough that planning it each time costs nothing that
 * shows (a retention batch: once per batch of rows). A hot path's statement is kept named and written to hold on
 * either plan instead (ARCHITECTURE.md, "generic plans").
 */
export function planEachRun(sql: Sql): Sql {
  return Prisma.sql([`${PLANNED_EACH_RUN} `, ""], sql);
}

/** What the executor needs of a client: the pool, and the statement namer (none where connections share a session). */
export interface SqlPool {
  pool: pg.Pool;
  nameOf: ((query: { sql: string }) => string | undefined) | undefined;
}

/** The pool under each client createPrisma made (registered there): what the executor runs on. */
const pools = new WeakMap<object, SqlPool>();

/** Called by createPrisma only: `client`'s raw statements run on `pool`. */
export function registerSqlPool(client: object, pool: SqlPool): void {
  pools.set(client, pool);
}

function poolOf(client: object): SqlPool {
  const pool = pools.get(client);
  // Failure policy: fail loudly - every client is made by createPrisma; one made elsewhere would run SQL outside the one executor.
  if (pool === undefined) throw new Error("this PrismaClient was not made by createPrisma (services/shared/adapters/db.ts): its raw SQL has no executor");
  return pool;
}

function configOf(raw: SqlPool, sql: Sql): pg.QueryConfig {
  return { name: raw.nameOf?.({ sql: sql.text }), text: sql.text, values: sql.values as unknown[], types: SQL_TYPES };
}

/** Runs ONE statement on the client's pool; its rows, decoded as decode.ts says. */
export async function runSql<T>(client: object, sql: Sql): Promise<T[]> {
  const raw = poolOf(client);
  return (await raw.pool.query<T & pg.QueryResultRow>(configOf(raw, sql))).rows;
}

/** Runs ONE statement on the client's pool; how many rows it inserted, updated or deleted. */
export async function executeSql(client: object, sql: Sql): Promise<number> {
  const raw = poolOf(client);
  return (await raw.pool.query(configOf(raw, sql))).rowCount ?? 0;
}

/** The client's pool as a SqlTx (each statement on its own, autocommitted): for code that takes either a transaction or the pool. */
export function sqlOf(client: object): SqlTx {
  return { query: (sql) => runSql(client, sql), execute: (sql) => executeSql(client, sql) };
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
 * TransactionUnavailable, or Prisma's P2028 (a model-API interactive transaction that got no connection within
 * its maxWait, or expired before its commit).
 */
export function isTransactionUnavailable(error: unknown): boolean {
  return error instanceof TransactionUnavailable || (error as { code?: unknown })?.code === "P2028";
}

/**
 * Runs `body` in ONE transaction on a connection of the client's pool: BEGIN, the body's statements, COMMIT when
 * it resolves, ROLLBACK when it throws. BEGIN travels in the first statement's network round trip (queryAfterBegin,
 * pg-internals.ts), so a transaction of n statements costs n + 1 round trips, not n + 2; a body that sends no
 * statement costs none. A transaction still open after `timeoutMs` is ended by closing its connection (the database
 * rolls it back), and it fails with TransactionUnavailable. With `maxWaitMs`, a transaction that gets no pooled
 * connection by then fails with TransactionUnavailable too (without it the pool's own connection timeout applies).
 * A COMMIT that PostgreSQL answers ROLLBACK (a statement failed and the body swallowed its error) fails the call.
 */
export async function runSqlTransaction<T>(client: object, body: (tx: SqlTx) => Promise<T>, opts: { timeoutMs: number; maxWaitMs?: number }): Promise<T> {
  const raw = poolOf(client);
  const connection = await connectWithin(raw.pool, opts.maxWaitMs);
  let broken: Error | undefined;
  let expired: TransactionUnavailable | undefined;
  const timer = setTimeout(() => {
    expired = new TransactionUnavailable(`transaction still open after ${opts.timeoutMs} ms; its connection was closed`);
    broken = expired;
    // Failure policy: closing the connection ends the transaction (rolled back by the database); the body's next statement fails.
    void connection.end().catch(() => undefined);
  }, opts.timeoutMs);
  // BEGIN is not sent on its own: it rides in the first statement's round trip (queryAfterBegin). A body that sends
  // no statement opens no transaction on the server, and nothing is committed or rolled back.
  let begun = false;
  const run = async (sql: Sql): Promise<pg.QueryResult> => {
    if (broken) throw broken;
    const config = configOf(raw, sql);
    if (begun) return connection.query(config);
    begun = true;
    return queryAfterBegin(connection, config);
  };
  const tx: SqlTx = {
    query: async <R>(sql: Sql) => (await run(sql)).rows as R[],
    execute: async (sql: Sql) => (await run(sql)).rowCount ?? 0,
  };
  try {
    const value = await body(tx);
    if (broken) throw broken;
    if (begun) {
      // PostgreSQL answers COMMIT of a transaction a failed statement aborted with the tag ROLLBACK and no error:
      // a body that caught a statement's error and resolved would otherwise be told its writes committed.
      const commit = await connection.query("COMMIT");
      if (commit.command !== "COMMIT") throw new Error(`the transaction was rolled back at COMMIT (${commit.command}): a statement in it failed`);
    }
    return value;
  } catch (error) {
    // Failure policy: roll back and rethrow; a connection that cannot roll back (lost, closed) is destroyed, not reused.
    broken ??= !begun
      ? undefined
      : await connection.query("ROLLBACK").then(
          () => undefined,
          (rollbackError: unknown) => (rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError))),
        );
    // A statement cut off by the timeout fails with the driver's "connection terminated": the cause is the timeout.
    throw expired ?? error;
  } finally {
    clearTimeout(timer);
    connection.release(broken ?? false);
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
      (late) => late.release(),
      () => undefined,
    );
    throw error;
  } finally {
    clearTimeout(timer);
  }
}
