/**
 * Held deliveries (pending and due, but not sendable now) are parked out of the claim's index by the dispatcher's
 * poll, and every write that can make them sendable gives them back in its own transaction: the claim reads a
 * handful of rows however many callbacks a server holds, and no held delivery is left parked once it is sendable
 * (a delivery parked for ever is a lost reward).
 */
import anyTest, { type TestFn } from "ava";
import { randomUUID } from "node:crypto";
import pg from "pg";
import { Prisma } from "../../gen/prisma/client.js";
import { claimDueDeliveries, PARK_SCAN_ROWS, parkHeldDeliveries } from "../../services/delivery/pipeline/claim-deliveries.js";
import { insertAndLeaseDeliveries } from "../../services/delivery/pipeline/insert-deliveries.js";
import { executeSql, runSql } from "../../services/shared/adapters/sql/executor.js";
import type { PrismaClient } from "../../services/shared/adapters/db.js";
import { eventually } from "../helpers/eventually.js";
import { recordingClient, rowsReadByStatements } from "../helpers/rows-read.js";
import { dispatcherRoomAt, insertPendingCallbacks } from "../helpers/skewed-history.js";
import {
  addDelivery,
  defaultEndpoint,
  insertSecret,
  insertServer,
  setDefaultEndpoint,
  startDispatchWorld,
  startMeasuredHarness,
  type Harness,
  type MeasuredHarness,
} from "../../scripts/harness/delivery-harness.js";

const HELD_ROWS = 20_000;
/** A handful: the claimed row and its index neighbours, the server and endpoint rows (as delivery-bounded-reads.test.ts). */
const FEW = 12;

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void> }>;

test.before(async (t) => {
  t.context = await startMeasuredHarness("2026-05-10T12:00:00.000Z");
});
test.after.always(async (t) => {
  await t.context.close?.();
});

/** The parked_at of each of the server's pending callback/Votifier deliveries. */
async function parkedOf(prisma: PrismaClient, serverId: string): Promise<Array<Date | null>> {
  const rows = await runSql<{ parked_at: Date | null }>(
    prisma,
    Prisma.sql`SELECT parked_at FROM deliveries WHERE server_id = ${serverId}::uuid AND status = 'pending' AND transport <> 'pull' ORDER BY id`,
  );
  return rows.map((r) => r.parked_at);
}

/** Runs the dispatcher's park pass until a poll parks nothing (each poll parks at most PARK_SCAN_ROWS). */
async function parkAll(prisma: PrismaClient, now: Date, t: { true(v: boolean, m?: string): void }): Promise<void> {
  for (let poll = 0; poll < HELD_ROWS / PARK_SCAN_ROWS + 10; poll++) {
    const parked = await parkHeldDeliveries(prisma, now);
    t.true(parked <= PARK_SCAN_ROWS, `a poll parked ${parked}`);
    if (parked === 0) return;
  }
  throw new Error("the park pass never ran out of held rows");
}

test.serial(
  "the dispatcher's claim reads at most 12 deliveries rows while a server holds 20,000 callbacks (no URL) due before another server's sendable one",
  async (t) => {
    const { h, clock, pool } = t.context;
    const at = clock.now();
    const holding = await insertServer(h.db.prisma);
    const endpointId = (await defaultEndpoint(h.db.prisma, holding)).id;
    await insertPendingCallbacks(h.db.prisma, holding, endpointId, HELD_ROWS, at);
    await executeSql(h.db.prisma, Prisma.sql`ANALYZE deliveries`);
    // The polls before: each parks at most PARK_SCAN_ROWS of the held rows it reads.
    await parkAll(h.db.prisma, at, t);
    t.true(
      (await parkedOf(h.db.prisma, holding)).every((p) => p !== null),
      "every held row is parked",
    );

    const sending = await insertServer(h.db.prisma, { callbackUrl: "http://127.0.0.1:9/callback" });
    await insertSecret(h.db.prisma, h.deps.secretBox, sending, "callback");
    const heartId = randomUUID();
    await insertAndLeaseDeliveries(h.db.prisma, [
      { heartId, serverId: sending, eventType: "heart.counted", username: "Steve", voterIdentity: "steve", period: "2026-05", streakDay: null, countedAt: at },
    ]);
    const claim = recordingClient(pool);
    const room = { now: at, leaseUntil: new Date(at.getTime() + 60_000), limit: 10, perServerLimit: 10, inFlightByServer: new Map<string, number>() };
    const claimed = await claimDueDeliveries(claim.client, room);
    t.deepEqual(
      claimed.map((c) => c.heartId),
      [heartId],
      "the sendable delivery behind the held ones is claimed",
    );
    await executeSql(h.db.prisma, Prisma.sql`UPDATE deliveries SET lease_until = NULL, leased_by = NULL WHERE id = ANY(${claimed.map((c) => c.id)}::uuid[])`);
    // The park pass and the claim together: the one sendable row (read by both) and its index neighbours, not the 20,000.
    const read = await rowsReadByStatements(h.db.prisma, claim.statements());
    t.log("claim", read);
    t.true((read.deliveries ?? 0) <= FEW, `deliveries rows read: ${read.deliveries}`);
  },
);

test.serial(
  "before any park pass, a claim reads at most its scan (limit x 4) of a server's 20,000 held callbacks, and the park pass it triggers parks them a scan at a time",
  async (t) => {
    const { h, clock, pool } = t.context;
    const at = clock.now();
    const holding = await insertServer(h.db.prisma);
    const endpointId = (await defaultEndpoint(h.db.prisma, holding)).id;
    await insertPendingCallbacks(h.db.prisma, holding, endpointId, HELD_ROWS, new Date(at.getTime() - 86_400_000));
    await executeSql(h.db.prisma, Prisma.sql`ANALYZE deliveries`);
    const room = dispatcherRoomAt(at);
    const scan = room.limit * 4;
    const claim = recordingClient(pool);
    t.deepEqual(await claimDueDeliveries(claim.client, room), [], "every scanned row is held: nothing to send");
    const [claimStatement, ...parkPass] = claim.statements();
    const claimRead = await rowsReadByStatements(h.db.prisma, [claimStatement!]);
    const parkRead = await rowsReadByStatements(h.db.prisma, parkPass);
    t.log("claim", claimRead, "park pass", parkRead);
    t.true((claimRead.deliveries ?? 0) <= scan + FEW, `the claim read ${claimRead.deliveries} deliveries rows`);
    // The park pass's scan, then each held id it found at most three times (re-checked, matched, updated).
    t.true((parkRead.deliveries ?? 0) <= 4 * PARK_SCAN_ROWS + FEW, `the park pass read ${parkRead.deliveries} deliveries rows`);
    const parked = (await parkedOf(h.db.prisma, holding)).filter((p) => p !== null).length;
    t.is(parked, PARK_SCAN_ROWS, "the claim that met held rows ran the park pass");
    await parkAll(h.db.prisma, at, t);
  },
);

test.serial(
  "a settings write waiting with the server row lock is serialised with the park pass: a held row it makes sendable is not parked after its release",
  async (t) => {
    const { h } = t.context;
    // addDelivery stores a delivery due at the wall clock's now.
    const at = new Date(Date.now() + 60_000);
    // Held for want of a URL only: the secret is there.
    const serverId = await insertServer(h.db.prisma);
    await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
    await addDelivery(h, serverId);
    const settings = new pg.Client({ connectionString: h.db.url });
    await settings.connect();
    t.teardown(() => settings.end());
    // The settings write as updateEndpoint makes it: the server row lock (lockServer's update), the URL, the release
    // of the endpoint's parked rows (none yet); then it has not committed when the poll comes.
    await settings.query("BEGIN");
    await settings.query("UPDATE servers SET id = id WHERE id = $1", [serverId]);
    await settings.query("UPDATE callback_endpoints SET url = 'http://127.0.0.1:9/callback' WHERE server_id = $1 AND is_default", [serverId]);
    await settings.query("UPDATE deliveries SET parked_at = NULL WHERE server_id = $1 AND status = 'pending' AND parked_at IS NOT NULL", [serverId]);
    let settled = false;
    const parking = parkHeldDeliveries(h.db.prisma, at).finally(() => {
      settled = true;
    });
    // The park pass read the row as held (the URL is not committed) and now waits for the server row, or it is done.
    await eventually(async () => {
      const [waiting] = await runSql<{ n: number }>(
        h.db.prisma,
        Prisma.sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return settled || (waiting?.n ?? 0) > 0;
    });
    t.false(settled, "the park pass waits for the settings write's server row lock");
    await settings.query("COMMIT");
    t.is(await parking, 0, "nothing parked: the row is sendable once the settings committed");
    t.deepEqual(await parkedOf(h.db.prisma, serverId), [null]);
  },
);

/** A server whose delivery is held as `hold` leaves it, parked by a poll; returns the server id. */
async function parkedServer(h: Harness, hold: (serverId: string) => Promise<void>): Promise<string> {
  const serverId = await insertServer(h.db.prisma);
  await hold(serverId);
  await addDelivery(h, serverId);
  // addDelivery stores a delivery due at the wall clock's now.
  await parkHeldDeliveries(h.db.prisma, new Date(Date.now() + 60_000));
  return serverId;
}

const VOTIFIER = { host: "127.0.0.1", port: 8192, serviceName: "Test", token: "votifier-token" };

for (const path of [
  {
    rule: "setting the callback URL (which mints the first secret)",
    hold: async () => {},
    release: (h: Harness, serverId: string) => h.admin.setCallbackSettings({ serverId, callbackUrl: "http://127.0.0.1:9/callback" }),
  },
  {
    rule: "re-enabling a disabled endpoint",
    hold: async (h: Harness, serverId: string) => {
      await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
      await setDefaultEndpoint(h.db.prisma, serverId, { url: "http://127.0.0.1:9/callback", disabledAt: new Date(), disabledReason: "410 Gone" });
    },
    release: (h: Harness, serverId: string) => h.admin.enableCallback({ serverId }),
  },
  {
    rule: "minting a callback secret (rotation) for an endpoint that had none active",
    hold: async (h: Harness, serverId: string) => {
      await setDefaultEndpoint(h.db.prisma, serverId, { url: "http://127.0.0.1:9/callback" });
    },
    release: (h: Harness, serverId: string) => h.admin.rotateCallbackSecret({ serverId }),
  },
  {
    rule: "setting Votifier up again",
    hold: async (h: Harness, serverId: string) => {
      await h.admin.setVotifierSettings({ serverId, ...VOTIFIER });
    },
    afterDelivery: (h: Harness, serverId: string) => h.admin.setVotifierSettings({ serverId, host: "", port: 0, serviceName: "", token: "" }),
    release: (h: Harness, serverId: string) => h.admin.setVotifierSettings({ serverId, ...VOTIFIER }),
  },
]) {
  test.serial(`${path.rule} gives the endpoint's (server's) parked deliveries back to the claim`, async (t) => {
    const { h } = t.context;
    const serverId = await parkedServer(h, async (id) => {
      await path.hold(h, id);
      if (path.afterDelivery) {
        await addDelivery(h, id);
        await path.afterDelivery(h, id);
      }
    });
    const before = await parkedOf(h.db.prisma, serverId);
    t.true(before.length > 0 && before.every((p) => p !== null), "held and parked");
    await path.release(h, serverId);
    const after = await parkedOf(h.db.prisma, serverId);
    t.true(
      after.some((p) => p === null),
      `released: ${JSON.stringify(after)}`,
    );
    const claimed = await claimDueDeliveries(h.db.prisma, {
      now: new Date(Date.now() + 60_000),
      leaseUntil: new Date(Date.now() + 120_000),
      limit: 100,
      perServerLimit: 100,
      inFlightByServer: new Map(),
    });
    t.true(
      claimed.some((c) => c.serverId === serverId),
      "and claimed",
    );
    await executeSql(h.db.prisma, Prisma.sql`UPDATE deliveries SET status = 'failed' WHERE server_id = ${serverId}::uuid`);
  });
}

anyTest("setting the callback URL of a server with parked held callbacks delivers each of them exactly once", async (t) => {
  const w = await startDispatchWorld(t);
  const serverId = await insertServer(w.h.db.prisma);
  const heartIds: string[] = [];
  for (let i = 0; i < 5; i++) heartIds.push(await addDelivery(w.h, serverId));
  const receiver = await w.receiver();
  w.dispatcher().start();
  await eventually(async () => (await parkedOf(w.h.db.prisma, serverId)).every((p) => p !== null));
  await w.h.admin.setCallbackSettings({ serverId, callbackUrl: receiver.url });
  await eventually(async () => {
    const rows = await w.h.db.prisma.delivery.findMany({ where: { serverId, transport: "callback" } });
    return rows.length === 5 && rows.every((r) => r.status === "delivered");
  });
  const delivered = receiver.requests.map((r) => (JSON.parse(r.body.toString("utf8")) as { heart_id: string }).heart_id);
  t.deepEqual([...delivered].sort(), [...heartIds].sort(), "each held heart once");
});
