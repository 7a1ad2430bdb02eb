/**
 * A server whose receiver is slow holds its cap of deliveries in flight while its backlog stays due, ahead of every
 * other server's rows in the due order. The dispatcher's claim reads a bounded number of rows whatever that backlog
 * (it used to filter the saturated server's rows out while reading through all of them), and still claims the other
 * servers' due rows past it.
 */
import anyTest, { type TestFn } from "ava";
import { randomUUID } from "node:crypto";
import { Prisma } from "../../gen/prisma/client.js";
import { claimDueDeliveries } from "../../services/delivery/pipeline/claim-deliveries.js";
import { insertAndLeaseDeliveries } from "../../services/delivery/pipeline/insert-deliveries.js";
import { executeSql, runSql } from "../../services/shared/adapters/sql/executor.js";
import { recordingClient, rowsReadByStatements } from "../helpers/rows-read.js";
import { dispatcherRoomAt, insertPendingCallbacks } from "../helpers/skewed-history.js";
import { defaultEndpoint, insertSecret, insertServer, startMeasuredHarness, type MeasuredHarness } from "../../scripts/harness/delivery-harness.js";

const BACKLOG = 20_000;

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void> }>;

test.before(async (t) => {
  t.context = await startMeasuredHarness("2026-05-10T12:00:00.000Z");
});
test.after.always(async (t) => {
  await t.context.close?.();
});

/** A server with a callback URL and secret (its deliveries are sendable). */
async function sendingServer(t: { context: MeasuredHarness }): Promise<string> {
  const { h } = t.context;
  const serverId = await insertServer(h.db.prisma, { callbackUrl: "http://127.0.0.1:9/callback" });
  await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  return serverId;
}

/** One due delivery of a new heart of `serverId`; its heart id. */
async function oneDue(t: { context: MeasuredHarness }, serverId: string): Promise<string> {
  const heartId = randomUUID();
  const at = t.context.clock.now();
  await insertAndLeaseDeliveries(t.context.h.db.prisma, [
    { heartId, serverId, eventType: "heart.counted", username: "Steve", voterIdentity: `v-${heartId}`, period: "2026-05", streakDay: null, countedAt: at },
  ]);
  return heartId;
}

async function leasedCount(t: { context: MeasuredHarness }, serverId: string): Promise<number> {
  const [row] = await runSql<{ n: bigint }>(
    t.context.h.db.prisma,
    Prisma.sql`SELECT count(*) AS n FROM deliveries WHERE server_id = ${serverId}::uuid AND lease_until IS NOT NULL`,
  );
  return Number(row!.n);
}

test.serial(
  "with a server at its cap and 20,000 of its deliveries due first, a claim reads at most its scan plus a handful of rows and claims two other servers' due rows past them",
  async (t) => {
    const { h, clock, pool } = t.context;
    const at = clock.now();
    const slow = await sendingServer(t);
    await insertPendingCallbacks(h.db.prisma, slow, (await defaultEndpoint(h.db.prisma, slow)).id, BACKLOG, at);
    const others = [await sendingServer(t), await sendingServer(t)];
    const hearts = [await oneDue(t, others[0]!), await oneDue(t, others[1]!)];
    await executeSql(h.db.prisma, Prisma.sql`ANALYZE deliveries`);

    // This dispatcher has the slow server's cap (10) in flight: it has no room there.
    const room = { ...dispatcherRoomAt(at), inFlightByServer: new Map([[slow, 10]]) };
    const claim = recordingClient(pool);
    const claimed = await claimDueDeliveries(claim.client, room);
    t.deepEqual(claimed.map((c) => c.heartId).sort(), [...hearts].sort(), "both other servers' rows are claimed");
    t.is(await leasedCount(t, slow), 0, "none of the saturated server's rows is leased");
    await executeSql(h.db.prisma, Prisma.sql`UPDATE deliveries SET lease_until = NULL, leased_by = NULL WHERE id = ANY(${claimed.map((c) => c.id)}::uuid[])`);

    const read = await rowsReadByStatements(h.db.prisma, claim.statements());
    t.log("claim", read);
    // The first statement's scan (4 x the limit of 10), then the walk: an index entry per server with claimable rows
    // (3 here), and of each unsaturated one its due row; the servers and endpoints by key.
    const bound = 4 * room.limit + 12;
    t.true((read.deliveries ?? 0) <= bound, `deliveries rows read: ${read.deliveries} (bound ${bound})`);
    await executeSql(h.db.prisma, Prisma.sql`DELETE FROM deliveries WHERE server_id = ANY(${[slow, ...others]}::uuid[])`);
  },
);

test.serial("with room at the server, the claim leases its oldest due rows up to the cap and reads no walk", async (t) => {
  const { h, clock, pool } = t.context;
  const at = clock.now();
  const busy = await sendingServer(t);
  await insertPendingCallbacks(h.db.prisma, busy, (await defaultEndpoint(h.db.prisma, busy)).id, 100, at);
  const claim = recordingClient(pool);
  const claimed = await claimDueDeliveries(claim.client, { ...dispatcherRoomAt(at), perServerLimit: 4 });
  t.is(claimed.filter((c) => c.serverId === busy).length, 4, "the server's cap of rows");
  t.is(claim.statements().length, 1, "one statement: the scan saw no saturated server");
  await executeSql(h.db.prisma, Prisma.sql`DELETE FROM deliveries WHERE server_id = ${busy}::uuid`);
});
