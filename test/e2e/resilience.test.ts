/**
 * Crash and outage resilience of the real processes. This file starts a Kafka broker
 * of its own (so restarting it disturbs no other test file), a database of its own,
 * and the referral service, relay and delivery as separate OS processes. Hearts are
 * cast over time while the relay and the delivery service are SIGKILLed and
 * restarted and the broker is restarted; the receiver keys payments on heart_id, as
 * the contract tells receivers to, and must end up paying every counted heart once.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { startKafka, type KafkaBroker } from "../../scripts/infra/kafka.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { eventually } from "../helpers/eventually.js";
import { createProcessGroup, jsonLines, type ProcessGroup } from "../../scripts/harness/processes.js";
import { startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { createServiceClients, type ServiceClients } from "../../scripts/harness/stack.js";
import {
  createPaymentLedger,
  dumpOnFailure,
  newSecretsKey,
  precreateTopics,
  startDeliveryProcess,
  startReferralServiceProcess,
  startRelayProcess,
  type PaymentLedger,
  type ServiceProcess,
  type SystemSettings,
} from "../../scripts/harness/e2e-support.js";
import { retryOverloaded } from "../helpers/retry-overloaded.js";

interface Context {
  broker: KafkaBroker;
  db: TestDatabase;
  group: ProcessGroup;
  settings: SystemSettings;
  clients: ServiceClients;
  /** The current relay and delivery processes (replaced when a test restarts them; an object shared by every test's context copy). */
  live: { relay?: ServiceProcess; delivery?: ServiceProcess };
  receivers: Receiver[];
}

const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const group = createProcessGroup();
  t.context = { group, live: {}, receivers: [] } as unknown as Context;
  try {
    const [broker, db] = await Promise.all([startKafka(), createTestDatabase({ maxConnections: 4 })]);
    Object.assign(t.context, { broker, db });
    const settings: SystemSettings = {
      databaseUrl: db.url,
      kafkaBrokers: broker.brokers,
      secretsKey: newSecretsKey(),
      groupId: `e2e-resilience-${randomBytes(4).toString("hex")}`,
    };
    const [referralService] = await Promise.all([startReferralServiceProcess(group, settings), precreateTopics(broker.brokers)]);
    const [relay, delivery] = await Promise.all([startRelayProcess(group, settings), startDeliveryProcess(group, settings)]);
    Object.assign(t.context, { settings, clients: createServiceClients(referralService.rpcUrl) });
    Object.assign(t.context.live, { relay, delivery });
  } catch (error) {
    group.dump("before hook failed");
    throw error;
  }
});

test.afterEach.always((t) => dumpOnFailure(t, t.context.group));

test.after.always(async (t) => {
  await t.context.group?.killAll();
  await Promise.all((t.context.receivers ?? []).map((r) => r.close()));
  await t.context.broker?.stop();
  await t.context.db?.drop();
});

/** A server with referrals off and a callback to a fresh receiver whose ledger pays each heart_id once. */
async function createPayingServer(
  t: { context: Context },
  name: string,
  opts: { answerDelayMs?: number } = {},
): Promise<{ serverId: string; receiver: Receiver; ledger: PaymentLedger }> {
  const { clients } = t.context;
  let secret = "";
  const ledger = createPaymentLedger(() => secret, opts);
  const receiver = await startReceiver({ fallback: (request) => ledger.respond(request) });
  t.context.receivers.push(receiver);
  const { server } = await clients.admin.createServer({ name, registrationUrl: "" });
  const serverId = server!.id;
  await clients.admin.setCallbackSettings({ serverId, callbackUrl: receiver.url, standardWebhooks: false });
  secret = (await clients.admin.revealCallbackSecret({ serverId })).secret;
  return { serverId, receiver, ledger };
}

/** Casts one heart from a voter of its own on an address of its own (/24 of its own, so fraud rules stay quiet). */
async function castHeart(clients: ServiceClients, serverId: string, voter: number): Promise<string> {
  const cast = await retryOverloaded(() =>
    clients.hearts.castHeart({
      serverId,
      username: `Player${voter}`,
      voterIdentity: `voter-${serverId}-${voter}`,
      ip: `100.${64 + Math.floor(voter / 256)}.${voter % 256}.9`,
      userAgent: "Mozilla/5.0 (X11; Linux x86_64) e2e-resilience",
    }),
  );
  if (!cast.counted) throw new Error(`heart ${voter} did not count: ${cast.reason}`);
  return cast.heartId;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What is stuck, for a failure message: stored deliveries by status, unpublished outbox rows, kafkajs crashes logged. */
async function diagnose(context: Context, serverId: string): Promise<string> {
  const byStatus = await context.db.prisma.delivery.groupBy({ by: ["status"], where: { serverId }, _count: { _all: true } });
  const unpublished = await context.db.prisma.outboxMessage.count({ where: { publishedAt: null } });
  const crashes = context.group.processes.flatMap((p) =>
    jsonLines(p.stdout)
      .filter((l) => typeof l.msg === "string" && /^(Crash|Restarting)/.test(l.msg))
      .map((l) => `${p.name}: ${String(l.msg)}`),
  );
  const exited = context.group.processes.filter((p) => p.exitInfo && p.exitInfo.signal !== "SIGKILL").map((p) => `${p.name} exited ${p.exitInfo?.code}`);
  return [
    `deliveries stored by status: ${JSON.stringify(Object.fromEntries(byStatus.map((r) => [r.status, r._count._all])))}`,
    `outbox rows unpublished: ${unpublished}`,
    `kafkajs consumer crashes logged: ${crashes.join(" | ") || "none"}`,
    `processes that exited on their own: ${exited.join(", ") || "none"}`,
  ].join("; ");
}

test.serial(
  "relay SIGKILLed and restarted, Kafka broker restarted, delivery SIGKILLed and restarted, all mid-stream: every counted heart_id is paid exactly once and no delivery is left pending or failed",
  async (t) => {
    t.timeout(240_000);
    const N = 40;
    const { clients, group, settings, broker, db, live } = t.context;
    // The receiver pays on arrival and answers 300 ms later, so the delivery SIGKILL below can cut a paid callback.
    const { serverId, ledger } = await createPayingServer(t, "Resilience", { answerDelayMs: 300 });

    const heartIds: string[] = [];
    const events: string[] = [];
    const started = Date.now();
    const note = (what: string): void => void events.push(`${((Date.now() - started) / 1000).toFixed(1)}s ${what}`);
    let relayRestart: Promise<void> = Promise.resolve();
    let brokerRestart: Promise<void> = Promise.resolve();
    let deliveryRestart: Promise<void> = Promise.resolve();
    // Hearts keep coming every 200 ms through three disruptions, one after the other.
    for (let i = 0; i < N; i++) {
      heartIds.push(await castHeart(clients, serverId, i));
      if (i === 5) {
        // The relay dies without draining, possibly between publishing and marking rows: it republishes them.
        await live.relay!.proc.kill();
        note("relay SIGKILLed");
        relayRestart = sleep(1_000).then(async () => {
          live.relay = await startRelayProcess(group, settings, "relay#2");
          note("relay restarted");
        });
      }
      if (i === 12) {
        await relayRestart;
        note("broker restart begins");
        brokerRestart = broker.restart().then(() => note("broker restarted"));
      }
      if (i === 28) {
        await brokerRestart;
        // The delivery service dies with a callback in flight (paid by the receiver, not yet answered) and offsets
        // possibly uncommitted. That delivery's lease (callback timeout + 30 s) must expire before it is sent again,
        // and the successor joins the group once the dead member's session (30 s) expires.
        // After the broker restart a consumer that crashed rejoins as a new member (up to a session, 30 s, later).
        await eventually(() => ledger.unanswered > 0, { timeoutMs: 60_000, intervalMs: 5, message: "a callback in flight after the broker restart" });
        await live.delivery!.proc.kill();
        note("delivery SIGKILLed");
        deliveryRestart = startDeliveryProcess(group, settings, "delivery#2").then((d) => {
          live.delivery = d;
          note("delivery restarted (joined its group)");
        });
      }
      await sleep(200);
    }
    note(`${N} hearts cast`);
    await deliveryRestart;

    try {
      await eventually(() => ledger.paid.size >= N, { timeoutMs: 90_000, intervalMs: 200 });
    } catch {
      // Failure policy: fail with what is stuck, not just "timed out".
      return t.fail(`paid ${ledger.paid.size} of ${N} hearts within 90 s; ${await diagnose(t.context, serverId)}; timeline: ${events.join("; ")}`);
    }
    note("all paid");
    const settled = await eventually(
      async () => {
        const rows = await db.prisma.delivery.groupBy({ by: ["status"], where: { serverId }, _count: { _all: true } });
        const counts = Object.fromEntries(rows.map((r) => [r.status, r._count._all]));
        return counts.delivered === N && Object.keys(counts).length === 1 ? counts : undefined;
      },
      { timeoutMs: 30_000, message: "every delivery row delivered" },
    );
    t.deepEqual(settled, { delivered: N }, "no delivery pending or failed");

    t.deepEqual([...ledger.paid].sort(), [...heartIds].sort(), "every counted heart_id is paid, and nothing else");
    t.is(ledger.paid.size, N, "paid count equals the hearts counted");
    t.deepEqual(ledger.rejected, [], "every callback verified");
    const duplicates = [...ledger.received.values()].reduce((sum, n) => sum + n, 0) - N;
    t.true(duplicates >= 1, "the callback cut by the SIGKILL was sent again (at least once), and paid once");
    t.is(await db.prisma.outboxMessage.count({ where: { publishedAt: null } }), 0, "the outbox is drained");
    t.is(live.relay!.proc.exitInfo, undefined, "the restarted relay still runs");
    t.is(live.delivery!.proc.exitInfo, undefined, "the restarted delivery still runs");
    t.log(`${events.join("; ")}; duplicate callbacks (absorbed by the receiver): ${duplicates}`);
  },
);

test.serial(
  "a receiver that refuses connections for a while, then comes back, receives every callback (retried on the schedule) and pays each once",
  async (t) => {
    t.timeout(90_000);
    const M = 5;
    const { clients, db } = t.context;
    const { serverId, receiver, ledger } = await createPayingServer(t, "Receiver outage");
    await receiver.down();

    const heartIds: string[] = [];
    for (let i = 0; i < M; i++) heartIds.push(await castHeart(clients, serverId, 1_000 + i));

    // Down long enough that every delivery has failed at least twice with a connection error.
    await eventually(
      async () => {
        const rows = await db.prisma.delivery.findMany({ where: { serverId } });
        return rows.length === M && rows.every((r) => r.status === "pending" && r.attempts >= 2 && r.lastStatusCode === null && r.lastError !== null);
      },
      { timeoutMs: 30_000, message: "every delivery failed twice while the receiver was down" },
    );
    t.is(receiver.requests.length, 0, "nothing reached the receiver while it was down");

    await receiver.up();
    await eventually(() => ledger.paid.size >= M, { timeoutMs: 30_000, message: "every heart paid once the receiver is back" });
    await eventually(async () => (await db.prisma.delivery.count({ where: { serverId, status: "delivered" } })) === M, {
      timeoutMs: 10_000,
      message: "every delivery delivered",
    });

    t.deepEqual([...ledger.paid].sort(), [...heartIds].sort());
    t.deepEqual(ledger.rejected, []);
    const attempts = await db.prisma.deliveryAttempt.findMany({ where: { delivery: { serverId } }, orderBy: [{ deliveryId: "asc" }, { attempt: "asc" }] });
    for (const heartId of heartIds) {
      const delivery = await db.prisma.delivery.findFirstOrThrow({ where: { serverId, heartId } });
      const log = attempts.filter((a) => a.deliveryId === delivery.id);
      t.true(log.length >= 3, `heart ${heartId}: at least two failed attempts and one success are recorded`);
      t.true(
        log.slice(0, -1).every((a) => a.statusCode === null && a.error !== null),
        "the failed attempts record a connection error",
      );
      t.is(log.at(-1)?.statusCode, 200, "the last attempt is the 200");
    }
  },
);
