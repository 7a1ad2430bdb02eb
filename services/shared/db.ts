import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaClient, type Prisma as PrismaNs } from "../../gen/prisma/client.js";
import { PG_CONNECTION_LOST } from "./db-errors.js";

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
    Client: ConnectionLossCodedClient,
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

/**
 * The node-postgres version whose internals this file builds on, read in its source: Client#_errorAllQueries
 * (ConnectionLossCodedClient), Query#hasBeenParsed/prepare/handleCommandComplete and Connection#parse/bind/execute
 * with submittedNamedStatements (BeginThenQuery). PRIVATE API: test/unit/pg-internals.test.ts fails when the
 * installed pg differs; re-read those methods in the new version, run the sql-transaction, round-trip and
 * database-down tests, then raise this constant (and the exact pin in package.json).
 */
export const PG_VERIFIED_VERSION = "8.23.1";

/** node-postgres's Client with the method that fails every query of a connection that is gone (pg/lib/client.js). */
const PgClientWithInternals = pg.Client as unknown as new (config?: string | pg.ClientConfig) => pg.Client & { _errorAllQueries(error: Error): void };

/**
 * node-postgres's Client, except that an error ending every query of a lost connection always has a code: the one
 * node-postgres makes when the socket ends without an error message ("Connection terminated unexpectedly") has none,
 * and errors are classified by code only (services/shared/db-errors.ts), so it gets PG_CONNECTION_LOST. Errors that
 * carry a code (a socket's ECONNRESET, the server's SQLSTATE 57P01) keep it.
 */
class ConnectionLossCodedClient extends PgClientWithInternals {
  override _errorAllQueries(error: Error): void {
    const coded = error as Error & { code?: unknown };
    if (typeof coded.code !== "string") coded.code = PG_CONNECTION_LOST;
    super._errorAllQueries(error);
  }
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
 * The same body as runSqlTransaction takes, run as a Prisma interactive transaction (`timeoutMs` and `maxWaitMs` as
 * Prisma's `timeout` and `maxWait`): rows come as `$queryRaw` gives them (bigint as bigint). runSqlTransaction falls
 * back to it for a client createPrisma did not make.
 */
export function runPrismaSqlTransaction<T>(prisma: PrismaClient, body: (tx: SqlTx) => Promise<T>, opts: { timeoutMs: number; maxWaitMs?: number }): Promise<T> {
  return prisma.$transaction((tx) => body({ query: <R>(sql: PrismaNs.Sql) => tx.$queryRaw<R[]>(sql) }), {
    timeout: opts.timeoutMs,
    ...(opts.maxWaitMs === undefined ? {} : { maxWait: opts.maxWaitMs }),
  });
}

/**
 * Runs `body` in ONE transaction on a connection of the client's node-postgres pool (as runSql, without
 * Prisma's query engine and its interactive-transaction machinery): BEGIN, the body's statements, COMMIT when
 * it resolves, ROLLBACK when it throws. BEGIN travels in the first statement's network round trip (queryAfterBegin),
 * so a transaction of n statements costs n + 1 round trips, not n + 2; a body that sends no statement costs none. A transaction still open after `timeoutMs` is ended by closing its
 * connection (the database rolls it back), and it fails with TransactionUnavailable. With `maxWaitMs`, a
 * transaction that gets no pooled connection by then fails with TransactionUnavailable too (Prisma's
 * `maxWait`; without it the pool's own connection timeout applies). For ApplyEvent's rounds and the relay's passes.
 * Rows come as runSql says. A client made elsewhere falls back to runPrismaSqlTransaction.
 */
export async function runSqlTransaction<T>(prisma: PrismaClient, body: (tx: SqlTx) => Promise<T>, opts: { timeoutMs: number; maxWaitMs?: number }): Promise<T> {
  const raw = rawPools.get(prisma);
  if (raw === undefined) return runPrismaSqlTransaction(prisma, body, opts);
  const client = await connectWithin(raw.pool, opts.maxWaitMs);
  let broken: Error | undefined;
  let expired: TransactionUnavailable | undefined;
  const timer = setTimeout(() => {
    expired = new TransactionUnavailable(`transaction still open after ${opts.timeoutMs} ms; its connection was closed`);
    broken = expired;
    // Failure policy: closing the connection ends the transaction (rolled back by the database); the body's next statement fails.
    void client.end().catch(() => undefined);
  }, opts.timeoutMs);
  // BEGIN is not sent on its own: it rides in the first statement's round trip (queryAfterBegin). A body that sends
  // no statement opens no transaction on the server, and nothing is committed or rolled back.
  let begun = false;
  const tx: SqlTx = {
    query: async <R>(sql: PrismaNs.Sql) => {
      if (broken) throw broken;
      const config = { name: raw.nameOf?.({ sql: sql.text }), text: sql.text, values: sql.values };
      if (begun) return (await client.query<R & pg.QueryResultRow>(config)).rows;
      begun = true;
      return queryAfterBegin<R>(client, config);
    },
  };
  try {
    const value = await body(tx);
    if (broken) throw broken;
    if (begun) {
      // PostgreSQL answers COMMIT of a transaction a failed statement aborted with the tag ROLLBACK and no error:
      // a body that caught a statement's error and resolved would otherwise be told its writes committed.
      const commit = await client.query("COMMIT");
      if (commit.command !== "COMMIT") throw new Error(`the transaction was rolled back at COMMIT (${commit.command}): a statement in it failed`);
    }
    return value;
  } catch (error) {
    // Failure policy: roll back and rethrow; a connection that cannot roll back (lost, closed) is destroyed, not reused.
    broken ??= !begun
      ? undefined
      : await client.query("ROLLBACK").then(
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

/** The parts of node-postgres's Query (pg/lib/query.js) that BeginThenQuery builds on; its type definitions leave them out. */
interface PgQueryInternals extends pg.Submittable {
  text: string;
  name: string | undefined;
  types: unknown;
  hasBeenParsed(connection: pg.Connection): boolean;
  prepare(connection: pg.Connection): void;
  handleCommandComplete(message: unknown, connection: pg.Connection): void;
}

/** The parts of node-postgres's Connection (pg/lib/connection.js) BeginThenQuery writes with. */
interface PgConnectionInternals {
  submittedNamedStatements: Record<string, string>;
  parse(query: { text: string; name?: string; types?: unknown }): void;
  bind(config: object): void;
  execute(config: object): void;
}

type PgQueryConfig = pg.QueryConfig & { queryMode: "extended"; callback: (error: Error | undefined, result: pg.QueryResult) => void };
const PgQuery = pg.Query as unknown as new (config: PgQueryConfig) => PgQueryInternals;

/**
 * A statement preceded by BEGIN in ONE network round trip, on the extended protocol with its parameters bound as
 * every statement's are (no value is ever written into the SQL text). node-postgres writes a statement's messages
 * (Parse, Bind, Describe, Execute, Sync) in one corked write and waits for the one ReadyForQuery that Sync brings;
 * this adds BEGIN's Parse, Bind and Execute before the statement's Bind, under the same Sync:
 * - a named statement not yet prepared on the connection is parsed FIRST: if its Parse fails, nothing after it
 *   runs (no BEGIN), and node-postgres never records it as prepared (it would be, were BEGIN's ParseComplete first);
 * - if BEGIN or the statement fails, the server skips to the Sync: the transaction is open and aborted, or not
 *   open at all, and runSqlTransaction's ROLLBACK ends it either way (on no transaction it is only a warning);
 * - BEGIN's CommandComplete is the first to arrive and is dropped, so the result is the statement's alone.
 */
class BeginThenQuery extends PgQuery {
  #beginPending = false;

  override prepare(connection: pg.Connection): void {
    const wire = connection as unknown as PgConnectionInternals;
    if (this.name && !this.hasBeenParsed(connection)) {
      wire.parse({ text: this.text, name: this.name, types: this.types });
      wire.submittedNamedStatements[this.name] = this.text;
    }
    wire.parse({ text: "BEGIN" });
    wire.bind({});
    wire.execute({});
    this.#beginPending = true;
    super.prepare(connection);
  }

  override handleCommandComplete(message: unknown, connection: pg.Connection): void {
    if (this.#beginPending) {
      this.#beginPending = false;
      return;
    }
    super.handleCommandComplete(message, connection);
  }
}

/** Runs `config` on `client` with BEGIN before it in the same round trip (BeginThenQuery); its rows as client.query gives them. */
function queryAfterBegin<R>(client: pg.PoolClient, config: pg.QueryConfig): Promise<R[]> {
  return new Promise((resolve, reject) => {
    client.query(
      new BeginThenQuery({
        ...config,
        queryMode: "extended",
        callback: (error, result) => (error ? reject(error) : resolve(result.rows as R[])),
      }),
    );
  });
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

/** Database errors are classified in one place, by code (services/shared/db-errors.ts); re-exported for their callers. */
export { isDatabaseUnavailable, isUniqueViolation, PG_SERIALIZATION_FAILURE, PG_UNIQUE_VIOLATION } from "./db-errors.js";

/** Checks the database answers; used by /readyz. */
export async function pingDatabase(prisma: PrismaClient): Promise<void> {
  await prisma.$queryRaw`SELECT 1`;
}
