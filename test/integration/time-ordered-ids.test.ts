/**
 * The rows the database names itself in the big tables (the consumer's deliveries) get time-ordered ids, uuid version
 * 7, as the rows the application names do (test/unit/time-ordered-ids.test.ts): `uuid_v7()` of migration
 * 20261130152000_uuid_v7.
 */
import anyTest, { type TestFn } from "ava";
import { randomUUID } from "node:crypto";
import { Prisma } from "../../gen/prisma/client.js";
import { insertAndLeaseDeliveries } from "../../services/delivery/pipeline/insert-deliveries.js";
import { runSql } from "../../services/shared/adapters/sql/executor.js";
import { isUuid } from "../../services/shared/values/ids.js";
import { insertServer, startMeasuredHarness, type MeasuredHarness } from "../../scripts/harness/delivery-harness.js";
import { dispatcherRoomAt } from "../helpers/skewed-history.js";

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void> }>;

test.before(async (t) => {
  t.context = await startMeasuredHarness("2026-05-10T12:00:00.000Z");
});
test.after.always(async (t) => {
  await t.context.close?.();
});

/** The milliseconds in a time-ordered id's first 48 bits. */
const millisOf = (id: string) => Number.parseInt(id.replaceAll("-", "").slice(0, 12), 16);

test.serial("uuid_v7() is a uuid of version 7 and variant 10 whose first 48 bits are the database's clock in milliseconds", async (t) => {
  const { h } = t.context;
  const before = Date.now();
  const rows = await runSql<{ id: string }>(h.db.prisma, Prisma.sql`SELECT uuid_v7()::text AS id FROM generate_series(1, 1000)`);
  const after = Date.now();
  t.is(new Set(rows.map((r) => r.id)).size, 1000);
  for (const { id } of rows) {
    t.true(isUuid(id));
    t.is(id[14], "7", id);
    t.true(["8", "9", "a", "b"].includes(id[19]!), id);
    // The database runs on this machine: its clock is this process's, give or take a second.
    t.true(millisOf(id) >= before - 1000 && millisOf(id) <= after + 1000, id);
  }
});

test.serial("the consumer's deliveries get time-ordered ids", async (t) => {
  const { h, clock } = t.context;
  const serverId = await insertServer(h.db.prisma, { callbackUrl: "http://127.0.0.1:9/callback" });
  const heartId = randomUUID();
  await insertAndLeaseDeliveries(
    h.db.prisma,
    [{ heartId, serverId, eventType: "heart.counted", username: "Steve", voterIdentity: "steve", period: "2026-05", streakDay: null, countedAt: clock.now() }],
    dispatcherRoomAt(clock.now()),
  );
  const [delivery] = await runSql<{ id: string }>(h.db.prisma, Prisma.sql`SELECT id::text FROM deliveries WHERE heart_id = ${heartId}::uuid`);
  t.is(delivery?.id[14], "7");
});
