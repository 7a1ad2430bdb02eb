/**
 * ApplyEvent's group commit (services/referral/apply-event.ts) against real
 * PostgreSQL: per-event isolation inside one batch, races between batches of two
 * service instances decided by the unique constraints, one advance per referral per
 * batch, and overload answered as resource_exhausted / 503 + Retry-After with
 * nothing written (never a 500, never an answered event lost).
 */
import anyTest, { type TestFn } from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { ReferralEventType } from "../../gen/proto/referral/v1/referral_pb.js";
import { applyEventBatch, createApplyEventQueue, MAX_TRANSACTION_RETRIES, type ApplyEventResult } from "../../services/referral/apply-event.js";
import { toApplyEventCommand, type ApplyEventCommand } from "../../services/referral/domain/commands.js";
import { DomainError, IllegalTransition, RETRY_AFTER_HEADER } from "../../services/shared/rpc/errors.js";
import { ERROR_TEXT } from "../../gateway/http-errors.js";
import type { ItemOutcome } from "../../services/shared/runtime/group-commit.js";
import { applyEvent, clickToken, createReferralServer, rpcError, startHarness, type Harness } from "../../scripts/harness/referral-harness.js";
import { nowSeconds, startGatewayStack } from "./gateway-stack.js";

const test = anyTest as TestFn<{ h: Harness }>;

test.before(async (t) => {
  t.context.h = await startHarness({ maxConnections: 20 });
  await installRaceLoser(t.context.h);
});
test.after.always(async (t) => {
  await t.context.h?.close();
});

function command(e: {
  serverId: string;
  event: "registered" | "qualified" | "reversed";
  token: string;
  serverEventId: string;
  refereeIdentity?: string;
}): ApplyEventCommand {
  return toApplyEventCommand({ ...e, refereeIdentity: e.refereeIdentity ?? "", ts: 0n, kid: "k1" });
}

/**
 * Stands in for a concurrent writer: while `lost_races.remaining` of a referral is above zero, an
 * UPDATE of that referral row changes nothing (a BEFORE trigger returning NULL), exactly what a
 * conditional write sees when another transaction moved the version first. `tries` counts the
 * conditional writes tried. Any other referral is untouched.
 */
async function installRaceLoser(h: Harness): Promise<void> {
  await h.db.prisma.$executeRawUnsafe(`CREATE TABLE lost_races (referral_id uuid PRIMARY KEY, remaining int NOT NULL, tries int NOT NULL DEFAULT 0)`);
  await h.db.prisma.$executeRawUnsafe(`
    CREATE FUNCTION lose_race() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE left_over int;
    BEGIN
      UPDATE lost_races SET tries = tries + 1, remaining = remaining - 1 WHERE referral_id = OLD.id RETURNING remaining INTO left_over;
      IF left_over IS NOT NULL AND left_over >= 0 THEN RETURN NULL; END IF;
      RETURN NEW;
    END $$`);
  await h.db.prisma.$executeRawUnsafe(`CREATE TRIGGER lose_race BEFORE UPDATE ON referrals FOR EACH ROW EXECUTE FUNCTION lose_race()`);
}

/** Makes the next `times` conditional writes of referral `id` lose (and restarts its count of tries). */
async function loseRaces(h: Harness, id: string, times: number): Promise<void> {
  await h.db.prisma.$executeRaw`INSERT INTO lost_races (referral_id, remaining) VALUES (${id}::uuid, ${times}::int)
    ON CONFLICT (referral_id) DO UPDATE SET remaining = EXCLUDED.remaining, tries = 0`;
}

/** The conditional writes of referral `id` tried since loseRaces. */
async function triedWrites(h: Harness, id: string): Promise<number> {
  const [row] = await h.db.prisma.$queryRaw<{ tries: number }[]>`SELECT tries FROM lost_races WHERE referral_id = ${id}::uuid`;
  return row?.tries ?? 0;
}

/** A readable label of one outcome. */
function label(o: ItemOutcome<ApplyEventResult>): string {
  if (!o.ok) {
    if (o.error instanceof IllegalTransition) return `422 from ${o.error.from}`;
    if (o.error instanceof DomainError) return `error ${o.error.kind}`;
    return `failed ${String(o.error)}`;
  }
  const r = o.value;
  return r.kind === "applied" ? `${r.advanced ? "advanced" : "idempotent"} ${r.state}` : r.kind;
}

test("one batch mixing valid, unknown-token, other-server, illegal-transition and duplicate events: each gets its own answer, errors leave no event row", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const { serverId: otherServer } = await createReferralServer(h, "Other");
  const fresh = await clickToken(h, serverId, "alice");
  const otherToken = await clickToken(h, otherServer, "alice");
  const unregistered = await clickToken(h, serverId, "alice");
  const replayed = await clickToken(h, serverId, "alice");
  await applyEvent(h, { serverId, event: "registered", token: replayed, serverEventId: "reg-carol", refereeIdentity: "carol" });
  const toQualify = await clickToken(h, serverId, "alice");
  await applyEvent(h, { serverId, event: "registered", token: toQualify, serverEventId: "reg-dave", refereeIdentity: "dave" });
  const rival = await clickToken(h, serverId, "erin");
  const joining = await clickToken(h, serverId, "alice");
  const reversed = await clickToken(h, serverId, "alice");
  await applyEvent(h, { serverId, event: "registered", token: reversed, serverEventId: "reg-gina", refereeIdentity: "gina" });
  await applyEvent(h, { serverId, event: "reversed", token: reversed, serverEventId: "rev-gina" });

  const batch = [
    command({ serverId, event: "registered", token: fresh, serverEventId: "reg-bob", refereeIdentity: "bob" }),
    command({ serverId, event: "registered", token: "no-such-token", serverEventId: "x", refereeIdentity: "bob2" }),
    command({ serverId, event: "registered", token: otherToken, serverEventId: "y", refereeIdentity: "bob3" }),
    command({ serverId, event: "qualified", token: unregistered, serverEventId: "q-early" }),
    command({ serverId, event: "registered", token: replayed, serverEventId: "reg-carol", refereeIdentity: "carol" }),
    command({ serverId, event: "qualified", token: toQualify, serverEventId: "q-dave" }),
    command({ serverId, event: "registered", token: rival, serverEventId: "reg-dave-rival", refereeIdentity: "dave" }),
    command({ serverId, event: "registered", token: joining, serverEventId: "reg-carol-2", refereeIdentity: "carol" }),
    command({ serverId, event: "qualified", token: reversed, serverEventId: "q-gina" }),
  ];
  const outcomes = await applyEventBatch(h.deps, batch);
  t.deepEqual(outcomes.map(label), [
    "advanced registered",
    "error unknown_token",
    "error unknown_token",
    "422 from clicked",
    "duplicate",
    "advanced qualified",
    "first_touch_conflict",
    "idempotent registered",
    "422 from reversed",
  ]);

  const events = await h.db.prisma.referralEvent.findMany({ where: { serverId } });
  const outcomeOf = (id: string) => events.find((e) => e.serverEventId === id)?.outcome ?? "none";
  t.is(outcomeOf("reg-bob"), "advanced");
  t.is(outcomeOf("q-dave"), "advanced");
  t.is(outcomeOf("reg-dave-rival"), "first_touch_conflict");
  t.is(outcomeOf("reg-carol-2"), "idempotent");
  t.is(outcomeOf("q-early"), "none", "a 422 leaves no event row, so a retry is processed afresh");
  t.is(outcomeOf("q-gina"), "none");
  t.false(events.some((e) => e.outcome === "pending"));
  t.is(await h.db.prisma.referralEvent.count({ where: { serverId: otherServer } }), 0);

  const bob = await h.db.prisma.referral.findFirstOrThrow({ where: { serverId, refereeIdentity: "bob" } });
  t.is(bob.id[14], "7", "a minted referral's id is time-ordered (uuid version 7)");
  t.is((await h.db.prisma.referralClick.findFirstOrThrow({ where: { token: fresh } })).referralId, bob.id);
  const carol = await h.db.prisma.referral.findFirstOrThrow({ where: { serverId, refereeIdentity: "carol" } });
  t.is((await h.db.prisma.referralClick.findFirstOrThrow({ where: { token: joining } })).referralId, carol.id, "the joining click is linked");
  t.is((await h.db.prisma.referralClick.findFirstOrThrow({ where: { token: rival } })).referralId, null);
  const dave = await h.db.prisma.referral.findFirstOrThrow({ where: { serverId, refereeIdentity: "dave" } });
  t.is(dave.state, "qualified");
  t.is(dave.version, 2);
  t.is(await h.db.prisma.referralCredit.count({ where: { referralId: dave.id, reversedAt: null } }), 1);
  const outbox = await h.db.prisma.outboxMessage.findMany({ where: { key: serverId }, orderBy: { id: "asc" } });
  t.deepEqual(
    outbox.map((o) => o.type),
    ["referral.registered", "referral.registered", "referral.registered", "referral.reversed", "referral.registered", "referral.qualified"],
  );

  // The 422'd event is processed afresh once its cause is gone.
  await applyEvent(h, { serverId, event: "registered", token: unregistered, serverEventId: "reg-hal", refereeIdentity: "hal" });
  const retried = await applyEventBatch(h.deps, [command({ serverId, event: "qualified", token: unregistered, serverEventId: "q-early" })]);
  t.deepEqual(retried.map(label), ["advanced qualified"]);
});

test("two advances of one referral in one batch (through two tokens): one in the batch, the other alone after it, in order", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const first = await clickToken(h, serverId, "alice");
  const second = await clickToken(h, serverId, "alice");
  await applyEvent(h, { serverId, event: "registered", token: first, serverEventId: "reg-1", refereeIdentity: "bob" });
  await applyEvent(h, { serverId, event: "registered", token: second, serverEventId: "reg-2", refereeIdentity: "bob" });
  const outcomes = await applyEventBatch(h.deps, [
    command({ serverId, event: "qualified", token: first, serverEventId: "q" }),
    command({ serverId, event: "reversed", token: second, serverEventId: "rev" }),
  ]);
  t.deepEqual(outcomes.map(label), ["advanced qualified", "advanced reversed"]);
  const referral = await h.db.prisma.referral.findFirstOrThrow({ where: { serverId } });
  t.is(referral.state, "reversed");
  t.is(referral.version, 3);
  const types = (await h.db.prisma.outboxMessage.findMany({ where: { key: serverId }, orderBy: { id: "asc" } })).map((o) => o.type);
  t.deepEqual(types, ["referral.registered", "referral.qualified", "referral.reversed"]);
  t.not((await h.db.prisma.referralCredit.findFirstOrThrow({ where: { referralId: referral.id } })).reversedAt, null);
});

test("two service instances (two queues) racing: identical events -> exactly one applied; one referee from many referrers -> one anchor", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const queues = [createApplyEventQueue(h.deps), createApplyEventQueue(h.deps)];
  const token = await clickToken(h, serverId, "alice");
  const identical = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      queues[i % 2]!.submit(command({ serverId, event: "registered", token, serverEventId: "reg-bob", refereeIdentity: "bob" })),
    ),
  );
  t.is(identical.filter((r) => r.kind === "applied").length, 1);
  t.is(identical.filter((r) => r.kind === "duplicate").length, 11);
  t.is(await h.db.prisma.referralEvent.count({ where: { serverId } }), 1);

  const tokens = await Promise.all(Array.from({ length: 12 }, (_, i) => clickToken(h, serverId, `referrer-${i}`)));
  const rivals = await Promise.all(
    tokens.map((tk, i) => queues[i % 2]!.submit(command({ serverId, event: "registered", token: tk, serverEventId: `reg-${i}`, refereeIdentity: "carol" }))),
  );
  t.is(rivals.filter((r) => r.kind === "applied").length, 1);
  t.is(rivals.filter((r) => r.kind === "first_touch_conflict").length, 11);
  t.is(await h.db.prisma.referral.count({ where: { serverId, refereeIdentity: "carol" } }), 1);
  t.is(await h.db.prisma.referralClick.count({ where: { serverId, referrerIdentity: { startsWith: "referrer-" }, referralId: { not: null } } }), 1);
  t.is(await h.db.prisma.outboxMessage.count({ where: { key: serverId } }), 2);
  t.is(await h.db.prisma.referralEvent.count({ where: { serverId, outcome: "pending" } }), 0);
});

test("past capacity, ApplyEvent answers resource_exhausted with a retry hint and writes nothing; every applied answer has its rows", async (t) => {
  const h = await startHarness({ applyEventBatch: { maxBatch: 2, maxQueue: 2, maxInFlight: 1 } });
  t.teardown(() => h.close());
  const { serverId } = await createReferralServer(h);
  const tokens = await Promise.all(Array.from({ length: 60 }, () => clickToken(h, serverId, "alice")));
  const settled = await Promise.allSettled(
    tokens.map((token, i) =>
      h.referral.applyEvent({ serverId, event: ReferralEventType.REGISTERED, token, serverEventId: `reg-${i}`, refereeIdentity: `referee-${i}` }),
    ),
  );
  let applied = 0;
  let refused = 0;
  for (const [i, s] of settled.entries()) {
    const anchor = await h.db.prisma.referral.count({ where: { serverId, refereeIdentity: `referee-${i}` } });
    const event = await h.db.prisma.referralEvent.count({ where: { serverId, serverEventId: `reg-${i}` } });
    if (s.status === "fulfilled") {
      t.is(s.value.outcome.case, "applied");
      t.is(anchor + event, 2, `applied event ${i} has its anchor and event row`);
      applied++;
    } else {
      const error = ConnectError.from(s.reason);
      t.is(error.code, Code.ResourceExhausted, `event ${i}: ${error.message}`);
      t.true(Number(error.metadata.get(RETRY_AFTER_HEADER)) >= 1);
      t.is(anchor + event, 0, `refused event ${i} wrote nothing`);
      refused++;
    }
  }
  t.true(applied > 0);
  t.true(refused > 0, "60 calls at once overflow a queue of 2");
  t.is(await h.db.prisma.outboxMessage.count({ where: { key: serverId } }), applied);
});

test("past capacity, the public endpoint answers 503 with Retry-After (never 500); each 200 has its anchor, each 503 wrote nothing", async (t) => {
  const stack = await startGatewayStack({ applyEventBatch: { maxBatch: 1, maxQueue: 1, maxInFlight: 1 } });
  t.teardown(() => stack.close());
  const server = await stack.createServer();
  const tokens = await Promise.all(Array.from({ length: 40 }, () => stack.click(server.serverId, "alice")));
  const t0 = nowSeconds();
  const answers = await Promise.all(
    tokens.map((token, i) =>
      stack.postSigned(server, { event: "registered", token, server_id: server.serverId, referee_identity: `p-${i}`, server_event_id: `reg-${i}` }, { t: t0 }),
    ),
  );
  const statuses = new Map<number, number>();
  for (const [i, res] of answers.entries()) {
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    const anchors = await stack.db.prisma.referral.count({ where: { serverId: server.serverId, refereeIdentity: `p-${i}` } });
    if (res.status === 200) {
      t.is(JSON.parse(res.text).state, "registered");
      t.is(anchors, 1);
    } else {
      t.is(res.status, 503, res.text);
      t.deepEqual(JSON.parse(res.text), { error: ERROR_TEXT.overloaded });
      t.true(Number(res.headers.get("retry-after")) >= 1);
      t.is(anchors, 0);
    }
  }
  t.log(Object.fromEntries(statuses));
  t.true((statuses.get(200) ?? 0) > 0);
});

test("a conditional write that loses a race is decided again in a later round: its batch-mate commits in the first round, it advances once, nothing of the lost try stays", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-bob", refereeIdentity: "bob" });
  const bob = await h.db.prisma.referral.findFirstOrThrow({ where: { serverId, refereeIdentity: "bob" } });
  await loseRaces(h, bob.id, 1);
  const fresh = await clickToken(h, serverId, "alice");

  const outcomes = await applyEventBatch(h.deps, [
    command({ serverId, event: "qualified", token, serverEventId: "q-bob" }),
    command({ serverId, event: "registered", token: fresh, serverEventId: "reg-carol", refereeIdentity: "carol" }),
  ]);
  t.deepEqual(outcomes.map(label), ["advanced qualified", "advanced registered"]);
  t.is(await triedWrites(h, bob.id), 2, "lost once, then won in the next round");
  const after = await h.db.prisma.referral.findUniqueOrThrow({ where: { id: bob.id } });
  t.is(after.state, "qualified");
  t.is(after.version, 2, "one state change");
  t.is(await h.db.prisma.referralCredit.count({ where: { referralId: bob.id } }), 1);
  const types = (await h.db.prisma.outboxMessage.findMany({ where: { key: serverId }, orderBy: { id: "asc" } })).map((o) => o.type);
  t.deepEqual(types, ["referral.registered", "referral.registered", "referral.qualified"], "carol's round committed before bob's rerun");
  const rows = await h.db.prisma.referralEvent.findMany({ where: { serverId, serverEventId: "q-bob" } });
  t.deepEqual(
    rows.map((r) => r.outcome),
    ["advanced"],
    "one event row: the lost try's dedup row is gone",
  );
});

test("an event that keeps losing its conditional write is answered `internal error` after MAX_TRANSACTION_RETRIES reruns, with nothing of it written; later it is processed afresh", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-bob", refereeIdentity: "bob" });
  const bob = await h.db.prisma.referral.findFirstOrThrow({ where: { serverId, refereeIdentity: "bob" } });
  await loseRaces(h, bob.id, 1_000);

  // Through the RPC: a lone event is a batch of one, on the same path.
  const error = await rpcError(applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q-bob" }));
  t.is(error.code, Code.Internal);
  t.is(error.rawMessage, ERROR_TEXT.internal);
  t.is(await triedWrites(h, bob.id), MAX_TRANSACTION_RETRIES + 1, "the first try and MAX_TRANSACTION_RETRIES reruns");
  const after = await h.db.prisma.referral.findUniqueOrThrow({ where: { id: bob.id } });
  t.is(after.state, "registered");
  t.is(after.version, 1);
  t.is(await h.db.prisma.referralCredit.count({ where: { referralId: bob.id } }), 0);
  t.is(await h.db.prisma.outboxMessage.count({ where: { key: serverId, type: "referral.qualified" } }), 0);
  t.is(await h.db.prisma.referralEvent.count({ where: { serverId, serverEventId: "q-bob" } }), 0, "no event row: a retry is processed afresh");

  await loseRaces(h, bob.id, 0);
  const retried = await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q-bob" });
  t.is(retried.outcome.case, "applied");
  t.is((await h.db.prisma.referral.findUniqueOrThrow({ where: { id: bob.id } })).version, 2);
});

test("a round that fails as a whole reruns its events in rounds of one: the failing event alone gets the error and leaves nothing, the others apply once", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-bob", refereeIdentity: "bob" });
  const boomToken = await clickToken(h, serverId, "alice");
  const carolToken = await clickToken(h, serverId, "alice");
  // Minting this server's referee "boom" fails the statement that carries it (and so its whole round).
  await h.db.prisma.$executeRawUnsafe(`
    CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.referee_identity = 'boom' AND NEW.server_id = '${serverId}'::uuid THEN RAISE EXCEPTION 'refused by the test'; END IF;
      RETURN NEW;
    END $$`);
  await h.db.prisma.$executeRawUnsafe(`CREATE TRIGGER refuse_boom BEFORE INSERT ON referrals FOR EACH ROW EXECUTE FUNCTION refuse_boom()`);
  t.teardown(async () => {
    await h.db.prisma.$executeRawUnsafe(`DROP TRIGGER refuse_boom ON referrals`);
    await h.db.prisma.$executeRawUnsafe(`DROP FUNCTION refuse_boom()`);
  });

  const outcomes = await applyEventBatch(h.deps, [
    command({ serverId, event: "qualified", token, serverEventId: "q-bob" }),
    command({ serverId, event: "registered", token: boomToken, serverEventId: "reg-boom", refereeIdentity: "boom" }),
    command({ serverId, event: "registered", token: carolToken, serverEventId: "reg-carol", refereeIdentity: "carol" }),
  ]);
  t.deepEqual(
    outcomes.map(label).map((l) => (l.startsWith("failed") ? "failed" : l)),
    ["advanced qualified", "failed", "advanced registered"],
  );
  t.is(await h.db.prisma.referralEvent.count({ where: { serverId, serverEventId: "reg-boom" } }), 0, "the failed event leaves no event row");
  t.is(await h.db.prisma.referral.count({ where: { serverId, refereeIdentity: "boom" } }), 0);
  t.deepEqual(
    (await h.db.prisma.referralEvent.findMany({ where: { serverId, serverEventId: { in: ["q-bob", "reg-carol"] } } })).map((e) => e.outcome),
    ["advanced", "advanced"],
  );
  const bob = await h.db.prisma.referral.findFirstOrThrow({ where: { serverId, refereeIdentity: "bob" } });
  t.is(bob.version, 2, "applied once");
  t.is(await h.db.prisma.referralCredit.count({ where: { referralId: bob.id } }), 1);
  t.is(await h.db.prisma.outboxMessage.count({ where: { key: serverId } }), 3, "bob registered and qualified, carol registered");
});
