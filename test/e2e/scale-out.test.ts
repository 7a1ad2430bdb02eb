/**
 * Scale-out (issue #8 target 7): TWO instances each of gateway, referral service, relay and
 * delivery, as separate OS processes started exactly as in production, against ONE PostgreSQL
 * database and ONE Kafka broker (the two delivery instances share one consumer group; the two
 * referral services bootstrap the same gateway token at the same moment). Load goes in through
 * both: signed `registered`/`qualified` events via both gateways, hearts via CastHeart on both
 * referral services (many voters, a few servers, and the same voter+server cast concurrently on
 * both instances). Each server has a local receiver of its own that verifies every callback with
 * node:crypto and keys what it pays on heart_id.
 *
 * Asserted with `eventually` (no sleeps, no timing assertions): every counted heart reaches its
 * server's receiver exactly once; no callback for a heart that did not count; every applied event
 * has exactly one outbox row, published once (the relays' counters add up to the rows, and a
 * reader of the topics sees each event id once). Then one delivery instance is SIGKILLed
 * mid-stream: the other takes its partitions over (after the Kafka session timeout) and its
 * leased rows (after the lease), every heart is paid once, and a heart reaches a receiver twice
 * only when its first callback was in flight at the kill (at least once, as the contract says).
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { fromBinary } from "@bufbuild/protobuf";
import { EnvelopeSchema } from "../../gen/proto/events/v1/events_pb.js";
import { HeartVerdict, type CastHeartResponse } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { ensureServiceToken } from "../../services/access/service-tokens.js";
import { HEARTS_TOPIC, REFERRALS_TOPIC } from "../../services/shared/adapters/bus.js";
import { createKafkaBus } from "../../services/shared/adapters/kafka-bus.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { eventually } from "../helpers/eventually.js";
import { createProcessGroup, freePorts, type ProcessGroup } from "../../scripts/harness/processes.js";
import { startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { createServiceClients, type ServiceClients } from "../../scripts/harness/stack.js";
import {
  counterValue,
  createPaymentLedger,
  dumpOnFailure,
  fetchMetrics,
  newSecretsKey,
  postSignedEvent,
  precreateTopics,
  startDeliveryProcess,
  startGatewayProcess,
  startReferralServiceProcess,
  startRelayProcess,
  unixNow,
  type PaymentLedger,
  type ServiceProcess,
} from "../../scripts/harness/e2e-support.js";

/** Servers under load, each with a receiver of its own. */
const SERVERS = 3;
/** Referees per server, each registered then qualified through the gateways. */
const REFEREES_PER_SERVER = 6;
/** Voters of the first round; each votes for every server. */
const VOTERS = 40;
/** Voter+server pairs cast concurrently, CASTS_PER_CONTEST times, half on each referral service. */
const CONTESTS = 6;
const CASTS_PER_CONTEST = 6;
/** Callers at a time per instance while casting the bulk of the hearts. */
const CONCURRENCY = 8;
/** Voters of the second round (the delivery kill). */
const KILL_ROUND_VOTERS = 40;
/** How long the receivers hold their answer in the kill round, so callbacks are in flight at the kill. */
const KILL_ROUND_ANSWER_DELAY_MS = 150;
/** How late after the victim's exit is seen a callback it wrote before dying may still be read here (far below the 30 s lease). */
const KILL_READ_MARGIN_MS = 2_000;
/** The delivery instances' callback attempt timeout. */
const CALLBACK_TIMEOUT_MS = 20_000;

interface Server {
  id: string;
  referralSecret: string;
  callbackSecret: string;
  receiver: Receiver;
  ledger: PaymentLedger;
  /** The ledger's responder, swapped for a slow one in the kill round. */
  respond: PaymentLedger["respond"];
}

interface Context {
  db: TestDatabase;
  group: ProcessGroup;
  brokers: string;
  gateways: (ServiceProcess & { url: string })[];
  referralServices: (ServiceProcess & { rpcUrl: string })[];
  relays: ServiceProcess[];
  deliveries: ServiceProcess[];
  /** One set of RPC clients per referral-service instance. */
  clients: ServiceClients[];
  servers: Server[];
  /** Counted heart ids so far, by server id. */
  counted: Map<string, Set<string>>;
  /** Heart ids that did not count (cooldown, fraud). */
  notCounted: Set<string>;
  /** What the gateways answered as applied: `${referralId}/${state}`. */
  applied: Set<string>;
}

const test = anyTest as TestFn<Context>;

/** Runs `work` over `items`, `limit` at a time. */
async function inPool<T>(items: T[], limit: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        await work(items[index]!, index);
      }
    }),
  );
}

/** A distinct IPv4 address (and /24) per voter index, so the per-IP and per-subnet fraud rules stay quiet. */
const voterIp = (round: number, voter: number) => `10.${round}.${voter}.7`;
const USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) scale-out";

test.before(async (t) => {
  t.timeout(420_000, "starting eight processes on a small shared machine");
  const brokers = process.env.KAFKA_BROKERS;
  if (!brokers) throw new Error("KAFKA_BROKERS is not set: run the e2e tests through `npm test`");
  const db = await createTestDatabase({ maxConnections: 4 });
  const group = createProcessGroup();
  t.context = { db, group, brokers, counted: new Map(), notCounted: new Set(), applied: new Set() } as unknown as Context;
  try {
    // Both instances share the delivery consumer group (that is what scales the consumer out).
    const settings = { databaseUrl: db.url, kafkaBrokers: brokers, secretsKey: newSecretsKey(), groupId: `e2e-scale-${randomBytes(4).toString("hex")}` };
    // The production wiring: both referral services bootstrap the same gateway token (by name) at once.
    const gatewayToken = `rst_${randomBytes(24).toString("base64url")}`;
    const gatewayPorts = await freePorts(2);
    const [referralServices] = await Promise.all([
      Promise.all(
        gatewayPorts.map((port) =>
          startReferralServiceProcess(group, settings, { publicBaseUrl: `http://127.0.0.1:${port}`, env: { GATEWAY_SERVICE_TOKEN: gatewayToken } }),
        ),
      ),
      precreateTopics(brokers),
    ]);
    // One at a time from here: on a small shared machine, several processes compiling and booting at once miss their start timeouts.
    const gateways: (ServiceProcess & { url: string })[] = [];
    for (const [i, port] of gatewayPorts.entries()) {
      gateways.push(await startGatewayProcess(group, { port, referralServiceUrl: referralServices[i]!.rpcUrl, env: { REFERRAL_SERVICE_TOKEN: gatewayToken } }));
    }
    const relays = [await startRelayProcess(group, settings, "relay#1"), await startRelayProcess(group, settings, "relay#2")];
    // A callback answered late on a loaded machine would be retried and arrive twice (at least once, as it should); this
    // test is about scale-out, so the attempt timeout is generous (the lease, and so a takeover after the kill, follows it).
    const deliveryEnv = { CALLBACK_TIMEOUT_MS: String(CALLBACK_TIMEOUT_MS) };
    const deliveries = [
      await startDeliveryProcess(group, settings, "delivery#1", deliveryEnv),
      await startDeliveryProcess(group, settings, "delivery#2", deliveryEnv),
    ];
    const clients = referralServices.map((s) => createServiceClients(s.rpcUrl));
    const servers: Server[] = [];
    for (let i = 0; i < SERVERS; i++) {
      // Each server is set up through one instance or the other; both read the same rows.
      const { admin } = clients[i % 2]!;
      const { server } = await admin.createServer({ name: `Scale ${i}`, registrationUrl: "https://example.com/register" });
      const id = server!.id;
      await admin.setReferralsEnabled({ serverId: id, enabled: true });
      const { secret: referralSecret } = await admin.createReferralSecret({ serverId: id });
      let callbackSecret = "";
      const ledger = createPaymentLedger(() => callbackSecret);
      const entry = { id, referralSecret, callbackSecret: "", ledger, respond: ledger.respond } as Server;
      entry.receiver = await startReceiver({ fallback: (request) => entry.respond(request) });
      await admin.setCallbackSettings({ serverId: id, callbackUrl: entry.receiver.url, standardWebhooks: false });
      callbackSecret = (await admin.revealCallbackSecret({ serverId: id })).secret;
      entry.callbackSecret = callbackSecret;
      servers.push(entry);
      t.context.counted.set(id, new Set());
    }
    Object.assign(t.context, { gateways, referralServices, relays, deliveries, clients, servers });
  } catch (error) {
    group.dump("before hook failed");
    throw error;
  }
});

test.afterEach.always((t) => dumpOnFailure(t, t.context.group));

test.after.always(async (t) => {
  await t.context.group?.killAll();
  await Promise.all((t.context.servers ?? []).map((s) => s.receiver.close()));
  await t.context.db?.drop();
});

/** Records a CastHeart answer in the context's counted / not-counted sets. */
function noteHeart(t: { context: Context }, serverId: string, answer: CastHeartResponse): void {
  if (answer.counted) t.context.counted.get(serverId)!.add(answer.heartId);
  else t.context.notCounted.add(answer.heartId);
}

/** Every counted heart of every server paid by its receiver (each verified with node:crypto), and delivered in the database. */
async function allHeartsPaid(t: { context: Context }, timeoutMs: number): Promise<void> {
  const { servers, counted, db } = t.context;
  const expected = [...counted.values()].reduce((n, set) => n + set.size, 0);
  await eventually(() => servers.every((s) => [...counted.get(s.id)!].every((heartId) => s.ledger.paid.has(heartId))), {
    timeoutMs,
    message: `every counted heart paid (expected ${expected})`,
  });
  await eventually(async () => (await db.prisma.delivery.count({ where: { transport: "callback", status: "delivered" } })) === expected, {
    timeoutMs,
    message: "every callback delivery row marked delivered",
  });
}

test.serial("replicas booting at once: concurrent bootstraps of one configured service token all succeed, and exactly one creates its row", async (t) => {
  // The before hook started both referral services at once with the same GATEWAY_SERVICE_TOKEN; this makes the race certain.
  const input = { name: `replica-${randomBytes(4).toString("hex")}`, token: `rst_${randomBytes(24).toString("base64url")}`, scopes: ["ingest"] as const };
  const outcomes = await Promise.all(Array.from({ length: 4 }, () => ensureServiceToken(t.context.db.prisma, new Date(), input)));
  t.deepEqual([...outcomes].sort(), ["created", "unchanged", "unchanged", "unchanged"]);
});

test.serial(
  "two of each process: registered/qualified via both gateways and hearts via both referral services reach each receiver exactly once; every applied event has one outbox row, published once",
  async (t) => {
    t.timeout(180_000);
    const { gateways, clients, servers, db, relays, deliveries, brokers } = t.context;

    // Referrals: registered through one gateway, qualified through the other, an exact replay of the registration through the first is a duplicate.
    await inPool(
      servers.flatMap((server) => Array.from({ length: REFEREES_PER_SERVER }, (_, n) => ({ server, n }))),
      CONCURRENCY,
      async ({ server, n }, index) => {
        const [first, second] = index % 2 === 0 ? [gateways[0]!, gateways[1]!] : [gateways[1]!, gateways[0]!];
        const { token } = await clients[index % 2]!.referral.recordClick({
          serverId: server.id,
          referrerIdentity: `referrer-${n % 3}`,
          ip: voterIp(9, index),
          userAgent: USER_AGENT,
        });
        const registeredEvent = {
          event: "registered",
          token,
          server_id: server.id,
          referee_identity: `referee-${n}`,
          server_event_id: `reg-${n}`,
          ts: unixNow(),
        };
        const registered = await postSignedEvent(first.url, server.referralSecret, registeredEvent);
        t.is(registered.status, 200, JSON.stringify(registered.body));
        t.is(registered.body.state, "registered");
        const referralId = String(registered.body.referral_id);
        t.context.applied.add(`${referralId}/registered`);
        const qualified = await postSignedEvent(second.url, server.referralSecret, {
          event: "qualified",
          token,
          server_id: server.id,
          server_event_id: `qual-${n}`,
          ts: unixNow(),
        });
        t.is(qualified.status, 200, JSON.stringify(qualified.body));
        t.deepEqual(qualified.body, { ok: true, referral_id: referralId, state: "qualified" });
        t.context.applied.add(`${referralId}/qualified`);
        const replay = await postSignedEvent(second.url, server.referralSecret, registeredEvent);
        t.deepEqual([replay.status, replay.body], [200, { ok: true, duplicate: true }]);
      },
    );

    // Contested: the same voter and server cast CASTS_PER_CONTEST times at once, half on each instance: exactly one counts.
    const contests = Array.from({ length: CONTESTS }, (_, c) => ({ server: servers[c % SERVERS]!, voter: `contested-${c}`, ip: voterIp(8, c) }));
    const contested = await Promise.all(
      contests.map(async ({ server, voter, ip }) => {
        const answers = await Promise.all(
          Array.from({ length: CASTS_PER_CONTEST }, (_, k) =>
            clients[k % 2]!.hearts.castHeart({ serverId: server.id, username: `Steve_${voter}`, voterIdentity: voter, ip, userAgent: USER_AGENT }),
          ),
        );
        for (const answer of answers) noteHeart(t, server.id, answer);
        return answers;
      }),
    );
    for (const answers of contested) {
      t.is(answers.filter((a) => a.counted).length, 1, `one of ${CASTS_PER_CONTEST} concurrent casts counts: ${answers.map((a) => a.reason).join("; ")}`);
      t.true(answers.filter((a) => !a.counted).every((a) => a.verdict === HeartVerdict.COOLDOWN));
    }

    // The bulk: every voter votes for every server, alternating instances; a few fraud hearts (malformed username) never count.
    const casts = Array.from({ length: VOTERS }, (_, v) => servers.map((server) => ({ server, v }))).flat();
    await inPool(casts, CONCURRENCY * 2, async ({ server, v }, index) => {
      const answer = await clients[index % 2]!.hearts.castHeart({
        serverId: server.id,
        username: `Player_${v}`,
        voterIdentity: `voter-${v}`,
        ip: voterIp(1, v),
        userAgent: USER_AGENT,
      });
      t.true(answer.counted, `voter-${v} on ${server.id}: ${answer.reason}`);
      noteHeart(t, server.id, answer);
    });
    for (const [i, server] of servers.entries()) {
      const answer = await clients[i % 2]!.hearts.castHeart({
        serverId: server.id,
        username: "bad!name",
        voterIdentity: `fraud-${i}`,
        ip: voterIp(7, i),
        userAgent: USER_AGENT,
      });
      t.is(answer.verdict, HeartVerdict.FRAUD);
      noteHeart(t, server.id, answer);
    }
    const countedTotal = [...t.context.counted.values()].reduce((n, set) => n + set.size, 0);
    t.is(countedTotal, CONTESTS + VOTERS * SERVERS);
    t.is(await db.prisma.heart.count({ where: { counted: true } }), countedTotal);

    // Every counted heart reaches its own server's receiver exactly once, verified; nothing else arrives.
    await allHeartsPaid(t, 60_000);
    for (const server of servers) {
      const expected = t.context.counted.get(server.id)!;
      t.deepEqual(server.ledger.rejected, [], "every callback's signature verifies");
      t.deepEqual([...server.ledger.received.keys()].sort(), [...expected].sort(), "the receiver saw exactly the server's counted hearts");
      t.deepEqual(
        [...server.ledger.received.values()].filter((n) => n !== 1),
        [],
        "each heart id once",
      );
      t.is(server.receiver.requests.length, expected.size, "no other request reached the receiver");
      for (const heartId of t.context.notCounted) t.false(server.ledger.received.has(heartId), `no callback for the non-counted heart ${heartId}`);
    }
    t.is(await db.prisma.delivery.count({ where: { heartId: { in: [...t.context.notCounted] } } }), 0, "no delivery for a non-counted heart");

    // Every applied event has exactly one outbox row, and all were published.
    const rows = await eventually(
      async () => {
        const found = await db.prisma.outboxMessage.findMany({ orderBy: { id: "asc" } });
        return found.every((r) => r.publishedAt !== null) ? found : undefined;
      },
      { timeoutMs: 30_000, message: "every outbox row published" },
    );
    const outboxKeys = rows.map((r) => {
      const envelope = fromBinary(EnvelopeSchema, r.payload);
      if (envelope.payload.case === "heartCounted") return `heart/${envelope.payload.value.heartId}`;
      if (envelope.payload.case === "referralTransitioned") return `${envelope.payload.value.referralId}/${envelope.payload.value.state}`;
      return `${envelope.type}/${envelope.eventId}`;
    });
    const expectedKeys = [...t.context.applied, ...[...t.context.counted.values()].flatMap((set) => [...set].map((id) => `heart/${id}`))];
    t.deepEqual([...outboxKeys].sort(), [...expectedKeys].sort(), "one outbox row per applied event, none for a duplicate or a non-counted heart");

    // Published once: the two relays' counters add up to the rows, and a reader sees each event id once.
    const relayCounts = await Promise.all(relays.map(async (r) => counterValue(await fetchMetrics(r.opsUrl), "relay_published_total")));
    t.is(relayCounts[0]! + relayCounts[1]!, rows.length, `relay counters ${relayCounts.join(" + ")}`);
    const eventIds = rows.map((r) => fromBinary(EnvelopeSchema, r.payload).eventId);
    const ours = new Set(servers.map((s) => s.id));
    const seen = new Map<string, number>();
    const bus = createKafkaBus({ brokers: brokers.split(","), clientId: "e2e-scale-reader", log: createLogger("e2e-scale-reader", "silent") });
    const subscription = await bus.subscribe({
      groupId: `e2e-scale-reader-${randomBytes(4).toString("hex")}`,
      topics: [HEARTS_TOPIC, REFERRALS_TOPIC],
      fromBeginning: true,
      handler: async (message) => {
        const envelope = fromBinary(EnvelopeSchema, message.value);
        if (ours.has(envelope.serverId)) seen.set(envelope.eventId, (seen.get(envelope.eventId) ?? 0) + 1);
      },
    });
    try {
      await eventually(() => eventIds.every((id) => seen.has(id)), { timeoutMs: 60_000, message: "every outbox event read back from Kafka" });
    } finally {
      await subscription.stop();
      await bus.close();
    }
    t.is(seen.size, eventIds.length, "no event on the topics that is not in the outbox");
    t.deepEqual(
      [...seen.entries()].filter(([, n]) => n !== 1),
      [],
      "each event published once",
    );

    const deliveryCounts = await Promise.all(
      deliveries.map(async (d) => counterValue(await fetchMetrics(d.opsUrl), "callback_attempts_total", { outcome: "delivered" })),
    );
    t.log(`relay rows published per instance: ${relayCounts.join(" / ")}; callbacks delivered per delivery instance: ${deliveryCounts.join(" / ")}`);
  },
);

test.serial(
  "SIGKILL one delivery instance mid-stream: the other takes over; every heart is paid once, and only a callback sent before the kill and not recorded reaches its receiver twice",
  async (t) => {
    t.timeout(180_000);
    const { clients, servers, deliveries } = t.context;
    const [survivor, victim] = [deliveries[0]!, deliveries[1]!];
    // Receivers pay on arrival and answer later, so a callback can be paid and still in flight when its sender dies.
    for (const server of servers) {
      const slow = createPaymentLedger(() => server.callbackSecret, { answerDelayMs: KILL_ROUND_ANSWER_DELAY_MS });
      server.respond = (request) => {
        const answer = slow.respond(request);
        server.ledger.respond(request);
        return answer;
      };
    }
    const before = new Map(servers.map((s) => [s.id, s.receiver.requests.length]));
    const casts = Array.from({ length: KILL_ROUND_VOTERS }, (_, v) => servers.map((server) => ({ server, v }))).flat();
    const load = inPool(casts, CONCURRENCY * 2, async ({ server, v }, index) => {
      const answer = await clients[index % 2]!.hearts.castHeart({
        serverId: server.id,
        username: `Round2_${v}`,
        voterIdentity: `round2-${v}`,
        ip: voterIp(2, v),
        userAgent: USER_AGENT,
      });
      t.true(answer.counted, answer.reason);
      noteHeart(t, server.id, answer);
    });
    // Mid-stream: once callbacks of this round are arriving.
    await eventually(() => servers.reduce((n, s) => n + s.receiver.requests.length - before.get(s.id)!, 0) >= 10, {
      timeoutMs: 60_000,
      message: "callbacks of the kill round arriving",
    });
    const exit = await victim.proc.kill();
    const killedAt = Date.now();
    t.is(exit.signal, "SIGKILL");
    await load;

    // The survivor gets the victim's partitions after the session timeout and its leased rows after the lease.
    await allHeartsPaid(t, 120_000);
    t.is(survivor.proc.exitInfo, undefined, "the surviving delivery instance keeps running");
    for (const server of servers) {
      const expected = t.context.counted.get(server.id)!;
      t.deepEqual(server.ledger.rejected, [], "every callback's signature verifies");
      t.deepEqual([...server.ledger.received.keys()].sort(), [...expected].sort(), "the receiver saw exactly the server's counted hearts");
      // At least once: a heart arrives twice only when the victim sent it before it died and had not recorded the answer
      // (first arrival before the kill), and the survivor sent it again after the lease (second arrival after the kill).
      const arrivals = new Map<string, number[]>();
      for (const r of server.receiver.requests) {
        const heartId = String((JSON.parse(r.text) as { heart_id: string }).heart_id);
        arrivals.set(heartId, [...(arrivals.get(heartId) ?? []), r.receivedAt]);
      }
      const twice = [...arrivals.entries()].filter(([, at]) => at.length !== 1);
      // A callback the victim wrote just before it died can be read by this process's receiver a few ms after `killedAt`
      // (taken when the exit is seen); the survivor cannot send a leased row before the lease ends (LEASE_MARGIN_MS, 30 s).
      const sentByVictim = (at: number) => at <= killedAt + KILL_READ_MARGIN_MS;
      t.deepEqual(
        twice.filter(([, at]) => at.length > 2 || !(sentByVictim(at[0]!) && at[1]! > killedAt + KILL_READ_MARGIN_MS)),
        [],
        `a heart arrives more than once only when its first callback was sent before the kill and not recorded (the kill was seen at ${killedAt})`,
      );
      if (twice.length > 0) t.log(`${server.id}: ${twice.length} heart(s) sent before the kill and not recorded arrived twice (paid once by heart_id)`);
    }
    t.is(await t.context.db.prisma.delivery.count({ where: { heartId: { in: [...t.context.notCounted] } } }), 0, "no delivery for a non-counted heart");
  },
);
