import test, { type ExecutionContext } from "ava";
import { eventually } from "../helpers/eventually.js";
import { headerOf, type RecordedRequest } from "../../scripts/harness/receiver.js";
import { validateHeartCallbackHeaders, validateHeartEvent } from "./openapi-validate.js";
import {
  expectedCallbackMac,
  expectedStandardWebhookSignature,
  hexEquals,
  insertSecret,
  insertServer,
  parseCallbackSignature,
  type Harness,
  startDispatchWorld,
  addDelivery,
  defaultEndpoint,
  setDefaultEndpoint,
} from "../../scripts/harness/delivery-harness.js";

// Serial: these tests measure delays (the schedule, Retry-After, one server not delaying another),
// so they do not compete with each other for the machine's cores.

const world = (t: ExecutionContext) => startDispatchWorld(t);

/** A server with a callback URL and one active callback secret. */
async function callbackServer(h: Harness, url: string | null, opts: { standardWebhooks?: boolean } = {}) {
  const serverId = await insertServer(h.db.prisma, { callbackUrl: url, ...opts });
  const { secret } = await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  return { serverId, secret };
}

function deliveryOf(h: Harness, heartId: string) {
  return h.db.prisma.delivery.findFirstOrThrow({ where: { heartId }, include: { attemptsLog: { orderBy: { id: "asc" } } } });
}

function bodyOf(request: RecordedRequest): Record<string, unknown> {
  return JSON.parse(request.text) as Record<string, unknown>;
}

/** Checks a received callback the way a receiver following the docs would, with node:crypto. */
function assertSignedBy(t: ExecutionContext, request: RecordedRequest, secretsNewestFirst: string[]) {
  const parsed = parseCallbackSignature(headerOf(request, "x-service-signature"));
  if (!parsed) return t.fail(`malformed X-Service-Signature: ${headerOf(request, "x-service-signature")}`);
  t.is(parsed.v1.length, secretsNewestFirst.length, "one v1 per active secret");
  secretsNewestFirst.forEach((secret, i) => t.true(hexEquals(parsed.v1[i] ?? "", expectedCallbackMac(secret, parsed.t, request.body)), `v1 #${i + 1}`));
  t.is(bodyOf(request).timestamp, parsed.t, "body timestamp equals the signature's t");
}

test.serial("a delivery is POSTed once, signed over the raw body (verified independently), with the contract's headers and body fields", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver();
  const { serverId, secret } = await callbackServer(h, r.url);
  const heartId = await addDelivery(h, serverId, { username: "Alex" });
  const before = Math.floor(Date.now() / 1000);
  dispatcher().start();
  const [request] = await r.waitForRequests(1);
  const after = Math.floor(Date.now() / 1000);
  t.is(request!.method, "POST");
  t.is(request!.path, "/hook");
  t.is(headerOf(request!, "content-type"), "application/json");
  t.is(headerOf(request!, "x-service-event"), "heart.counted");
  assertSignedBy(t, request!, [secret]);
  const body = bodyOf(request!);
  t.deepEqual(Object.keys(body).sort(), ["event", "heart_id", "period", "server_id", "timestamp", "username"]);
  t.like(body, { event: "heart.counted", server_id: serverId, username: "Alex", heart_id: heartId, period: "2026-03" });
  t.true((body.timestamp as number) >= before && (body.timestamp as number) <= after, "timestamp is the delivery time");
  t.deepEqual(validateHeartEvent(body).errors, [], "the body matches the OpenAPI webhooks schema");
  t.deepEqual(validateHeartCallbackHeaders(request!.headers as Record<string, string>).errors, []);
  const delivery = await eventually(async () => {
    const d = await deliveryOf(h, heartId);
    return d.status === "delivered" ? d : undefined;
  });
  t.is(delivery.attempts, 1);
  t.is(delivery.lastStatusCode, 200);
  t.truthy(delivery.deliveredAt);
  t.is(delivery.attemptsLog.length, 1);
  t.like(delivery.attemptsLog[0], { attempt: 1, statusCode: 200, error: null, url: r.url });
  t.is(r.requests.length, 1, "a 2xx stops retries");
});

test.serial("any 2xx (202, 204) marks the delivery delivered", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  for (const status of [202, 204]) {
    const r = await receiver({ fallback: { status, body: "" } });
    const { serverId } = await callbackServer(h, r.url);
    const heartId = await addDelivery(h, serverId);
    if (status === 202) dispatcher().start();
    await eventually(async () => (await deliveryOf(h, heartId)).status === "delivered", { message: `status ${status}` });
    t.is((await deliveryOf(h, heartId)).lastStatusCode, status);
  }
});

test.serial(
  "rotation: with two active callback secrets the header carries two v1 entries, newest first; expired and revoked secrets sign nothing",
  async (t) => {
    const { h, dispatcher, receiver } = await world(t);
    const r = await receiver();
    const serverId = await insertServer(h.db.prisma, { callbackUrl: r.url });
    const now = Date.now();
    const db = h.db.prisma;
    const box = h.deps.secretBox;
    await insertSecret(db, box, serverId, "callback", { createdAt: new Date(now - 72 * 3600_000), expiresAt: new Date(now - 24 * 3600_000) });
    await insertSecret(db, box, serverId, "callback", { createdAt: new Date(now - 60 * 3600_000), revokedAt: new Date(now - 3600_000) });
    const old = await insertSecret(db, box, serverId, "callback", { createdAt: new Date(now - 48 * 3600_000), expiresAt: new Date(now + 23 * 3600_000) });
    const newest = await insertSecret(db, box, serverId, "callback", { createdAt: new Date(now - 3600_000) });
    await addDelivery(h, serverId);
    dispatcher().start();
    const [request] = await r.waitForRequests(1);
    assertSignedBy(t, request!, [newest.secret, old.secret]);
  },
);

test.serial("Standard Webhooks opt-in: webhook-id = heart_id, webhook-timestamp = t, webhook-signature verifies (computed in the test)", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver();
  const { serverId, secret } = await callbackServer(h, r.url, { standardWebhooks: true });
  const heartId = await addDelivery(h, serverId);
  dispatcher().start();
  const [request] = await r.waitForRequests(1);
  const t0 = Number(headerOf(request!, "webhook-timestamp"));
  t.is(headerOf(request!, "webhook-id"), heartId);
  t.is(t0, parseCallbackSignature(headerOf(request!, "x-service-signature"))?.t ?? -1);
  t.is(headerOf(request!, "webhook-signature"), `v1,${expectedStandardWebhookSignature(secret, heartId, t0, request!.body)}`);
  assertSignedBy(t, request!, [secret]);
});

test.serial("without the opt-in no Standard Webhooks headers are sent", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver();
  const { serverId } = await callbackServer(h, r.url);
  await addDelivery(h, serverId);
  dispatcher().start();
  const [request] = await r.waitForRequests(1);
  t.is(headerOf(request!, "webhook-id"), undefined);
  t.is(headerOf(request!, "webhook-signature"), undefined);
});

test.serial(
  "compressed schedule: a failing receiver is retried per schedule, every attempt recorded, then the delivery is failed and stays visible; Redeliver sends it again",
  async (t) => {
    const { h, dispatcher, receiver } = await world(t);
    const r = await receiver({ fallback: { status: 500, body: "boom" } });
    const { serverId, secret } = await callbackServer(h, r.url);
    const heartId = await addDelivery(h, serverId);
    dispatcher({ scheduleText: "100ms,200ms,300ms" }).start();
    const failed = await eventually(async () => {
      const d = await deliveryOf(h, heartId);
      return d.status === "failed" ? d : undefined;
    });
    t.is(r.requests.length, 4, "1 attempt + 3 retries");
    const gaps = r.requests.slice(1).map((req, i) => req.receivedAt - r.requests[i]!.receivedAt);
    [100, 200, 300].forEach((delay, i) => t.true(gaps[i]! >= delay - 5, `retry ${i + 1} waited ${gaps[i]} ms >= ${delay} ms`));
    t.is(failed.attempts, 4);
    t.truthy(failed.failedAt);
    t.is(failed.lastStatusCode, 500);
    t.is(failed.lastError, "receiver answered 500");
    t.deepEqual(
      failed.attemptsLog.map((a) => [a.attempt, a.statusCode, a.error, a.url]),
      [1, 2, 3, 4].map((n) => [n, 500, "receiver answered 500", r.url]),
    );
    t.true(failed.attemptsLog.every((a) => a.latencyMs >= 0 && a.startedAt instanceof Date));
    // Every retry carries the same heart_id and is freshly signed.
    for (const request of r.requests) {
      t.is(bodyOf(request).heart_id, heartId);
      assertSignedBy(t, request, [secret]);
    }

    r.setFallback({ status: 200 });
    const res = await h.delivery.redeliver({ deliveryId: failed.id });
    t.is(res.delivery?.status, 1 /* PENDING */);
    const delivered = await eventually(async () => {
      const d = await deliveryOf(h, heartId);
      return d.status === "delivered" ? d : undefined;
    });
    t.is(r.requests.length, 5);
    t.is(delivered.attemptsLog.length, 5, "the attempt log is kept across a redelivery");
    t.is(delivered.attemptsLog[4]?.attempt, 5);
    t.is(delivered.failedAt, null);
  },
);

test.serial("receiver down then up: every heart is delivered, each heart_id is paid exactly once", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const paid = new Map<string, number>();
  const r = await receiver({
    fallback: (req) => {
      // The receiver keys its reward on heart_id: a repeat is acknowledged and pays nothing.
      const heartId = String((JSON.parse(req.text) as { heart_id: string }).heart_id);
      paid.set(heartId, (paid.get(heartId) ?? 0) + 1);
      return { status: 200 };
    },
  });
  await r.down();
  const { serverId } = await callbackServer(h, r.url);
  const heartIds = await Promise.all(Array.from({ length: 5 }, () => addDelivery(h, serverId)));
  dispatcher({ scheduleText: "150ms,150ms,150ms,150ms,150ms,150ms,150ms,150ms" }).start();
  // Wait until every delivery failed at least once against the closed port.
  const down = await eventually(async () => {
    const rows = await h.db.prisma.delivery.findMany({ where: { serverId } });
    return rows.every((d) => d.attempts >= 1) ? rows : undefined;
  });
  t.true(down.every((d) => d.status === "pending" && d.lastError === "connection failed: ECONNREFUSED"));
  await r.up();
  await eventually(async () => (await h.db.prisma.delivery.count({ where: { serverId, status: "delivered" } })) === heartIds.length);
  t.deepEqual([...paid.keys()].sort(), [...heartIds].sort());
  t.true(
    [...paid.values()].every((n) => n === 1),
    JSON.stringify([...paid.values()]),
  );
});

test.serial("410 Gone disables the server's callback with a reason and holds its deliveries; re-enabling resumes them, nothing is lost", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver({ responses: [{ status: 410, body: "gone" }] });
  const { serverId } = await callbackServer(h, r.url);
  const first = await addDelivery(h, serverId);
  dispatcher().start();
  await r.waitForRequests(1);
  const server = await eventually(async () => {
    const s = await defaultEndpoint(h.db.prisma, serverId);
    return s.disabledAt ? s : undefined;
  });
  t.regex(server.disabledReason ?? "", /^receiver answered 410 Gone at \d{4}-\d{2}-\d{2}T/);
  const held = await eventually(async () => {
    const d = await deliveryOf(h, first);
    return d.attemptsLog.length === 1 && d.leaseUntil === null ? d : undefined;
  });
  t.is(held.status, "pending");
  t.is(held.lastStatusCode, 410);
  const second = await addDelivery(h, serverId);
  // Negative check: give the dispatcher many poll cycles (25 ms each) to prove nothing more is sent while disabled.
  await new Promise((resolve) => setTimeout(resolve, 400));
  t.is(r.requests.length, 1, "held: no attempt while the callback is disabled");

  // What EnableCallback does: clear the disable.
  await setDefaultEndpoint(h.db.prisma, serverId, { disabledAt: null, disabledReason: null });
  await eventually(async () => (await h.db.prisma.delivery.count({ where: { serverId, status: "delivered" } })) === 2);
  const heartIds = r.requests.slice(1).map((req) => bodyOf(req).heart_id);
  t.deepEqual(heartIds.sort(), [first, second].sort());
});

test.serial("Retry-After on a non-2xx pushes the next attempt back to at least that long (never earlier than the schedule)", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver({ responses: [{ status: 429, headers: { "Retry-After": "2" } }], fallback: { status: 200 } });
  const { serverId } = await callbackServer(h, r.url);
  const heartId = await addDelivery(h, serverId);
  dispatcher({ scheduleText: "100ms,100ms" }).start();
  await r.waitForRequests(1);
  const retrying = await eventually(async () => {
    const d = await deliveryOf(h, heartId);
    return d.attemptsLog.length === 1 && d.leaseUntil === null ? d : undefined;
  });
  const attemptStarted = retrying.attemptsLog[0]!.startedAt.getTime();
  t.true(retrying.nextAttemptAt.getTime() - attemptStarted >= 2000, `next attempt ${retrying.nextAttemptAt.getTime() - attemptStarted} ms after the 429`);
  await r.waitForRequests(2, 20_000);
  const gap = r.requests[1]!.receivedAt - r.requests[0]!.receivedAt;
  t.true(gap >= 1950, `second request came ${gap} ms after the first`);
  await eventually(async () => (await deliveryOf(h, heartId)).status === "delivered");
});

test.serial("redirects are not followed: a 302 is a failed attempt and the Location target receives nothing", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const target = await receiver();
  const r = await receiver({ fallback: { status: 302, headers: { Location: target.url } } });
  const { serverId } = await callbackServer(h, r.url);
  const heartId = await addDelivery(h, serverId);
  dispatcher({ scheduleText: "5s" }).start();
  await r.waitForRequests(1);
  const d = await eventually(async () => {
    const row = await deliveryOf(h, heartId);
    return row.attemptsLog.length === 1 && row.leaseUntil === null ? row : undefined;
  });
  t.is(d.status, "pending");
  t.is(d.attemptsLog[0]?.statusCode, 302);
  t.is(d.attemptsLog[0]?.error, `redirect not followed: receiver answered 302 to ${target.url}`);
  t.is(target.requests.length, 0);
});

test.serial(
  "a hanging receiver for server A does not delay server B: B is delivered within 3 s (A's timeout is 20 s) while A's attempts are stuck",
  async (t) => {
    const { h, dispatcher, receiver } = await world(t);
    const hangA = await receiver({ fallback: { hang: true } });
    const okB = await receiver();
    const a = await callbackServer(h, hangA.url);
    const b = await callbackServer(h, okB.url);
    for (let i = 0; i < 8; i++) await addDelivery(h, a.serverId);
    const d = dispatcher({ timeoutMs: 20_000, concurrency: 4, perServerConcurrency: 2 });
    d.start();
    await hangA.waitForRequests(2);
    const queuedAt = Date.now();
    const heartB = await addDelivery(h, b.serverId);
    const [requestB] = await okB.waitForRequests(1, 10_000);
    const waited = requestB!.receivedAt - queuedAt;
    t.true(waited < 3000, `B waited ${waited} ms`);
    t.is(bodyOf(requestB!).heart_id, heartB);
    t.is(hangA.requests.length, 2, "A is capped at its per-server concurrency");
    t.is(d.inFlight().get(a.serverId), 2);
  },
);

test.serial("a receiver slower than the timeout is a failed attempt with a timeout error", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver({ fallback: { status: 200, delayMs: 1_500 } });
  const { serverId } = await callbackServer(h, r.url);
  const heartId = await addDelivery(h, serverId);
  dispatcher({ timeoutMs: 300, scheduleText: "10s" }).start();
  const d = await eventually(async () => {
    const row = await deliveryOf(h, heartId);
    return row.attemptsLog.length === 1 && row.leaseUntil === null ? row : undefined;
  });
  t.is(d.status, "pending");
  t.is(d.attemptsLog[0]?.statusCode, null);
  t.is(d.attemptsLog[0]?.error, "timed out after 300 ms");
  t.true(d.attemptsLog[0]!.latencyMs >= 290 && d.attemptsLog[0]!.latencyMs < 1_400, `latency ${d.attemptsLog[0]!.latencyMs}`);
});

test.serial("SSRF: a callback to a loopback address is refused at connect time unless the development flag allows it", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver();
  // https so the scheme check passes: only the address check can refuse these.
  const literal = await callbackServer(h, `https://127.0.0.1:${r.port}/hook`);
  const named = await callbackServer(h, `https://localhost:${r.port}/hook`);
  const heartLiteral = await addDelivery(h, literal.serverId);
  const heartNamed = await addDelivery(h, named.serverId);
  const strict = dispatcher({ allowInsecure: false, scheduleText: "10s" });
  strict.start();
  const rows = await eventually(async () => {
    const both = await Promise.all([deliveryOf(h, heartLiteral), deliveryOf(h, heartNamed)]);
    return both.every((d) => d.attemptsLog.length === 1 && d.leaseUntil === null) ? both : undefined;
  });
  t.regex(rows[0].attemptsLog[0]?.error ?? "", /^refused to connect to 127\.0\.0\.1: loopback, private/);
  t.regex(rows[1].attemptsLog[0]?.error ?? "", /^refused to connect to (127\.0\.0\.1|::1): loopback, private/);
  t.is(r.requests.length, 0, "nothing reached the receiver");
  await strict.stop();

  // The development flag allows private addresses (and http).
  const allowed = await callbackServer(h, r.url);
  const heartAllowed = await addDelivery(h, allowed.serverId);
  dispatcher({ allowInsecure: true }).start();
  await eventually(async () => (await deliveryOf(h, heartAllowed)).status === "delivered");
  t.is(r.requests.length, 1);
});

test.serial("http callback URLs are refused without the development flag", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver();
  const { serverId } = await callbackServer(h, r.url);
  const heartId = await addDelivery(h, serverId);
  dispatcher({ allowInsecure: false, scheduleText: "10s" }).start();
  const d = await eventually(async () => {
    const row = await deliveryOf(h, heartId);
    return row.attemptsLog.length === 1 ? row : undefined;
  });
  t.is(d.attemptsLog[0]?.error, "callback URL scheme http: is not allowed");
  t.is(r.requests.length, 0);
});

test.serial("deliveries of a server without a callback URL or without an active callback secret are held pending, not attempted", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver();
  const noUrl = await callbackServer(h, null);
  const noSecret = await insertServer(h.db.prisma, { callbackUrl: r.url });
  await insertSecret(h.db.prisma, h.deps.secretBox, noSecret, "callback", { revokedAt: new Date() });
  const heldA = await addDelivery(h, noUrl.serverId);
  const heldB = await addDelivery(h, noSecret);
  const control = await callbackServer(h, r.url);
  const controlHeart = await addDelivery(h, control.serverId);
  dispatcher().start();
  await eventually(async () => (await deliveryOf(h, controlHeart)).status === "delivered");
  // Negative check: several more poll cycles for the held rows to (wrongly) go out.
  await new Promise((resolve) => setTimeout(resolve, 300));
  for (const heartId of [heldA, heldB]) {
    const d = await deliveryOf(h, heartId);
    t.is(d.status, "pending");
    t.is(d.attempts, 0);
    t.is(d.attemptsLog.length, 0);
  }
  t.is(r.requests.length, 1);

  // Setting a URL releases the held delivery.
  const r2 = await receiver();
  await setDefaultEndpoint(h.db.prisma, noUrl.serverId, { url: r2.url });
  await eventually(async () => (await deliveryOf(h, heldA)).status === "delivered");
  t.is(bodyOf(r2.requests[0]!).heart_id, heldA);
});

test.serial("streak_day is read at delivery time: today or yesterday -> its streak, older -> 0, no voter state -> omitted", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver();
  const { serverId } = await callbackServer(h, r.url);
  const now = new Date();
  const day = (offset: number) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + offset));
  const states: [string, Date, number][] = [
    ["today", day(0), 4],
    ["yesterday", day(-1), 6],
    ["stale", day(-2), 9],
  ];
  for (const [voter, lastDay, streakDays] of states) {
    await h.db.prisma.voterState.create({ data: { serverId, voterIdentity: voter, lastCountedAt: lastDay, lastDay, streakDays } });
  }
  const ids = {
    today: await addDelivery(h, serverId, { voterIdentity: "today" }),
    yesterday: await addDelivery(h, serverId, { voterIdentity: "yesterday" }),
    stale: await addDelivery(h, serverId, { voterIdentity: "stale" }),
    none: await addDelivery(h, serverId, { voterIdentity: "never-counted" }),
  };
  dispatcher().start();
  await r.waitForRequests(4);
  const byHeart = new Map(r.requests.map((req) => [bodyOf(req).heart_id, bodyOf(req)]));
  for (const body of byHeart.values()) t.deepEqual(validateHeartEvent(body).errors, []);
  t.is(byHeart.get(ids.today)?.streak_day, 4);
  t.is(byHeart.get(ids.yesterday)?.streak_day, 6);
  t.is(byHeart.get(ids.stale)?.streak_day, 0);
  t.false("streak_day" in (byHeart.get(ids.none) ?? {}));
});

test.serial("each attempt is signed afresh: a retry carries a later timestamp equal to its own t", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver({ responses: [{ status: 503 }], fallback: { status: 200 } });
  const { serverId, secret } = await callbackServer(h, r.url);
  await addDelivery(h, serverId);
  dispatcher({ scheduleText: "1100ms" }).start();
  const [first, second] = await r.waitForRequests(2, 20_000);
  assertSignedBy(t, first!, [secret]);
  assertSignedBy(t, second!, [secret]);
  t.true((bodyOf(second!).timestamp as number) > (bodyOf(first!).timestamp as number));
});

test.serial("two dispatcher instances on one database never send the same delivery twice (FOR UPDATE SKIP LOCKED + lease)", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver({ fallback: { status: 200, delayMs: 20 } });
  const { serverId } = await callbackServer(h, r.url);
  const heartIds = await Promise.all(Array.from({ length: 40 }, () => addDelivery(h, serverId)));
  dispatcher({ perServerConcurrency: 8 }).start();
  dispatcher({ perServerConcurrency: 8 }).start();
  await eventually(async () => (await h.db.prisma.delivery.count({ where: { serverId, status: "delivered" } })) === heartIds.length, { timeoutMs: 20_000 });
  const seen = r.requests.map((req) => bodyOf(req).heart_id);
  t.is(seen.length, heartIds.length);
  t.is(new Set(seen).size, heartIds.length);
});

test.serial("stop() stops claiming and waits for in-flight attempts to be recorded", async (t) => {
  const { h, dispatcher, receiver } = await world(t);
  const r = await receiver({ fallback: { status: 200, delayMs: 400 } });
  const { serverId } = await callbackServer(h, r.url);
  const heartId = await addDelivery(h, serverId);
  const d = dispatcher();
  d.start();
  await r.waitForRequests(1);
  await d.stop();
  t.is((await deliveryOf(h, heartId)).status, "delivered", "the in-flight attempt finished and was recorded before stop() resolved");
  const later = await addDelivery(h, serverId);
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.is((await deliveryOf(h, later)).attempts, 0, "nothing is claimed after stop()");
});
