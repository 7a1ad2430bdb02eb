import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "../../gen/prisma/client.js";

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
  const adapter = new PrismaPg(
    {
      connectionString: databaseUrl,
      max: opts.maxConnections ?? 10,
      // Failure policy: fail fast rather than queue forever when the database is gone.
      connectionTimeoutMillis: 10_000,
    },
    opts.namedStatements === false ? {} : { statementNameGenerator: createStatementNamer() as (query: { sql: string }) => string },
  );
  return new PrismaClient({ adapter });
}

/** The transaction client handed to interactive-transaction callbacks. */
export type Tx = Parameters<Parameters<PrismaClient["$transaction"]>[0]>[0];

/** PostgreSQL SQLSTATE codes the code classifies on (never on message text). */
export const PG_UNIQUE_VIOLATION = "23505";
export const PG_SERIALIZATION_FAILURE = "40001";

/** True when `error` is Prisma's unique-constraint violation (P2002 or SQLSTATE 23505). */
export function isUniqueViolation(error: unknown): boolean {
  const e = error as { code?: string; meta?: { driverAdapterError?: { cause?: { originalCode?: string; kind?: string } } } };
  if (e?.code === "P2002") return true;
  const cause = e?.meta?.driverAdapterError?.cause;
  return cause?.originalCode === PG_UNIQUE_VIOLATION || cause?.kind === "UniqueConstraintViolation";
}

/** Checks the database answers; used by /readyz. */
export async function pingDatabase(prisma: PrismaClient): Promise<void> {
  await prisma.$queryRaw`SELECT 1`;
}
