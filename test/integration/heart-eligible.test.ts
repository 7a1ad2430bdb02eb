/**
 * heart.eligible end to end (issue 32): votes cast through the real pipeline (CastHeart on the stack's clock, the outbox,
 * the relay, Kafka, the delivery consumer and dispatcher) to local receivers. An endpoint subscribed to heart.eligible
 * gets exactly one per counted vote, signed, when the stack's clock reaches the vote's next eligible time (not before);
 * the default endpoint (heart.counted only) gets none; a replayed vote stores none twice; a voter's erasure withdraws
 * it; the signed pull API lists it only once due.
 */
import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { HEART_COOLDOWN_MS } from "../../services/hearts/domain/streak.js";
import { heartEligibleEventId } from "../../services/delivery/pipeline/domain/heart-eligible.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { headerOf, startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { eraseVoterData, newTombstone } from "../../services/voter-data/erase-voter-data.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { eventually } from "../helpers/eventually.js";
import { heartCountedMessageOf, isSignedWith } from "../helpers/pipeline-messages.js";
import { validateAgainstOpenApi } from "./openapi-validate.js";

interface Context {
  stack: TestStack;
  receivers: Receiver[];
}
const test = anyTest as TestFn<Context>;

/** The stack's clock: each cast sets it to the vote's time; moved to a vote's next eligible time to release its event. */
let clockMs = Date.parse("2027-05-01T12:00:00Z");
let voterN = 0;

test.before(async (t) => {
  const stack = await startStack({
    now: () => new Date(clockMs),
    allowInsecureCallbacks: true,
    pipeline: {
      name: "heart-eligible",
      delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100, allowInsecureCallbacks: true },
    },
  });
  t.context = { stack, receivers: [] };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
  for (const r of t.context.receivers ?? []) await r.close();
});

async function receiver(c: Context): Promise<Receiver> {
  const r = await startReceiver();
  c.receivers.push(r);
  return r;
}

/** A server whose default endpoint (heart.counted only) goes to `plain`, and a second endpoint to `eligible` subscribed to heart.eligible only. */
async function newServer(c: Context, plain: Receiver, eligible: Receiver) {
  const admin = c.stack.clients.admin;
  const { server } = await admin.createServer({ name: `eligible-${randomBytes(3).toString("hex")}` });
  const serverId = server!.id;
  await admin.setCallbackSettings({ serverId, callbackUrl: plain.url });
  const second = await admin.createEndpoint({ serverId, url: eligible.url, eventTypes: ["heart.eligible"] });
  return { serverId, eligibleSecret: second.secret };
}

/** Casts a counted vote of a fresh voter at `at` (the stack's clock), and waits until its heart.counted is delivered. */
async function vote(stack: TestStack, serverId: string, at: string, username = "Steve"): Promise<string> {
  clockMs = Date.parse(at);
  voterN += 1;
  const res = await stack.clients.hearts.castHeart({
    serverId,
    voterIdentity: `eligible-voter-${voterN}-${randomBytes(3).toString("hex")}`,
    username,
    ip: `198.51.100.${(voterN % 200) + 20}`,
    userAgent: "Mozilla/5.0 (X11; Linux x86_64) HeartEligibleTest/1.0",
  });
  if (!res.counted) throw new Error(`the vote at ${at} did not count`);
  await eventually(
    async () => {
      const rows = await stack.prisma.delivery.findMany({ where: { serverId, heartId: res.heartId }, select: { eventType: true, status: true } });
      return rows.some((r) => r.eventType === "heart.counted" && r.status === "delivered") ? true : undefined;
    },
    { timeoutMs: 30_000, message: `the vote at ${at} sent` },
  );
  return res.heartId;
}

const eligibleRowsOf = (stack: TestStack, serverId: string) =>
  stack.prisma.delivery.findMany({
    where: { serverId, eventType: "heart.eligible" },
    select: { heartId: true, transport: true, status: true, nextAttemptAt: true },
  });

test.serial(
  "an endpoint subscribed to heart.eligible gets exactly one per counted vote at its next eligible time, signed; the default endpoint none; a replayed vote none twice",
  async (t) => {
    const { stack } = t.context;
    const [plain, eligible] = [await receiver(t.context), await receiver(t.context)];
    const { serverId, eligibleSecret } = await newServer(t.context, plain, eligible);
    const castAt = "2027-05-01T12:00:00.000Z";
    const heartId = await vote(stack, serverId, castAt);
    const due = new Date(Date.parse(castAt) + HEART_COOLDOWN_MS);
    // Stored with the vote, waiting for its due time: one row, to the subscribed endpoint only.
    const waiting = await eligibleRowsOf(stack, serverId);
    t.deepEqual(waiting, [{ heartId, transport: "callback", status: "pending", nextAttemptAt: due }]);
    // The same vote again (a redelivered Kafka message): nothing new.
    const before = await stack.prisma.delivery.count({ where: { serverId } });
    await stack.pipeline!.delivery.consumer.handle(await heartCountedMessageOf(stack, serverId, heartId));
    t.is(await stack.prisma.delivery.count({ where: { serverId } }), before, "the replay stores nothing");
    // Still waiting once the vote's own deliveries are sent; at its due time (the stack's clock) it is sent.
    t.is((await eligibleRowsOf(stack, serverId))[0]?.status, "pending");
    clockMs = due.getTime();
    await eventually(async () => ((await eligibleRowsOf(stack, serverId))[0]?.status === "delivered" ? true : undefined), {
      timeoutMs: 30_000,
      message: "heart.eligible delivered at its due time",
    });
    t.is(eligible.requests.length, 1, "exactly one heart.eligible");
    const request = eligible.requests[0]!;
    t.true(isSignedWith(request, eligibleSecret), "signed with the subscribed endpoint's secret");
    t.is(headerOf(request, "x-service-event"), "heart.eligible");
    const body = JSON.parse(request.text) as Record<string, unknown>;
    t.deepEqual(Object.keys(body), ["event", "event_id", "server_id", "heart_id", "username", "cast_at", "eligible_at", "timestamp"]);
    t.like(body, {
      event: "heart.eligible",
      event_id: heartEligibleEventId(heartId),
      server_id: serverId,
      heart_id: heartId,
      username: "Steve",
      cast_at: Date.parse(castAt) / 1000,
      eligible_at: due.getTime() / 1000,
    });
    t.deepEqual(
      plain.requests.map((r) => headerOf(r, "x-service-event")),
      ["heart.counted"],
      "the default endpoint (heart.counted only) gets no heart.eligible",
    );
  },
);

test.serial("a voter's erasure withdraws their heart.eligible not sent yet: it never names them", async (t) => {
  const { stack } = t.context;
  const [plain, eligible] = [await receiver(t.context), await receiver(t.context)];
  const { serverId } = await newServer(t.context, plain, eligible);
  const username = `Erin_${randomBytes(3).toString("hex")}`;
  const heartId = await vote(stack, serverId, "2027-05-10T12:00:00.000Z", username);
  const tombstone = newTombstone();
  await eraseVoterData(stack.prisma, { serverId, key: { kind: "username", value: username }, now: new Date(clockMs), tombstone });
  const rows = await stack.prisma.delivery.findMany({ where: { serverId, heartId, eventType: "heart.eligible" } });
  t.is(rows.length, 1);
  t.like(rows[0], { status: "withdrawn", username: tombstone });
  t.false(JSON.stringify(rows[0]!.payload).includes(username));
});

test.serial("the signed pull API lists a heart.eligible only from its due time, in the callback's fields", async (t) => {
  const { stack } = t.context;
  const admin = stack.clients.admin;
  const [plain, eligible] = [await receiver(t.context), await receiver(t.context)];
  const { serverId } = await newServer(t.context, plain, eligible);
  await admin.setPullEnabled({ serverId, enabled: true });
  await admin.setPullEventTypes({ serverId, eventTypes: ["heart.counted", "heart.eligible"] });
  const pullSecret = (await admin.revealPullSecret({ serverId })).secret;
  const castAt = "2027-05-20T12:00:00.000Z";
  const heartId = await vote(stack, serverId, castAt);
  const post = async (path: string, fields: Record<string, unknown>) => {
    const raw = JSON.stringify({ server_id: serverId, ...fields });
    const res = await fetch(`${stack.gatewayUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-service-signature": formatIngestSignature(pullSecret, Math.floor(clockMs / 1000), raw) },
      body: raw,
    });
    const body = (await res.json()) as Record<string, unknown>;
    return { status: res.status, body, openApiErrors: validateAgainstOpenApi(path, "post", res.status, body).errors };
  };
  t.true(
    (await eligibleRowsOf(stack, serverId)).some((r) => r.transport === "pull"),
    "stored for pull with the vote",
  );
  const early = await post("/api/pull/events", {});
  t.deepEqual(early.body.events, [], "not listed before its due time");
  clockMs = Date.parse(castAt) + HEART_COOLDOWN_MS;
  const listed = await post("/api/pull/events", {});
  t.is(listed.status, 200);
  t.deepEqual(listed.openApiErrors, []);
  const events = listed.body.events as Array<Record<string, unknown>>;
  t.is(events.length, 1);
  t.deepEqual(Object.keys(events[0]!), ["event", "event_id", "server_id", "heart_id", "username", "cast_at", "eligible_at", "occurred_at"]);
  t.like(events[0], { event: "heart.eligible", heart_id: heartId, event_id: heartEligibleEventId(heartId) });
});
