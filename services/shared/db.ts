import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "../../gen/prisma/client.js";

export { PrismaClient };
export type { Prisma } from "../../gen/prisma/client.js";

/** The one PrismaClient factory: every process and test builds its client here. */
export function createPrisma(databaseUrl: string, opts: { maxConnections?: number } = {}): PrismaClient {
  const adapter = new PrismaPg({
    connectionString: databaseUrl,
    max: opts.maxConnections ?? 10,
    // Failure policy: fail fast rather than queue forever when the database is gone.
    connectionTimeoutMillis: 10_000,
  });
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
