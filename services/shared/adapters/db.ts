import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { Prisma as PrismaNs, PrismaClient } from "../../../gen/prisma/client.js";
import { PLANNED_EACH_RUN, registerSqlPool, runSql } from "./sql/executor.js";
import { ConnectionLossCodedClient } from "./sql/pg-internals.js";

export { PrismaClient };
export type { Prisma } from "../../../gen/prisma/client.js";

/** Distinct SQL texts prepared as named statements at most; texts beyond it run unnamed (parsed each time). */
export const MAX_NAMED_STATEMENTS = 500;

/**
 * Names each distinct SQL text once (`p1`, `p2`, ...), so node-postgres prepares it once per
 * connection and PostgreSQL parses it once and may reuse its plan, instead of parsing and
 * planning every execution afresh. Bounded: Prisma writes a new text for each length of an
 * `IN (...)` list, so only the first MAX_NAMED_STATEMENTS texts are named; the rest stay unnamed. A text that starts
 * with PLANNED_EACH_RUN (planEachRun) is never named: PostgreSQL plans it with its values each time.
 */
export function createStatementNamer(limit = MAX_NAMED_STATEMENTS): (query: { sql: string }) => string | undefined {
  const names = new Map<string, string>();
  return ({ sql }) => {
    // A statement planned with its values on every run (planEachRun) stays unnamed.
    if (sql.startsWith(PLANNED_EACH_RUN)) return undefined;
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
  registerSqlPool(client, { pool, nameOf });
  return client;
}

/** The transaction client handed to interactive-transaction callbacks. */
export type Tx = Parameters<Parameters<PrismaClient["$transaction"]>[0]>[0];

/** Checks the database answers; used by /readyz. */
export async function pingDatabase(prisma: PrismaClient): Promise<void> {
  await runSql(prisma, PrismaNs.sql`SELECT 1`);
}
