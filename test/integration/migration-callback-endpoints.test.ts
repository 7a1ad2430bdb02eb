/**
 * The callback_endpoints data migration: a database with servers' callback settings, callback
 * secrets, deliveries and health (the schema before it) keeps all of them, now on each server's
 * default endpoint, and a server inserted afterwards gets its default endpoint from the trigger.
 */
import test from "ava";
import { cpSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes, randomUUID } from "node:crypto";
import pg from "pg";
import { applyMigrations, DEFAULT_MIGRATIONS_DIR } from "../../scripts/db/schema-engine.js";
import { withDatabase } from "../../scripts/harness/db.js";

const adminUrl = process.env.TEST_PG_ADMIN_URL ?? "";
const MIGRATION = "20261127110433_callback_endpoints";

test("existing callback settings, secrets, deliveries and health move to each server's default endpoint; new servers get one too", async (t) => {
  const name = `m_${randomBytes(5).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  const before = mkdtempSync(join(tmpdir(), "migrations-"));
  t.teardown(async () => {
    rmSync(before, { recursive: true, force: true });
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.end();
  });
  for (const entry of readdirSync(DEFAULT_MIGRATIONS_DIR)) {
    if (entry < MIGRATION || entry === "migration_lock.toml") cpSync(join(DEFAULT_MIGRATIONS_DIR, entry), join(before, entry), { recursive: true });
  }
  const url = withDatabase(adminUrl, name);
  await applyMigrations(url, { migrationsDir: before });
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  t.teardown(() => db.end());
  const withUrl = randomUUID();
  const withoutUrl = randomUUID();
  await db.query(
    `INSERT INTO servers (id, name, callback_url, standard_webhooks, public_key_signatures, callback_disabled_at, callback_disabled_reason)
     VALUES ($1, 'with', 'https://hooks.example/cb', true, true, '2026-11-01T00:00:00Z', '410 Gone'), ($2, 'without', NULL, false, false, NULL, NULL)`,
    [withUrl, withoutUrl],
  );
  await db.query(
    `INSERT INTO server_secrets (id, server_id, purpose, kid, ciphertext) VALUES
       ($1, $3, 'callback', 'k1', 'v1:a:b:c'), ($2, $3, 'referral', 'k2', 'v1:a:b:c')`,
    [randomUUID(), randomUUID(), withUrl],
  );
  const heartId = randomUUID();
  for (const transport of ["callback", "votifier"]) {
    await db.query(
      `INSERT INTO deliveries (id, server_id, heart_id, transport, dedup_key, event_type, username, voter_identity, period, counted_at)
       VALUES ($1, $2, $3::uuid, $4, $3::text, 'heart.counted', 'Steve', 'v', '2026-11', now())`,
      [randomUUID(), withUrl, heartId, transport],
    );
  }
  await db.query(`INSERT INTO callback_health (server_id, last_failure_reason) VALUES ($1, 'receiver answered 500')`, [withUrl]);

  await applyMigrations(url);

  const { rows: endpoints } = await db.query(
    `SELECT server_id::text, is_default, url, event_types, payload_version, standard_webhooks, public_key_signatures, disabled_reason, id::text
     FROM callback_endpoints ORDER BY url NULLS LAST`,
  );
  t.like(endpoints[0], {
    server_id: withUrl,
    is_default: true,
    url: "https://hooks.example/cb",
    event_types: ["heart.counted"],
    payload_version: 1,
    standard_webhooks: true,
    public_key_signatures: true,
    disabled_reason: "410 Gone",
  });
  t.like(endpoints[1], { server_id: withoutUrl, is_default: true, url: null, event_types: ["heart.counted"], standard_webhooks: false });
  t.is(endpoints.length, 2);
  const defaultId = endpoints[0].id as string;
  const { rows: secrets } = await db.query(`SELECT purpose::text, endpoint_id::text FROM server_secrets ORDER BY kid`);
  t.deepEqual(secrets, [
    { purpose: "callback", endpoint_id: defaultId },
    { purpose: "referral", endpoint_id: null },
  ]);
  const { rows: deliveries } = await db.query(`SELECT transport::text, endpoint_id::text FROM deliveries ORDER BY transport`);
  t.deepEqual(deliveries, [
    { transport: "callback", endpoint_id: defaultId },
    { transport: "votifier", endpoint_id: null },
  ]);
  const { rows: health } = await db.query(`SELECT endpoint_id::text, last_failure_reason FROM callback_health`);
  t.deepEqual(health, [{ endpoint_id: defaultId, last_failure_reason: "receiver answered 500" }]);
  // The unique index treats a null endpoint as one value: a second Votifier row of the heart is refused.
  const again = await db.query(
    `INSERT INTO deliveries (id, server_id, heart_id, transport, dedup_key, event_type, username, voter_identity, period, counted_at)
     VALUES ($1, $2, $3::uuid, 'votifier', $3::text, 'heart.counted', 'Steve', 'v', '2026-11', now())
     ON CONFLICT (server_id, transport, endpoint_id, dedup_key) DO NOTHING`,
    [randomUUID(), withUrl, heartId],
  );
  t.is(again.rowCount, 0);
  const later = randomUUID();
  await db.query(`INSERT INTO servers (id, name) VALUES ($1, 'later')`, [later]);
  const { rows: created } = await db.query(`SELECT is_default, url, event_types FROM callback_endpoints WHERE server_id = $1`, [later]);
  t.deepEqual(created, [{ is_default: true, url: null, event_types: ["heart.counted"] }]);
});
