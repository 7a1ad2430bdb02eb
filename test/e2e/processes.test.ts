/**
 * The whole system as four separate OS processes, started exactly as in production
 * (`node --import tsx <main.ts>`): gateway, referral service, relay and delivery,
 * against this file's own database and the shared Kafka broker. A signed request
 * goes in through the gateway's HTTP endpoint; a signed callback comes out at a
 * local receiver. The delivery process uses a consumer group of this file's own,
 * and only this file's server exists in its database.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { EnvelopeSchema, HeartCountedSchema, type Envelope } from "../../gen/proto/events/v1/events_pb.js";
import { HEARTS_TOPIC, REFERRALS_TOPIC } from "../../services/shared/adapters/bus.js";
import { createKafkaBus } from "../../services/shared/adapters/kafka-bus.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { eventually } from "../helpers/eventually.js";
import { createProcessGroup, freePort, jsonLines, type ProcessGroup } from "../../scripts/harness/processes.js";
import { headerOf, startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { createServiceClients, type ServiceClients } from "../../scripts/harness/stack.js";
import {
  checkCallback,
  counterValue,
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
  type ServiceProcess,
} from "../../scripts/harness/e2e-support.js";
import { retryOverloaded } from "../helpers/retry-overloaded.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface Context {
  db: TestDatabase;
  group: ProcessGroup;
  brokers: string;
  gateway: ServiceProcess & { url: string };
  referralService: ServiceProcess & { rpcUrl: string };
  relay: ServiceProcess;
  delivery: ServiceProcess;
  clients: ServiceClients;
  receiver: Receiver;
  /** Filled by the ingest test, read by the outbox test (an object: each test gets a shallow copy of the context). */
  shared: { referral?: { serverId: string; referralId: string } };
}

const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const brokers = process.env.KAFKA_BROKERS;
  if (!brokers) throw new Error("KAFKA_BROKERS is not set: run the e2e tests through `npm test`");
  const db = await createTestDatabase({ maxConnections: 4 });
  const group = createProcessGroup();
  t.context = { db, group, brokers, shared: {} } as unknown as Context;
  try {
    const settings = { databaseUrl: db.url, kafkaBrokers: brokers, secretsKey: newSecretsKey(), groupId: `e2e-processes-${randomBytes(4).toString("hex")}` };
    const gatewayPort = await freePort();
    const [referralService] = await Promise.all([
      startReferralServiceProcess(group, settings, { publicBaseUrl: `http://127.0.0.1:${gatewayPort}` }),
      precreateTopics(brokers),
    ]);
    const [gateway, relay, delivery] = await Promise.all([
      startGatewayProcess(group, { port: gatewayPort, referralServiceUrl: referralService.rpcUrl }),
      startRelayProcess(group, settings),
      startDeliveryProcess(group, settings),
    ]);
    Object.assign(t.context, {
      gateway,
      referralService,
      relay,
      delivery,
      clients: createServiceClients(referralService.rpcUrl),
      receiver: await startReceiver(),
    });
  } catch (error) {
    group.dump("before hook failed");
    throw error;
  }
});

test.afterEach.always((t) => dumpOnFailure(t, t.context.group));

test.after.always(async (t) => {
  await t.context.group?.killAll();
  await t.context.receiver?.close();
  await t.context.db?.drop();
});

test.serial("all four processes (gateway, referral service, relay, delivery) answer /healthz and /readyz 200", async (t) => {
  const { gateway, referralService, relay, delivery } = t.context;
  for (const [name, service] of Object.entries({ gateway, referralService, relay, delivery })) {
    const health = await fetch(`${service.opsUrl}/healthz`);
    t.is(health.status, 200, `${name} /healthz`);
    const ready = await fetch(`${service.opsUrl}/readyz`);
    const body = (await ready.json()) as { ok: boolean; checks: Record<string, string> };
    t.is(ready.status, 200, `${name} /readyz`);
    t.true(body.ok, `${name} /readyz body.ok`);
    t.true(
      Object.values(body.checks).every((status) => status === "ok"),
      `${name} checks: ${JSON.stringify(body.checks)}`,
    );
  }
});

test.serial(
  "a signed registered, then qualified, through the gateway's HTTP endpoint answer 200 with the contract bodies; an exact replay is duplicate",
  async (t) => {
    const { admin, referral } = t.context.clients;
    const { server } = await admin.createServer({ name: "E2E Server", registrationUrl: "https://example.com/register" });
    const serverId = server!.id;
    await admin.setReferralsEnabled({ serverId, enabled: true });
    const { secret } = await admin.createReferralSecret({ serverId });
    const { token } = await referral.recordClick({ serverId, referrerIdentity: "referrer-e2e", ip: "198.51.100.7", userAgent: "Mozilla/5.0 e2e" });
    const gatewayUrl = t.context.gateway.url;

    const registeredEvent = { event: "registered", token, server_id: serverId, referee_identity: "player-1", server_event_id: "reg-player-1", ts: unixNow() };
    const registered = await postSignedEvent(gatewayUrl, secret, registeredEvent);
    t.is(registered.status, 200);
    t.deepEqual(Object.keys(registered.body).sort(), ["ok", "referral_id", "state"]);
    t.is(registered.body.ok, true);
    t.is(registered.body.state, "registered");
    t.regex(String(registered.body.referral_id), UUID);

    const qualified = await postSignedEvent(gatewayUrl, secret, {
      event: "qualified",
      token,
      server_id: serverId,
      server_event_id: "qual-player-1",
      ts: unixNow(),
    });
    t.is(qualified.status, 200);
    t.deepEqual(qualified.body, { ok: true, referral_id: registered.body.referral_id, state: "qualified" });

    // Re-signed with a fresh t, same server_event_id: the contract's retry is a no-op.
    const replay = await postSignedEvent(gatewayUrl, secret, registeredEvent);
    t.is(replay.status, 200);
    t.deepEqual(replay.body, { ok: true, duplicate: true });

    t.context.shared.referral = { serverId, referralId: String(registered.body.referral_id) };
  },
);

test.serial("the relay publishes the referral.* outbox rows to Kafka: published_at is set and both transitions are on referrals.events.v1", async (t) => {
  const { db, brokers } = t.context;
  const { referral } = t.context.shared;
  if (!referral) return t.fail("the ingest test did not run");
  const rows = await eventually(
    async () => {
      const found = await db.prisma.outboxMessage.findMany({ where: { type: { startsWith: "referral." } }, orderBy: { id: "asc" } });
      return found.length === 2 && found.every((r) => r.publishedAt !== null) ? found : undefined;
    },
    { timeoutMs: 20_000, message: "referral outbox rows published" },
  );
  t.deepEqual(
    rows.map((r) => [r.type, r.topic, r.key]),
    [
      ["referral.registered", REFERRALS_TOPIC, referral.serverId],
      ["referral.qualified", REFERRALS_TOPIC, referral.serverId],
    ],
  );

  // Read them back from the broker with a consumer group of this test's own.
  const log = createLogger("e2e-reader", "silent");
  const bus = createKafkaBus({ brokers: brokers.split(","), clientId: "e2e-reader", log });
  const seen: Envelope[] = [];
  const subscription = await bus.subscribe({
    groupId: `e2e-reader-${randomBytes(4).toString("hex")}`,
    topics: [REFERRALS_TOPIC],
    fromBeginning: true,
    handler: async (message) => {
      const envelope = fromBinary(EnvelopeSchema, message.value);
      if (envelope.serverId === referral.serverId) seen.push(envelope);
    },
  });
  try {
    await eventually(() => seen.length >= 2, { timeoutMs: 30_000, message: "both transitions consumed from Kafka" });
  } finally {
    await subscription.stop();
    await bus.close();
  }
  const transitions = seen.map((e) => (e.payload.case === "referralTransitioned" ? [e.type, e.payload.value.referralId, e.payload.value.state] : [e.type]));
  t.deepEqual(transitions, [
    ["referral.registered", referral.referralId, "registered"],
    ["referral.qualified", referral.referralId, "qualified"],
  ]);
});

test.serial(
  "a heart cast via RPC reaches the local receiver as a heart.counted callback signed HMAC_SHA256(secret, `${t}.${rawBody}`) in bare hex, with t == body.timestamp",
  async (t) => {
    const { clients, receiver, db } = t.context;
    const { server } = await clients.admin.createServer({ name: "E2E Hearts", registrationUrl: "" });
    const serverId = server!.id;
    await clients.admin.setCallbackSettings({ serverId, callbackUrl: receiver.url, standardWebhooks: false });
    const { secret } = await clients.admin.revealCallbackSecret({ serverId });
    t.true(secret.startsWith("whsec_"));

    const cast = await retryOverloaded(() =>
      clients.hearts.castHeart({
        serverId,
        username: "Steve",
        voterIdentity: "voter-e2e-1",
        ip: "203.0.113.10",
        userAgent: "Mozilla/5.0 (X11; Linux x86_64) e2e",
      }),
    );
    t.true(cast.counted, `heart not counted: ${cast.reason}`);
    t.regex(cast.heartId, UUID);

    const [request] = await receiver.waitForRequests(1, 30_000);
    t.is(request!.method, "POST");
    t.is(request!.path, new URL(receiver.url).pathname);
    t.is(headerOf(request!, "content-type"), "application/json");
    t.is(headerOf(request!, "x-service-event"), "heart.counted");
    t.regex(headerOf(request!, "x-service-signature") ?? "", /^t=\d+,v1=[0-9a-f]{64}$/);
    const check = checkCallback(request!, secret);
    if (!check.ok) return t.fail(check.reason);
    t.deepEqual(
      { ...check.body, timestamp: typeof check.body.timestamp },
      { event: "heart.counted", server_id: serverId, username: "Steve", heart_id: cast.heartId, period: cast.period, timestamp: "number", streak_day: 1 },
    );
    t.true(Math.abs((check.body.timestamp as number) - unixNow()) <= 60, "timestamp is the delivery time");
    t.regex(cast.period, /^[0-9]{4}-[0-9]{2}$/);

    const delivery = await eventually(
      () => db.prisma.delivery.findFirst({ where: { heartId: cast.heartId, status: "delivered" } }).then((d) => d ?? undefined),
      {
        timeoutMs: 10_000,
        message: "delivery row marked delivered",
      },
    );
    t.is(delivery.lastStatusCode, 200);
  },
);

test.serial("a heart.counted on the shared topic for a server unknown to this database is skipped: no delivery row, no callback", async (t) => {
  const { brokers, delivery, db, receiver } = t.context;
  const foreignServerId = randomUUID();
  const heartId = randomUUID();
  const at = new Date();
  const envelope = create(EnvelopeSchema, {
    eventId: randomUUID(),
    type: "heart.counted",
    occurredAt: timestampFromDate(at),
    serverId: foreignServerId,
    payload: {
      case: "heartCounted",
      value: create(HeartCountedSchema, {
        heartId,
        serverId: foreignServerId,
        username: "Other",
        voterIdentity: "voter-other",
        period: "2026-01",
        countedAt: timestampFromDate(at),
        streakDay: 1,
      }),
    },
  });
  const requestsBefore = receiver.requests.length;
  const bus = createKafkaBus({ brokers: brokers.split(","), clientId: "e2e-foreign", log: createLogger("e2e-foreign", "silent") });
  try {
    await bus.publish(HEARTS_TOPIC, [{ key: foreignServerId, value: toBinary(EnvelopeSchema, envelope) }]);
  } finally {
    await bus.close();
  }
  const skipped = await eventually(
    () => jsonLines(delivery.proc.stdout).find((l) => l.msg === "heart for an unknown server; no delivery" && l.serverId === foreignServerId),
    { timeoutMs: 30_000, message: "delivery logged the unknown server" },
  );
  t.is(skipped.heartId, heartId);
  t.is(await db.prisma.delivery.count({ where: { heartId } }), 0);
  t.is(receiver.requests.length, requestsBefore);
  t.is(delivery.proc.exitInfo, undefined, "the delivery process keeps running");
});

test.serial(
  "/metrics of every process exposes its counters: requests by route and code (gateway, referral service), published rows (relay), callback attempts (delivery)",
  async (t) => {
    const { gateway, referralService, relay, delivery } = t.context;
    t.is((await fetch(`${gateway.url}/metrics`)).status, 404, "the gateway's public port does not serve /metrics");
    t.not(gateway.opsUrl, gateway.url);
    const gatewayMetrics = await fetchMetrics(gateway.opsUrl);
    t.true(counterValue(gatewayMetrics, "requests_total", { route: "/api/referral/events", code: "200" }) >= 3, "gateway counts its 200s on the ingest route");

    const serviceMetrics = await fetchMetrics(referralService.opsUrl);
    t.true(
      counterValue(serviceMetrics, "requests_total", { route: "referral.v1.ReferralService/ApplyEvent", code: "ok" }) >= 2,
      "referral service counts ApplyEvent",
    );
    t.true(counterValue(serviceMetrics, "requests_total", { route: "hearts.v1.HeartService/CastHeart", code: "ok" }) >= 1, "referral service counts CastHeart");

    const relayMetrics = await fetchMetrics(relay.opsUrl);
    t.true(counterValue(relayMetrics, "relay_published_total", { topic: REFERRALS_TOPIC }) >= 2, "relay counts referral rows");
    t.true(counterValue(relayMetrics, "relay_published_total", { topic: HEARTS_TOPIC }) >= 1, "relay counts heart rows");

    const deliveryMetrics = await fetchMetrics(delivery.opsUrl);
    t.true(counterValue(deliveryMetrics, "callback_attempts_total", { outcome: "delivered" }) >= 1, "delivery counts callback attempts");
    for (const text of [gatewayMetrics, serviceMetrics, relayMetrics, deliveryMetrics]) t.regex(text, /^process_cpu_seconds_total/m);
  },
);

test.serial("SIGTERM: every process drains and exits 0", async (t) => {
  const { gateway, referralService, relay, delivery } = t.context;
  const exits = await Promise.all([gateway, referralService, relay, delivery].map((s) => s.proc.stop()));
  t.deepEqual(
    exits.map((e, i) => [[gateway, referralService, relay, delivery][i]!.proc.name, e.code, e.signal]),
    [
      ["gateway", 0, null],
      ["referral-service", 0, null],
      ["relay", 0, null],
      ["delivery", 0, null],
    ],
  );
  for (const service of [gateway, referralService, relay, delivery]) {
    t.true(
      jsonLines(service.proc.stdout).some((l) => l.msg === "drained; exiting"),
      `${service.proc.name} logged its drain`,
    );
  }
});
