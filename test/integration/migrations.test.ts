import test from "ava";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { applyMigrations, diffSchemaAgainstMigrations } from "../../scripts/db/schema-engine.js";
import { startEmbeddedPostgres, IN_MEMORY_DATA_DIR } from "../../scripts/infra/embedded-postgres.js";
import { withDatabase } from "../../scripts/harness/db.js";

const adminUrl = process.env.TEST_PG_ADMIN_URL ?? "";

async function withScratchDatabase<T>(fn: (url: string) => Promise<T>): Promise<T> {
  const name = `m_${randomBytes(5).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  try {
    return await fn(withDatabase(adminUrl, name));
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.end();
  }
}

async function migrationRows(url: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ migration_name: string; checksum: string; finished_at: Date | null }>(
      "SELECT migration_name, checksum, finished_at FROM _prisma_migrations ORDER BY migration_name",
    );
    return rows;
  } finally {
    await client.end();
  }
}

test("migrations apply to an empty PostgreSQL database, a second run applies nothing, and _prisma_migrations is kept as Prisma keeps it", async (t) => {
  await withScratchDatabase(async (url) => {
    const first = await applyMigrations(url);
    t.true(first.applied.length >= 1);
    const second = await applyMigrations(url);
    t.deepEqual(second.applied, [], "idempotent");
    const rows = await migrationRows(url);
    t.deepEqual(
      rows.map((r) => r.migration_name),
      first.applied,
    );
    for (const row of rows) {
      t.regex(row.checksum, /^[0-9a-f]{64}$/, "sha256 checksum as Prisma writes it");
      t.truthy(row.finished_at);
    }
  });
});

test("prisma/schema.prisma and prisma/migrations are in sync (no drift)", async (t) => {
  t.is((await diffSchemaAgainstMigrations(adminUrl)).trim(), "");
});

test("migrations apply to the embedded PGlite database and are idempotent there too", async (t) => {
  const embedded = await startEmbeddedPostgres(IN_MEMORY_DATA_DIR);
  try {
    const first = await applyMigrations(embedded.url);
    t.true(first.applied.length >= 1);
    t.deepEqual((await applyMigrations(embedded.url)).applied, []);
    t.is((await migrationRows(embedded.url)).length, first.applied.length);
  } finally {
    await embedded.stop();
  }
});
