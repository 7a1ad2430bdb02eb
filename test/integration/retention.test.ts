/**
 * Retention (services/retention): each rule removes (or erases) the rows past its age limit and keeps the younger
 * ones, a second pass removes nothing, a pass stays within its budget, and the metrics and the log line say what
 * was removed. The clock is injected: rows are written with timestamps relative to `now`, never waited for.
 */
import { randomUUID } from "node:crypto";
import test from "ava";
import { Registry } from "prom-client";
import { Prisma } from "../../gen/prisma/client.js";
import { PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { expiredAccessRetention } from "../../services/access/dashboard-sessions.js";
import { claimOldestHeld, readStanding } from "../../services/claims/ledger-store.js";
import { toLedgerPlayer } from "../../services/claims/ledger-player.js";
import { expiredClaimRetention } from "../../services/claims/write-vote-claims.js";
import { attemptExchangeRetention } from "../../services/delivery/pipeline/attempt-log.js";
import { addressVotersRetention } from "../../services/hearts/store.js";
import { publishedOutboxRetention } from "../../services/relay/statements.js";
import { voterRewardStatesRetention } from "../../services/rewards/reward-queue-store.js";
import { voterPeriodTalliesRetention } from "../../services/rewards/period-store.js";
import { networkGoalHeartsRetention } from "../../services/rewards/network-goal-store.js";
import { readRetentionSettings } from "../../services/retention/retention-settings.js";
import { retentionRules } from "../../services/retention/retention-rules.js";
import { createRetentionLoop, createRetentionMetrics, runRetentionPass, type RetentionPassDeps } from "../../services/retention/run-retention.js";
import { deadLetterRetention } from "../../services/shared/adapters/dead-letters.js";
import type { RetentionRule } from "../../services/shared/adapters/retention-rule.js";
import { executeSql } from "../../services/shared/adapters/sql/executor.js";
import { createEnvReader } from "../../services/shared/runtime/config.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { DEFAULT_FRAUD_RULES } from "../../services/hearts/domain/fraud-rules.js";
import { captureLog } from "../helpers/capture-log.js";
import { eventually } from "../helpers/eventually.js";
import { testOutboxRow } from "../helpers/outbox-row.js";

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const log = createLogger("retention-test", "silent");
/** The injected clock: every row's timestamps are relative to it. */
const NOW = new Date("2027-03-01T12:00:00.000Z");
const ago = (ms: number) => new Date(NOW.getTime() - ms);

let db: TestDatabase;
test.before(async () => {
  db = await createTestDatabase();
});
test.after.always(async () => {
  await db?.drop();
});

/** One pass of `rules` at `now` (default NOW) with the given bounds. */
function pass(rules: RetentionRule[], opts: { batchRows?: number; passMaxRows?: number; now?: Date; deps?: Partial<RetentionPassDeps> } = {}) {
  return runRetentionPass(
    { db: db.prisma, rules, batchRows: opts.batchRows ?? 1_000, passMaxRows: opts.passMaxRows ?? 10_000, log, ...opts.deps },
    opts.now ?? NOW,
  );
}

async function insertOutbox(rows: { publishedAt: Date | null; createdAt?: Date }[]): Promise<bigint[]> {
  const ids: bigint[] = [];
  for (const r of rows) {
    const row = await db.prisma.outboxMessage.create({ data: testOutboxRow({ publishedAt: r.publishedAt, createdAt: r.createdAt ?? ago(DAY_MS) }) });
    ids.push(row.id);
  }
  return ids;
}

async function outboxIds(): Promise<bigint[]> {
  return (await db.prisma.outboxMessage.findMany({ select: { id: true }, orderBy: { id: "asc" } })).map((r) => r.id);
}

test.serial(
  "published outbox rows older than the limit go; younger published rows and every unpublished row stay; a second pass removes nothing",
  async (t) => {
    await db.prisma.outboxMessage.deleteMany();
    const rule = publishedOutboxRetention(300);
    const [old1, old2, young, unpublishedOld] = await insertOutbox([
      { publishedAt: ago(301_000) },
      { publishedAt: ago(DAY_MS) },
      { publishedAt: ago(299_000) },
      { publishedAt: null, createdAt: ago(30 * DAY_MS) },
    ]);
    const first = await pass([rule]);
    t.is(first.removed.published_outbox, 2);
    t.deepEqual(await outboxIds(), [young!, unpublishedOld!]);
    t.false([old1, old2].some((id) => id === young));
    t.is(first.oldestAgeSeconds.published_outbox, 299, "the oldest published row left is the young one");
    t.is((await pass([rule])).removed.published_outbox, 0);
  },
);

test.serial("a pass removes at most its budget (RETENTION_PASS_MAX_ROWS) in batches of RETENTION_BATCH_ROWS; the next pass removes the rest", async (t) => {
  await db.prisma.outboxMessage.deleteMany();
  await insertOutbox(Array.from({ length: 25 }, () => ({ publishedAt: ago(DAY_MS) })));
  const rule = publishedOutboxRetention(300);
  const statements: number[] = [];
  const counted: RetentionRule = {
    ...rule,
    removeBatch: async (d, now, limit) => {
      statements.push(limit);
      return rule.removeBatch(d, now, limit);
    },
  };
  t.is((await pass([counted], { batchRows: 10, passMaxRows: 20 })).removed.published_outbox, 20);
  t.deepEqual(statements, [10, 10], "two statements of at most 10 rows");
  t.is((await outboxIds()).length, 5);
  statements.length = 0;
  t.is((await pass([counted], { batchRows: 10, passMaxRows: 20 })).removed.published_outbox, 5);
  t.deepEqual(statements, [10, 10], "5 removed, then 0: the rule has nothing more due");
  t.is((await outboxIds()).length, 0);
  t.is((await pass([counted], { batchRows: 10, passMaxRows: 20 })).removed.published_outbox, 0);
});

test.serial("the metrics count the rows removed per table and rule and show each rule's oldest row age; the pass's log line has only counts", async (t) => {
  await db.prisma.outboxMessage.deleteMany();
  await db.prisma.deadLetter.deleteMany();
  await insertOutbox([{ publishedAt: ago(DAY_MS) }, { publishedAt: ago(DAY_MS) }, { publishedAt: ago(100_000) }]);
  const registry = new Registry();
  const metrics = createRetentionMetrics(registry);
  const captured = captureLog();
  await pass([publishedOutboxRetention(3_600), deadLetterRetention(30 * 86_400)], { deps: { metrics, log: captured.log } });
  const text = await registry.metrics();
  t.regex(text, /retention_rows_removed_total\{table="outbox",rule="published_outbox"\} 2\n/);
  t.regex(text, /retention_rows_removed_total\{table="dead_letters",rule="dead_letters"\} 0\n/);
  t.regex(text, /retention_oldest_row_age_seconds\{rule="published_outbox"\} 100\n/);
  t.regex(text, /retention_oldest_row_age_seconds\{rule="dead_letters"\} 0\n/);
  const line = captured.lines.find((l) => l.msg === "retention pass");
  t.deepEqual(line?.removed, { published_outbox: 2, dead_letters: 0 });
});

/** A server, a delivery of it with `fields`, and one attempt started at `startedAt` holding a full exchange. */
async function deliveryWithAttempt(serverId: string, fields: Prisma.DeliveryUncheckedCreateInput extends infer T ? Partial<T> : never, startedAt: Date) {
  const id = randomUUID();
  await db.prisma.delivery.create({
    data: {
      id,
      serverId,
      heartId: randomUUID(),
      dedupKey: id,
      eventType: "heart.counted",
      username: "voter",
      voterIdentity: "voter",
      period: "2027-03",
      countedAt: startedAt,
      ...fields,
    },
  });
  const attempt = await db.prisma.deliveryAttempt.create({
    data: {
      deliveryId: id,
      serverId,
      attempt: 1,
      url: "https://example.test/cb",
      startedAt,
      statusCode: 200,
      latencyMs: 12,
      succeeded: true,
      requestHeaders: { "content-type": "application/json" },
      requestBody: '{"username":"voter"}',
      responseHeaders: { "content-type": "text/plain" },
      responseBody: "ok",
    },
  });
  return attempt.id;
}

async function exchangeOf(id: bigint) {
  return db.prisma.deliveryAttempt.findUniqueOrThrow({
    where: { id },
    select: {
      requestHeaders: true,
      requestBody: true,
      responseHeaders: true,
      responseBody: true,
      statusCode: true,
      latencyMs: true,
      succeeded: true,
      startedAt: true,
    },
  });
}

test.serial(
  "an attempt's exchange is dropped 30 days after its delivery was delivered or failed; pending (held) and younger ones keep theirs; the row keeps status and timing",
  async (t) => {
    const server = await db.prisma.server.create({ data: { name: "attempts" } });
    const rule = attemptExchangeRetention(30 * 86_400);
    const deliveredOld = await deliveryWithAttempt(server.id, { status: "delivered", deliveredAt: ago(31 * DAY_MS) }, ago(31 * DAY_MS + 1000));
    const failedOld = await deliveryWithAttempt(server.id, { status: "failed", failedAt: ago(31 * DAY_MS) }, ago(35 * DAY_MS));
    const deliveredYoung = await deliveryWithAttempt(server.id, { status: "delivered", deliveredAt: ago(29 * DAY_MS) }, ago(31 * DAY_MS));
    const failedYoung = await deliveryWithAttempt(server.id, { status: "failed", failedAt: ago(29 * DAY_MS) }, ago(40 * DAY_MS));
    const held = await deliveryWithAttempt(server.id, { status: "pending", parkedAt: ago(50 * DAY_MS) }, ago(60 * DAY_MS));
    const first = await pass([rule]);
    t.is(first.removed.delivery_attempt_exchanges, 2);
    for (const id of [deliveredOld, failedOld]) {
      const a = await exchangeOf(id);
      t.like(a, { requestHeaders: null, requestBody: null, responseHeaders: null, responseBody: null, statusCode: 200, latencyMs: 12, succeeded: true });
    }
    for (const id of [deliveredYoung, failedYoung, held]) t.is((await exchangeOf(id)).requestBody, '{"username":"voter"}');
    t.is(first.oldestAgeSeconds.delivery_attempt_exchanges, 60 * 86_400, "the held delivery's attempt is the oldest exchange kept");
    t.is((await pass([rule])).removed.delivery_attempt_exchanges, 0);
  },
);

test.serial("attempts of deliveries still pending ahead of due ones do not stop the exchange rule: it steps over them, a window at a time", async (t) => {
  const server = await db.prisma.server.create({ data: { name: "attempts-window" } });
  const rule = attemptExchangeRetention(30 * 86_400);
  await pass([rule]);
  const held: bigint[] = [];
  for (let i = 0; i < 5; i++) held.push(await deliveryWithAttempt(server.id, { status: "pending", parkedAt: ago(80 * DAY_MS) }, ago((90 - i) * DAY_MS)));
  const due = await deliveryWithAttempt(server.id, { status: "delivered", deliveredAt: ago(70 * DAY_MS) }, ago(70 * DAY_MS));
  t.is((await pass([rule], { batchRows: 2 })).removed.delivery_attempt_exchanges, 1);
  t.is((await exchangeOf(due)).requestBody, null);
  for (const id of held) t.not((await exchangeOf(id)).requestBody, null);
  t.is((await pass([rule], { batchRows: 2 })).removed.delivery_attempt_exchanges, 0);
});

test.serial("dead letters older than the limit go, younger stay; a second pass removes nothing", async (t) => {
  await db.prisma.deadLetter.deleteMany();
  const letter = (createdAt: Date) =>
    db.prisma.deadLetter.create({ data: { source: "delivery", code: "undecodable", reason: "r", topic: "t", key: "k", payload: Buffer.from("x"), createdAt } });
  await letter(ago(31 * DAY_MS));
  const young = await letter(ago(29 * DAY_MS));
  const rule = deadLetterRetention(30 * 86_400);
  t.is((await pass([rule])).removed.dead_letters, 1);
  t.deepEqual(
    (await db.prisma.deadLetter.findMany({ select: { id: true } })).map((r) => r.id),
    [young.id],
  );
  t.is((await pass([rule])).removed.dead_letters, 0);
});

test.serial("login links and sessions expired longer than the margin go; expired within it and live ones stay; a second pass removes nothing", async (t) => {
  const owner = await db.prisma.owner.create({ data: { id: `owner-${randomUUID()}`, displayName: "o" } });
  const link = (expiresAt: Date) =>
    db.prisma.dashboardLoginLink.create({ data: { ownerId: owner.id, tokenHash: randomUUID(), createdAt: ago(30 * DAY_MS), expiresAt } });
  const session = (expiresAt: Date, revokedAt: Date | null = null) =>
    db.prisma.dashboardSession.create({ data: { ownerId: owner.id, tokenHash: randomUUID(), createdAt: ago(30 * DAY_MS), expiresAt, revokedAt } });
  await link(ago(25 * HOUR_MS));
  const keptLinks = [(await link(ago(23 * HOUR_MS))).id, (await link(new Date(NOW.getTime() + 60_000))).id];
  await session(ago(25 * HOUR_MS));
  await session(ago(26 * HOUR_MS), ago(30 * HOUR_MS));
  const keptSessions = [(await session(ago(23 * HOUR_MS))).id, (await session(new Date(NOW.getTime() + HOUR_MS))).id];
  const rules = [expiredAccessRetention("dashboard_login_links", 24 * 3_600), expiredAccessRetention("dashboard_sessions", 24 * 3_600)];
  const first = await pass(rules);
  t.deepEqual(first.removed, { dashboard_login_links: 1, dashboard_sessions: 2 });
  t.deepEqual((await db.prisma.dashboardLoginLink.findMany({ where: { ownerId: owner.id }, select: { id: true } })).map((r) => r.id).sort(), keptLinks.sort());
  t.deepEqual((await db.prisma.dashboardSession.findMany({ where: { ownerId: owner.id }, select: { id: true } })).map((r) => r.id).sort(), keptSessions.sort());
  t.deepEqual((await pass(rules)).removed, { dashboard_login_links: 0, dashboard_sessions: 0 });
});

/** A ledger row of `serverId` for the player with SteamID64 `steamId`. */
async function ledgerRow(serverId: string, steamId: string, row: { state: "held" | "claimed" | "expired" | "withdrawn"; countedAt: Date; expiredAt?: Date }) {
  const heartId = randomUUID();
  await db.prisma.voteClaim.create({
    data: {
      heartId,
      serverId,
      playerKey: `steam:${steamId}`,
      usernameLower: "voter",
      steamId,
      countedAt: row.countedAt,
      expiresAt: new Date(row.countedAt.getTime() + 30 * DAY_MS),
      state: row.state,
      claimedAt: row.state === "claimed" ? row.countedAt : null,
      expiredReason: row.state === "expired" ? "window" : null,
      expiredAt: row.expiredAt ?? null,
    },
  });
  return heartId;
}

test.serial(
  "expired ledger rows expired longer than the limit go; held, claimed, withdrawn and recently expired rows stay; a second pass removes nothing",
  async (t) => {
    const server = await db.prisma.server.create({ data: { name: "ledger", claimsEnabled: true } });
    const steam = "76561198000000001";
    await ledgerRow(server.id, steam, { state: "expired", countedAt: ago(70 * DAY_MS), expiredAt: ago(31 * DAY_MS) });
    const kept = [
      await ledgerRow(server.id, steam, { state: "expired", countedAt: ago(60 * DAY_MS), expiredAt: ago(29 * DAY_MS) }),
      await ledgerRow(server.id, steam, { state: "held", countedAt: ago(90 * DAY_MS) }),
      await ledgerRow(server.id, steam, { state: "claimed", countedAt: ago(90 * DAY_MS) }),
      await ledgerRow(server.id, steam, { state: "withdrawn", countedAt: ago(90 * DAY_MS) }),
    ];
    const rule = expiredClaimRetention(30 * 86_400);
    t.is((await pass([rule])).removed.expired_vote_claims, 1);
    t.deepEqual((await db.prisma.voteClaim.findMany({ where: { serverId: server.id }, select: { heartId: true } })).map((r) => r.heartId).sort(), kept.sort());
    t.is((await pass([rule])).removed.expired_vote_claims, 0);
  },
);

test.serial("pay-once: a heart whose expired ledger row was removed is never claimed nor paid; the claim takes the player's held heart only", async (t) => {
  const server = await db.prisma.server.create({ data: { name: "pay-once", claimsEnabled: true, payOnce: true } });
  const steam = "76561198000000002";
  const player = toLedgerPlayer({ kind: PlayerIdKind.STEAM_ID, value: steam } as Parameters<typeof toLedgerPlayer>[0]);
  const removed = await ledgerRow(server.id, steam, { state: "expired", countedAt: ago(40 * DAY_MS), expiredAt: ago(31 * DAY_MS) });
  t.is((await pass([expiredClaimRetention(30 * 86_400)])).removed.expired_vote_claims, 1);
  t.is(await db.prisma.voteClaim.findUnique({ where: { heartId: removed } }), null);
  t.deepEqual(await readStanding(db.prisma, server.id, player, NOW), { kind: "none" }, "nothing offered to claim");
  t.is(await claimOldestHeld(db.prisma, server.id, player, NOW), null, "nothing to claim");

  const held = await ledgerRow(server.id, steam, { state: "held", countedAt: ago(HOUR_MS) });
  const claimed = await claimOldestHeld(db.prisma, server.id, player, NOW);
  t.is(claimed?.heartId, held);
  t.is(await claimOldestHeld(db.prisma, server.id, player, NOW), null, "one held heart, paid once");
  const payouts = await db.prisma.heartPayout.findMany({ where: { serverId: server.id }, select: { heartId: true, state: true } });
  t.deepEqual(payouts, [{ heartId: held, state: "paid" }], "the removed heart has no payout; the held one is paid once");
});

test.serial("identity-set rows older than the longest identity window plus the margin go, younger stay; a second pass removes nothing", async (t) => {
  const serverId = randomUUID();
  const settings = readRetentionSettings(createEnvReader({}), DEFAULT_FRAUD_RULES);
  t.is(settings.addressVotersSeconds, 48 * 3_600, "24 h identity windows + 24 h margin");
  const rule = addressVotersRetention(settings.addressVotersSeconds);
  const row = (voterIdentity: string, lastCountedAt: Date) =>
    executeSql(
      db.prisma,
      Prisma.sql`INSERT INTO heart_address_voters (server_id, address, voter_identity, last_counted_at)
                 VALUES (${serverId}::uuid, '203.0.113.0/24', ${voterIdentity}, ${lastCountedAt}::timestamptz)`,
    );
  await row("old", ago(49 * HOUR_MS));
  await row("young", ago(47 * HOUR_MS));
  t.is((await pass([rule])).removed.heart_address_voters, 1);
  const left = await db.prisma.heartAddressVoter.findMany({ where: { serverId }, select: { voterIdentity: true } });
  t.deepEqual(left, [{ voterIdentity: "young" }]);
  t.is((await pass([rule])).removed.heart_address_voters, 0);
});

test.serial("a voter's reward counts older than the hearts' horizon go, younger stay; a second pass removes nothing", async (t) => {
  const server = await db.prisma.server.create({ data: { name: "reward counts" } });
  const rule = voterRewardStatesRetention((400 * DAY_MS) / 1000);
  const row = (voterIdentity: string, lastCountedAt: Date) =>
    executeSql(
      db.prisma,
      Prisma.sql`INSERT INTO voter_reward_states (server_id, voter_identity, last_counted_at, total, month, month_total, week, week_total, streak_last_day, streak_days)
                 VALUES (${server.id}::uuid, ${voterIdentity}, ${lastCountedAt}::timestamptz, 3, '2025-10', 1, '2025-W40', 1, ${lastCountedAt}::date, 1)`,
    );
  await row("old", ago(401 * DAY_MS));
  await row("young", ago(399 * DAY_MS));
  t.is((await pass([rule])).removed.voter_reward_states, 1);
  const left = await db.prisma.voterRewardState.findMany({ where: { serverId: server.id }, select: { voterIdentity: true } });
  t.deepEqual(left, [{ voterIdentity: "young" }]);
  t.is((await pass([rule])).removed.voter_reward_states, 0);
});

test.serial("a voter's period standings counts older than the hearts' horizon go, younger stay; a second pass removes nothing", async (t) => {
  const server = await db.prisma.server.create({ data: { name: "period tallies" } });
  const rule = voterPeriodTalliesRetention((400 * DAY_MS) / 1000);
  const row = (voterIdentity: string, lastCountedAt: Date) =>
    executeSql(
      db.prisma,
      Prisma.sql`INSERT INTO voter_period_tallies (server_id, period, voter_identity, votes, last_counted_at)
                 VALUES (${server.id}::uuid, '2025-10', ${voterIdentity}, 2, ${lastCountedAt}::timestamptz)`,
    );
  await row("old", ago(401 * DAY_MS));
  await row("young", ago(399 * DAY_MS));
  t.is((await pass([rule])).removed.voter_period_tallies, 1);
  const left = await db.prisma.voterPeriodTally.findMany({ where: { serverId: server.id }, select: { voterIdentity: true } });
  t.deepEqual(left, [{ voterIdentity: "young" }]);
  t.is((await pass([rule])).removed.voter_period_tallies, 0);
});

test.serial("the hearts network goals counted older than the acknowledged entries' horizon go, younger stay; a second pass removes nothing", async (t) => {
  const rule = networkGoalHeartsRetention((90 * DAY_MS) / 1000);
  const goalId = randomUUID();
  const row = (heartId: string, countedAt: Date) =>
    executeSql(
      db.prisma,
      Prisma.sql`INSERT INTO network_goal_hearts (goal_id, heart_id, counted_at) VALUES (${goalId}::uuid, ${heartId}::uuid, ${countedAt}::timestamptz)`,
    );
  const [old, young] = [randomUUID(), randomUUID()];
  await row(old, ago(91 * DAY_MS));
  await row(young, ago(89 * DAY_MS));
  t.is((await pass([rule])).removed.network_goal_hearts, 1);
  const left = await db.prisma.networkGoalHeart.findMany({ where: { goalId }, select: { heartId: true } });
  t.deepEqual(left, [{ heartId: young }]);
  t.is((await pass([rule])).removed.network_goal_hearts, 0);
});

test.serial("the settings: defaults, every RETENTION_* read and validated, problems reported with the process's others", (t) => {
  const defaults = readRetentionSettings(createEnvReader({}), DEFAULT_FRAUD_RULES);
  t.deepEqual(defaults, {
    enabled: true,
    intervalSeconds: 60,
    batchRows: 1_000,
    passMaxRows: 10_000,
    dutyPercent: 10,
    publishedOutboxSeconds: 300,
    attemptExchangeSeconds: 30 * 86_400,
    deadLetterSeconds: 30 * 86_400,
    dashboardExpiredSeconds: 24 * 3_600,
    expiredClaimSeconds: 30 * 86_400,
    addressVotersSeconds: 48 * 3_600,
    voterAddressSeconds: 48 * 3_600,
    deliverySeconds: 90 * 86_400,
    heartSeconds: 400 * 86_400,
    clickSeconds: 400 * 86_400,
    referralSeconds: 400 * 86_400,
    rewardQueueAckedSeconds: 90 * 86_400,
    endedReminderSeconds: 30 * 86_400,
    ownerAlertSeconds: 90 * 86_400,
  });
  t.is(retentionRules(defaults).length, 20);
  const r = createEnvReader({ RETENTION_BATCH_ROWS: "0", RETENTION_DEAD_LETTER_DAYS: "x", RETENTION_ENABLED: "maybe", RETENTION_DUTY_PERCENT: "0" });
  readRetentionSettings(r, DEFAULT_FRAUD_RULES);
  const error = t.throws(() => r.finish({}));
  t.regex(error.message, /RETENTION_BATCH_ROWS must be >= 1/);
  t.regex(error.message, /RETENTION_DEAD_LETTER_DAYS must be an integer/);
  t.regex(error.message, /RETENTION_DUTY_PERCENT must be >= 1/);
  t.regex(error.message, /RETENTION_ENABLED must be true or false/);
});

test.serial("the retention loop runs a pass at start and publishes its metrics; stop() ends it; with RETENTION_ENABLED=false it runs nothing", async (t) => {
  await db.prisma.outboxMessage.deleteMany();
  await insertOutbox([{ publishedAt: ago(DAY_MS) }]);
  const settings = { ...readRetentionSettings(createEnvReader({}), DEFAULT_FRAUD_RULES), enabled: false };
  const off = createRetentionLoop({ db: db.prisma, settings, log, registry: new Registry(), now: () => NOW });
  off.start();
  await off.stop();
  t.is((await outboxIds()).length, 1, "disabled: nothing removed");
  const registry = new Registry();
  const loop = createRetentionLoop({ db: db.prisma, settings: { ...settings, enabled: true }, log, registry, now: () => NOW });
  loop.start();
  await eventually(async () => /retention_rows_removed_total\{table="outbox",rule="published_outbox"\} 1\n/.test(await registry.metrics()));
  await loop.stop();
  t.is((await outboxIds()).length, 0);
});
