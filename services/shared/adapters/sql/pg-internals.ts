import pg from "pg";
import { PG_CONNECTION_LOST } from "../../values/db-errors.js";

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
 * and errors are classified by code only (services/shared/values/db-errors.ts), so it gets PG_CONNECTION_LOST. Errors that
 * carry a code (a socket's ECONNRESET, the server's SQLSTATE 57P01) keep it.
 */
export class ConnectionLossCodedClient extends PgClientWithInternals {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    // Failure policy: a connection the database ends (a restart, pg_terminate_backend) emits 'error' on its client. The
    // pool listens only while the client is idle; a client checked out (a transaction between two statements) had no
    // listener, and the unhandled 'error' event ended the process. The loss still fails every query of the connection
    // (_errorAllQueries, and the transaction's next statement), and the pool drops the client when it is released.
    this.on("error", () => undefined);
  }

  override _errorAllQueries(error: Error): void {
    const coded = error as Error & { code?: unknown };
    if (typeof coded.code !== "string") coded.code = PG_CONNECTION_LOST;
    super._errorAllQueries(error);
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
 *   open at all, and the executor's ROLLBACK ends it either way (on no transaction it is only a warning);
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

/** Runs `config` on `client` with BEGIN before it in the same round trip (BeginThenQuery); its result as client.query gives it. */
export function queryAfterBegin(client: pg.PoolClient, config: pg.QueryConfig): Promise<pg.QueryResult> {
  return new Promise((resolve, reject) => {
    client.query(
      new BeginThenQuery({
        ...config,
        queryMode: "extended",
        callback: (error, result) => (error ? reject(error) : resolve(result)),
      }),
    );
  });
}
