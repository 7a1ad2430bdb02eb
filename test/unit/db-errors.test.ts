/**
 * Database errors are classified by code, never by message text (services/shared/values/db-errors.ts): the
 * shapes node-postgres, Prisma and its driver adapter give for a database that is down or restarting
 * count as unavailable; a request's own failure (a constraint, a syntax error) and an unknown error do not.
 */
import test from "ava";
import { isDatabaseUnavailable, isUniqueViolation, PG_CONNECTION_LOST } from "../../services/shared/values/db-errors.js";

const coded = (code: string, extra: Record<string, unknown> = {}) => Object.assign(new Error("any text at all"), { code, ...extra });
const prisma = (code: string, cause: Record<string, unknown>) =>
  Object.assign(new Error("Invalid invocation"), { code, meta: { driverAdapterError: { cause } } });

test("a database that is down or restarting is unavailable, by SQLSTATE, Prisma code, adapter kind or socket code", (t) => {
  const unavailable: Array<[string, unknown]> = [
    ["node-postgres: connection refused", coded("ECONNREFUSED", { syscall: "connect", errno: -111 })],
    ["node-postgres: connection reset", coded("ECONNRESET")],
    ["node-postgres: connection ended without a message (coded by createPrisma's client)", coded(PG_CONNECTION_LOST)],
    ["SQLSTATE 57P01 admin_shutdown (a restart cut the connection)", coded("57P01", { severity: "FATAL" })],
    ["SQLSTATE 57P02 crash_shutdown", coded("57P02")],
    ["SQLSTATE 57P03 cannot_connect_now (shutting down, starting up)", coded("57P03")],
    ["SQLSTATE 08006 connection_failure (class 08)", coded("08006")],
    ["SQLSTATE 53300 too_many_connections", coded("53300")],
    ["Prisma P1001 can't reach the server", prisma("P1001", { kind: "DatabaseNotReachable", host: "127.0.0.1", port: 5432 })],
    ["Prisma P1017 the server closed the connection", coded("P1017")],
    ["Prisma P2010 raw query with SQLSTATE 57P01", prisma("P2010", { kind: "postgres", originalCode: "57P01" })],
    ["Prisma P2039 with SQLSTATE 57P03", prisma("P2039", { kind: "postgres", originalCode: "57P03" })],
    ["Prisma P2010 with the adapter's DatabaseNotReachable", prisma("P2010", { kind: "DatabaseNotReachable" })],
    ["wrapped in a cause", new Error("round failed", { cause: coded("ECONNREFUSED") })],
    ["an AggregateError of connect attempts", Object.assign(new AggregateError([coded("ECONNREFUSED")], "x"), {})],
  ];
  for (const [what, error] of unavailable) t.true(isDatabaseUnavailable(error), what);
});

test("a request's own failure or an unknown error is not 'unavailable' (it stays a 500), whatever its text says", (t) => {
  const available: Array<[string, unknown]> = [
    ["unique violation", coded("23505")],
    ["syntax error", coded("42601")],
    ["serialization failure", coded("40001")],
    ["Prisma P2002", coded("P2002")],
    ["Prisma P2010 with a constraint SQLSTATE", prisma("P2010", { kind: "postgres", originalCode: "23503" })],
    ["a message that reads like an outage, without a code", new Error("Connection terminated unexpectedly: ECONNREFUSED 57P01")],
    ["not an error", "ECONNREFUSED"],
    ["undefined", undefined],
  ];
  for (const [what, error] of available) t.false(isDatabaseUnavailable(error), what);
});

test("a cause chain that loops is read once", (t) => {
  const a = new Error("a") as Error & { cause?: unknown };
  const b = new Error("b", { cause: a });
  a.cause = b;
  t.false(isDatabaseUnavailable(a));
});

test("isUniqueViolation: node-postgres's SQLSTATE, Prisma's P2002 and its adapter's kind", (t) => {
  t.true(isUniqueViolation(coded("23505")));
  t.true(isUniqueViolation(coded("P2002")));
  t.true(isUniqueViolation(prisma("P2010", { kind: "UniqueConstraintViolation" })));
  t.false(isUniqueViolation(coded("57P01")));
});
