/**
 * Leaderboard and funnel: SQL aggregates over credits, anchors and clicks,
 * before and after reversals, per UTC month.
 */
import { randomUUID } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { Code } from "@connectrpc/connect";
import { applyEvent, clickToken, createReferralServer, errorDetails, rpcError, startHarness, type Harness } from "../../scripts/harness/referral-harness.js";

const test = anyTest as TestFn<{ h: Harness }>;

test.before(async (t) => {
  t.context.h = await startHarness();
});
test.after.always(async (t) => {
  await t.context.h?.close();
});

/** Clicks, registers and (optionally) qualifies one referee for a referrer; returns the token. */
async function refer(h: Harness, serverId: string, referrer: string, referee: string, qualify: boolean): Promise<string> {
  const token = await clickToken(h, serverId, referrer);
  await applyEvent(h, { serverId, event: "registered", token, serverEventId: `reg-${referee}`, refereeIdentity: referee });
  if (qualify) await applyEvent(h, { serverId, event: "qualified", token, serverEventId: `qual-${referee}` });
  return token;
}

const board = async (h: Harness, serverId: string, period = "", limit = 0) =>
  (await h.referral.getLeaderboard({ serverId, period, limit })).entries.map((e) => ({
    referrer: e.referrerIdentity,
    credits: Number(e.credits),
    reversed: Number(e.reversed),
    rank: e.rank,
  }));

test.serial("leaderboard ranks by live credits; a reversal removes the credit from the ranking and keeps it as reversed", async (t) => {
  const { h } = t.context;
  h.clock.set("2024-05-10T10:00:00Z");
  const { serverId } = await createReferralServer(h);
  await refer(h, serverId, "alice", "a1", true);
  const aliceSecond = await refer(h, serverId, "alice", "a2", true);
  await refer(h, serverId, "bob", "b1", true);
  await refer(h, serverId, "carol", "c1", false); // registered only: no credit
  t.deepEqual(await board(h, serverId), [
    { referrer: "alice", credits: 2, reversed: 0, rank: 1 },
    { referrer: "bob", credits: 1, reversed: 0, rank: 2 },
  ]);

  await applyEvent(h, { serverId, event: "reversed", token: aliceSecond, serverEventId: "rev-a2" });
  t.deepEqual(
    await board(h, serverId),
    [
      { referrer: "alice", credits: 1, reversed: 1, rank: 1 },
      { referrer: "bob", credits: 1, reversed: 0, rank: 1 },
    ],
    "ties share a rank",
  );
});

test.serial("leaderboard period selects credits by the UTC month of qualification; a later reversal still removes the credit from its month", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  h.clock.set("2024-03-31T23:59:59Z");
  const march = await refer(h, serverId, "alice", "m1", true);
  h.clock.set("2024-04-01T00:00:00Z");
  await refer(h, serverId, "bob", "a1", true);
  t.deepEqual(await board(h, serverId, "2024-03"), [{ referrer: "alice", credits: 1, reversed: 0, rank: 1 }]);
  t.deepEqual(await board(h, serverId, "2024-04"), [{ referrer: "bob", credits: 1, reversed: 0, rank: 1 }]);
  t.is((await board(h, serverId)).length, 2, "empty period = all time");
  await applyEvent(h, { serverId, event: "reversed", token: march, serverEventId: "rev-m1" });
  t.deepEqual(await board(h, serverId, "2024-03"), [{ referrer: "alice", credits: 0, reversed: 1, rank: 1 }]);
});

test("leaderboard limit cuts the list with global ranks; an oversized limit is clamped; a negative one is refused", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  await refer(h, serverId, "r1", "x1", true);
  await refer(h, serverId, "r1", "x2", true);
  await refer(h, serverId, "r2", "x3", true);
  await refer(h, serverId, "r3", "x4", true);
  t.deepEqual(await board(h, serverId, "", 2), [
    { referrer: "r1", credits: 2, reversed: 0, rank: 1 },
    { referrer: "r2", credits: 1, reversed: 0, rank: 2 },
  ]);
  t.is((await board(h, serverId, "", 100_000)).length, 3, "an oversized limit is clamped, not refused");
  const error = await rpcError(h.referral.getLeaderboard({ serverId, limit: -1 }));
  t.is(error.code, Code.InvalidArgument);
});

test("leaderboard limit defaults to 50 and is clamped to at most 500", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  // 510 referrers with one credit each, written in bulk (the RPC path is covered above).
  const now = new Date("2024-05-01T00:00:00Z");
  const ids = Array.from({ length: 510 }, () => randomUUID());
  await h.db.prisma.referral.createMany({
    data: ids.map((id, i) => ({
      id,
      serverId,
      refereeIdentity: `p${i}`,
      referrerIdentity: `r${i}`,
      state: "qualified" as const,
      registeredAt: now,
      qualifiedAt: now,
    })),
  });
  await h.db.prisma.referralCredit.createMany({
    data: ids.map((referralId, i) => ({ referralId, serverId, referrerIdentity: `r${i}`, period: "2024-05", creditedAt: now })),
  });
  t.is((await board(h, serverId)).length, 50);
  t.is((await board(h, serverId, "", 1000)).length, 500);
});

test("leaderboard and funnel refuse a malformed period and an unknown server", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  t.like(errorDetails(await rpcError(h.referral.getLeaderboard({ serverId, period: "2024-13" }))), {
    code: Code.InvalidArgument,
    message: "period must be YYYY-MM",
  });
  t.like(errorDetails(await rpcError(h.referral.getFunnel({ serverId, period: "May" }))), { code: Code.InvalidArgument, message: "period must be YYYY-MM" });
  const unknown = "00000000-0000-4000-8000-000000000000";
  t.like(errorDetails(await rpcError(h.referral.getLeaderboard({ serverId: unknown }))), { code: Code.NotFound, message: "unknown server" });
  t.like(errorDetails(await rpcError(h.referral.getFunnel({ serverId: "nope" }))), { code: Code.NotFound, message: "unknown server" });
});

const funnel = async (h: Harness, serverId: string, period = "") => {
  const f = await h.referral.getFunnel({ serverId, period });
  return {
    clicks: Number(f.clicks),
    registered: Number(f.registered),
    qualified: Number(f.qualified),
    reversed: Number(f.reversed),
    clickToRegisterRate: f.clickToRegisterRate,
    registerToQualifyRate: f.registerToQualifyRate,
    reversalRate: f.reversalRate,
  };
};

test.serial("funnel counts clicks, anchors, credits and reversed anchors with the proto's rates, before and after a reversal", async (t) => {
  const { h } = t.context;
  h.clock.set("2024-05-10T10:00:00Z");
  const { serverId } = await createReferralServer(h);
  t.deepEqual(
    await funnel(h, serverId),
    { clicks: 0, registered: 0, qualified: 0, reversed: 0, clickToRegisterRate: 0, registerToQualifyRate: 0, reversalRate: 0 },
    "no division by zero",
  );
  const q1 = await refer(h, serverId, "alice", "p1", true);
  await refer(h, serverId, "alice", "p2", true);
  await refer(h, serverId, "bob", "p3", false);
  await clickToken(h, serverId, "bob"); // a click that never registers
  // A conflicting registration is not an anchor.
  const conflict = await clickToken(h, serverId, "carol");
  await applyEvent(h, { serverId, event: "registered", token: conflict, serverEventId: "reg-c", refereeIdentity: "p1" });
  t.deepEqual(await funnel(h, serverId), {
    clicks: 5,
    registered: 3,
    qualified: 2,
    reversed: 0,
    clickToRegisterRate: 3 / 5,
    registerToQualifyRate: 2 / 3,
    reversalRate: 0,
  });

  await applyEvent(h, { serverId, event: "reversed", token: q1, serverEventId: "rev-p1" });
  t.deepEqual(await funnel(h, serverId), {
    clicks: 5,
    registered: 3,
    qualified: 2,
    reversed: 1,
    clickToRegisterRate: 3 / 5,
    registerToQualifyRate: 2 / 3,
    reversalRate: 1 / 2,
  });
});

test.serial("funnel period counts each step by the UTC month of its own timestamp", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  h.clock.set("2024-01-31T23:00:00Z");
  const token = await clickToken(h, serverId, "alice"); // click in January
  h.clock.set("2024-02-01T00:30:00Z");
  await applyEvent(h, { serverId, event: "registered", token, serverEventId: "r", refereeIdentity: "p" }); // anchor in February
  h.clock.set("2024-03-05T00:00:00Z");
  await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q" }); // credit in March
  h.clock.set("2024-04-05T00:00:00Z");
  await applyEvent(h, { serverId, event: "reversed", token, serverEventId: "x" }); // reversal in April
  t.like(await funnel(h, serverId, "2024-01"), { clicks: 1, registered: 0, qualified: 0, reversed: 0 });
  t.like(await funnel(h, serverId, "2024-02"), { clicks: 0, registered: 1, qualified: 0, reversed: 0 });
  t.like(await funnel(h, serverId, "2024-03"), { clicks: 0, registered: 0, qualified: 1, reversed: 0 });
  t.like(await funnel(h, serverId, "2024-04"), { clicks: 0, registered: 0, qualified: 0, reversed: 1 });
  t.like(await funnel(h, serverId), { clicks: 1, registered: 1, qualified: 1, reversed: 1 });
});
