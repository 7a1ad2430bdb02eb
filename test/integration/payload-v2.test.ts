/**
 * Payload version 2, pinned per callback endpoint, end to end: hearts cast with platform ids through
 * the real pipeline (CastHeart, outbox, relay, Kafka, delivery consumer and dispatcher) to local
 * receivers; a version-1 endpoint gets the contract's body, a version-2 endpoint the richer one, each
 * signed with its own secret (checked with node:crypto) and valid against the OpenAPI document; the
 * test callback of a version-2 endpoint; the endpoint RPCs' version validation.
 */
import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { Code } from "@connectrpc/connect";
import { HEART_COOLDOWN_MS } from "../../services/hearts/domain/streak.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { NIL_UUID } from "../../services/shared/values/ids.js";
import { TEST_CALLBACK_PLATFORM_IDS } from "../../services/delivery/rpc/send-test-callback.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { headerOf, startReceiver, type Receiver, type RecordedRequest } from "../../scripts/harness/receiver.js";
import { expectedCallbackMac, hexEquals, parseCallbackSignature } from "../../scripts/harness/delivery-harness.js";
import { validateHeartEvent, validateHeartEventV2 } from "./openapi-validate.js";
import { rpcError } from "../../scripts/harness/referral-harness.js";
import { ownerApi, signInOwner } from "../helpers/owner-session.js";

interface Context {
  stack: TestStack;
  receivers: Receiver[];
}
const test = anyTest as TestFn<Context>;
let heartIp = 10;

const IDS = {
  steamId: "76561198000000001",
  discordId: "123456789012345678",
  minecraftUuid: "8667ba71-b85a-4004-af54-457a9734eed7",
  accountId: "acct-991",
};

test.before(async (t) => {
  const stack = await startStack({
    allowInsecureCallbacks: true,
    pipeline: {
      name: "payload-v2",
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

function macOk(request: RecordedRequest, secret: string): boolean {
  const parsed = parseCallbackSignature(headerOf(request, "x-service-signature"));
  return parsed?.v1.some((mac) => hexEquals(mac, expectedCallbackMac(secret, parsed.t, request.body))) ?? false;
}

async function newServer(c: Context, url: string): Promise<{ serverId: string; defaultSecret: string }> {
  const { server } = await c.stack.clients.admin.createServer({ name: `v2-${randomBytes(3).toString("hex")}` });
  const serverId = server!.id;
  await c.stack.clients.admin.setCallbackSettings({ serverId, callbackUrl: url });
  return { serverId, defaultSecret: (await c.stack.clients.admin.revealCallbackSecret({ serverId })).secret };
}

async function cast(c: Context, serverId: string, ids: Partial<typeof IDS>): Promise<{ heartId: string; castAt: number }> {
  heartIp += 1;
  const before = Math.floor(Date.now() / 1000);
  const res = await c.stack.clients.hearts.castHeart({
    serverId,
    username: "Steve",
    voterIdentity: `voter-${randomBytes(4).toString("hex")}`,
    ip: `203.0.113.${heartIp}`,
    userAgent: "Mozilla/5.0 (payload v2 test)",
    ...ids,
  });
  if (!res.heartId) throw new Error("the heart did not count");
  return { heartId: res.heartId, castAt: before };
}

async function callbackFor(r: Receiver, heartId: string): Promise<RecordedRequest> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const found = r.requests.find((q) => q.text.includes(heartId));
    if (found) return found;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no callback for heart ${heartId}`);
}

test("a version-2 endpoint receives the heart's cast time, next eligible time and ids, signed and valid against the OpenAPI document", async (t) => {
  const r = await receiver(t.context);
  const { serverId, defaultSecret } = await newServer(t.context, r.url);
  const [defaultEndpoint] = (await t.context.stack.clients.admin.listEndpoints({ serverId })).endpoints;
  const updated = await t.context.stack.clients.admin.updateEndpoint({ serverId, endpointId: defaultEndpoint!.id, payloadVersion: 2 });
  t.is(updated.endpoint?.payloadVersion, 2);
  const { heartId, castAt } = await cast(t.context, serverId, IDS);
  const request = await callbackFor(r, heartId);
  t.true(macOk(request, defaultSecret), "the body is signed like every callback");
  const body = JSON.parse(request.text) as Record<string, unknown>;
  t.like(body, {
    event: "heart.counted",
    server_id: serverId,
    heart_id: heartId,
    username: "Steve",
    payload_version: 2,
    steam_id: IDS.steamId,
    discord_id: IDS.discordId,
    minecraft_uuid: IDS.minecraftUuid,
    account_id: IDS.accountId,
  });
  const castSeconds = body.cast_at as number;
  t.true(castSeconds >= castAt && castSeconds <= Math.floor(Date.now() / 1000), "cast_at is the heart's cast time");
  t.is(body.next_eligible_at, castSeconds + HEART_COOLDOWN_MS / 1000, "next_eligible_at is the end of the cooldown");
  t.deepEqual(validateHeartEventV2(body).errors, []);
});

test("two endpoints of one server, version 1 and version 2, each get their own shape for the same heart", async (t) => {
  const v1 = await receiver(t.context);
  const v2 = await receiver(t.context);
  const { serverId, defaultSecret } = await newServer(t.context, v1.url);
  const second = await t.context.stack.clients.admin.createEndpoint({ serverId, url: v2.url, eventTypes: ["heart.counted"], payloadVersion: 2 });
  t.is(second.endpoint?.payloadVersion, 2);
  const { heartId } = await cast(t.context, serverId, { minecraftUuid: IDS.minecraftUuid });
  const [toV1, toV2] = await Promise.all([callbackFor(v1, heartId), callbackFor(v2, heartId)]);
  t.true(macOk(toV1, defaultSecret));
  t.true(macOk(toV2, second.secret));
  const b1 = JSON.parse(toV1.text) as Record<string, unknown>;
  const b2 = JSON.parse(toV2.text) as Record<string, unknown>;
  t.deepEqual(Object.keys(b1), ["event", "server_id", "username", "heart_id", "period", "timestamp", "streak_day"], "version 1: the contract's body");
  t.deepEqual(validateHeartEvent(b1).errors, []);
  t.deepEqual(
    Object.keys(b2),
    ["event", "server_id", "username", "heart_id", "period", "timestamp", "streak_day", "payload_version", "cast_at", "next_eligible_at", "minecraft_uuid"],
    "version 2: v1's fields, then the additions; ids the vote did not give are omitted",
  );
  t.deepEqual(validateHeartEventV2(b2).errors, []);
  const { timestamp: _t1, ...rest1 } = b1;
  const { timestamp: _t2, ...rest2 } = b2;
  t.like(rest2, rest1, "every version-1 field has the same value in version 2");
});

test("the test callback of a version-2 endpoint has the version-2 shape with sample values; a version-1 one the contract's", async (t) => {
  const v1 = await receiver(t.context);
  const v2 = await receiver(t.context);
  const { serverId } = await newServer(t.context, v1.url);
  const second = await t.context.stack.clients.admin.createEndpoint({ serverId, url: v2.url, eventTypes: ["heart.counted"], payloadVersion: 2 });
  const sent = await t.context.stack.clients.delivery.sendTestCallback({ serverId, endpointId: second.endpoint!.id });
  t.true(sent.report?.ok);
  const body = JSON.parse(sent.report!.requestBody) as Record<string, unknown>;
  t.like(body, {
    event: "heart.test",
    heart_id: NIL_UUID,
    payload_version: 2,
    steam_id: TEST_CALLBACK_PLATFORM_IDS.steamId,
    discord_id: TEST_CALLBACK_PLATFORM_IDS.discordId,
    minecraft_uuid: TEST_CALLBACK_PLATFORM_IDS.minecraftUuid,
    account_id: TEST_CALLBACK_PLATFORM_IDS.accountId,
  });
  t.is(body.next_eligible_at, (body.cast_at as number) + HEART_COOLDOWN_MS / 1000);
  t.deepEqual(validateHeartEventV2(body).errors, []);
  t.is((await v2.waitForRequests(1))[0]?.text, sent.report!.requestBody, "the receiver got exactly that body");
  const plain = await t.context.stack.clients.delivery.sendTestCallback({ serverId });
  const plainBody = JSON.parse(plain.report!.requestBody) as Record<string, unknown>;
  t.deepEqual(Object.keys(plainBody), ["event", "server_id", "username", "heart_id", "period", "timestamp"]);
  t.deepEqual(validateHeartEvent(plainBody).errors, []);
});

test("payload_version: 1, 2 and 3 accepted (0 means 1); anything else -> InvalidArgument naming the versions", async (t) => {
  const admin = t.context.stack.clients.admin;
  const { serverId } = await newServer(t.context, "http://127.0.0.1:9/default");
  const url = "http://127.0.0.1:9/x";
  t.is((await admin.createEndpoint({ serverId, url, eventTypes: ["heart.counted"] })).endpoint?.payloadVersion, 1);
  const { endpoint } = await admin.createEndpoint({ serverId, url, eventTypes: ["heart.counted"], payloadVersion: 2 });
  t.is(endpoint?.payloadVersion, 2);
  for (const bad of [4, -1]) {
    const created = await rpcError(admin.createEndpoint({ serverId, url, eventTypes: ["heart.counted"], payloadVersion: bad }));
    t.deepEqual([created.code, created.rawMessage], [Code.InvalidArgument, "payload_version must be one of 1|2|3"]);
    const updated = await rpcError(admin.updateEndpoint({ serverId, endpointId: endpoint!.id, payloadVersion: bad }));
    t.deepEqual([updated.code, updated.rawMessage], [Code.InvalidArgument, "payload_version must be one of 1|2|3"]);
  }
  t.is((await admin.updateEndpoint({ serverId, endpointId: endpoint!.id, payloadVersion: 1 })).endpoint?.payloadVersion, 1);
  t.is((await admin.listEndpoints({ serverId })).endpoints.find((e) => e.id === endpoint!.id)?.payloadVersion, 1);
});

test("dashboard: the owner picks the default endpoint's payload version in the callback form; 4 is refused and changes nothing; another owner cannot", async (t) => {
  const { stack } = t.context;
  const gateway = await stack.startGateway({ dashboard: { token: undefined } });
  const r = await receiver(t.context);
  const { serverId } = await newServer(t.context, r.url);
  const ownerId = `owner-${randomBytes(3).toString("hex")}`;
  await stack.clients.access.createOwner({ ownerId, displayName: "Payload owner" });
  await stack.clients.access.assignServer({ serverId, ownerId });
  const session = await signInOwner(stack.clients.access, gateway.url, ownerId);
  const put = (s: typeof session, payloadVersion: number) =>
    ownerApi(gateway.url, s, "PUT", `/servers/${serverId}/callback`, { callback_url: r.url, standard_webhooks: false, payload_version: payloadVersion });
  const set = await put(session, 2);
  t.is(set.status, 200, set.text);
  t.is((JSON.parse(set.text) as { server: { payload_version: number } }).server.payload_version, 2);
  t.is((await stack.clients.admin.listEndpoints({ serverId })).endpoints[0]?.payloadVersion, 2);
  const refused = await put(session, 4);
  t.is(refused.status, 400);
  t.deepEqual(JSON.parse(refused.text), { error: "payload_version must be one of 1|2|3" });
  t.is((await stack.clients.admin.listEndpoints({ serverId })).endpoints[0]?.payloadVersion, 2, "a refused version changes nothing");
  const other = await signInOwner(stack.clients.access, gateway.url, `owner-${randomBytes(3).toString("hex")}`);
  t.is((await put(other, 1)).status, 404, "another owner's server answers like a missing one");
  t.is((await stack.clients.admin.listEndpoints({ serverId })).endpoints[0]?.payloadVersion, 2);
  const page = await ownerApi(gateway.url, session, "GET", `/servers/${serverId}`);
  t.is((JSON.parse(page.text) as { server: { payload_version: number } }).server.payload_version, 2, "the form shows the stored version");
});
