/**
 * Referral outcomes delivered to owners, end to end on PostgreSQL + Kafka: a click, then signed
 * ingest requests through the real gateway (registered, qualified, reversed), the outbox, the
 * relay, referrals.events.v1, the delivery worker's consumer and dispatcher, to local receivers.
 * Each endpoint receives only the event types it subscribed to; a referral event is signed like
 * the reward callback with that endpoint's own secret (verified here with node:crypto); a server
 * without a referral endpoint gets nothing new; a Kafka redelivery adds no second delivery.
 */
import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { REFERRALS_TOPIC } from "../../services/shared/adapters/bus.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { eventually } from "../helpers/eventually.js";
import { headerOf, startReceiver, type Receiver, type RecordedRequest } from "../../scripts/harness/receiver.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { expectedCallbackMac, expectedStandardWebhookSignature, hexEquals, parseCallbackSignature } from "../../scripts/harness/delivery-harness.js";

interface Context {
  stack: TestStack;
  hearts: Receiver;
  referrals: Receiver;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const stack = await startStack({
    allowInsecureCallbacks: true,
    pipeline: {
      name: "referral-outcomes",
      delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 50, allowInsecureCallbacks: true },
    },
  });
  t.context = { stack, hearts: await startReceiver(), referrals: await startReceiver() };
});

test.after.always(async (t) => {
  await t.context.stack?.close();
  await t.context.hearts?.close();
  await t.context.referrals?.close();
});

/** A server with referrals on and a referral secret (to sign its ingest requests). */
async function referralServer(stack: TestStack): Promise<{ serverId: string; secret: string }> {
  const { admin } = stack.clients;
  const serverId = (await admin.createServer({ name: `outcomes-${randomBytes(3).toString("hex")}`, registrationUrl: "" })).server!.id;
  await admin.setReferralsEnabled({ serverId, enabled: true });
  return { serverId, secret: (await admin.createReferralSecret({ serverId })).secret };
}

/** POSTs a signed ingest request through the gateway; returns its JSON answer. */
async function ingest(stack: TestStack, server: { serverId: string; secret: string }, body: Record<string, string>) {
  const raw = JSON.stringify({ server_id: server.serverId, ...body });
  const res = await fetch(`${stack.gatewayUrl}/api/referral/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-signature": formatIngestSignature(server.secret, Math.floor(Date.now() / 1000), raw) },
    body: raw,
  });
  if (res.status !== 200) throw new Error(`ingest answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as { referral_id: string; state: string };
}

function bodyOf(request: RecordedRequest): Record<string, unknown> {
  return JSON.parse(request.text) as Record<string, unknown>;
}

/** The receiver's requests for one referral. */
function eventsOf(r: Receiver, referralId: string): RecordedRequest[] {
  return r.requests.filter((q) => bodyOf(q).referral_id === referralId);
}

test.serial(
  "click -> registered -> qualified -> reversed through the signed ingest: each is a signed referral event at the subscribed endpoint only, with the referrer's identity; hearts go to the heart endpoint only",
  async (t) => {
    const { stack, hearts, referrals } = t.context;
    const { admin } = stack.clients;
    const server = await referralServer(stack);
    const { serverId } = server;
    await admin.setCallbackSettings({ serverId, callbackUrl: hearts.url });
    const endpoint = await admin.createEndpoint({
      serverId,
      url: referrals.url,
      eventTypes: ["referral.registered", "referral.qualified", "referral.reversed"],
      standardWebhooks: true,
    });
    const secret = endpoint.secret;
    const { token } = await stack.clients.referral.recordClick({ serverId, referrerIdentity: "alice#1" });
    const registered = await ingest(stack, server, { event: "registered", token, referee_identity: "bob", server_event_id: "reg-1" });
    const referralId = registered.referral_id;
    await ingest(stack, server, { event: "qualified", token, server_event_id: "q-1" });
    await ingest(stack, server, { event: "reversed", token, server_event_id: "r-1" });
    const received = await eventually(() => {
      const got = eventsOf(referrals, referralId);
      return got.length >= 3 ? got : undefined;
    });
    // Sent several at a time per server, so they may arrive in any order (docs/callbacks.md): each transition once.
    t.deepEqual(
      received.map((q) => headerOf(q, "x-service-event")).sort(),
      ["referral.qualified", "referral.registered", "referral.reversed"],
      "one event per transition",
    );
    const qualified = received.find((q) => headerOf(q, "x-service-event") === "referral.qualified")!;
    const sig = parseCallbackSignature(headerOf(qualified, "x-service-signature"));
    if (!sig) return t.fail("malformed X-Service-Signature");
    t.true(hexEquals(sig.v1[0] ?? "", expectedCallbackMac(secret, sig.t, qualified.body)), "signed with the endpoint's own secret");
    const body = bodyOf(qualified);
    const stored = await stack.prisma.delivery.findFirstOrThrow({ where: { serverId, eventType: "referral.qualified" } });
    t.deepEqual(body, {
      event: "referral.qualified",
      event_id: stored.eventId,
      server_id: serverId,
      referral_id: referralId,
      referrer_identity: "alice#1",
      referee_identity: "bob",
      state: "qualified",
      previous_state: "registered",
      timestamp: sig.t,
    });
    t.is(headerOf(qualified, "webhook-id"), stored.eventId ?? "", "webhook-id is the event id");
    t.is(headerOf(qualified, "webhook-signature"), `v1,${expectedStandardWebhookSignature(secret, stored.eventId ?? "", sig.t, qualified.body)}`);
    t.like(bodyOf(received.find((q) => headerOf(q, "x-service-event") === "referral.reversed")!), {
      event: "referral.reversed",
      state: "reversed",
      previous_state: "qualified",
      referrer_identity: "alice#1",
    });
    t.like(bodyOf(received.find((q) => headerOf(q, "x-service-event") === "referral.registered")!), {
      event: "referral.registered",
      state: "registered",
      previous_state: "clicked",
    });

    // A heart goes to the heart.counted endpoint only.
    const cast = await stack.clients.hearts.castHeart({
      serverId,
      username: "Steve",
      voterIdentity: "v-outcomes",
      ip: "203.0.113.77",
      userAgent: "Mozilla/5.0 (outcomes)",
    });
    await eventually(() => hearts.requests.find((q) => bodyOf(q).heart_id === cast.heartId));
    t.false(
      referrals.requests.some((q) => bodyOf(q).heart_id !== undefined),
      "the referral endpoint never receives a heart",
    );
    t.false(
      hearts.requests.some((q) => String(headerOf(q, "x-service-event")).startsWith("referral.")),
      "the heart endpoint never receives a referral event",
    );
    // Recorded, visible and per endpoint like any callback delivery.
    const listed = await stack.clients.delivery.listDeliveries({ serverId });
    t.true(listed.deliveries.some((d) => d.eventType === "referral.qualified" && d.endpointId === endpoint.endpoint!.id && d.endpointUrl === referrals.url));
    const health = await stack.clients.delivery.getEndpointHealth({ serverId, endpointId: endpoint.endpoint!.id });
    t.true((health.last24h?.succeeded ?? 0) >= 3, "counted in the endpoint's health");
  },
);

test.serial("a server without a referral endpoint gets nothing new; a Kafka redelivery of a referral event adds no second delivery", async (t) => {
  const { stack, hearts, referrals } = t.context;
  const { admin } = stack.clients;
  const plain = await referralServer(stack);
  await admin.setCallbackSettings({ serverId: plain.serverId, callbackUrl: hearts.url });
  const plainClick = await stack.clients.referral.recordClick({ serverId: plain.serverId, referrerIdentity: "carol" });
  await ingest(stack, plain, { event: "registered", token: plainClick.token, referee_identity: "dave", server_event_id: "reg-p" });

  const opted = await referralServer(stack);
  await admin.setCallbackSettings({ serverId: opted.serverId, callbackUrl: hearts.url });
  await admin.createEndpoint({ serverId: opted.serverId, url: referrals.url, eventTypes: ["referral.registered", "referral.qualified"] });
  const { token } = await stack.clients.referral.recordClick({ serverId: opted.serverId, referrerIdentity: "erin" });
  const { referral_id: referralId } = await ingest(stack, opted, { event: "registered", token, referee_identity: "frank", server_event_id: "reg-o" });
  await eventually(() => eventsOf(referrals, referralId).length === 1 || undefined);

  // The relay has published the plain server's transition before the opted one's (one outbox, in order); once the
  // opted one's event arrived, the plain one's was consumed too (same topic, both committed by now or their rows exist).
  const outbox = await stack.prisma.outboxMessage.findFirstOrThrow({ where: { key: plain.serverId, topic: REFERRALS_TOPIC } });
  t.not(outbox.publishedAt, null);
  t.is(await stack.prisma.delivery.count({ where: { serverId: plain.serverId, eventType: { startsWith: "referral." } } }), 0);
  t.false(hearts.requests.some((q) => String(headerOf(q, "x-service-event")).startsWith("referral.")));

  // Redeliver the registered event's message as Kafka would (the same bytes, the same key), then a
  // qualified transition behind it on the same partition: once that one is delivered, the copy was consumed.
  const registeredRow = await stack.prisma.outboxMessage.findFirstOrThrow({ where: { key: opted.serverId, type: "referral.registered" } });
  await stack.pipeline!.bus.publish(REFERRALS_TOPIC, [{ key: opted.serverId, value: registeredRow.payload }]);
  await ingest(stack, opted, { event: "qualified", token, server_event_id: "q-o" });
  await eventually(() => eventsOf(referrals, referralId).length >= 2 || undefined);
  t.is(await stack.prisma.delivery.count({ where: { serverId: opted.serverId, eventType: "referral.registered" } }), 1, "one delivery per event and endpoint");
  t.is(eventsOf(referrals, referralId).filter((q) => headerOf(q, "x-service-event") === "referral.registered").length, 1);
});
