/** The history template's table sizes (bench/lib/history-template.ts measureHistoryTables), read by the capacity model. */
import test from "ava";
import pg from "pg";
import { measureHistoryTables } from "../../bench/lib/history-template.js";
import { createTestDatabase } from "../../scripts/harness/db.js";

test("every table of the database is measured: its total size in bytes and its exact row count", async (t) => {
  const db = await createTestDatabase({ maxConnections: 1 });
  t.teardown(() => db.drop());
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  t.teardown(() => client.end());
  await client.query(
    `INSERT INTO outbox (topic, key, type, payload, shard) SELECT 'hearts.events.v1', 'k' || i, 't', decode(repeat('ab', 500), 'hex'), 0 FROM generate_series(1, 250) i`,
  );
  const tables = await measureHistoryTables(client);
  t.is(tables.outbox?.rows, 250);
  t.true((tables.outbox?.bytes ?? 0) >= 250 * 500, "at least the payloads' bytes");
  t.is(tables.hearts?.rows, 0);
  t.true((tables.hearts?.bytes ?? 0) > 0, "an empty table still has its indexes' pages");
});
