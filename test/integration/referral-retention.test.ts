/**
 * Referral history ages out (issue 30): clicks that never registered anyone go after RETENTION_CLICK_DAYS, and
 * referrals past RETENTION_REFERRAL_DAYS since their last change go with their clicks, events and credit, unless held
 * for the owner's review. Events are applied through the referral service's own ApplyEvent; the clock is the harness's,
 * moved forward, never waited for. Every event through a removed referral's tokens, an exact replay included, is then
 * an unknown token (404) that writes nothing: no second credit, no second `referral.qualified`.
 */
import anyTest, { type TestFn } from "ava";
import { Code } from "@connectrpc/connect";
import { Prisma } from "../../gen/prisma/client.js";
import { endedReferralRetention } from "../../services/referral/apply-event.js";
import { unlinkedClickRetention } from "../../services/referral/record-click.js";
import { getLeaderboard } from "../../services/referral/reports.js";
import { runRetentionPass } from "../../services/retention/run-retention.js";
import type { RetentionRule } from "../../services/shared/adapters/retention-rule.js";
import { executeSql, runSql } from "../../services/shared/adapters/sql/executor.js";
import { ERROR_TEXT } from "../../services/shared/values/contract.js";
import pg from "pg";
import { eventually } from "../helpers/eventually.js";
import { recordingOnlyClient } from "../helpers/rows-read.js";
import { applyEvent, clickToken, createReferralServer, rpcError, startHarness, type Harness } from "../../scripts/harness/referral-harness.js";

const DAY_SECONDS = 86_400;
const KEEP_DAYS = 400;
const clickRule = unlinkedClickRetention(KEEP_DAYS * DAY_SECONDS);
const referralRule = endedReferralRetention(KEEP_DAYS * DAY_SECONDS);

const test = anyTest as TestFn<{ h: Harness }>;

test.before(async (t) => {
  t.context = { h: await startHarness() };
});
test.after.always(async (t) => {
  await t.context.h?.close();
});

/** One pass of `rules` at the harness's clock. */
function pass(h: Harness, rules: RetentionRule[]) {
  return runRetentionPass({ db: h.db.prisma, rules, batchRows: 2, passMaxRows: 1_000, log: h.deps.log }, h.clock.now());
}

/** The answer to an event through an unknown token: 404 with the contract's text. */
const UNKNOWN_TOKEN = { code: Code.NotFound, message: ERROR_TEXT.unknownToken };

/** The code and text a rejected ApplyEvent answered. */
async function answerOf(call: Promise<unknown>): Promise<{ code: Code; message: string }> {
  const error = await rpcError(call);
  return { code: error.code, message: error.rawMessage };
}

/** Each test starts from empty referral tables (the clock moves on across tests, so earlier rows would be due). */
async function emptyReferralTables(h: Harness): Promise<void> {
  await executeSql(h.db.prisma, Prisma.sql`DELETE FROM referral_events`);
  await executeSql(h.db.prisma, Prisma.sql`DELETE FROM referral_credits`);
  await executeSql(h.db.prisma, Prisma.sql`DELETE FROM referral_clicks`);
  await executeSql(h.db.prisma, Prisma.sql`DELETE FROM referrals`);
}

/** A registered referral of `referrer` for `referee` through a fresh click; its token. */
async function register(h: Harness, serverId: string, referrer: string, referee: string): Promise<string> {
  const token = await clickToken(h, serverId, referrer);
  await applyEvent(h, { serverId, event: "registered", token, serverEventId: `reg-${referee}`, refereeIdentity: referee });
  return token;
}

async function tokensLeft(h: Harness, tokens: string[]): Promise<string[]> {
  const rows = await h.db.prisma.referralClick.findMany({ where: { token: { in: tokens } }, select: { token: true } });
  return tokens.filter((token) => rows.some((r) => r.token === token));
}

async function refereesLeft(h: Harness, serverId: string): Promise<string[]> {
  const rows = await h.db.prisma.referral.findMany({ where: { serverId }, select: { refereeIdentity: true }, orderBy: { refereeIdentity: "asc" } });
  return rows.map((r) => r.refereeIdentity);
}

test.serial(
  "clicks that never registered anyone older than RETENTION_CLICK_DAYS go with their first-touch-conflict dedup rows; younger and linked clicks stay; a second pass removes nothing",
  async (t) => {
    const { h } = t.context;
    await emptyReferralTables(h);
    const { serverId } = await createReferralServer(h, "clicks");
    const oldUnlinked = await clickToken(h, serverId, "alice");
    const oldLinked = await register(h, serverId, "alice", "referee-linked");
    // A click of another referrer for the anchored referee: a first-touch conflict, its click stays unlinked.
    const conflicted = await clickToken(h, serverId, "bob");
    await applyEvent(h, { serverId, event: "registered", token: conflicted, serverEventId: "reg-conflict", refereeIdentity: "referee-linked" });
    t.is(await h.db.prisma.referralEvent.count({ where: { token: conflicted } }), 1);
    h.clock.advanceSeconds((KEEP_DAYS - 1) * DAY_SECONDS);
    const young = await clickToken(h, serverId, "alice");
    h.clock.advanceSeconds(2 * DAY_SECONDS);

    const first = await pass(h, [clickRule]);
    t.is(first.removed.unlinked_clicks, 2);
    t.deepEqual(await tokensLeft(h, [oldUnlinked, oldLinked, conflicted, young]), [oldLinked, young]);
    t.is(await h.db.prisma.referralEvent.count({ where: { token: conflicted } }), 0);
    t.is(await h.db.prisma.referralEvent.count({ where: { token: oldLinked } }), 1);
    t.is((await pass(h, [clickRule])).removed.unlinked_clicks ?? 0, 0);

    // The removed click's token is unknown now.
    t.deepEqual(
      await answerOf(applyEvent(h, { serverId, event: "registered", token: oldUnlinked, serverEventId: "late", refereeIdentity: "late" })),
      UNKNOWN_TOKEN,
    );
  },
);

test.serial(
  "referrals whose last change is older than RETENTION_REFERRAL_DAYS go with their clicks, events and credit (reversed, qualified, registered); held and younger ones stay; a second pass removes nothing; a late qualified is an unknown token",
  async (t) => {
    const { h } = t.context;
    await emptyReferralTables(h);
    const { serverId } = await createReferralServer(h, "referrals");
    const reversed = await register(h, serverId, "alice", "r-reversed");
    await applyEvent(h, { serverId, event: "reversed", token: reversed, serverEventId: "rev-1" });
    const qualified = await register(h, serverId, "alice", "r-qualified");
    await applyEvent(h, { serverId, event: "qualified", token: qualified, serverEventId: "q-1" });
    // A second token of the same referrer joined to the qualified referral: it goes with it.
    const joined = await clickToken(h, serverId, "alice");
    await applyEvent(h, { serverId, event: "registered", token: joined, serverEventId: "reg-join", refereeIdentity: "r-qualified" });
    const registered = await register(h, serverId, "alice", "r-registered");
    const held = await register(h, serverId, "alice", "r-held");
    await applyEvent(h, { serverId, event: "qualified", token: held, serverEventId: "q-held" });
    await executeSql(h.db.prisma, Prisma.sql`UPDATE referrals SET review = 'held' WHERE server_id = ${serverId}::uuid AND referee_identity = 'r-held'`);
    // Registered long ago, qualified recently: its last change is young.
    const late = await register(h, serverId, "alice", "r-late");
    h.clock.advanceSeconds((KEEP_DAYS - 1) * DAY_SECONDS);
    await applyEvent(h, { serverId, event: "qualified", token: late, serverEventId: "q-late" });
    h.clock.advanceSeconds(2 * DAY_SECONDS);

    const first = await pass(h, [referralRule]);
    t.is(first.removed.ended_referrals, 3);
    t.deepEqual(await refereesLeft(h, serverId), ["r-held", "r-late"]);
    t.deepEqual(await tokensLeft(h, [reversed, qualified, joined, registered, held, late]), [held, late]);
    t.is(await h.db.prisma.referralEvent.count({ where: { token: { in: [reversed, qualified, joined, registered] } } }), 0);
    t.is(await h.db.prisma.referralEvent.count({ where: { token: { in: [held, late] } } }), 4);
    const credits = await h.db.prisma.referralCredit.findMany({ where: { serverId }, select: { referral: { select: { refereeIdentity: true } } } });
    t.deepEqual(credits.map((c) => c.referral.refereeIdentity).sort(), ["r-held", "r-late"]);
    t.is((await pass(h, [referralRule, clickRule])).removed.ended_referrals ?? 0, 0);

    // A `qualified` for the registered referral that never qualified in time: its token is unknown, nothing is credited.
    t.deepEqual(await answerOf(applyEvent(h, { serverId, event: "qualified", token: registered, serverEventId: "q-too-late" })), UNKNOWN_TOKEN);
    t.is(await h.db.prisma.referralCredit.count({ where: { serverId } }), 2);

    // The owner's all-time leaderboard counts what is kept (docs/privacy.md): the removed qualified credit is gone.
    const board = await getLeaderboard(h.deps, { serverId, period: "", limit: 10 });
    t.deepEqual(
      board.map((r) => [r.referrerIdentity, r.credits]),
      [["alice", 1]],
    );
  },
);

test.serial(
  "pay-once: after a qualified referral is removed, exact replays of its events are unknown tokens that write nothing (no second credit, no second referral.qualified); the referee through a new click starts a new referral",
  async (t) => {
    const { h } = t.context;
    await emptyReferralTables(h);
    const { serverId } = await createReferralServer(h, "replays");
    const token = await register(h, serverId, "alice", "r-paid");
    await applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q-paid" });
    const qualifiedEvents = () => h.db.prisma.outboxMessage.count({ where: { key: serverId, type: "referral.qualified" } });
    t.is(await qualifiedEvents(), 1);
    h.clock.advanceSeconds((KEEP_DAYS + 1) * DAY_SECONDS);
    t.is((await pass(h, [referralRule])).removed.ended_referrals, 1);

    for (const replay of [
      { event: "registered" as const, serverEventId: "reg-r-paid", refereeIdentity: "r-paid" },
      { event: "qualified" as const, serverEventId: "q-paid" },
      { event: "reversed" as const, serverEventId: "rev-paid" },
    ]) {
      t.deepEqual(await answerOf(applyEvent(h, { serverId, token, ...replay })), UNKNOWN_TOKEN, replay.event);
    }
    t.is(await qualifiedEvents(), 1);
    t.is(await h.db.prisma.referralCredit.count({ where: { serverId } }), 0);
    t.is(await h.db.prisma.referralEvent.count({ where: { token } }), 0);

    // Past the horizon the first touch is forgotten: another referrer's new click registers the referee afresh.
    await register(h, serverId, "bob", "r-paid");
    const fresh = await h.db.prisma.referral.findMany({ where: { serverId }, select: { referrerIdentity: true, state: true } });
    t.deepEqual(fresh, [{ referrerIdentity: "bob", state: "registered" }]);
  },
);

test.serial(
  "pay-once: a qualified event racing the removal of its referral waits for it, then answers 404 and leaves no credit, no referral.qualified and no dedup row",
  async (t) => {
    const { h } = t.context;
    await emptyReferralTables(h);
    const { serverId } = await createReferralServer(h, "race");
    const token = await register(h, serverId, "alice", "r-race");
    h.clock.advanceSeconds((KEEP_DAYS + 1) * DAY_SECONDS);
    // The rule's batch, held open in a transaction of its own (its row locks taken, not committed).
    const recorded = recordingOnlyClient();
    await referralRule.removeBatch(recorded.client, h.clock.now(), 10);
    const [batch] = recorded.statements;
    const holder = new pg.Client({ connectionString: h.db.url });
    await holder.connect();
    t.teardown(() => holder.end());
    await holder.query("BEGIN");
    t.is((await holder.query(batch!.text, batch!.values as unknown[])).rowCount, 1);
    const qualifying = answerOf(applyEvent(h, { serverId, event: "qualified", token, serverEventId: "q-race" }));
    await eventually(async () => {
      const [row] = await runSql<{ n: number }>(
        h.db.prisma,
        Prisma.sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return (row?.n ?? 0) >= 1;
    });
    await holder.query("COMMIT");
    t.deepEqual(await qualifying, UNKNOWN_TOKEN);
    t.is(await h.db.prisma.referralCredit.count({ where: { serverId } }), 0);
    t.is(await h.db.prisma.outboxMessage.count({ where: { key: serverId, type: "referral.qualified" } }), 0);
    t.is(await h.db.prisma.referralEvent.count({ where: { token } }), 0);
    t.is(await h.db.prisma.referral.count({ where: { serverId } }), 0);
  },
);

test.serial("the rules' oldest-age gauges read the oldest row each governs (a linked click and a held referral are not governed)", async (t) => {
  const { h } = t.context;
  await emptyReferralTables(h);
  const { serverId } = await createReferralServer(h, "gauges");
  const held = await register(h, serverId, "alice", "g-held");
  await executeSql(h.db.prisma, Prisma.sql`UPDATE referrals SET review = 'held' WHERE server_id = ${serverId}::uuid`);
  t.truthy(held);
  t.is(await clickRule.oldestAge(h.db.prisma, h.clock.now()), null);
  t.is(await referralRule.oldestAge(h.db.prisma, h.clock.now()), null);
  h.clock.advanceSeconds(60);
  await clickToken(h, serverId, "alice");
  await register(h, serverId, "alice", "g-young");
  h.clock.advanceSeconds(60);
  t.is(await clickRule.oldestAge(h.db.prisma, h.clock.now()), 60);
  t.is(await referralRule.oldestAge(h.db.prisma, h.clock.now()), 60);
});
