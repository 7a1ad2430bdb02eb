/**
 * Retention of published outbox rows beside the relay (ARCHITECTURE.md, "The relay's claim"): while rows keep
 * committing, two relays publish them and retention removes the published ones as soon as it may (limit 0, small
 * batches). The relay reads unpublished rows only, so removing published rows changes nothing it reads: every
 * row is published exactly once, and none is removed unpublished (it would never be published).
 */
import test from "ava";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { createRelay } from "../../services/relay/relay.js";
import { publishedOutboxRetention } from "../../services/relay/statements.js";
import { runRetentionPass } from "../../services/retention/run-retention.js";
import type { EventBus } from "../../services/shared/adapters/bus.js";
import { createMemoryBus } from "../../services/shared/adapters/memory-bus.js";
import { shardOf } from "../../services/shared/adapters/outbox.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { eventually } from "../helpers/eventually.js";

const log = createLogger("retention-relay-test", "silent");
let db: TestDatabase;
test.before(async () => {
  db = await createTestDatabase();
});
test.after.always(async () => {
  await db?.drop();
});

test("relay and retention together while rows keep committing: every row is published exactly once and none is removed unpublished", async (t) => {
  const sent = new Map<number, number>();
  const base = createMemoryBus();
  const bus: EventBus = {
    ...base,
    publish: async (_topic, messages) => {
      // Yield between sends, so retention's statements interleave with the relays' passes.
      await new Promise((resolve) => setImmediate(resolve));
      for (const m of messages) {
        const { seq } = JSON.parse(Buffer.from(m.value).toString("utf8")) as { seq: number };
        sent.set(seq, (sent.get(seq) ?? 0) + 1);
      }
    },
  };
  const relays = [0, 1].map(() => createRelay({ prisma: db.prisma, bus, log, batchSize: 4 }));
  const keys = Array.from({ length: 32 }, (_, i) => `k${i}`);
  const rule = publishedOutboxRetention(0);
  let producing = true;
  let written = 0;
  let removed = 0;
  const producer = (async () => {
    while (producing) {
      const rows = keys.slice(0, 8).map((_, i) => {
        const key = keys[(written + i) % keys.length]!;
        return { topic: "retention-relay", key, type: "test.event", payload: Buffer.from(JSON.stringify({ seq: written + i })), shard: shardOf(key) };
      });
      await db.prisma.outboxMessage.createMany({ data: rows });
      written += rows.length;
    }
  })();
  const loops = relays.map(async (relay) => {
    while (producing) await relay.runOnce();
  });
  const retention = (async () => {
    while (producing) {
      // The injected clock a minute ahead: every row published by now is due at once.
      const pass = await runRetentionPass({ db: db.prisma, rules: [rule], batchRows: 3, passMaxRows: 30, log }, new Date(Date.now() + 60_000));
      removed += pass.removed.published_outbox ?? 0;
    }
  })();
  try {
    await eventually(() => written >= 400 && removed >= 100, { timeoutMs: 60_000, message: "400 rows written, 100 removed while publishing" });
  } finally {
    producing = false;
    await Promise.all([producer, retention, ...loops]);
  }
  for (const relay of relays) while ((await relay.runOnce()).kind !== "idle");
  const twice = [...sent].filter(([, n]) => n > 1);
  t.deepEqual(twice, [], "no row published twice");
  t.is(sent.size, written, "every row published: none was removed before it was");
  const left = await db.prisma.outboxMessage.count({ where: { publishedAt: null } });
  t.is(left, 0);
  t.true(removed >= 100, `retention removed rows meanwhile (${removed})`);
});
