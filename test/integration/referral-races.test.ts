/**
 * Races decided by unique constraints and conditional writes, exercised with
 * real concurrent RPCs against real PostgreSQL.
 */
import anyTest, { type TestFn } from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { ReferralState } from "../../gen/proto/referral/v1/referral_pb.js";
import { applyEvent, clickToken, createReferralServer, errorDetails, startHarness, type Harness } from "../../scripts/harness/referral-harness.js";

const test = anyTest as TestFn<{ h: Harness }>;
const CONCURRENCY = 25;

test.before(async (t) => {
  t.context.h = await startHarness({ maxConnections: 30 });
});
test.after.always(async (t) => {
  await t.context.h?.close();
});

test("25 concurrent identical ApplyEvent -> exactly one applied, 24 duplicate, one event row, one outbox row", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  const results = await Promise.all(
    Array.from({ length: CONCURRENCY }, () => applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg-bob", refereeIdentity: "bob" })),
  );
  const cases = results.map((r) => r.outcome.case);
  t.is(cases.filter((c) => c === "applied").length, 1);
  t.is(cases.filter((c) => c === "duplicate").length, CONCURRENCY - 1);
  t.is(await h.db.prisma.referralEvent.count({ where: { serverId } }), 1);
  t.is(await h.db.prisma.referral.count({ where: { serverId } }), 1);
  t.is(await h.db.prisma.outboxMessage.count({ where: { key: serverId } }), 1);
});

test("25 concurrent registered for one referee from 25 referrers -> exactly one anchor, 24 first_touch_conflict", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const tokens = await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => clickToken(h, serverId, `referrer-${i}`)));
  const results = await Promise.all(
    tokens.map((token, i) => applyEvent(h, { serverId, event: "registered", token, serverEventId: `reg-${i}`, refereeIdentity: "bob" })),
  );
  const applied = results.filter((r) => r.outcome.case === "applied");
  t.is(applied.length, 1);
  t.is(results.filter((r) => r.outcome.case === "firstTouchConflict").length, CONCURRENCY - 1);
  t.is(await h.db.prisma.referral.count({ where: { serverId, refereeIdentity: "bob" } }), 1, "one anchor row");
  const anchor = await h.db.prisma.referral.findFirstOrThrow({ where: { serverId } });
  t.is(await h.db.prisma.referralClick.count({ where: { serverId, referralId: { not: null } } }), 1, "only the winner's click is linked");
  t.is((await h.db.prisma.referralClick.findFirstOrThrow({ where: { serverId, referralId: anchor.id } })).referrerIdentity, anchor.referrerIdentity);
  t.is(await h.db.prisma.referralEvent.count({ where: { serverId, outcome: "first_touch_conflict" } }), CONCURRENCY - 1);
  t.is(await h.db.prisma.outboxMessage.count({ where: { key: serverId } }), 1);
});

test("concurrent registered for one referee by the same referrer through different tokens -> one anchor, all applied, every click linked", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const tokens = await Promise.all(Array.from({ length: 10 }, () => clickToken(h, serverId, "alice")));
  const results = await Promise.all(
    tokens.map((token, i) => applyEvent(h, { serverId, event: "registered", token, serverEventId: `reg-${i}`, refereeIdentity: "bob" })),
  );
  t.true(results.every((r) => r.outcome.case === "applied"));
  t.is(results.filter((r) => r.outcome.case === "applied" && r.outcome.value.advanced).length, 1);
  t.is(await h.db.prisma.referral.count({ where: { serverId } }), 1);
  t.is(await h.db.prisma.referralClick.count({ where: { serverId, referralId: null } }), 0);
});

test("conditional click link: one token registering 10 different referees concurrently mints exactly one anchor, the rest are 422", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  const settled = await Promise.allSettled(
    Array.from({ length: 10 }, (_, i) => applyEvent(h, { serverId, event: "registered", token, serverEventId: `reg-${i}`, refereeIdentity: `referee-${i}` })),
  );
  const applied = settled.filter((r) => r.status === "fulfilled" && r.value.outcome.case === "applied");
  const rejected = settled.flatMap((r) => (r.status === "rejected" ? [ConnectError.from(r.reason)] : []));
  t.is(applied.length, 1);
  t.is(rejected.length, 9);
  t.true(rejected.every((e) => e.code === Code.FailedPrecondition && errorDetails(e).from === "registered"));
  t.is(await h.db.prisma.referral.count({ where: { serverId } }), 1, "a token anchors one referee");
});

test("conditional version write: 25 concurrent qualified with distinct server_event_ids -> one advanced, 24 idempotent, one credit", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg", refereeIdentity: "bob" });
  const results = await Promise.all(
    Array.from({ length: CONCURRENCY }, (_, i) => applyEvent(h, { serverId, event: "qualified", token, serverEventId: `q-${i}` })),
  );
  const applied = results.flatMap((r) => (r.outcome.case === "applied" ? [r.outcome.value] : []));
  t.is(applied.length, CONCURRENCY);
  t.is(applied.filter((a) => a.advanced).length, 1);
  t.true(applied.every((a) => a.state === ReferralState.QUALIFIED));
  t.is(await h.db.prisma.referralCredit.count({ where: { serverId } }), 1);
  t.is(await h.db.prisma.outboxMessage.count({ where: { key: serverId, type: "referral.qualified" } }), 1);
  t.is((await h.db.prisma.referral.findFirstOrThrow({ where: { serverId } })).version, 2);
});

test("concurrent qualified and reversed on one referral end in a state the table allows, each advance with its outbox row", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  await applyEvent(h, { serverId, event: "registered", token, serverEventId: "reg", refereeIdentity: "bob" });
  const settled = await Promise.allSettled([
    applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q" }),
    applyEvent(h, { serverId, event: "reversed", token, serverEventId: "rev" }),
  ]);
  const referral = await h.db.prisma.referral.findFirstOrThrow({ where: { serverId } });
  t.is(referral.state, "reversed", "reversed is terminal whichever came first");
  const types = (await h.db.prisma.outboxMessage.findMany({ where: { key: serverId }, orderBy: { id: "asc" } })).map((o) => o.type);
  const [q, rev] = settled;
  if (q?.status === "fulfilled") {
    // qualified won the race: registered -> qualified -> reversed, credit kept as reversed.
    t.deepEqual(types, ["referral.registered", "referral.qualified", "referral.reversed"]);
    t.not((await h.db.prisma.referralCredit.findFirstOrThrow({ where: { serverId } })).reversedAt, null);
  } else {
    // reversed won: the late qualified is a 422 from reversed.
    t.deepEqual(types, ["referral.registered", "referral.reversed"]);
    t.is(await h.db.prisma.referralCredit.count({ where: { serverId } }), 0);
  }
  t.is(rev?.status, "fulfilled");
});
