/**
 * CastHeart's group commit (services/hearts/cast-heart-batch.ts) against real
 * PostgreSQL: per-cast isolation inside one batch, the cooldown race inside one
 * batch and across batches of two service instances (the conditional upsert
 * decides), one ranking increment per server per batch that still adds up, and
 * overload answered as resource_exhausted with a retry hint and nothing written.
 */
import anyTest, { type TestFn } from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { DomainError, RETRY_AFTER_HEADER } from "../../services/shared/rpc/errors.js";
import type { ItemOutcome } from "../../services/shared/runtime/group-commit.js";
import { castHeartBatch, createCastHeartQueue, type HeartCast, type HeartCastResult } from "../../services/hearts/cast-heart-batch.js";
import { DEFAULT_FRAUD_RULES } from "../../services/hearts/domain/fraud-rules.js";
import { toVoterAddress } from "../../services/hearts/domain/ip.js";
import { createTestClock, insertServer, startHarness, type Harness, type TestClock } from "../../scripts/harness/delivery-harness.js";

const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";
const test = anyTest as TestFn<{ h: Harness; clock: TestClock }>;

test.before(async (t) => {
  const clock = createTestClock("2026-05-10T12:00:00.000Z");
  t.context = { clock, h: await startHarness({ now: () => clock.now() }) };
});
test.after.always(async (t) => {
  await t.context.h?.close();
});

let ipCounter = 0;
/** A fresh address in a fresh /24 per call, so the IP and subnet rules of one cast never see another's. */
function freshIp(): string {
  ipCounter++;
  return `203.${(ipCounter >> 8) & 0xff}.${ipCounter & 0xff}.7`;
}

function heartCast(clock: TestClock, serverId: string, voterIdentity: string, extra: Partial<{ username: string; ip: string }> = {}): HeartCast {
  return { serverId, voterIdentity, username: extra.username ?? "Steve", userAgent: UA, address: toVoterAddress(extra.ip ?? freshIp())!, at: clock.now() };
}

function label(o: ItemOutcome<HeartCastResult>): string {
  if (!o.ok) return o.error instanceof DomainError ? `error ${o.error.kind}` : `failed ${String(o.error)}`;
  return o.value.kind;
}

test.serial("one batch mixing counted, unknown-server, fraud, cooldown and a second heart of the same voter: each cast gets its own answer", async (t) => {
  const { h, clock } = t.context;
  clock.set("2026-05-10T12:00:00.000Z");
  const serverId = await insertServer(h.db.prisma);
  const [rested] = await castHeartBatch(h.deps, DEFAULT_FRAUD_RULES, [heartCast(clock, serverId, "rested")]);
  t.is(rested && label(rested), "counted");
  clock.set("2026-05-10T13:00:00.000Z");

  const casts = [
    heartCast(clock, serverId, "alice"),
    heartCast(clock, "00000000-0000-4000-8000-000000000000", "bob"),
    heartCast(clock, serverId, "carol", { username: "bad\u0007name" }),
    heartCast(clock, serverId, "rested"),
    heartCast(clock, serverId, "dave"),
    heartCast(clock, serverId, "alice"),
  ];
  const outcomes = await castHeartBatch(h.deps, DEFAULT_FRAUD_RULES, casts);
  t.deepEqual(outcomes.map(label), ["counted", "error unknown_server", "fraud", "cooldown", "counted", "cooldown"]);
  const cooldown = outcomes[5]!.ok ? outcomes[5]!.value : undefined;
  t.is(
    cooldown?.kind === "cooldown" ? cooldown.nextEligibleAt.toISOString() : undefined,
    "2026-05-11T13:00:00.000Z",
    "the second heart of alice waits for the first one's 24 h",
  );

  const rows = await h.db.prisma.heart.findMany({ where: { serverId }, orderBy: { createdAt: "asc" } });
  t.is(rows.length, 6, "every cast of a known server is recorded, the unknown server's is not");
  t.deepEqual(
    rows
      .filter((r) => r.voterIdentity === "alice")
      .map((r) => r.verdict)
      .sort(),
    ["cooldown", "counted"],
  );
  t.is(await h.db.prisma.heart.count({ where: { voterIdentity: "bob" } }), 0);
  t.is((await h.db.prisma.serverRanking.findFirstOrThrow({ where: { serverId } })).hearts, 3, "rested, alice and dave counted");
  t.is(await h.db.prisma.outboxMessage.count({ where: { key: serverId } }), 3);
});

test.serial("a round whose write fails as a whole is retried cast by cast: only the failing cast fails", async (t) => {
  const { h, clock } = t.context;
  const serverId = await insertServer(h.db.prisma);
  // A NUL cannot be stored in PostgreSQL text (CastHeart refuses it before the queue; here it stands for any write failure).
  const casts = [heartCast(clock, serverId, "p1"), heartCast(clock, serverId, "p2", { username: "nul\u0000" }), heartCast(clock, serverId, "p3")];
  const outcomes = await castHeartBatch(h.deps, DEFAULT_FRAUD_RULES, casts);
  t.deepEqual(
    outcomes.map((o) => (o.ok ? o.value.kind : "failed")),
    ["counted", "failed", "counted"],
  );
  t.is(await h.db.prisma.heart.count({ where: { serverId } }), 2);
  t.is((await h.db.prisma.serverRanking.findFirstOrThrow({ where: { serverId } })).hearts, 2);
});

test.serial("two instances, 20 concurrent casts of one voter: exactly one counts (the conditional upsert decides across batches)", async (t) => {
  const { h, clock } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const [a, b] = [createCastHeartQueue(h.deps, DEFAULT_FRAUD_RULES), createCastHeartQueue(h.deps, DEFAULT_FRAUD_RULES)];
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).submit(heartCast(clock, serverId, "racer"))));
  t.is(results.filter((r) => r.kind === "counted").length, 1);
  t.is(results.filter((r) => r.kind === "cooldown").length, 19);
  t.is(await h.db.prisma.heart.count({ where: { serverId, counted: true } }), 1);
  t.is(await h.db.prisma.heart.count({ where: { serverId, verdict: "cooldown" } }), 19);
  t.is(await h.db.prisma.outboxMessage.count({ where: { key: serverId } }), 1);
  t.is((await h.db.prisma.serverRanking.findFirstOrThrow({ where: { serverId } })).hearts, 1);
  t.like(await h.db.prisma.voterState.findFirstOrThrow({ where: { serverId, voterIdentity: "racer" } }), { streakDays: 1 });
});

test.serial("300 concurrent casts to ONE server through two instances: batches form, and the ranking adds up to the counted hearts", async (t) => {
  const { h, clock } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const queues = [createCastHeartQueue(h.deps, DEFAULT_FRAUD_RULES), createCastHeartQueue(h.deps, DEFAULT_FRAUD_RULES)];
  const results = await Promise.all(Array.from({ length: 300 }, (_, i) => queues[i % 2]!.submit(heartCast(clock, serverId, `fan-${i}`))));
  t.is(results.filter((r) => r.kind === "counted").length, 300);
  t.true(Math.max(...queues.map((q) => q.stats().largestBatch)) > 1, "concurrent casts share batches");
  t.is((await h.db.prisma.serverRanking.findFirstOrThrow({ where: { serverId } })).hearts, 300);
  t.is(await h.db.prisma.outboxMessage.count({ where: { key: serverId } }), 300);
  const ranking = await h.hearts.getRanking({ period: "2026-05" });
  t.is(ranking.entries.find((e) => e.serverId === serverId)?.hearts, 300n);
});

test.serial("past capacity, CastHeart answers resource_exhausted with a retry hint and writes nothing; every counted answer has its rows", async (t) => {
  const { clock } = t.context;
  const h = await startHarness({ now: () => clock.now(), castHeartBatch: { maxBatch: 2, maxQueue: 2, maxInFlight: 1 } });
  t.teardown(() => h.close());
  const serverId = await insertServer(h.db.prisma);
  const settled = await Promise.allSettled(
    Array.from({ length: 60 }, (_, i) => h.hearts.castHeart({ serverId, voterIdentity: `v-${i}`, username: "Steve", ip: freshIp(), userAgent: UA })),
  );
  let counted = 0;
  let refused = 0;
  for (const [i, s] of settled.entries()) {
    const rows = await h.db.prisma.heart.count({ where: { serverId, voterIdentity: `v-${i}` } });
    if (s.status === "fulfilled") {
      t.true(s.value.counted, `cast ${i}: ${s.value.reason}`);
      t.is(await h.db.prisma.heart.count({ where: { id: s.value.heartId, counted: true } }), 1, `counted cast ${i} has its heart`);
      counted++;
    } else {
      const error = ConnectError.from(s.reason);
      t.is(error.code, Code.ResourceExhausted, `cast ${i}: ${error.message}`);
      t.true(Number(error.metadata.get(RETRY_AFTER_HEADER)) >= 1);
      t.is(rows, 0, `refused cast ${i} wrote nothing`);
      refused++;
    }
  }
  t.true(counted > 0);
  t.true(refused > 0, "60 calls at once overflow a queue of 2");
  t.is((await h.db.prisma.serverRanking.findFirstOrThrow({ where: { serverId } })).hearts, counted);
  t.is(await h.db.prisma.outboxMessage.count({ where: { key: serverId } }), counted);
});
