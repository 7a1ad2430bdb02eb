/**
 * THE classification of database errors, by code only (never by message text): PostgreSQL's SQLSTATE
 * (node-postgres puts it in `code`; Prisma's driver adapter in `meta.driverAdapterError.cause`),
 * Prisma's own `P....` codes, and Node's socket error codes. Import-free, so the error table
 * (services/shared/rpc/errors.ts), which the gateway loads too, can use it without loading Prisma.
 */

/**
 * The code createPrisma's node-postgres client gives an error that ends every query of a connection that is gone
 * ("Connection terminated unexpectedly": the server closed the socket without an error message, as a restart or a
 * crash does), which node-postgres leaves without a code (services/shared/adapters/db.ts#ConnectionLossCodedClient).
 */
export const PG_CONNECTION_LOST = "PG_CONNECTION_LOST";

/** PostgreSQL SQLSTATE codes the code classifies on. */
export const PG_UNIQUE_VIOLATION = "23505";
export const PG_SERIALIZATION_FAILURE = "40001";

/**
 * SQLSTATEs of a server that cannot serve now but will: shutting down or restarting (57P01 admin_shutdown,
 * 57P02 crash_shutdown, 57P03 cannot_connect_now) or out of connection slots (53300). Class 08 (connection
 * exception) is matched as a class.
 */
const UNAVAILABLE_SQLSTATES: ReadonlySet<string> = new Set(["57P01", "57P02", "57P03", "53300"]);
/** SQLSTATE class 08: connection exception (08000, 08003 no connection, 08006 connection failure, ...). */
const CONNECTION_EXCEPTION_CLASS = "08";
/**
 * Prisma's codes for the same: P1001 can't reach the server, P1002 timed out reaching it, P1008 operation timed
 * out (socket), P1017 the server closed the connection, P2037 too many connections.
 */
const UNAVAILABLE_PRISMA_CODES: ReadonlySet<string> = new Set(["P1001", "P1002", "P1008", "P1017", "P2037"]);
/** Node's socket errors: refused, reset, timed out, no route, no such host (node-postgres passes them through). */
const UNAVAILABLE_SOCKET_CODES: ReadonlySet<string> = new Set([
  PG_CONNECTION_LOST,
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);
/** Prisma driver-adapter error kinds of an unreachable or vanished server (adapter-pg's mapping of the socket codes above). */
const UNAVAILABLE_ADAPTER_KINDS: ReadonlySet<string> = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections"]);

/** The fields the classifiers read, on any of the error shapes above. */
interface CodedError {
  code?: unknown;
  cause?: unknown;
  errors?: unknown;
  meta?: { driverAdapterError?: { cause?: { originalCode?: unknown; kind?: unknown } } };
}

/** `error`, its `cause` chain and an AggregateError's parts (a connect to several addresses), each once; bounded. */
function codedErrors(error: unknown): CodedError[] {
  const found: CodedError[] = [];
  const queue: unknown[] = [error];
  const seen = new Set<unknown>();
  while (queue.length > 0 && found.length < 16) {
    const current = queue.shift();
    if (typeof current !== "object" || current === null || seen.has(current)) continue;
    seen.add(current);
    const coded = current as CodedError;
    found.push(coded);
    queue.push(coded.cause);
    if (Array.isArray(coded.errors)) queue.push(...coded.errors);
  }
  return found;
}

function isUnavailableSqlState(code: unknown): boolean {
  return typeof code === "string" && (UNAVAILABLE_SQLSTATES.has(code) || (code.length === 5 && code.startsWith(CONNECTION_EXCEPTION_CLASS)));
}

/**
 * True when `error` says the database cannot be reached or cannot serve now (stopped, restarting, refusing
 * connections, connection cut): a failure of the dependency, not of the request, so the caller may retry
 * later. Reads codes only: SQLSTATE (57P01, 57P02, 57P03, 53300, class 08), Prisma (P1001, P1002, P1008,
 * P1017, P2037, or the driver adapter's error kind and SQLSTATE), and socket codes (ECONNREFUSED, ECONNRESET, ...).
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  return codedErrors(error).some((e) => {
    if (typeof e.code === "string" && (UNAVAILABLE_PRISMA_CODES.has(e.code) || UNAVAILABLE_SOCKET_CODES.has(e.code) || isUnavailableSqlState(e.code)))
      return true;
    const adapter = e.meta?.driverAdapterError?.cause;
    return isUnavailableSqlState(adapter?.originalCode) || (typeof adapter?.kind === "string" && UNAVAILABLE_ADAPTER_KINDS.has(adapter.kind));
  });
}

/**
 * True when `error` is a unique-constraint violation: Prisma's (P2002, or SQLSTATE 23505 in its driver-adapter
 * error) or node-postgres's own (runSql, runSqlTransaction: SQLSTATE 23505 in `code`).
 */
export function isUniqueViolation(error: unknown): boolean {
  const e = error as CodedError;
  if (e?.code === "P2002" || e?.code === PG_UNIQUE_VIOLATION) return true;
  const cause = e?.meta?.driverAdapterError?.cause;
  return cause?.originalCode === PG_UNIQUE_VIOLATION || cause?.kind === "UniqueConstraintViolation";
}
