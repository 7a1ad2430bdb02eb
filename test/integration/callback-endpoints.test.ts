/**
 * Callback endpoints (services/servers/endpoint-store.ts): the endpoint RPCs, per-endpoint secrets,
 * deliveries, health and disable, and who may call them. Real PostgreSQL, a real dispatcher and
 * real HTTP receivers; signatures checked with node:crypto.
 */
import test, { type ExecutionContext } from "ava";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";
import { DASHBOARD_SESSION_HEADER } from "../../services/access/auth-interceptor.js";
import { insertDeliveries } from "../../services/delivery/pipeline/insert-deliveries.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createServiceTransport, withHeaders } from "../../services/shared/rpc/service-transport.js";
import { eventually } from "../helpers/eventually.js";
import { signInOwner, startDashboardGateway } from "../helpers/owner-session.js";
import { headerOf, type RecordedRequest } from "../../scripts/harness/receiver.js";
import { startStack } from "../../scripts/harness/stack.js";
import { rpcError } from "../../scripts/harness/referral-harness.js";
import { addDelivery, expectedCallbackMac, hexEquals, parseCallbackSignature, startDispatchWorld } from "../../scripts/harness/delivery-harness.js";
import { ENDPOINT_EVENT_TYPES } from "../../services/shared/values/event-types.js";

function macOk(request: RecordedRequest, secret: string): boolean {
  const parsed = parseCallbackSignature(headerOf(request, "x-service-signature"));
  return parsed !== null && parsed.v1.length === 1 && hexEquals(parsed.v1[0] ?? "", expectedCallbackMac(secret, parsed.t, request.body));
}

async function serverWithDefault(t: ExecutionContext, url: string) {
  const w = await startDispatchWorld(t);
  const { server } = await w.h.admin.createServer({ name: "Endpoints", registrationUrl: "" });
  const serverId = server!.id;
  await w.h.admin.setCallbackSettings({ serverId, callbackUrl: url });
  const defaultSecret = (await w.h.admin.revealCallbackSecret({ serverId })).secret;
  return { ...w, serverId, defaultSecret };
}

test("CreateEndpoint returns its secret once; ListEndpoints lists the default endpoint first; the callback RPCs act on the default one unless given an endpoint_id", async (t) => {
  const { h, serverId, defaultSecret } = await serverWithDefault(t, "http://127.0.0.1:9/default");
  const created = await h.admin.createEndpoint({
    serverId,
    url: "http://127.0.0.1:9/second",
    eventTypes: ["referral.qualified", "heart.counted", "referral.qualified"],
  });
  t.regex(created.secret, /^whsec_/);
  t.like(created.endpoint, { isDefault: false, url: "http://127.0.0.1:9/second", payloadVersion: 1, eventTypes: ["heart.counted", "referral.qualified"] });
  const endpointId = created.endpoint!.id;
  const listed = (await h.admin.listEndpoints({ serverId })).endpoints;
  t.deepEqual(
    listed.map((e) => [e.isDefault, e.url, e.eventTypes]),
    [
      [true, "http://127.0.0.1:9/default", ["heart.counted"]],
      [false, "http://127.0.0.1:9/second", ["heart.counted", "referral.qualified"]],
    ],
  );
  t.false(JSON.stringify(listed, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)).includes(created.secret), "a list never carries a secret");
  // Each endpoint has its own secret: reveal by endpoint, the default one without an id.
  t.is((await h.admin.revealCallbackSecret({ serverId, endpointId })).secret, created.secret);
  t.is((await h.admin.revealCallbackSecret({ serverId })).secret, defaultSecret);
  const rotated = await h.admin.rotateCallbackSecret({ serverId, endpointId });
  t.is((await h.admin.revealCallbackSecret({ serverId, endpointId })).secret, rotated.secret);
  t.is((await h.admin.revealCallbackSecret({ serverId })).secret, defaultSecret, "rotating one endpoint's secret leaves the default's alone");
  // SetCallbackSettings with an endpoint_id changes that endpoint, the Server message keeps the default's settings.
  const set = await h.admin.setCallbackSettings({ serverId, endpointId, callbackUrl: "http://127.0.0.1:9/moved", standardWebhooks: true });
  t.like(set.server, { callbackUrl: "http://127.0.0.1:9/default", standardWebhooks: false });
  t.like((await h.admin.listEndpoints({ serverId })).endpoints[1], { url: "http://127.0.0.1:9/moved", standardWebhooks: true });
});

test("endpoint input: payload_version other than 1, 2 or 3, an unknown or missing event type, a missing URL -> InvalidArgument; the default endpoint cannot be deleted; a deleted endpoint is unknown", async (t) => {
  const { h, serverId } = await serverWithDefault(t, "http://127.0.0.1:9/default");
  const url = "http://127.0.0.1:9/x";
  t.deepEqual(await rpcError(h.admin.createEndpoint({ serverId, url, eventTypes: ["heart.counted"], payloadVersion: 4 })).then((e) => [e.code, e.rawMessage]), [
    Code.InvalidArgument,
    "payload_version must be one of 1|2|3",
  ]);
  t.deepEqual(await rpcError(h.admin.createEndpoint({ serverId, url, eventTypes: ["heart.cast"] })).then((e) => [e.code, e.rawMessage]), [
    Code.InvalidArgument,
    `event_types must be one of ${ENDPOINT_EVENT_TYPES.join("|")}`,
  ]);
  t.is((await rpcError(h.admin.createEndpoint({ serverId, url, eventTypes: [] }))).code, Code.InvalidArgument);
  t.is((await rpcError(h.admin.createEndpoint({ serverId, url: "", eventTypes: ["heart.counted"] }))).code, Code.InvalidArgument);
  const { endpoint } = await h.admin.createEndpoint({ serverId, url, eventTypes: ["heart.counted"] });
  t.is((await rpcError(h.admin.updateEndpoint({ serverId, endpointId: endpoint!.id, payloadVersion: 4 }))).code, Code.InvalidArgument);
  const defaultId = (await h.admin.listEndpoints({ serverId })).endpoints[0]!.id;
  t.is((await rpcError(h.admin.deleteEndpoint({ serverId, endpointId: defaultId }))).code, Code.FailedPrecondition);
  await h.admin.deleteEndpoint({ serverId, endpointId: endpoint!.id });
  t.is((await h.admin.listEndpoints({ serverId })).endpoints.length, 1);
  t.deepEqual(await rpcError(h.admin.revealCallbackSecret({ serverId, endpointId: endpoint!.id })).then((e) => [e.code, e.rawMessage]), [
    Code.NotFound,
    "unknown endpoint",
  ]);
});

test("a counted heart goes to every endpoint subscribed to heart.counted, each signed with its own secret; an endpoint without it gets nothing; a redelivered message adds nothing", async (t) => {
  const w = await startDispatchWorld(t);
  const { h } = w;
  const a = await w.receiver();
  const b = await w.receiver();
  const c = await w.receiver();
  const { server } = await h.admin.createServer({ name: "Fan-out", registrationUrl: "" });
  const serverId = server!.id;
  await h.admin.setCallbackSettings({ serverId, callbackUrl: a.url });
  const aSecret = (await h.admin.revealCallbackSecret({ serverId })).secret;
  const second = await h.admin.createEndpoint({ serverId, url: b.url, eventTypes: ["heart.counted"] });
  await h.admin.createEndpoint({ serverId, url: c.url, eventTypes: ["referral.qualified"] });
  const heartId = await addDelivery(h, serverId, { username: "Alex" });
  const again = await insertDeliveries(h.db.prisma, [
    { heartId, serverId, eventType: "heart.counted", username: "Alex", voterIdentity: "v", period: "2026-03", streakDay: null, countedAt: new Date() },
  ]);
  t.deepEqual(again, ["duplicate"]);
  t.is(await h.db.prisma.delivery.count({ where: { heartId } }), 2, "one delivery per subscribed endpoint, not per message");
  w.dispatcher().start();
  const [toA] = await a.waitForRequests(1);
  const [toB] = await b.waitForRequests(1);
  t.true(macOk(toA!, aSecret), "the default endpoint's secret signs its callback");
  t.true(macOk(toB!, second.secret), "the second endpoint's own secret signs its callback");
  t.false(macOk(toB!, aSecret));
  t.is(JSON.parse(toA!.text).heart_id, heartId);
  t.is(toA!.text.replace(/"timestamp":\d+/, ""), toB!.text.replace(/"timestamp":\d+/, ""), "the same contract body to both");
  await eventually(async () => (await h.db.prisma.delivery.count({ where: { heartId, status: "delivered" } })) === 2);
  t.is(c.requests.length, 0, "an endpoint not subscribed to heart.counted receives no heart");
  const listed = await h.delivery.listDeliveries({ serverId });
  t.deepEqual(listed.deliveries.map((d) => d.endpointUrl).sort(), [a.url, b.url].sort(), "each delivery shows its endpoint");
});

test("a 410 from one endpoint disables that endpoint only; its health is its own; EnableCallback with its id turns it back on", async (t) => {
  const w = await startDispatchWorld(t);
  const { h } = w;
  const ok = await w.receiver();
  const gone = await w.receiver({ responses: [{ status: 410 }] });
  const { server } = await h.admin.createServer({ name: "Gone", registrationUrl: "" });
  const serverId = server!.id;
  await h.admin.setCallbackSettings({ serverId, callbackUrl: ok.url });
  const { endpoint } = await h.admin.createEndpoint({ serverId, url: gone.url, eventTypes: ["heart.counted"] });
  const endpointId = endpoint!.id;
  w.dispatcher().start();
  await addDelivery(h, serverId);
  const disabled = await eventually(async () => {
    const e = (await h.admin.listEndpoints({ serverId })).endpoints.find((x) => x.id === endpointId);
    return e?.disabledReason ? e : undefined;
  });
  t.regex(disabled.disabledReason, /410 Gone/);
  t.like((await h.admin.getServer({ serverId })).server, { callbackDisabledReason: "" }, "the default endpoint stays enabled");
  await ok.waitForRequests(1);
  const healthOfOther = await h.delivery.getEndpointHealth({ serverId, endpointId });
  t.is(healthOfOther.callbackUrl, gone.url);
  t.regex(healthOfOther.disabledReason, /410 Gone/);
  const healthOfDefault = await eventually(async () => {
    const r = await h.delivery.getEndpointHealth({ serverId });
    return r.last24h?.succeeded === 1 ? r : undefined;
  });
  t.is(healthOfDefault.callbackUrl, ok.url);
  t.is(healthOfDefault.disabledReason, "");
  const enabled = await h.admin.enableCallback({ serverId, endpointId });
  t.is(enabled.endpoint?.disabledReason, "");
  await gone.waitForRequests(2);
  t.pass();
});

test("who may manage endpoints: another owner's server answers like a missing one; another server's endpoint id through one's own server is unknown; a token without the admin scope is refused", async (t) => {
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
  const theirEndpoint = (await admin.createEndpoint({ serverId: theirs, url: "https://hooks.example/b", eventTypes: ["heart.counted"] })).endpoint!.id;
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
  const create = { url: "https://hooks.example/a", eventTypes: ["heart.counted"] };
  t.is(await codeOf(asA.createEndpoint({ serverId: theirs, ...create })), "NotFound: unknown server");
  t.is(await codeOf(asA.listEndpoints({ serverId: theirs })), "NotFound: unknown server");
  t.is(await codeOf(asA.updateEndpoint({ serverId: theirs, endpointId: theirEndpoint, url: "https://evil.example/" })), "NotFound: unknown server");
  t.is(await codeOf(asA.deleteEndpoint({ serverId: theirs, endpointId: theirEndpoint })), "NotFound: unknown server");
  t.is(await codeOf(asA.updateEndpoint({ serverId: mine, endpointId: theirEndpoint, url: "https://evil.example/" })), "NotFound: unknown endpoint");
  t.is(await codeOf(asA.deleteEndpoint({ serverId: mine, endpointId: theirEndpoint })), "NotFound: unknown endpoint");
  t.is(await codeOf(asA.revealCallbackSecret({ serverId: mine, endpointId: theirEndpoint })), "NotFound: unknown endpoint");
  t.is(await codeOf(asA.createEndpoint({ serverId: mine, ...create })), "ok", "the owner manages its own server's endpoints");
  t.is((await admin.listEndpoints({ serverId: theirs })).endpoints[1]?.url, "https://hooks.example/b", "B's endpoint is untouched");
  const readOnly = (await access.createServiceToken({ name: "reader", scopes: ["read"] })).token;
  const reader = createClient(ServerAdminService, createServiceTransport(stack.rpcUrl, readOnly));
  t.regex(await codeOf(reader.createEndpoint({ serverId: mine, ...create })), /^PermissionDenied/);
  t.regex(await codeOf(reader.deleteEndpoint({ serverId: mine, endpointId: theirEndpoint })), /^PermissionDenied/);
  t.is(await codeOf(reader.listEndpoints({ serverId: mine })), "ok");
});
