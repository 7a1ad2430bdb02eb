/**
 * The plugin's reward queue reads stay bounded whatever the server's history (the same cost on day 1,000 as on day 1).
 * One server holds 20,000 acknowledged entries and 20,000 online-only entries of players who are offline, all older
 * than the few entries a list should answer. A list of the whole queue reads about a page; a list for the players
 * online reads about the entries it answers, never the offline players' online-only entries nor the acknowledged ones.
 * Statements are recorded, then re-run under EXPLAIN ANALYZE (rolled back).
 */
import anyTest, { type TestFn } from "ava";
import { randomUUID } from "node:crypto";
import { Prisma } from "../../gen/prisma/client.js";
import {
  ackRewardEntries,
  listPendingRewardEntries,
  queueRewardEntries,
  REQUEUE_PAGE_ENTRIES,
  requeueAckedRewardEntries,
  type RewardPlayer,
} from "../../services/rewards/reward-queue-store.js";
import { executeSql, runSqlTransaction, sqlOf } from "../../services/shared/adapters/sql/executor.js";
import { insertServer, startMeasuredHarness, type MeasuredHarness } from "../../scripts/harness/delivery-harness.js";
import { recordingClient, rowsReadByStatements } from "../helpers/rows-read.js";

const HISTORY = 20_000;
const PAGE = 50;
/** Index neighbours, the rows by primary key, a handful. */
const FEW = 10;

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void>; serverId: string; answerable: string[] }>;

const playerOf = (username: string): RewardPlayer => ({ username, steamId: null, discordId: null, minecraftUuid: null, accountId: null });
const entries = (n: number, onlineOnly: boolean) =>
  Array.from({ length: n }, (_, i) => ({ key: `${randomUUID()}:vote:${i}`, reason: "vote" as const, commands: [`give p ${i}`], onlineOnly }));

test.before(async (t) => {
  const harness = await startMeasuredHarness("2026-05-10T12:00:00.000Z");
  const { prisma } = harness.h.db;
  const serverId = await insertServer(prisma);
  const tx = <T>(body: Parameters<typeof runSqlTransaction<T>>[1]) => runSqlTransaction(prisma, body, { timeoutMs: 120_000 });
  // 20,000 entries the plugin ran and acknowledged (20 players of 1,000 entries).
  for (let p = 0; p < HISTORY / 1_000; p++) {
    await tx(async (q) => {
      const ids = await queueRewardEntries(q, { serverId, heartId: null, player: playerOf(`veteran${p}`), rulesVersion: 1, entries: entries(1_000, false) });
      await ackRewardEntries(q, { serverId, ids, at: harness.clock.now() });
    });
  }
  // 20,000 online-only entries of 1,000 players who are not online (20 each).
  await tx(async (q) => {
    for (let p = 0; p < HISTORY / 20; p++)
      await queueRewardEntries(q, { serverId, heartId: null, player: playerOf(`offline${p}`), rulesVersion: 1, entries: entries(20, true) });
  });
  // Then what a list for the players online answers: entries any time, and the online player's online-only ones.
  const answerable = await tx(async (q) => [
    ...(await queueRewardEntries(q, { serverId, heartId: null, player: playerOf("offline0"), rulesVersion: 1, entries: entries(3, false) })),
    ...(await queueRewardEntries(q, { serverId, heartId: null, player: playerOf("Alice"), rulesVersion: 1, entries: entries(4, true) })),
  ]);
  await executeSql(prisma, Prisma.sql`ANALYZE reward_queue_entries`);
  t.context = { ...harness, serverId, answerable };
});

test.after.always(async (t) => {
  await t.context.close?.();
});

test.serial("a list of the whole queue of a server with 20,000 acknowledged entries reads about a page of entries", async (t) => {
  const { h, pool, serverId } = t.context;
  const { client, statements } = recordingClient(pool);
  const page = await listPendingRewardEntries(sqlOf(client), { serverId, limit: PAGE });
  t.is(page.length, PAGE);
  t.true(page.every((e) => e.onlineOnly && e.player.username.startsWith("offline")));
  t.is(statements().length, 1);
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.true((read.reward_queue_entries ?? 0) <= PAGE + FEW, `reward_queue_entries rows read: ${read.reward_queue_entries}`);
});

test.serial(
  "a list for the players online reads about the entries it answers, never the 20,000 online-only entries of offline players nor the 20,000 acknowledged",
  async (t) => {
    const { h, pool, serverId, answerable } = t.context;
    const { client, statements } = recordingClient(pool);
    const page = await listPendingRewardEntries(sqlOf(client), { serverId, limit: PAGE, online: ["alice", "nobody"] });
    t.deepEqual(page.map((e) => e.id).sort(), [...answerable].sort());
    t.is(statements().length, 1);
    const read = await rowsReadByStatements(h.db.prisma, statements());
    t.true((read.reward_queue_entries ?? 0) <= 3 * answerable.length + FEW, `reward_queue_entries rows read: ${read.reward_queue_entries}`);
  },
);

test.serial("a bulk re-queue page of a server with 20,000 acknowledged entries reads one page of them; a range without any reads a handful", async (t) => {
  const { h, pool, serverId, clock } = t.context;
  const { client, statements } = recordingClient(pool);
  const at = clock.now();
  const day = 86_400_000;
  const page = await requeueAckedRewardEntries(sqlOf(client), {
    serverId,
    from: new Date(at.getTime() - day),
    to: new Date(at.getTime() + day),
    after: null,
    limit: REQUEUE_PAGE_ENTRIES,
    at,
  });
  t.is(page.scanned, REQUEUE_PAGE_ENTRIES, "a full page of the 20,000");
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.log(read);
  // The page's index entries, then the same rows by primary key for their copies: 2 x the page.
  t.true((read.reward_queue_entries ?? 0) <= 2 * REQUEUE_PAGE_ENTRIES + FEW, `reward_queue_entries rows read: ${read.reward_queue_entries}`);

  const empty = recordingClient(pool);
  const none = await requeueAckedRewardEntries(sqlOf(empty.client), {
    serverId,
    from: new Date(at.getTime() + day),
    to: new Date(at.getTime() + 2 * day),
    after: null,
    limit: REQUEUE_PAGE_ENTRIES,
    at,
  });
  t.is(none.scanned, 0);
  const readNone = await rowsReadByStatements(h.db.prisma, empty.statements());
  t.true((readNone.reward_queue_entries ?? 0) <= FEW, `reward_queue_entries rows read for an empty range: ${readNone.reward_queue_entries}`);
});
