/**
 * The delivery side's reads stay bounded whatever one voter's or one server's history (issue: the same cost on day
 * 1,000 as on day 1), for the paths test/integration/delivery-bounded-reads.test.ts leaves out: the consumer's insert
 * of a heart whose voter has 20,000 delivered deliveries on the server, the attempt record of a delivery with 20,000
 * earlier attempts, and the pull claim (the acknowledgement) of referral events while the server has 20,000
 * unclaimed ones. Every statement is recorded and re-run under EXPLAIN
 * ANALYZE (rolled back), after undoing what the path changed, so the re-run does the same work.
 */
import anyTest, { type TestFn } from "ava";
import { randomUUID } from "node:crypto";
import { Prisma } from "../../gen/prisma/client.js";
import { recordAttempts } from "../../services/delivery/pipeline/attempt-log.js";
import { insertAndLeaseDeliveries } from "../../services/delivery/pipeline/insert-deliveries.js";
import { claimPullEvents, toPullClaimExchange } from "../../services/delivery/rpc/claim-pull-hearts.js";
import { executeSql } from "../../services/shared/adapters/sql/executor.js";
import { deliveredCallbackOf, deliveryAttemptOf, seedListServers } from "../helpers/list-servers.js";
import { recordingClient, rowsReadByStatements, rowsReadByTableGeneric } from "../helpers/rows-read.js";
import { dispatcherRoomAt, insertDeliveredCallbacks, insertPendingPullEvents } from "../helpers/skewed-history.js";
import { defaultEndpoint, insertSecret, insertServer, startMeasuredHarness, type MeasuredHarness } from "../../scripts/harness/delivery-harness.js";

const HISTORY_ROWS = 20_000;
const VOTER = "regular";
/** A handful: the request's own rows, their neighbours in an index, the row versions an undo leaves behind. */
const FEW = 12;

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void> }>;

test.before(async (t) => {
  t.context = await startMeasuredHarness("2026-05-10T12:00:00.000Z");
  // The list's 5,000 other servers, each with a delivered callback and its attempt: every test (each ANALYZEs after
  // its own history) runs on a list's statistics, where one server's share of a table looks tiny to a generic plan.
  await seedListServers(t.context.h.db.prisma, { at: t.context.clock.now(), rowsOf: [deliveredCallbackOf, deliveryAttemptOf], analyze: [] });
});

/**
 * The most rows per table any one of `statements` reads on its generic plan (the plan a named statement may run on after
 * five executions); a planner fence's own statement is skipped.
 */
async function genericReadsOf(prisma: object, statements: readonly Prisma.Sql[]): Promise<Record<string, number>> {
  const most: Record<string, number> = {};
  for (const statement of statements.filter((x) => !x.text.includes("/* planner-fence */"))) {
    for (const [table, rows] of Object.entries(await rowsReadByTableGeneric(prisma, statement))) most[table] = Math.max(most[table] ?? 0, rows);
  }
  return most;
}
test.after.always(async (t) => {
  await t.context.close?.();
});

/** A server with a callback URL and secret: its deliveries are sendable, so an insert leases them. */
async function callbackServer(h: MeasuredHarness["h"]): Promise<string> {
  const serverId = await insertServer(h.db.prisma, { callbackUrl: "http://127.0.0.1:9/callback" });
  await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  return serverId;
}

const heartOf = (serverId: string, heartId: string, at: Date) => ({
  heartId,
  serverId,
  eventType: "heart.counted",
  username: "Regular",
  voterIdentity: VOTER,
  period: "2026-05",
  streakDay: null,
  countedAt: at,
});

test.serial("the consumer's insert with its lease reads a handful of rows for a voter with 20,000 delivered deliveries on the server", async (t) => {
  const { h, clock, pool } = t.context;
  const at = clock.now();
  const serverId = await callbackServer(h);
  await insertDeliveredCallbacks(h.db.prisma, serverId, (await defaultEndpoint(h.db.prisma, serverId)).id, HISTORY_ROWS, at, VOTER);
  await executeSql(h.db.prisma, Prisma.sql`ANALYZE deliveries`);

  const heartId = randomUUID();
  const { client, statements } = recordingClient(pool);
  const inserted = await insertAndLeaseDeliveries(client, [heartOf(serverId, heartId, at)], dispatcherRoomAt(at));
  t.deepEqual(inserted.outcomes, ["inserted"]);
  t.is(inserted.leased.length, 1, "leased with its insert");
  await executeSql(h.db.prisma, Prisma.sql`DELETE FROM deliveries WHERE heart_id = ${heartId}::uuid`);
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.log(read);
  t.true((read.deliveries ?? 0) <= FEW, `deliveries rows read: ${read.deliveries}`);
  const generic = await genericReadsOf(h.db.prisma, statements());
  t.log("generic plan, most of a statement", generic);
  t.true((generic.deliveries ?? 0) <= FEW, `generic plan: deliveries rows read: ${generic.deliveries}`);
  // The server's row and its endpoints, not the list's: a generic plan may join them by a scan of the whole table.
  for (const table of ["servers", "callback_endpoints"]) t.true((generic[table] ?? 0) <= FEW, `generic plan: ${table} rows read: ${generic[table]}`);
});

test.serial("the attempt record of a delivery with 20,000 earlier attempts (redelivered again and again) reads a handful of its attempt rows", async (t) => {
  const { h, clock, pool } = t.context;
  const at = clock.now();
  const serverId = await callbackServer(h);
  const heartId = randomUUID();
  const [leased] = (await insertAndLeaseDeliveries(h.db.prisma, [heartOf(serverId, heartId, at)], dispatcherRoomAt(at))).leased;
  await executeSql(
    h.db.prisma,
    Prisma.sql`
    INSERT INTO delivery_attempts (delivery_id, server_id, attempt, url, started_at, status_code, latency_ms, succeeded, request_body, response_body)
    SELECT ${leased!.id}::uuid, ${serverId}::uuid, g, 'http://127.0.0.1:9/callback', ${at}::timestamptz - g * interval '1 minute', 503, 5, false, '{}', ''
    FROM generate_series(1, ${HISTORY_ROWS}::int) AS g`,
  );
  await executeSql(h.db.prisma, Prisma.sql`ANALYZE delivery_attempts`);
  const { client, statements } = recordingClient(pool);
  const [recorded] = await recordAttempts(client, [
    {
      delivery: leased!,
      startedAt: at,
      finishedAt: at,
      exchange: { ...toPullClaimExchange(serverId, heartId), succeeded: true },
      result: { kind: "delivered" },
    },
  ]);
  t.deepEqual(recorded, { kind: "recorded", owned: true });
  const [last] = await h.db.prisma.deliveryAttempt.findMany({ where: { deliveryId: leased!.id }, orderBy: { attempt: "desc" }, take: 1 });
  t.is(last?.attempt, HISTORY_ROWS + 1, "the log continues");
  await executeSql(h.db.prisma, Prisma.sql`DELETE FROM delivery_attempts WHERE delivery_id = ${leased!.id}::uuid AND attempt = ${HISTORY_ROWS + 1}::int`);
  await executeSql(h.db.prisma, Prisma.sql`UPDATE deliveries SET status = 'pending', attempts = 0, delivered_at = NULL WHERE id = ${leased!.id}::uuid`);
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.log(read);
  t.true((read.delivery_attempts ?? 0) <= FEW, `delivery_attempts rows read: ${read.delivery_attempts}`);
  const generic = await genericReadsOf(h.db.prisma, statements());
  t.log("generic plan, most of a statement", generic);
  t.true((generic.delivery_attempts ?? 0) <= FEW, `generic plan: delivery_attempts rows read: ${generic.delivery_attempts}`);
});

test.serial("the pull claim of two referral events reads a handful of rows while the server has 20,000 unclaimed ones", async (t) => {
  const { h, clock, pool } = t.context;
  const at = clock.now();
  const serverId = await insertServer(h.db.prisma);
  await h.db.prisma.server.update({ where: { id: serverId }, data: { pullEnabled: true } });
  await insertPendingPullEvents(h.db.prisma, serverId, HISTORY_ROWS, at);
  await executeSql(h.db.prisma, Prisma.sql`ANALYZE deliveries`);

  // The newest and the oldest.
  const [newest, oldest] = await Promise.all(
    (["desc", "asc"] as const).map((order) => h.db.prisma.delivery.findFirstOrThrow({ where: { serverId }, orderBy: { createdAt: order } })),
  );
  const eventIds = [newest!.eventId!, oldest!.eventId!];
  const { client, statements } = recordingClient(pool);
  t.deepEqual(
    await claimPullEvents(client, { serverId, eventIds, now: at }),
    eventIds.map((eventId) => ({ eventId, status: "claimed" })),
  );
  const claimed = Prisma.sql`SELECT id FROM deliveries WHERE server_id = ${serverId}::uuid AND event_id = ANY(${eventIds}::text[])`;
  await executeSql(h.db.prisma, Prisma.sql`DELETE FROM delivery_attempts WHERE delivery_id IN (${claimed})`);
  await executeSql(h.db.prisma, Prisma.sql`UPDATE deliveries SET status = 'pending', attempts = 0, delivered_at = NULL WHERE id IN (${claimed})`);
  for (const [path, read] of [
    ["custom plan", await rowsReadByStatements(h.db.prisma, statements())],
    ["generic plan, most of a statement", await genericReadsOf(h.db.prisma, statements())],
  ] as const) {
    t.log(path, read);
    t.true((read.deliveries ?? 0) <= FEW, `${path}: deliveries rows read: ${read.deliveries}`);
    t.true((read.delivery_attempts ?? 0) <= FEW, `${path}: delivery_attempts rows read: ${read.delivery_attempts}`);
  }
});
