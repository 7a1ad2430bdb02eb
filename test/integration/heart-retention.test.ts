/**
 * The hearts' retention (issue 30, services/hearts/store.ts heartHistoryRetention and voterStatesRetention) through the
 * production wiring: hearts cast more than RETENTION_HEART_DAYS ago go with their claim-ledger rows and pay-once payouts;
 * younger ones stay; an old heart that a delivery is left of keeps all three until the delivery is gone; rankings
 * stay as they were; a removed heart is never paid again (ledger claim, pull claim) and its receipt answers as an
 * unknown one; a voter state past the horizon goes and the voter's next vote starts a new streak. The clock is
 * injected: hearts are cast at past instants, never waited for.
 */
import test from "ava";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { Prisma } from "../../gen/prisma/client.js";
import { ClaimService, ClaimStatus, PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import { PullClaimStatus } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { insertDelivery } from "../../services/delivery/pipeline/insert-deliveries.js";
import { heartHistoryRetention, voterStatesRetention } from "../../services/hearts/store.js";
import { runRetentionPass } from "../../services/retention/run-retention.js";
import type { RetentionRule } from "../../services/shared/adapters/retention-rule.js";
import { executeSql } from "../../services/shared/adapters/sql/executor.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { createTestClock, type TestClock } from "../../scripts/harness/delivery-harness.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";

const DAY_MS = 86_400_000;
const HEART_DAYS = 400;
const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";
const log = createLogger("heart-retention-test", "silent");
/** The retention pass's instant; hearts are cast relative to it. */
const NOW = new Date("2027-03-01T12:00:00.000Z");
const ago = (ms: number) => new Date(NOW.getTime() - ms);
/** Past the horizon (401 days ago) and inside it (399 days ago). */
const OLD = ago((HEART_DAYS + 1) * DAY_MS);
const YOUNG = ago((HEART_DAYS - 1) * DAY_MS);

/** The stack's clock: each heart is cast at the instant it is set to. */
const clock: TestClock = createTestClock(OLD);
let stack: TestStack;
let claims: Client<typeof ClaimService>;
test.before(async () => {
  stack = await startStack({ gateway: false, now: () => clock.now() });
  claims = createClient(ClaimService, createServiceTransport(stack.rpcUrl, TEST_SERVICE_TOKEN));
});
test.after.always(async () => {
  await stack?.close();
});

const rules = (): RetentionRule[] => [heartHistoryRetention(HEART_DAYS * 86_400), voterStatesRetention(HEART_DAYS * 86_400)];

function pass(rs: RetentionRule[]) {
  return runRetentionPass({ db: stack.prisma, rules: rs, batchRows: 1_000, passMaxRows: 10_000, log }, NOW);
}

/** A pay-once server with a claim key and the pull API on. */
async function payOnceServer() {
  const { admin } = stack.clients;
  const { server } = await admin.createServer({ name: "Rust x3" });
  const serverId = server!.id;
  const { claimKey } = await admin.rotateClaimKey({ serverId });
  await admin.setPullEnabled({ serverId, enabled: true });
  await admin.setClaimSettings({ serverId, paysOnce: true });
  return { serverId, claimKey };
}

let counter = 0;
/** Casts a heart at `at` for the voter of `steamId` (a fresh one by default); `store` stores its deliveries as the consumer does. */
async function cast(serverId: string, at: Date, opts: { steamId?: string; store?: boolean } = {}) {
  counter++;
  const steamId = opts.steamId ?? `7656119802${String(counter).padStart(7, "0")}`;
  clock.set(at);
  const heart = await stack.clients.hearts.castHeart({
    serverId,
    voterIdentity: `voter-${steamId}`,
    username: "Steve",
    ip: `198.51.100.${counter % 250}`,
    userAgent: UA,
    steamId,
  });
  if (opts.store) {
    await insertDelivery(stack.prisma, {
      heartId: heart.heartId,
      serverId,
      eventType: "heart.counted",
      username: "Steve",
      voterIdentity: `voter-${steamId}`,
      period: heart.period,
      streakDay: null,
      countedAt: at,
      platformIds: { steamId, discordId: null, minecraftUuid: null, accountId: null },
    });
  }
  return { heartId: heart.heartId, steamId, counted: heart.counted, streakDay: heart.streakDay, token: heart.receiptUrl.split("/").pop() ?? "" };
}

/** What is stored of the heart: the heart, its ledger row, its payout, its deliveries. */
async function storedOf(heartId: string) {
  const p = stack.prisma;
  return {
    heart: (await p.heart.count({ where: { id: heartId } })) === 1,
    claim: (await p.voteClaim.findUnique({ where: { heartId } }))?.state ?? null,
    payout: (await p.heartPayout.findUnique({ where: { heartId } }))?.transport ?? null,
    deliveries: await p.delivery.count({ where: { heartId } }),
  };
}

/** What the deliveries' own retention does once a heart's deliveries ended and aged out (another rule; here by hand). */
async function deliveriesAgedOut(heartId: string) {
  await executeSql(stack.prisma, Prisma.sql`DELETE FROM deliveries WHERE heart_id = ${heartId}::uuid`);
}

const steam = (value: string) => ({ kind: PlayerIdKind.STEAM_ID, value });

test.serial(
  "hearts older than the horizon go with their ledger rows and payouts; younger stay; an old heart with a pending delivery keeps all three until it is gone; rankings unchanged; a second pass removes nothing",
  async (t) => {
    const { serverId, claimKey } = await payOnceServer();
    const claimed = await cast(serverId, OLD);
    t.like(await claims.claimVote({ claimKey, player: steam(claimed.steamId) }), { status: ClaimStatus.CLAIMED_NOW });
    // A refused heart (cooldown) of the same voter, cast a minute later: removed with the rest.
    const refused = await cast(serverId, new Date(OLD.getTime() + 60_000), { steamId: claimed.steamId });
    t.false(refused.counted);
    const pending = await cast(serverId, new Date(OLD.getTime() - DAY_MS), { store: true });
    const young = await cast(serverId, YOUNG);
    t.deepEqual(await storedOf(claimed.heartId), { heart: true, claim: "claimed", payout: "claim", deliveries: 0 });
    t.true((await storedOf(pending.heartId)).deliveries > 0, "the pending heart has its pull delivery");
    const rankings = await stack.prisma.serverRanking.findMany({ where: { serverId }, orderBy: { period: "asc" } });

    const first = await pass(rules());
    t.is(first.removed.hearts, 2, "the claimed heart and the refused one");
    t.deepEqual(await storedOf(claimed.heartId), { heart: false, claim: null, payout: null, deliveries: 0 });
    t.false((await storedOf(refused.heartId)).heart);
    t.like(await storedOf(pending.heartId), { heart: true, claim: "held" }, "a delivery is left: the heart and its ledger row stay");
    t.like(await storedOf(young.heartId), { heart: true, claim: "held" });
    t.deepEqual(await stack.prisma.serverRanking.findMany({ where: { serverId }, orderBy: { period: "asc" } }), rankings, "rankings as they were");
    t.is((await pass(rules())).removed.hearts, 0, "a second pass removes nothing");

    await deliveriesAgedOut(pending.heartId);
    t.is((await pass(rules())).removed.hearts, 1, "once its deliveries are gone, the pending heart goes too");
    t.deepEqual(await storedOf(pending.heartId), { heart: false, claim: null, payout: null, deliveries: 0 });
    t.like(await storedOf(young.heartId), { heart: true, claim: "held" });
  },
);

test.serial(
  "pay-once: a heart paid by a pull claim, then aged out with its deliveries: a replayed pull claim, ledger claim or check pays nothing",
  async (t) => {
    const { serverId, claimKey } = await payOnceServer();
    const paid = await cast(serverId, OLD, { store: true });
    const pull = await stack.clients.delivery.claimPullHearts({ serverId, heartIds: [paid.heartId] });
    t.deepEqual(
      pull.results.map((r) => r.status),
      [PullClaimStatus.CLAIMED],
    );
    t.like(await storedOf(paid.heartId), { heart: true, claim: "withdrawn", payout: "pull" });

    t.is((await pass(rules())).removed.hearts, 0, "its delivered pull delivery is still there: the heart stays");
    await deliveriesAgedOut(paid.heartId);
    t.is((await pass(rules())).removed.hearts, 1);
    t.deepEqual(await storedOf(paid.heartId), { heart: false, claim: null, payout: null, deliveries: 0 });

    clock.set(NOW);
    const replay = await stack.clients.delivery.claimPullHearts({ serverId, heartIds: [paid.heartId] });
    t.deepEqual(
      replay.results.map((r) => r.status),
      [PullClaimStatus.UNKNOWN],
      "no delivery to claim",
    );
    t.like(await claims.checkVote({ claimKey, player: steam(paid.steamId) }), { status: ClaimStatus.NOT_FOUND });
    t.like(await claims.claimVote({ claimKey, player: steam(paid.steamId) }), { status: ClaimStatus.NOT_FOUND });
    t.deepEqual(await storedOf(paid.heartId), { heart: false, claim: null, payout: null, deliveries: 0 }, "nothing paid, nothing stored again");
  },
);

test.serial("a removed heart's receipt answers as an unknown one; a kept heart's receipt is unchanged", async (t) => {
  const { serverId } = await payOnceServer();
  const old = await cast(serverId, OLD);
  const young = await cast(serverId, YOUNG);
  await pass(rules());
  const error = await t.throwsAsync(stack.clients.hearts.getReceipt({ token: old.token }));
  t.is(ConnectError.from(error).code, Code.NotFound);
  t.is(ConnectError.from(error).rawMessage, "unknown receipt");
  t.truthy((await stack.clients.hearts.getReceipt({ token: young.token })).receipt);
});

test.serial("a voter state whose voter last counted before the horizon goes; a younger one stays; the voter's next vote starts a new streak", async (t) => {
  const { serverId } = await payOnceServer();
  const start = ago((HEART_DAYS + 3) * DAY_MS);
  const old = await cast(serverId, start);
  const next = await cast(serverId, new Date(start.getTime() + DAY_MS + 60_000), { steamId: old.steamId });
  t.like(next, { counted: true, streakDay: 2 });
  const young = await cast(serverId, YOUNG);
  const states = () => stack.prisma.voterState.findMany({ where: { serverId }, select: { voterIdentity: true }, orderBy: { voterIdentity: "asc" } });
  t.is((await states()).length, 2);

  t.is((await pass([voterStatesRetention(HEART_DAYS * 86_400)])).removed.voter_states, 1);
  t.deepEqual(await states(), [{ voterIdentity: `voter-${young.steamId}` }]);
  t.is((await pass([voterStatesRetention(HEART_DAYS * 86_400)])).removed.voter_states, 0, "a second pass removes nothing");

  const again = await cast(serverId, NOW, { steamId: old.steamId });
  t.like(again, { counted: true, streakDay: 1 }, "a new streak");
});

test.serial("old hearts kept by their deliveries ahead of due ones do not stop the rule: it steps over them, a window at a time", async (t) => {
  await pass(rules()); // the earlier tests' old hearts
  const { serverId } = await payOnceServer();
  const kept = [];
  for (let n = 0; n < 5; n++) kept.push(await cast(serverId, ago((HEART_DAYS + 10 + n) * DAY_MS), { store: true }));
  const due = await cast(serverId, OLD);
  const first = await runRetentionPass({ db: stack.prisma, rules: [heartHistoryRetention(HEART_DAYS * 86_400)], batchRows: 2, passMaxRows: 100, log }, NOW);
  t.is(first.removed.hearts, 1);
  t.false((await storedOf(due.heartId)).heart);
  for (const k of kept) t.true((await storedOf(k.heartId)).heart);
});
