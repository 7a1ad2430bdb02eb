import { randomBytes } from "node:crypto";
import pg from "pg";
import { createPrisma, type PrismaClient } from "../../services/shared/db.js";
import { seedServiceTokenSql } from "./service-token.js";

/** A database of its own for one test file, cloned from the migrated template. */
export interface TestDatabase {
  url: string;
  name: string;
  prisma: PrismaClient;
  drop(): Promise<void>;
}

/** The test runner (scripts/test.ts) sets these after migrating the template database. */
function harnessEnv(): { adminUrl: string; template: string } {
  const adminUrl = process.env.TEST_PG_ADMIN_URL;
  const template = process.env.TEST_TEMPLATE_DB;
  if (!adminUrl || !template) {
    throw new Error("TEST_PG_ADMIN_URL/TEST_TEMPLATE_DB are not set: run integration tests through `npm test` (scripts/test.ts)");
  }
  return { adminUrl, template };
}

/** Returns `url` with its database name replaced. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** Creates a fresh database from the migrated template (fast: a file copy on the server). */
export async function createTestDatabase(opts: { maxConnections?: number } = {}): Promise<TestDatabase> {
  const { adminUrl, template } = harnessEnv();
  const name = `t_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  // Every test database holds the shared test token (service-token.ts), so the shared clients are authenticated.
  const seed = new pg.Client({ connectionString: url });
  await seed.connect();
  try {
    const { text, values } = seedServiceTokenSql();
    await seed.query(text, values);
  } finally {
    await seed.end();
  }
  const prisma = createPrisma(url, { maxConnections: opts.maxConnections ?? 10 });
  return {
    url,
    name,
    prisma,
    async drop() {
      await prisma.$disconnect();
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
