/**
 * Retention of deliveries' history (endedDeliveryRetention, services/delivery/pipeline/write-deliveries.ts): a delivery
 * that ended (delivered, failed, withdrawn) more than RETENTION_DELIVERY_DAYS ago is removed with its attempts; a
 * younger ended one, and every pending one (due, retried, leased, parked, an unclaimed pull row, a redelivered one)
 * stays whatever its age; a second pass removes nothing. The clock is injected: rows are written with timestamps
 * relative to `now`, never waited for.
 */
import { randomUUID } from "node:crypto";
import test from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { endedDeliveryRetention, redeliverSql } from "../../services/delivery/pipeline/write-deliveries.js";
import { runRetentionPass } from "../../services/retention/run-retention.js";
import type { RetentionRule } from "../../services/shared/adapters/retention-rule.js";
import { executeSql } from "../../services/shared/adapters/sql/executor.js";
import { createLogger } from "../../services/shared/runtime/log.js";

const DAY_MS = 86_400_000;
const KEEP_DAYS = 90;
const log = createLogger("delivery-retention-test", "silent");
/** The injected clock: every row's timestamps are relative to it. */
const NOW = new Date("2027-03-01T12:00:00.000Z");
const ago = (days: number) => new Date(NOW.getTime() - days * DAY_MS);

let db: TestDatabase;
let serverId: string;
test.before(async () => {
  db = await createTestDatabase();
  serverId = (await db.prisma.server.create({ data: { name: "history" } })).id;
});
test.after.always(async () => {
  await db?.drop();
});

function pass(rules: RetentionRule[], now = NOW) {
  return runRetentionPass({ db: db.prisma, rules, batchRows: 2, passMaxRows: 10_000, log }, now);
}

/** What a stored delivery is, for the test: its status, transport and times. */
interface Row {
  status: "pending" | "delivered" | "failed" | "withdrawn";
  transport?: "callback" | "pull" | "votifier";
  createdAt: Date;
  deliveredAt?: Date;
  failedAt?: Date;
  leaseUntil?: Date;
  parkedAt?: Date;
  /** Attempt rows to write (each with its exchange). */
  attempts?: number;
}

/** Stores a delivery as the pipeline leaves it (and its attempts); its id. */
async function store(row: Row): Promise<string> {
  const id = randomUUID();
  await executeSql(
    db.prisma,
    Prisma.sql`INSERT INTO deliveries (id, server_id, heart_id, dedup_key, transport, event_type, username, voter_identity, period, counted_at,
        status, delivered_at, failed_at, lease_until, parked_at, created_at, next_attempt_at)
      VALUES (${id}::uuid, ${serverId}::uuid, gen_random_uuid(), ${id}, ${row.transport ?? "callback"}::"DeliveryTransport", 'heart.counted', 'v', 'v', '2027-03',
        ${row.createdAt}, ${row.status}::"DeliveryStatus", ${row.deliveredAt ?? null}::timestamptz, ${row.failedAt ?? null}::timestamptz,
        ${row.leaseUntil ?? null}::timestamptz, ${row.parkedAt ?? null}::timestamptz, ${row.createdAt}, ${row.createdAt})`,
  );
  for (let n = 1; n <= (row.attempts ?? 0); n++)
    await executeSql(
      db.prisma,
      Prisma.sql`INSERT INTO delivery_attempts (delivery_id, server_id, attempt, url, started_at, status_code, latency_ms, succeeded, request_body, response_body)
        VALUES (${id}::uuid, ${serverId}::uuid, ${n}, 'https://example.test/', ${row.createdAt}, 200, 5, true, '{}', 'ok')`,
    );
  return id;
}

async function remaining(): Promise<{ deliveries: Set<string>; attemptsOf: Map<string, number> }> {
  const deliveries = new Set((await db.prisma.delivery.findMany({ select: { id: true } })).map((d) => d.id));
  const attemptsOf = new Map<string, number>();
  for (const a of await db.prisma.deliveryAttempt.findMany({ select: { deliveryId: true } }))
    attemptsOf.set(a.deliveryId, (attemptsOf.get(a.deliveryId) ?? 0) + 1);
  return { deliveries, attemptsOf };
}

test.serial(
  "ended deliveries (delivered, failed, withdrawn) past RETENTION_DELIVERY_DAYS go with their attempts; younger ended ones and every pending one stay whatever their age; a second pass removes nothing",
  async (t) => {
    await db.prisma.delivery.deleteMany();
    const rule = endedDeliveryRetention(KEEP_DAYS * 86_400);
    const old = {
      delivered: await store({ status: "delivered", createdAt: ago(95), deliveredAt: ago(91), attempts: 2 }),
      failed: await store({ status: "failed", createdAt: ago(100), failedAt: ago(90.01), attempts: 3 }),
      // A withdrawn delivery records no resolution time: it ages from when it was stored.
      withdrawn: await store({ status: "withdrawn", createdAt: ago(91), attempts: 1 }),
      claimedPull: await store({ status: "delivered", transport: "pull", createdAt: ago(200), deliveredAt: ago(150), attempts: 1 }),
    };
    const kept = {
      // Ended less than 90 days ago, though stored long before: the age counts from the end.
      delivered: await store({ status: "delivered", createdAt: ago(300), deliveredAt: ago(89), attempts: 1 }),
      failed: await store({ status: "failed", createdAt: ago(200), failedAt: ago(10), attempts: 2 }),
      withdrawn: await store({ status: "withdrawn", createdAt: ago(30) }),
      // Pending, whatever their age: due, retried (attempts logged), leased, parked (held), an unclaimed pull row.
      due: await store({ status: "pending", createdAt: ago(400) }),
      retried: await store({ status: "pending", createdAt: ago(400), attempts: 4 }),
      leased: await store({ status: "pending", createdAt: ago(400), leaseUntil: new Date(NOW.getTime() + 60_000), attempts: 1 }),
      parked: await store({ status: "pending", createdAt: ago(400), parkedAt: ago(399) }),
      pull: await store({ status: "pending", transport: "pull", createdAt: ago(400) }),
      votifier: await store({ status: "pending", transport: "votifier", createdAt: ago(400), attempts: 1 }),
    };
    const first = await pass([rule]);
    t.is(first.removed.ended_deliveries, 4);
    const after = await remaining();
    t.deepEqual([...after.deliveries].sort(), Object.values(kept).sort(), "the old ended deliveries went, every other stayed");
    for (const id of Object.values(old)) t.false(after.attemptsOf.has(id), "a removed delivery's attempts went with it");
    t.deepEqual(
      Object.fromEntries(Object.entries(kept).map(([name, id]) => [name, after.attemptsOf.get(id) ?? 0])),
      { delivered: 1, failed: 2, withdrawn: 0, due: 0, retried: 4, leased: 1, parked: 0, pull: 0, votifier: 1 },
      "a kept delivery keeps every attempt",
    );
    t.is(Math.round(first.oldestAgeSeconds.ended_deliveries! / 86_400), 89, "the oldest ended delivery left ended 89 days ago");
    const second = await pass([rule]);
    t.is(second.removed.ended_deliveries, 0);
    t.is((await remaining()).deliveries.size, Object.keys(kept).length);
  },
);

test.serial("a redelivered delivery is pending again and stays; once it ends anew it ages from its new end", async (t) => {
  await db.prisma.delivery.deleteMany();
  const rule = endedDeliveryRetention(KEEP_DAYS * 86_400);
  const id = await store({ status: "failed", createdAt: ago(200), failedAt: ago(150), attempts: 2 });
  // The owner sends it again (the redeliver move): pending, its end time cleared, its attempt log kept.
  t.is(await executeSql(db.prisma, redeliverSql(Prisma.sql`d.id = ${id}::uuid`, ago(1), Prisma.sql`d.id`)), 1);
  t.is((await pass([rule])).removed.ended_deliveries, 0, "pending again: kept");
  t.is((await remaining()).attemptsOf.get(id), 2);
  // Delivered a day ago: kept until 90 days after that.
  await db.prisma.delivery.update({ where: { id }, data: { status: "delivered", deliveredAt: ago(1) } });
  t.is((await pass([rule])).removed.ended_deliveries, 0);
  t.is((await pass([rule], new Date(NOW.getTime() + (KEEP_DAYS - 2) * DAY_MS))).removed.ended_deliveries, 0);
  t.is((await pass([rule], new Date(NOW.getTime() + KEEP_DAYS * DAY_MS))).removed.ended_deliveries, 1);
  t.deepEqual([...(await remaining()).deliveries], []);
});

test.serial("with no ended delivery the oldest age is null, and a pass removes nothing", async (t) => {
  await db.prisma.delivery.deleteMany();
  await store({ status: "pending", createdAt: ago(1_000) });
  const result = await pass([endedDeliveryRetention(KEEP_DAYS * 86_400)]);
  t.is(result.removed.ended_deliveries, 0);
  t.is(result.oldestAgeSeconds.ended_deliveries, null);
});
