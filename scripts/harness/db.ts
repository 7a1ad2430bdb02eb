import { randomBytes } from "node:crypto";
import pg from "pg";
import { createPrisma, type PrismaClient } from "../../services/shared/adapters/db.js";
import { applyMigrations } from "../db/schema-engine.js";
import { startPostgres, type PostgresInstance } from "../infra/postgres.js";
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

/** Seeds TEST_SERVICE_TOKEN into the database at `url` (service-token.ts). */
async function seedServiceToken(url: string): Promise<void> {
  const seed = new pg.Client({ connectionString: url });
  await seed.connect();
  try {
    const { text, values } = seedServiceTokenSql();
    await seed.query(text, values);
  } finally {
    await seed.end();
  }
}

/** A migrated database on a PostgreSQL server of the test's own, which the test may stop and start. */
export interface PrivateDatabase extends TestDatabase {
  /** The test's own server: stopServer()/startServer()/restart() disturb no other test file. */
  server: PostgresInstance;
}

/**
 * Starts a PostgreSQL server of the caller's own (scripts/infra/postgres.ts), migrates a database on it
 * and seeds the test token, for tests that take the database away; drop() stops the server. Slower than
 * createTestDatabase (initdb and the migrations run), so only for outage tests.
 */
export async function createPrivateDatabase(opts: { maxConnections?: number } = {}): Promise<PrivateDatabase> {
  const server = await startPostgres({ maxConnections: 50 });
  try {
    const url = withDatabase(server.url, "private");
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    try {
      await admin.query('CREATE DATABASE "private"');
    } finally {
      await admin.end();
    }
    await applyMigrations(url);
    await seedServiceToken(url);
    const prisma = createPrisma(url, { maxConnections: opts.maxConnections ?? 10 });
    return {
      url,
      name: "private",
      prisma,
      server,
      async drop() {
        await prisma.$disconnect();
        await server.stop();
      },
    };
  } catch (error) {
    // Failure policy: a half-prepared server is stopped and removed; the cause is rethrown.
    await server.stop();
    throw error;
  }
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
  await seedServiceToken(url);
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
