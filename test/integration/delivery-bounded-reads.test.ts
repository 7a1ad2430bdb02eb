/**
 * The delivery side's reads stay bounded whatever one server's history (issue: the same cost on day 1,000 as on
 * day 1). The server has 20,000 delivered callback deliveries with their attempt rows and 20,000 claimed pull
 * deliveries; its voter has 20,000 hearts refused by the cooldown since the heart that counted. Each hot path (the
 * consumer's insert with its lease, the dispatcher's claim, the attempt record, the pull list and claim, a receipt)
 * must read a handful of rows, not that history. Every statement is recorded and re-run under EXPLAIN ANALYZE
 * (rolled back), after undoing what the path changed, so the re-run does the same work.
 */
import anyTest, { type TestFn } from "ava";
import { randomUUID } from "node:crypto";
import { Prisma } from "../../gen/prisma/client.js";
import { recordAttempts } from "../../services/delivery/pipeline/attempt-log.js";
import { claimDueDeliveries } from "../../services/delivery/pipeline/claim-deliveries.js";
import { claimPullHearts, toPullClaimExchange } from "../../services/delivery/rpc/claim-pull-hearts.js";
import { insertAndLeaseDeliveries, type NewDelivery } from "../../services/delivery/pipeline/insert-deliveries.js";
import { listPullEvents, listPullHearts } from "../../services/delivery/rpc/pull-store.js";
import { withdrawOthers } from "../../services/delivery/pipeline/withdraw-unpaid.js";
import { getReceipt } from "../../services/hearts/get-receipt.js";
import type { ReceiptLinks } from "../../services/hearts/receipt-token.js";
import { executeSql } from "../../services/shared/adapters/sql/executor.js";
import { create } from "@bufbuild/protobuf";
import { GetReceiptRequestSchema } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { countedHeartOf, deliveredCallbackOf, deliveryAttemptOf, heldLedgerRowOf, seedListServers } from "../helpers/list-servers.js";
import { recordingClient, rowsReadByStatements, rowsReadByTableGeneric } from "../helpers/rows-read.js";
import {
  defaultEndpoint,
  insertSecret,
  insertServer,
  startMeasuredHarness,
  type Harness,
  type MeasuredHarness,
} from "../../scripts/harness/delivery-harness.js";

const HISTORY_ROWS = 20_000;
/** A handful: the rows of the request itself, their neighbours in an index, the server and endpoint rows. */
const FEW = 12;

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void>; serverId: string }>;

test.before(async (t) => {
  const measured = await startMeasuredHarness("2026-05-10T12:00:00.000Z");
  t.context = { ...measured, serverId: await serverWithHistory(measured.h, measured.clock.now()) };
});
test.after.always(async (t) => {
  await t.context.close?.();
});

/** A server with a callback URL and secret, pull deliveries on, and HISTORY_ROWS of each kind of history (see the file's comment). */
async function serverWithHistory(h: Harness, at: Date): Promise<string> {
  const serverId = await insertServer(h.db.prisma, { callbackUrl: "http://127.0.0.1:9/callback" });
  await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  await h.db.prisma.server.update({ where: { id: serverId }, data: { pullEnabled: true } });
  const endpointId = (await defaultEndpoint(h.db.prisma, serverId)).id;
  const delivered = (transport: "callback" | "pull", endpoint: string | null) => Prisma.sql`
    INSERT INTO deliveries (id, server_id, heart_id, transport, endpoint_id, dedup_key, event_type, username, voter_identity, period, counted_at,
                            status, attempts, next_attempt_at, delivered_at, created_at)
    SELECT gen_random_uuid(), ${serverId}::uuid, x.heart_id, ${transport}::"DeliveryTransport", ${endpoint}::uuid, x.heart_id::text, 'heart.counted',
           'player' || g, 'voter-' || g, '2026-05', x.at, 'delivered', 1, x.at, x.at, x.at
    FROM generate_series(1, ${HISTORY_ROWS}::int) AS g
    CROSS JOIN LATERAL (SELECT gen_random_uuid() AS heart_id, ${at}::timestamptz - g * interval '1 minute' AS at) x`;
  await executeSql(h.db.prisma, delivered("callback", endpointId));
  await executeSql(h.db.prisma, delivered("pull", null));
  await executeSql(
    h.db.prisma,
    Prisma.sql`
    INSERT INTO delivery_attempts (delivery_id, server_id, attempt, url, started_at, status_code, latency_ms, succeeded, request_body, response_body)
    SELECT id, server_id, 1, 'http://127.0.0.1:9/callback', delivered_at, 200, 5, true, '{}', 'ok'
    FROM deliveries WHERE server_id = ${serverId}::uuid AND transport = 'callback'`,
  );
  // The voter's counted heart 20 h ago, then 20,000 hearts refused by its cooldown.
  await executeSql(
    h.db.prisma,
    Prisma.sql`
    INSERT INTO hearts (id, server_id, username, voter_identity, ip, subnet, user_agent, counted, verdict, fraud_score, fraud_reasons, period, created_at)
    SELECT gen_random_uuid(), ${serverId}::uuid, 'Spammer', 'spammer', '192.0.2.1', '192.0.2.0/24', 'ua', g = 0, CASE WHEN g = 0 THEN 'counted' ELSE 'cooldown' END,
           0, '{}', '2026-05', ${at}::timestamptz - interval '20 hours' + g * interval '1 second'
    FROM generate_series(0, ${HISTORY_ROWS}::int) AS g`,
  );
  // The list's other servers, each with a delivered callback, its attempt and a counted heart: every test runs on a
  // list's statistics, where one server's share of a table looks tiny to a generic plan (test/helpers/list-servers.ts).
  await seedListServers(h.db.prisma, {
    at,
    rowsOf: [deliveredCallbackOf, deliveryAttemptOf, countedHeartOf, heldLedgerRowOf],
    analyze: ["deliveries", "delivery_attempts", "hearts", "vote_claims"],
  });
  return serverId;
}

function newHeart(serverId: string, at: Date): NewDelivery {
  return {
    heartId: randomUUID(),
    serverId,
    eventType: "heart.counted",
    username: "Steve",
    voterIdentity: `voter-${randomUUID()}`,
    period: "2026-05",
    streakDay: null,
    countedAt: at,
  };
}

/**
 * The most rows per table any one of `statements` reads on its generic plan (the plan a named statement may run on after
 * five executions); a planner fence's own statement is skipped, as the pull claim's test does.
 */
/** HISTORY_ROWS pull deliveries of `serverId`, pending and due, counted over the day before `at`: a server's unclaimed pull backlog. */
async function insertWaitingPullDeliveries(prisma: object, serverId: string, at: Date): Promise<void> {
  await executeSql(
    prisma,
    Prisma.sql`
    INSERT INTO deliveries (id, server_id, heart_id, transport, dedup_key, event_type, username, voter_identity, period, counted_at, next_attempt_at, created_at)
    SELECT gen_random_uuid(), ${serverId}::uuid, x.heart_id, 'pull', x.heart_id::text, 'heart.counted', 'player' || g, 'voter-' || g, '2026-05', x.at, x.at, x.at
    FROM generate_series(1, ${HISTORY_ROWS}::int) AS g
    CROSS JOIN LATERAL (SELECT gen_random_uuid() AS heart_id, ${at}::timestamptz - interval '1 day' - g * interval '1 second' AS at) x`,
  );
}

async function genericReadsOf(prisma: object, statements: readonly Prisma.Sql[]): Promise<Record<string, number>> {
  const most: Record<string, number> = {};
  for (const statement of statements.filter((x) => !x.text.includes("/* planner-fence */"))) {
    for (const [table, rows] of Object.entries(await rowsReadByTableGeneric(prisma, statement))) most[table] = Math.max(most[table] ?? 0, rows);
  }
  return most;
}

const room = (at: Date) => ({
  now: at,
  leaseUntil: new Date(at.getTime() + 60_000),
  limit: 10,
  perServerLimit: 10,
  inFlightByServer: new Map<string, number>(),
});

test.serial(
  "the consumer's insert with its lease, the dispatcher's claim and the attempt record each read a handful of rows of a server with 20,000 delivered deliveries",
  async (t) => {
    const { h, clock, pool, serverId } = t.context;
    const at = clock.now();

    const insert = recordingClient(pool);
    const heart = newHeart(serverId, at);
    const inserted = await insertAndLeaseDeliveries(insert.client, [heart], { ...room(at), limit: 0 });
    t.deepEqual(inserted.outcomes, ["inserted"], "its callback and pull deliveries");
    const claim = recordingClient(pool);
    const [claimed] = await claimDueDeliveries(claim.client, room(at));
    t.is(claimed?.heartId, heart.heartId);
    const record = recordingClient(pool);
    const [recorded] = await recordAttempts(record.client, [
      {
        delivery: claimed!,
        startedAt: at,
        finishedAt: at,
        exchange: { ...toPullClaimExchange(serverId, heart.heartId), succeeded: true },
        result: { kind: "delivered" },
      },
    ]);
    t.deepEqual(recorded, { kind: "recorded", owned: true });

    // Undone in reverse, each path re-run on the state it ran on.
    await executeSql(h.db.prisma, Prisma.sql`DELETE FROM delivery_attempts WHERE delivery_id = ${claimed!.id}::uuid`);
    await executeSql(h.db.prisma, Prisma.sql`UPDATE deliveries SET status = 'pending', attempts = 0, delivered_at = NULL WHERE id = ${claimed!.id}::uuid`);
    const recordRead = await rowsReadByStatements(h.db.prisma, record.statements());
    const recordGeneric = await genericReadsOf(h.db.prisma, record.statements());
    await executeSql(h.db.prisma, Prisma.sql`UPDATE deliveries SET lease_until = NULL, leased_by = NULL WHERE id = ${claimed!.id}::uuid`);
    const claimRead = await rowsReadByStatements(h.db.prisma, claim.statements());
    const claimGeneric = await genericReadsOf(h.db.prisma, claim.statements());
    await executeSql(h.db.prisma, Prisma.sql`DELETE FROM deliveries WHERE heart_id = ${heart.heartId}::uuid`);
    const insertRead = await rowsReadByStatements(h.db.prisma, insert.statements());
    const insertGeneric = await genericReadsOf(h.db.prisma, insert.statements());

    for (const [path, read] of [
      ["insert", insertRead],
      ["claim", claimRead],
      ["record", recordRead],
      ["insert (generic plan, most of a statement)", insertGeneric],
      ["claim (generic plan, most of a statement)", claimGeneric],
      ["record (generic plan, most of a statement)", recordGeneric],
    ] as const) {
      t.log(path, read);
      t.true((read.deliveries ?? 0) <= FEW, `${path}: deliveries rows read: ${read.deliveries}`);
      t.true((read.delivery_attempts ?? 0) <= FEW, `${path}: delivery_attempts rows read: ${read.delivery_attempts}`);
    }
  },
);

test.serial("the pull list and the pull claim each read a handful of rows of a server with 20,000 claimed pull deliveries", async (t) => {
  const { h, clock, pool, serverId } = t.context;
  const at = clock.now();
  const heart = newHeart(serverId, at);
  await insertAndLeaseDeliveries(h.db.prisma, [heart]);
  const list = recordingClient(pool);
  const page = await listPullHearts(list.client, { serverId, cursor: "", limit: 100 });
  t.deepEqual(
    page.hearts.map((x) => x.heartId),
    [heart.heartId],
    "only the pending one",
  );
  const claim = recordingClient(pool);
  t.deepEqual(await claimPullHearts(claim.client, { serverId, heartIds: [heart.heartId], now: at }), [{ heartId: heart.heartId, status: "claimed" }]);
  await executeSql(
    h.db.prisma,
    Prisma.sql`DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE heart_id = ${heart.heartId}::uuid AND transport = 'pull')`,
  );
  await executeSql(
    h.db.prisma,
    Prisma.sql`UPDATE deliveries SET status = 'pending', attempts = 0, delivered_at = NULL WHERE heart_id = ${heart.heartId}::uuid AND transport = 'pull'`,
  );
  for (const [path, read] of [
    ["pull list", await rowsReadByStatements(h.db.prisma, list.statements())],
    ["pull claim", await rowsReadByStatements(h.db.prisma, claim.statements())],
    ["pull list (generic plan, most of a statement)", await genericReadsOf(h.db.prisma, list.statements())],
    ["pull claim (generic plan, most of a statement)", await genericReadsOf(h.db.prisma, claim.statements())],
  ] as const) {
    t.log(path, read);
    t.true((read.deliveries ?? 0) <= FEW, `${path}: deliveries rows read: ${read.deliveries}`);
    t.true((read.delivery_attempts ?? 0) <= FEW, `${path}: delivery_attempts rows read: ${read.delivery_attempts}`);
  }
});

test.serial(
  "a pull page reads the page and one more row of a server with 2,000 pending pull hearts, under the generic plan a cached statement runs on too",
  async (t) => {
    const { h, clock, pool } = t.context;
    const backlog = await insertServer(h.db.prisma);
    await h.db.prisma.server.update({ where: { id: backlog }, data: { pullEnabled: true } });
    await executeSql(
      h.db.prisma,
      Prisma.sql`INSERT INTO deliveries (id, server_id, heart_id, dedup_key, transport, event_type, username, voter_identity, period, counted_at, status, created_at)
        SELECT gen_random_uuid(), ${backlog}::uuid, h, h::text, 'pull', 'heart.counted', 'p' || g, 'p' || g, '2026-05', ${clock.now()}::timestamptz, 'pending',
               ${clock.now()}::timestamptz - interval '1 day' + g * interval '1 millisecond'
        FROM (SELECT g, gen_random_uuid() AS h FROM generate_series(1, 2000) g) x`,
    );
    await executeSql(h.db.prisma, Prisma.sql`ANALYZE deliveries`);
    const first = recordingClient(pool);
    const page = await listPullHearts(first.client, { serverId: backlog, cursor: "", limit: 100 });
    t.is(page.hearts.length, 100);
    const next = recordingClient(pool);
    t.is((await listPullHearts(next.client, { serverId: backlog, cursor: page.nextCursor ?? "", limit: 100 })).hearts.length, 100);
    for (const [path, statements] of [
      ["first page", first.statements()],
      ["a later page", next.statements()],
    ] as const) {
      for (const statement of statements) {
        const read = await rowsReadByTableGeneric(h.db.prisma, statement);
        t.log(path, read);
        t.true((read.deliveries ?? 0) <= 101 + FEW, `${path}: deliveries rows read under the generic plan: ${read.deliveries}`);
      }
    }
  },
);

test.serial(
  "a pull claim of a page of 100 reads about those rows of a server with 20,000 pending and 20,000 claimed pull hearts among a list's 5,000 servers, on its custom and on the generic plan",
  async (t) => {
    const { h, clock, pool } = t.context;
    const at = clock.now();
    const backlog = await insertServer(h.db.prisma);
    await h.db.prisma.server.update({ where: { id: backlog }, data: { pullEnabled: true } });
    const pull = (status: "pending" | "delivered") => Prisma.sql`
      INSERT INTO deliveries (id, server_id, heart_id, dedup_key, transport, event_type, username, voter_identity, period, counted_at, status, attempts,
                              delivered_at, created_at)
      SELECT gen_random_uuid(), ${backlog}::uuid, x.h, x.h::text, 'pull', 'heart.counted', 'p' || g, 'p' || g, '2026-05', ${at}::timestamptz,
             ${status}::"DeliveryStatus", ${status === "delivered" ? 1 : 0}::int, CASE WHEN ${status} = 'delivered' THEN ${at}::timestamptz END,
             ${at}::timestamptz - interval '2 days' + g * interval '1 millisecond'
      FROM (SELECT g, gen_random_uuid() AS h FROM generate_series(1, ${HISTORY_ROWS}::int) g) x`;
    await executeSql(h.db.prisma, pull("delivered"));
    await executeSql(h.db.prisma, pull("pending"));
    // The list's other servers (test/helpers/list-servers.ts): with a handful of servers, the generic plan of a claim that
    // named the server and the pending status kept to the dedup keys; with a list's thousands it walked the server's
    // pending partial index (deliveries_pull_pending_hearts_idx) and filtered by dedup key: the whole backlog per claim.
    await seedListServers(h.db.prisma, { at, rowsOf: [deliveredCallbackOf], analyze: ["deliveries"] });
    const page = await listPullHearts(h.db.prisma, { serverId: backlog, cursor: "", limit: 100 });
    const claim = recordingClient(pool);
    const answers = await claimPullHearts(claim.client, { serverId: backlog, heartIds: page.hearts.map((x) => x.heartId), now: at });
    t.is(answers.filter((a) => a.status === "claimed").length, 100);
    // Measured on the database as it was before the claim (each statement is re-run under EXPLAIN ANALYZE, rolled back).
    await executeSql(
      h.db.prisma,
      Prisma.sql`DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE server_id = ${backlog}::uuid AND heart_id = ANY(${page.hearts.map((x) => x.heartId)}::uuid[]))`,
    );
    await executeSql(
      h.db.prisma,
      Prisma.sql`UPDATE deliveries SET status = 'pending', attempts = 0, delivered_at = NULL WHERE server_id = ${backlog}::uuid AND heart_id = ANY(${page.hearts.map((x) => x.heartId)}::uuid[])`,
    );
    const statements = claim.statements();
    const custom = await rowsReadByStatements(h.db.prisma, statements);
    t.log("custom plan", custom);
    // 100 rows of the claim, read once by each part of the statement that names them (the probe of each id's unique key,
    // then by primary key the payout, the claim and the answer's check).
    t.true((custom.deliveries ?? 0) <= 4 * 100 + FEW, `custom plan: deliveries rows read: ${custom.deliveries}`);
    for (const statement of statements.filter((x) => !x.text.includes("/* planner-fence */"))) {
      const generic = await rowsReadByTableGeneric(h.db.prisma, statement);
      t.log("generic plan", generic);
      t.true((generic.deliveries ?? 0) <= 4 * 100 + FEW, `generic plan: deliveries rows read: ${generic.deliveries}`);
    }
  },
);

test.serial("a receipt of a heart refused by the cooldown reads a handful of rows, not the voter's 20,000 refused hearts before it", async (t) => {
  const { h, pool, serverId } = t.context;
  const [last] = await h.db.prisma.heart.findMany({ where: { serverId, voterIdentity: "spammer" }, orderBy: { createdAt: "desc" }, take: 1 });
  const receipts = { heartIdOf: () => last!.id, urlOf: () => "" } satisfies ReceiptLinks;
  const { client, statements } = recordingClient(pool);
  const answer = await getReceipt({ ...h.deps, prisma: client }, receipts, create(GetReceiptRequestSchema, { token: "t" }));
  t.truthy(answer.receipt?.nextVoteAt, "the cooldown's end, from the heart that counted");
  for (const [path, read] of [
    ["receipt", await rowsReadByStatements(h.db.prisma, statements())],
    ["receipt (generic plan, most of a statement)", await genericReadsOf(h.db.prisma, statements())],
  ] as const) {
    t.log(path, read);
    t.true((read.hearts ?? 0) <= FEW, `${path}: hearts rows read: ${read.hearts}`);
    t.true((read.deliveries ?? 0) <= FEW, `${path}: deliveries rows read: ${read.deliveries}`);
  }
});

test.serial("the dispatcher's claim reads a handful of rows while a server has 20,000 unclaimed pull deliveries due before the one it sends", async (t) => {
  const { h, clock, pool, serverId } = t.context;
  const at = clock.now();
  const pullOnly = await insertServer(h.db.prisma);
  await h.db.prisma.server.update({ where: { id: pullOnly }, data: { pullEnabled: true } });
  await insertWaitingPullDeliveries(h.db.prisma, pullOnly, at);
  await executeSql(h.db.prisma, Prisma.sql`ANALYZE deliveries`);
  const heart = newHeart(serverId, at);
  await insertAndLeaseDeliveries(h.db.prisma, [heart]);
  const claim = recordingClient(pool);
  const claimed = await claimDueDeliveries(claim.client, room(at));
  t.true(
    claimed.some((c) => c.heartId === heart.heartId && c.transport === "callback"),
    "the sendable callback delivery behind them is claimed",
  );
  await executeSql(h.db.prisma, Prisma.sql`UPDATE deliveries SET lease_until = NULL, leased_by = NULL WHERE id = ANY(${claimed.map((c) => c.id)}::uuid[])`);
  const read = await rowsReadByStatements(h.db.prisma, claim.statements());
  t.log("claim", read);
  // Twice a handful: the poll's park pass (claim-deliveries.ts parkHeldDeliveries) reads the same few unparked due
  // rows the claim then reads (the pending callbacks the earlier tests left, and this one).
  t.true((read.deliveries ?? 0) <= 2 * FEW, `deliveries rows read: ${read.deliveries}`);
  const generic = await genericReadsOf(h.db.prisma, claim.statements());
  t.log("claim (generic plan, most of a statement)", generic);
  t.true((generic.deliveries ?? 0) <= 2 * FEW, `generic plan: deliveries rows read: ${generic.deliveries}`);
});

test.serial("a server's pull list of hearts reads a page, not its 20,000 unclaimed referral events on pull (nor the other way round)", async (t) => {
  const { h, clock, pool, serverId } = t.context;
  const at = clock.now();
  await executeSql(
    h.db.prisma,
    Prisma.sql`
    INSERT INTO deliveries (id, server_id, heart_id, transport, dedup_key, event_type, event_id, username, voter_identity, period, counted_at, next_attempt_at, created_at)
    SELECT gen_random_uuid(), ${serverId}::uuid, gen_random_uuid(), 'pull', 'event-' || g, 'referral.registered', 'event-' || g, '', '', '2026-05',
           ${at}::timestamptz - interval '3 days', ${at}::timestamptz - interval '3 days', ${at}::timestamptz - interval '3 days' - g * interval '1 second'
    FROM generate_series(1, ${HISTORY_ROWS}::int) AS g`,
  );
  await executeSql(h.db.prisma, Prisma.sql`ANALYZE deliveries`);
  const hearts = recordingClient(pool);
  await listPullHearts(hearts.client, { serverId, cursor: "", limit: 100 });
  const events = recordingClient(pool);
  const page = await listPullEvents(events.client, { serverId, cursor: "", limit: 10, now: at });
  t.is(page.events.length, 10);
  for (const [path, read] of [
    ["hearts list", await rowsReadByStatements(h.db.prisma, hearts.statements())],
    ["events list", await rowsReadByStatements(h.db.prisma, events.statements())],
    ["hearts list (generic plan, most of a statement)", await genericReadsOf(h.db.prisma, hearts.statements())],
    ["events list (generic plan, most of a statement)", await genericReadsOf(h.db.prisma, events.statements())],
  ] as const) {
    t.log(path, read);
    // The hearts list: the pending hearts the earlier tests left (a few); the events list: its page + 1.
    t.true((read.deliveries ?? 0) <= FEW, `${path}: deliveries rows read: ${read.deliveries}`);
  }
});

test.serial(
  "a pay-once withdrawal of one paid heart's other deliveries and its ledger row reads a handful of rows of a server with 20,000 waiting deliveries and held ledger rows, on its custom and on the generic plan",
  async (t) => {
    const { h, clock, pool } = t.context;
    const at = clock.now();
    const waiting = await insertServer(h.db.prisma);
    await h.db.prisma.server.update({ where: { id: waiting }, data: { pullEnabled: true, payOnce: true } });
    await insertWaitingPullDeliveries(h.db.prisma, waiting, at);
    // Each waiting heart's held ledger row (the server's players claim in game too).
    await executeSql(
      h.db.prisma,
      Prisma.sql`
    INSERT INTO vote_claims (heart_id, server_id, player_key, username_lower, counted_at, expires_at)
    SELECT heart_id, server_id, 'name:' || username, username, counted_at, counted_at + interval '30 days' FROM deliveries WHERE server_id = ${waiting}::uuid`,
    );
    await executeSql(h.db.prisma, Prisma.sql`ANALYZE deliveries, vote_claims`);
    const [paid] = await h.db.prisma.delivery.findMany({ where: { serverId: waiting }, orderBy: { createdAt: "asc" }, take: 1 });
    const { client, statements } = recordingClient(pool);
    await withdrawOthers(client, { serverId: waiting, heartIds: [paid!.heartId], paidBy: "callback", now: at });
    t.is((await h.db.prisma.delivery.findUniqueOrThrow({ where: { id: paid!.id } })).status, "withdrawn");
    t.is((await h.db.prisma.voteClaim.findUniqueOrThrow({ where: { heartId: paid!.heartId } })).state, "withdrawn", "its ledger row too");
    await executeSql(h.db.prisma, Prisma.sql`DELETE FROM delivery_attempts WHERE delivery_id = ${paid!.id}::uuid`);
    await executeSql(h.db.prisma, Prisma.sql`UPDATE deliveries SET status = 'pending', attempts = 0, last_error = NULL WHERE id = ${paid!.id}::uuid`);
    await executeSql(h.db.prisma, Prisma.sql`UPDATE vote_claims SET state = 'held' WHERE heart_id = ${paid!.heartId}::uuid`);
    for (const [path, read] of [
      ["withdrawal", await rowsReadByStatements(h.db.prisma, statements())],
      ["withdrawal (generic plan, most of a statement)", await genericReadsOf(h.db.prisma, statements())],
    ] as const) {
      t.log(path, read);
      t.true((read.deliveries ?? 0) <= FEW, `${path}: deliveries rows read: ${read.deliveries}`);
      t.true((read.vote_claims ?? 0) <= 2, `${path}: vote_claims rows read: ${read.vote_claims}`);
    }
  },
);
