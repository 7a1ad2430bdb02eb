/**
 * Pay-once across the reward queue and the other transports (issue 31, docs/reward-queue.md "Pay-once") on real
 * PostgreSQL through the production wiring: a counted vote's `vote` entries pay its heart once across the queue, the
 * HTTP callback, the pull API and the check/claim API. The queue's acknowledgement takes the heart's payout in its
 * transaction (a claim, a check and a callback after it see it paid); a vote entry whose heart another transport paid
 * is never listed (the list closes it); a server not in pay-once mode is left as it was.
 */
import anyTest, { type TestFn } from "ava";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ClaimStatus, PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import { insertDelivery } from "../../services/delivery/pipeline/insert-deliveries.js";
import { withdrawnText } from "../../services/delivery/pipeline/withdraw-unpaid.js";
import { reservePayoutSql, settlePayoutSql } from "../../services/payouts/write-payouts.js";
import { executeSql } from "../../services/shared/adapters/sql/executor.js";
import { queueVoteRewards } from "../../services/rewards/queue-vote-rewards.js";
import { startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { eventually } from "../helpers/eventually.js";
import { createPayOnceServer, createTestDispatcher } from "../helpers/pay-once-server.js";

const test = (anyTest as TestFn<{ stack: TestStack }>).serial;
const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";

anyTest.before(async (t) => {
  (t.context as { stack: TestStack }).stack = await startStack({ gateway: false, allowInsecureCallbacks: true, callbackTimeoutMs: 2_000 });
});
anyTest.after.always(async (t) => {
  await (t.context as { stack?: TestStack }).stack?.close();
});

/** Two per-vote rewards (two `vote` entries of one heart) and a milestone on every vote (not a vote entry). */
const RULES = {
  perVote: [{ commands: ["give {player} diamond 1"] }, { commands: ["give {player} apple 1"] }],
  milestones: [{ scope: "all", every: 1, reward: { commands: ["say {player} voted"] } }],
};

let counter = 0;

async function receiver(t: { teardown(fn: () => Promise<void>): void }): Promise<Receiver> {
  const r = await startReceiver({ responses: [], fallback: { status: 200 } });
  t.teardown(() => r.close());
  return r;
}

/** A pay-once (or not) server every transport can pay through, with the reward rules. */
async function server(stack: TestStack, opts: { callbackUrl: string; payOnce: boolean }) {
  const { serverId, claimKey } = await createPayOnceServer(stack, { ...opts, name: "Queue x3" });
  await stack.clients.rewards.putRewardRules({ serverId, rulesJson: JSON.stringify(RULES), baseVersion: 0 });
  return { serverId, claimKey };
}

/** A test's receiver, server (pay-once as given) and one counted heart with its entries. */
async function votedOn(t: { context: { stack: TestStack }; teardown(fn: () => Promise<void>): void }, payOnce: boolean) {
  const { stack } = t.context;
  const hook = await receiver(t);
  const { serverId, claimKey } = await server(stack, { callbackUrl: hook.url, payOnce });
  return { stack, hook, serverId, claimKey, h: await heart(stack, serverId) };
}

/** A counted heart with a SteamID (its ledger row comes with it), its deliveries and its reward entries stored as the consumer stores them. */
async function heart(stack: TestStack, serverId: string) {
  counter++;
  const steamId = `7656119802${String(counter).padStart(7, "0")}`;
  const voterIdentity = `queue-voter-${steamId}`;
  const cast = await stack.clients.hearts.castHeart({ serverId, voterIdentity, username: "Steve", ip: `203.0.113.${counter}`, userAgent: UA, steamId });
  if (!cast.counted) throw new Error("the heart did not count");
  const countedAt = new Date();
  const platformIds = { steamId, discordId: null, minecraftUuid: null, accountId: null };
  await insertDelivery(stack.prisma, {
    heartId: cast.heartId,
    serverId,
    eventType: "heart.counted",
    username: "Steve",
    voterIdentity,
    period: "2026-11",
    streakDay: null,
    countedAt,
    platformIds,
  });
  await queueVoteRewards(
    stack.prisma,
    [{ heartId: cast.heartId, serverId, voterIdentity, countedAt, player: { username: "Steve", ...platformIds } }],
    stack.log,
  );
  const entries = await stack.prisma.rewardQueueEntry.findMany({ where: { heartId: cast.heartId }, orderBy: { entryKey: "asc" } });
  const [milestone, vote0, vote1] = entries;
  if (entries.length !== 3 || milestone?.reason !== "milestone") throw new Error("the heart's three entries were not queued");
  return { heartId: cast.heartId, steamId, vote0: vote0!.id, vote1: vote1!.id, milestone: milestone.id };
}

const steam = (value: string) => ({ kind: PlayerIdKind.STEAM_ID, value });

/** Starts the production dispatcher and waits until the heart's callback delivery is no longer pending. */
async function dispatchedCallback(t: { context: { stack: TestStack }; teardown(fn: () => Promise<void>): void }, heartId: string) {
  const { stack } = t.context;
  createTestDispatcher(t, { schedule: "100ms" }).start();
  return eventually(
    async () => {
      const row = await stack.prisma.delivery.findFirstOrThrow({ where: { heartId, transport: "callback" } });
      return row.status === "pending" ? undefined : row;
    },
    { message: "the callback settled" },
  );
}

const listedIds = async (stack: TestStack, claimKey: string) => (await stack.clients.rewardQueue.listRewardQueue({ claimKey })).entries.map((e) => e.id);

test("a queue acknowledgement of a vote entry pays its heart (transport queue): a claim and a check after it answer paid elsewhere, the callback is withdrawn and never sent", async (t) => {
  const { stack, hook, claimKey, h } = await votedOn(t, true);
  const acked = await stack.clients.rewardQueue.ackRewardEntries({ claimKey, ids: [h.vote0] });
  t.deepEqual(acked.acked, [h.vote0]);
  t.like(await stack.prisma.heartPayout.findUniqueOrThrow({ where: { heartId: h.heartId } }), { transport: "queue", state: "paid", deliveryId: null });

  t.like(await stack.clients.claims.claimVote({ claimKey, player: steam(h.steamId) }), { status: ClaimStatus.PAID_ELSEWHERE });
  t.like(await stack.clients.claims.checkVote({ claimKey, player: steam(h.steamId) }), { status: ClaimStatus.PAID_ELSEWHERE });
  t.is((await stack.prisma.voteClaim.findUniqueOrThrow({ where: { heartId: h.heartId } })).state, "withdrawn", "the ledger row says another transport paid");
  t.is((await stack.prisma.delivery.findFirstOrThrow({ where: { heartId: h.heartId, transport: "pull" } })).status, "withdrawn");
  // The callback stored before the acknowledgement: withdrawn, never sent, even by a dispatcher that starts now.
  const callback = await dispatchedCallback(t, h.heartId);
  t.is(callback.status, "withdrawn");
  t.is(callback.lastError, withdrawnText("queue"));
  t.is(hook.requests.length, 0, "the receiver never saw the heart");

  // The heart's other vote entry is the queue's to pay (it paid the heart): still listed, and its acknowledgement keeps the payout.
  t.deepEqual((await listedIds(stack, claimKey)).sort(), [h.milestone, h.vote1].sort());
  t.deepEqual((await stack.clients.rewardQueue.ackRewardEntries({ claimKey, ids: [h.vote1, h.milestone] })).acked, [h.vote1, h.milestone]);
  t.like(await stack.prisma.heartPayout.findUniqueOrThrow({ where: { heartId: h.heartId } }), { transport: "queue", state: "paid" });
});

test("listing a vote entry takes its heart for the queue (the plugin runs what it is listed): a claim and a push after the list see it paid, never paying it twice", async (t) => {
  const { stack, hook, claimKey, h } = await votedOn(t, true);
  t.deepEqual((await listedIds(stack, claimKey)).sort(), [h.milestone, h.vote0, h.vote1].sort());
  t.like(await stack.prisma.heartPayout.findUniqueOrThrow({ where: { heartId: h.heartId } }), { transport: "queue", state: "paid" });
  t.like(await stack.clients.claims.claimVote({ claimKey, player: steam(h.steamId) }), { status: ClaimStatus.PAID_ELSEWHERE });
  const callback = await dispatchedCallback(t, h.heartId);
  t.is(callback.status, "withdrawn");
  t.is(hook.requests.length, 0);
  // Listed again (not acknowledged yet): still the queue's, still listed; acknowledged: paid once, by the queue.
  t.deepEqual((await listedIds(stack, claimKey)).sort(), [h.milestone, h.vote0, h.vote1].sort());
  t.deepEqual((await stack.clients.rewardQueue.ackRewardEntries({ claimKey, ids: [h.vote0, h.vote1, h.milestone] })).unknown, []);
  t.like(await stack.prisma.heartPayout.findUniqueOrThrow({ where: { heartId: h.heartId } }), { transport: "queue", state: "paid" });
});

test("a vote entry whose heart a claim paid first is never listed: the list closes it (acknowledged) and lists the heart's other rewards", async (t) => {
  const { stack, claimKey, h } = await votedOn(t, true);
  t.like(await stack.clients.claims.claimVote({ claimKey, player: steam(h.steamId) }), { status: ClaimStatus.CLAIMED_NOW, heartId: h.heartId });
  t.deepEqual(await listedIds(stack, claimKey), [h.milestone], "only the milestone, which is no vote entry");
  const closed = await stack.prisma.rewardQueueEntry.findMany({ where: { id: { in: [h.vote0, h.vote1] } } });
  t.true(
    closed.every((e) => e.ackedAt !== null),
    "the vote entries are closed, so they never fill a page again",
  );
  t.deepEqual(await listedIds(stack, claimKey), [h.milestone]);
  t.like(await stack.prisma.heartPayout.findUniqueOrThrow({ where: { heartId: h.heartId } }), { transport: "claim", state: "paid" });
});

test("a vote entry whose heart a push holds in flight is left out (not closed) until the push settles", async (t) => {
  const { stack, serverId, claimKey, h } = await votedOn(t, true);
  const callback = await stack.prisma.delivery.findFirstOrThrow({ where: { heartId: h.heartId, transport: "callback" } });
  // The callback's reservation as a push in flight holds it (pay-once.ts reservePayout), before it is sent.
  await executeSql(stack.prisma, reservePayoutSql({ heartId: h.heartId, serverId, transport: "callback", deliveryId: callback.id }, new Date()));
  t.deepEqual(await listedIds(stack, claimKey), [h.milestone]);
  t.is(
    (await stack.prisma.rewardQueueEntry.findUniqueOrThrow({ where: { id: h.vote0 } })).ackedAt,
    null,
    "left pending: the push may still give the heart back",
  );
  // A definite failure of the push gives the heart back (PAYOUT_TRANSITIONS.refused).
  await executeSql(stack.prisma, settlePayoutSql("refused", h.heartId, callback.id, new Date()));
  t.deepEqual((await listedIds(stack, claimKey)).sort(), [h.milestone, h.vote0, h.vote1].sort(), "given back: listed again");
});

test("a list by server id (an owner or admin looking at the queue) takes nothing: the vote stays payable by the other transports", async (t) => {
  const { stack, serverId, claimKey, h } = await votedOn(t, true);
  const listed = await stack.clients.rewardQueue.listRewardQueue({ serverId });
  t.deepEqual(listed.entries.map((e) => e.id).sort(), [h.milestone, h.vote0, h.vote1].sort());
  t.is(await stack.prisma.heartPayout.count({ where: { heartId: h.heartId } }), 0);
  t.like(await stack.clients.claims.claimVote({ claimKey, player: steam(h.steamId) }), { status: ClaimStatus.CLAIMED_NOW });
  t.deepEqual(
    (await stack.clients.rewardQueue.listRewardQueue({ serverId })).entries.map((e) => e.id),
    [h.milestone],
    "the view leaves out what the claim paid",
  );
});

test("off (the default): an acknowledgement takes no payout, and a claim still pays the heart", async (t) => {
  const { stack, claimKey, h } = await votedOn(t, false);
  t.deepEqual((await stack.clients.rewardQueue.ackRewardEntries({ claimKey, ids: [h.vote0] })).acked, [h.vote0]);
  t.is(await stack.prisma.heartPayout.count({ where: { heartId: h.heartId } }), 0);
  t.like(await stack.clients.claims.claimVote({ claimKey, player: steam(h.steamId) }), { status: ClaimStatus.CLAIMED_NOW });
  t.deepEqual((await listedIds(stack, claimKey)).sort(), [h.milestone, h.vote1].sort());
});

test("a bulk re-queue on a pay-once server: copies of the entries the queue paid are listed and paid again (the owner's decision); copies of vote entries another transport paid are closed again, never listed", async (t) => {
  const { stack, claimKey, serverId, h } = await votedOn(t, true);
  t.deepEqual((await stack.clients.rewardQueue.ackRewardEntries({ claimKey, ids: [h.vote0, h.vote1, h.milestone] })).unknown, []);
  const other = await heart(stack, serverId);
  t.like(await stack.clients.claims.claimVote({ claimKey, player: steam(other.steamId) }), { status: ClaimStatus.CLAIMED_NOW });
  // The list closes the claimed heart's vote entries (acknowledged by the service) and lists its milestone: acknowledged.
  t.deepEqual(await listedIds(stack, claimKey), [other.milestone]);
  await stack.clients.rewardQueue.ackRewardEntries({ claimKey, ids: [other.milestone] });

  const now = Date.now();
  const range = { ackedFrom: timestampFromDate(new Date(now - 3_600_000)), ackedTo: timestampFromDate(new Date(now + 3_600_000)) };
  const requeued = await stack.clients.rewardQueue.requeueRewardEntries({ serverId, ...range });
  t.is(requeued.requeued, 6, "every acknowledged entry of the range is copied");
  const listed = await stack.clients.rewardQueue.listRewardQueue({ claimKey });
  const copies = await stack.prisma.rewardQueueEntry.findMany({ where: { serverId, entryKey: { contains: ":requeue:" } } });
  const listedIds2 = new Set(listed.entries.map((e) => e.id));
  const shown = copies.filter((c) => listedIds2.has(c.id));
  t.deepEqual(
    shown.map((c) => [c.heartId === h.heartId ? "queue-paid heart" : "claimed heart", c.reason]).sort(),
    [
      ["claimed heart", "milestone"],
      ["queue-paid heart", "milestone"],
      ["queue-paid heart", "vote"],
      ["queue-paid heart", "vote"],
    ],
    "the queue's own vote entries and every milestone are listed again; the claimed heart's vote entries are not",
  );
  const closedAgain = copies.filter((c) => c.heartId === other.heartId && c.reason === "vote");
  t.is(closedAgain.length, 2);
  const after = await stack.prisma.rewardQueueEntry.findMany({ where: { id: { in: closedAgain.map((c) => c.id) } } });
  t.true(
    after.every((c) => c.ackedAt !== null),
    "closed by the list again: never run",
  );
  t.like(await stack.prisma.heartPayout.findUniqueOrThrow({ where: { heartId: other.heartId } }), { transport: "claim" });
});
