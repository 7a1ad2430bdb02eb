/**
 * Referral events on the signed pull API, end to end on PostgreSQL + Kafka: a click, then signed
 * ingest requests through the real gateway, the outbox, the relay, referrals.events.v1 and the
 * delivery consumer, which stores a `pull` delivery per referral event for a server whose pull API
 * is opted in to that type (SetPullEventTypes); the owner lists them (POST /api/pull/events) and
 * claims them by event_id (POST /api/pull/events/claims), idempotently, each claim in the attempt
 * log. A server not opted in gets hearts only. Every real answer is validated against the OpenAPI
 * document. Who may change the setting is tested last.
 */
import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";
import { DASHBOARD_SESSION_HEADER } from "../../services/access/auth-interceptor.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createServiceTransport, withHeaders } from "../../services/shared/rpc/service-transport.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { eventually } from "../helpers/eventually.js";
import { signInOwner, startDashboardGateway } from "../helpers/owner-session.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { validateAgainstOpenApi } from "./openapi-validate.js";
import { ENDPOINT_EVENT_TYPES } from "../../services/shared/values/event-types.js";

const test = anyTest as TestFn<{ stack: TestStack }>;

test.before(async (t) => {
  const stack = await startStack({
    allowInsecureCallbacks: true,
    pipeline: {
      name: "pull-referral-events",
      delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 50, allowInsecureCallbacks: true },
    },
  });
  t.context = { stack };
});

test.after.always(async (t) => {
  await t.context.stack?.close();
});

interface PullReferralServer {
  serverId: string;
  /** The referral secret (signs ingest requests). */
  secret: string;
  /** The pull secret (signs pull requests). */
  pullSecret: string;
}

/** A server with referrals and the pull API on. */
async function pullReferralServer(stack: TestStack): Promise<PullReferralServer> {
  const { admin } = stack.clients;
  const serverId = (await admin.createServer({ name: `pull-events-${randomBytes(3).toString("hex")}`, registrationUrl: "" })).server!.id;
  await admin.setReferralsEnabled({ serverId, enabled: true });
  const secret = (await admin.createReferralSecret({ serverId })).secret;
  await admin.setPullEnabled({ serverId, enabled: true });
  const pullSecret = (await admin.revealPullSecret({ serverId })).secret;
  return { serverId, secret, pullSecret };
}

/** POSTs a signed JSON body (with the server's id) to the gateway; returns the status and parsed answer. */
async function post(stack: TestStack, path: string, serverId: string, secret: string, fields: Record<string, unknown>) {
  const raw = JSON.stringify({ server_id: serverId, ...fields });
  const res = await fetch(`${stack.gatewayUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-signature": formatIngestSignature(secret, Math.floor(Date.now() / 1000), raw) },
    body: raw,
  });
  const body = (await res.json()) as Record<string, unknown>;
  return { status: res.status, body, openApiErrors: validateAgainstOpenApi(path, "post", res.status, body).errors };
}

/** A click, then registered and qualified through the signed ingest; returns the referral id. */
async function referAndQualify(stack: TestStack, server: PullReferralServer, referrer: string): Promise<string> {
  const { token } = await stack.clients.referral.recordClick({ serverId: server.serverId, referrerIdentity: referrer });
  const registered = await post(stack, "/api/referral/events", server.serverId, server.secret, {
    event: "registered",
    token,
    referee_identity: "bob",
    server_event_id: "reg-1",
  });
  if (registered.status !== 200) throw new Error(`registered answered ${registered.status}: ${JSON.stringify(registered.body)}`);
  const qualified = await post(stack, "/api/referral/events", server.serverId, server.secret, { event: "qualified", token, server_event_id: "q-1" });
  if (qualified.status !== 200) throw new Error(`qualified answered ${qualified.status}: ${JSON.stringify(qualified.body)}`);
  return String(registered.body.referral_id);
}

test.serial(
  "opted in to referral.qualified: click -> registered -> qualified, the signed pull list shows the qualified event with the referrer; claim, then claim again is already_claimed, redeliver offers it again; hearts stay in their own list",
  async (t) => {
    const { stack } = t.context;
    const server = await pullReferralServer(stack);
    const { serverId, pullSecret } = server;
    const set = await stack.clients.admin.setPullEventTypes({ serverId, eventTypes: ["referral.qualified", "heart.counted"] });
    t.deepEqual(set.server?.pullEventTypes, ["heart.counted", "referral.qualified"], "stored in the list's order");
    const referralId = await referAndQualify(stack, server, "alice#1");

    const listed = await eventually(async () => {
      const r = await post(stack, "/api/pull/events", serverId, pullSecret, {});
      return (r.body.events as unknown[] | undefined)?.length ? r : undefined;
    });
    t.is(listed.status, 200);
    t.deepEqual(listed.openApiErrors, []);
    const stored = await stack.prisma.delivery.findFirstOrThrow({ where: { serverId, transport: "pull", eventType: "referral.qualified" } });
    const eventId = stored.eventId ?? "";
    t.deepEqual(listed.body, {
      events: [
        {
          event: "referral.qualified",
          event_id: eventId,
          server_id: serverId,
          referral_id: referralId,
          referrer_identity: "alice#1",
          referee_identity: "bob",
          state: "qualified",
          previous_state: "registered",
          occurred_at: stored.countedAt.toISOString(),
        },
      ],
      next_cursor: null,
    });
    t.is(
      await stack.prisma.delivery.count({ where: { serverId, transport: "pull", eventType: "referral.registered" } }),
      0,
      "a type not chosen is not offered",
    );
    const hearts = await post(stack, "/api/pull/hearts", serverId, pullSecret, {});
    t.deepEqual(hearts.body, { hearts: [], next_cursor: null }, "the hearts list holds no referral event");
    const asHeart = await post(stack, "/api/pull/claims", serverId, pullSecret, { heart_ids: [stored.heartId] });
    t.deepEqual(asHeart.body, { results: [{ heart_id: stored.heartId, status: "unknown" }] }, "the heart claim never claims a referral event");

    const claimed = await post(stack, "/api/pull/events/claims", serverId, pullSecret, { event_ids: [eventId] });
    t.is(claimed.status, 200);
    t.deepEqual(claimed.openApiErrors, []);
    t.deepEqual(claimed.body, { results: [{ event_id: eventId, status: "claimed" }] });
    const again = await post(stack, "/api/pull/events/claims", serverId, pullSecret, { event_ids: [eventId.toUpperCase(), "not-an-id"] });
    t.deepEqual(again.body, {
      results: [
        { event_id: eventId.toUpperCase(), status: "already_claimed" },
        { event_id: "not-an-id", status: "unknown" },
      ],
    });
    t.deepEqual((await post(stack, "/api/pull/events", serverId, pullSecret, {})).body, { events: [], next_cursor: null }, "a claimed event leaves the list");
    const attempts = await stack.prisma.deliveryAttempt.findMany({ where: { deliveryId: stored.id } });
    t.is(attempts.length, 1, "one attempt: the claim (the repeat changed nothing)");
    t.like(attempts[0], { url: "pull API claim", statusCode: 200, succeeded: true });
    t.deepEqual(JSON.parse(attempts[0]?.requestBody ?? "{}"), { server_id: serverId, event_ids: [eventId] });
    // Redeliverable like any delivery: "Redeliver" offers the event again.
    await stack.clients.delivery.redeliver({ deliveryId: stored.id });
    const offeredAgain = await post(stack, "/api/pull/events", serverId, pullSecret, {});
    t.deepEqual(
      (offeredAgain.body.events as Array<Record<string, unknown>>).map((e) => e.event_id),
      [eventId],
    );
  },
);

test.serial("not opted in: referral events reach the subscribed callback endpoint only; the pull API offers hearts only, unchanged", async (t) => {
  const { stack } = t.context;
  const server = await pullReferralServer(stack);
  const { serverId, pullSecret } = server;
  t.deepEqual((await stack.clients.admin.getServer({ serverId })).server?.pullEventTypes, ["heart.counted"], "the default");
  // An endpoint subscribed to referral.qualified shows when the consumer stored the event's deliveries (one statement for all).
  await stack.clients.admin.createEndpoint({ serverId, url: "http://127.0.0.1:9/referrals", eventTypes: ["referral.qualified"] });
  await referAndQualify(stack, server, "carol#2");
  const stored = await eventually(async () => (await stack.prisma.delivery.findFirst({ where: { serverId, eventType: "referral.qualified" } })) ?? undefined);
  t.is(stored.transport, "callback");
  t.is(await stack.prisma.delivery.count({ where: { serverId, transport: "pull" } }), 0, "no pull delivery for a referral event");
  const events = await post(stack, "/api/pull/events", serverId, pullSecret, {});
  t.deepEqual(events.body, { events: [], next_cursor: null });
  const cast = await stack.clients.hearts.castHeart({
    serverId,
    username: "Steve",
    voterIdentity: "v-pull-events",
    ip: "203.0.113.78",
    userAgent: "Mozilla/5.0 (pull)",
  });
  const hearts = await eventually(async () => {
    const r = await post(stack, "/api/pull/hearts", serverId, pullSecret, {});
    return (r.body.hearts as unknown[] | undefined)?.length ? r : undefined;
  });
  t.deepEqual(hearts.openApiErrors, []);
  t.deepEqual(Object.keys((hearts.body.hearts as Array<Record<string, unknown>>)[0] ?? {}), [
    "heart_id",
    "username",
    "period",
    "counted_at",
    "streak_day",
    "next_eligible_at",
  ]);
  t.like((hearts.body.hearts as Array<Record<string, unknown>>)[0], { heart_id: cast.heartId, username: "Steve" });
});

test.serial(
  "the events endpoints check like the hearts ones: the referral secret is refused, bad event_ids are a 400, a server with pull off is a 404",
  async (t) => {
    const { stack } = t.context;
    const server = await pullReferralServer(stack);
    const { serverId, pullSecret } = server;
    const wrongKey = await post(stack, "/api/pull/events", serverId, server.secret, {});
    t.is(wrongKey.status, 401);
    t.deepEqual(wrongKey.openApiErrors, []);
    for (const eventIds of [[], "x", [1], Array.from({ length: 501 }, () => "x")]) {
      const bad = await post(stack, "/api/pull/events/claims", serverId, pullSecret, { event_ids: eventIds });
      t.is(bad.status, 400);
      t.deepEqual(bad.openApiErrors, []);
      t.like(bad.body, { error: "event_ids must be an array of 1-500 strings" });
    }
    const badLimit = await post(stack, "/api/pull/events", serverId, pullSecret, { limit: 501 });
    t.is(badLimit.status, 400);
    t.deepEqual(badLimit.openApiErrors, []);
    const pullOff = (await stack.clients.admin.createServer({ name: "pull off", registrationUrl: "" })).server!.id;
    const off = await post(stack, "/api/pull/events", pullOff, "psec_x", {});
    t.is(off.status, 404);
    t.like(off.body, { error: "pull API not enabled for this server" });
    t.deepEqual(off.openApiErrors, []);
  },
);

test("who may set the pull event types: another owner's server answers like a missing one; a token without the admin scope is refused; unknown types are refused", async (t) => {
  let gatewayUrl = "";
  const stack = await startStack({
    gateway: false,
    get publicBaseUrl() {
      return gatewayUrl;
    },
  });
  t.teardown(() => stack.close());
  const gatewayToken = (await stack.clients.access.createServiceToken({ name: "gw", scopes: ["ingest", "pull", "clicks:record", "dashboard"] })).token;
  const gateway = await startDashboardGateway({ rpcUrl: stack.rpcUrl, token: gatewayToken, log: createLogger("test", "silent") });
  gatewayUrl = gateway.url;
  t.teardown(() => gateway.close());
  const { admin, access } = stack.clients;
  const mine = (await admin.createServer({ name: "A's", registrationUrl: "" })).server!.id;
  const theirs = (await admin.createServer({ name: "B's", registrationUrl: "" })).server!.id;
  await access.createOwner({ ownerId: "owner-a", displayName: "A" });
  await access.createOwner({ ownerId: "owner-b", displayName: "B" });
  await access.assignServer({ serverId: mine, ownerId: "owner-a" });
  await access.assignServer({ serverId: theirs, ownerId: "owner-b" });
  const session = await signInOwner(access, gateway.url, "owner-a");
  const asA = createClient(
    ServerAdminService,
    withHeaders(createServiceTransport(stack.rpcUrl, gatewayToken), { [DASHBOARD_SESSION_HEADER]: session.sessionToken }),
  );
  const codeOf = (p: Promise<unknown>) =>
    p.then(
      () => "ok",
      (e: unknown) => `${Code[ConnectError.from(e).code]}: ${ConnectError.from(e).rawMessage}`,
    );
  const optIn = { eventTypes: ["heart.counted", "referral.qualified"] };
  t.is(await codeOf(asA.setPullEventTypes({ serverId: theirs, ...optIn })), "NotFound: unknown server");
  t.deepEqual((await admin.getServer({ serverId: theirs })).server?.pullEventTypes, ["heart.counted"], "B's setting is untouched");
  t.is(await codeOf(asA.setPullEventTypes({ serverId: mine, ...optIn })), "ok", "the owner sets its own server's");
  const reader = createClient(
    ServerAdminService,
    createServiceTransport(stack.rpcUrl, (await access.createServiceToken({ name: "reader", scopes: ["read"] })).token),
  );
  t.regex(await codeOf(reader.setPullEventTypes({ serverId: mine, ...optIn })), /^PermissionDenied/);
  t.is(
    await codeOf(admin.setPullEventTypes({ serverId: mine, eventTypes: ["heart.test"] })),
    `InvalidArgument: event_types must be one of ${ENDPOINT_EVENT_TYPES.join("|")}`,
  );
  t.is(await codeOf(admin.setPullEventTypes({ serverId: mine, eventTypes: [] })), "InvalidArgument: event_types is required");
  t.is(await codeOf(admin.setPullEventTypes({ serverId: "nope", ...optIn })), "NotFound: unknown server");
  t.deepEqual((await admin.getServer({ serverId: mine })).server?.pullEventTypes, ["heart.counted", "referral.qualified"]);
});
