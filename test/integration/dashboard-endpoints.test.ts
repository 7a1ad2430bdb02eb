/**
 * The dashboard's callback endpoints (/dashboard/api/servers/:id/endpoints...) through a real gateway
 * and referral service: an owner lists, adds (secret shown once), updates, rotates, reveals and deletes
 * endpoints of their own server, switches `v1a` on the default endpoint; another owner's server or
 * endpoint is refused like a missing one, and a call without the CSRF token changes nothing.
 */
import anyTest, { type TestFn } from "ava";
import { randomUUID } from "node:crypto";
import { ENDPOINT_EVENT_TYPES } from "../../services/shared/values/event-types.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { formatCallbackSignature } from "../../services/shared/values/signature.js";
import { ownerApi, signInOwner, startDashboardGateway, type DashboardGateway, type OwnerSession } from "../helpers/owner-session.js";
import { startReceiver } from "../../scripts/harness/receiver.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";

interface Context {
  stack: TestStack;
  gateway: DashboardGateway;
  session: OwnerSession;
  own: string;
  other: string;
  otherEndpoint: string;
}
const test = anyTest as TestFn<Context>;

interface EndpointJson {
  id: string;
  is_default: boolean;
  url: string;
  event_types: string[];
  payload_version: number;
  standard_webhooks: boolean;
  public_key_signatures: boolean;
  disabled_at: string | null;
}

test.before(async (t) => {
  let gatewayUrl = "";
  const stack = await startStack({
    gateway: false,
    // Login links point at the dashboard gateway started below.
    get publicBaseUrl() {
      return gatewayUrl;
    },
  });
  const gatewayToken = (await stack.clients.access.createServiceToken({ name: "gateway", scopes: ["ingest", "pull", "clicks:record", "dashboard"] })).token;
  const gateway = await startDashboardGateway({ rpcUrl: stack.rpcUrl, token: gatewayToken, log: createLogger("test", "silent") });
  gatewayUrl = gateway.url;
  const session = await signInOwner(stack.clients.access, gateway.url, "owner-endpoints");
  const created = await ownerApi(gateway.url, session, "POST", "/servers", { name: "Mine" });
  const own = (JSON.parse(created.text) as { server: { id: string } }).server.id;
  const other = (await stack.clients.admin.createServer({ name: "Not mine", registrationUrl: "" })).server?.id ?? "";
  const otherEndpoint =
    (await stack.clients.admin.createEndpoint({ serverId: other, url: "https://other.example/hook", eventTypes: ["heart.counted"] })).endpoint?.id ?? "";
  t.context = { stack, gateway, session, own, other, otherEndpoint };
});
test.after.always(async (t) => {
  await t.context.gateway?.close();
  await t.context.stack?.close();
});

async function listEndpoints(c: Context) {
  const res = await ownerApi(c.gateway.url, c.session, "GET", `/servers/${c.own}/endpoints`);
  return JSON.parse(res.text) as { endpoints: EndpointJson[]; event_types: string[]; payload_versions: number[] };
}

test.serial("dashboard: the owner adds an endpoint (secret shown once), lists, updates, rotates, reveals and deletes it", async (t) => {
  const c = t.context;
  const before = await listEndpoints(c);
  t.deepEqual(before.event_types, [...ENDPOINT_EVENT_TYPES]);
  t.deepEqual(before.payload_versions, [1, 2, 3]);
  t.is(before.endpoints.length, 1);
  t.true(before.endpoints[0]?.is_default);

  const created = await ownerApi(c.gateway.url, c.session, "POST", `/servers/${c.own}/endpoints`, {
    url: "https://hooks.example/referrals",
    event_types: ["referral.qualified"],
    public_key_signatures: true,
  });
  t.is(created.status, 201, created.text);
  const made = JSON.parse(created.text) as { endpoint: EndpointJson; value: string; secret: { kid: string } };
  t.like(made.endpoint, {
    is_default: false,
    url: "https://hooks.example/referrals",
    event_types: ["referral.qualified"],
    payload_version: 1,
    standard_webhooks: false,
    public_key_signatures: true,
    disabled_at: null,
  });
  t.regex(made.value, /^whsec_/);

  const listed = await listEndpoints(c);
  t.deepEqual(
    listed.endpoints.map((e) => e.id),
    [before.endpoints[0]?.id, made.endpoint.id],
  );
  t.false(JSON.stringify(listed).includes(made.value), "the list never carries the secret");

  const updated = await ownerApi(c.gateway.url, c.session, "PUT", `/servers/${c.own}/endpoints/${made.endpoint.id}`, {
    event_types: ["referral.qualified", "referral.reversed"],
    standard_webhooks: true,
  });
  t.is(updated.status, 200, updated.text);
  t.like((JSON.parse(updated.text) as { endpoint: EndpointJson }).endpoint, {
    url: "https://hooks.example/referrals",
    event_types: ["referral.qualified", "referral.reversed"],
    standard_webhooks: true,
    public_key_signatures: true,
  });

  const revealed = JSON.parse((await ownerApi(c.gateway.url, c.session, "POST", `/servers/${c.own}/endpoints/${made.endpoint.id}/secret/reveal`)).text) as {
    value: string;
  };
  t.is(revealed.value, made.value);
  const rotated = await ownerApi(c.gateway.url, c.session, "POST", `/servers/${c.own}/endpoints/${made.endpoint.id}/secret/rotate`, {});
  t.is(rotated.status, 201, rotated.text);
  t.not((JSON.parse(rotated.text) as { value: string }).value, made.value);

  const health = await ownerApi(c.gateway.url, c.session, "GET", `/servers/${c.own}/endpoints/${made.endpoint.id}/health`);
  t.is(health.status, 200, health.text);
  t.is((JSON.parse(health.text) as { health: { callback_url: string } }).health.callback_url, "https://hooks.example/referrals");

  const deleted = await ownerApi(c.gateway.url, c.session, "DELETE", `/servers/${c.own}/endpoints/${made.endpoint.id}`);
  t.is(deleted.status, 200, deleted.text);
  t.deepEqual(
    (await listEndpoints(c)).endpoints.map((e) => e.id),
    [before.endpoints[0]?.id],
  );
});

test.serial("dashboard: bad endpoint input is refused with the field named; the default endpoint cannot be deleted", async (t) => {
  const c = t.context;
  const noTypes = await ownerApi(c.gateway.url, c.session, "POST", `/servers/${c.own}/endpoints`, { url: "https://hooks.example/x", event_types: [] });
  t.is(noTypes.status, 400, noTypes.text);
  t.regex(JSON.parse(noTypes.text).error, /^event_types /);
  const unknownType = await ownerApi(c.gateway.url, c.session, "POST", `/servers/${c.own}/endpoints`, {
    url: "https://hooks.example/x",
    event_types: ["vote.cast"],
  });
  t.is(unknownType.status, 400, unknownType.text);
  const notList = await ownerApi(c.gateway.url, c.session, "POST", `/servers/${c.own}/endpoints`, {
    url: "https://hooks.example/x",
    event_types: "heart.counted",
  });
  t.deepEqual({ status: notList.status, body: JSON.parse(notList.text) }, { status: 400, body: { error: "event_types must be a list of strings" } });
  const badUrl = await ownerApi(c.gateway.url, c.session, "POST", `/servers/${c.own}/endpoints`, {
    url: "ftp://hooks.example/x",
    event_types: ["heart.counted"],
  });
  t.is(badUrl.status, 400, badUrl.text);
  const defaultId = (await listEndpoints(c)).endpoints[0]?.id ?? "";
  const deleteDefault = await ownerApi(c.gateway.url, c.session, "DELETE", `/servers/${c.own}/endpoints/${defaultId}`);
  t.is(deleteDefault.status, 409, deleteDefault.text);
  t.is((await listEndpoints(c)).endpoints.length, 1);
});

test.serial("dashboard: the default endpoint's callback settings switch the public-key v1a signatures on and off", async (t) => {
  const c = t.context;
  const on = await ownerApi(c.gateway.url, c.session, "PUT", `/servers/${c.own}/callback`, {
    callback_url: "https://hooks.example/hearts",
    standard_webhooks: true,
    public_key_signatures: true,
  });
  t.is(on.status, 200, on.text);
  t.like((JSON.parse(on.text) as { server: Record<string, unknown> }).server, { public_key_signatures: true, standard_webhooks: true });
  // Absent: unchanged (the old form's body still works).
  const kept = await ownerApi(c.gateway.url, c.session, "PUT", `/servers/${c.own}/callback`, {
    callback_url: "https://hooks.example/hearts",
    standard_webhooks: true,
  });
  t.like((JSON.parse(kept.text) as { server: Record<string, unknown> }).server, { public_key_signatures: true });
  const off = await ownerApi(c.gateway.url, c.session, "PUT", `/servers/${c.own}/callback`, {
    callback_url: "https://hooks.example/hearts",
    standard_webhooks: true,
    public_key_signatures: false,
  });
  t.like((JSON.parse(off.text) as { server: Record<string, unknown> }).server, { public_key_signatures: false });
  t.like((await listEndpoints(c)).endpoints[0], { is_default: true, public_key_signatures: false, standard_webhooks: true });
});

test.serial("dashboard: the test send of an endpoint goes to that endpoint, signed with its secret; a disabled endpoint is enabled again", async (t) => {
  const c = t.context;
  const receiver = await startReceiver();
  t.teardown(() => receiver.close());
  const created = await ownerApi(c.gateway.url, c.session, "POST", `/servers/${c.own}/endpoints`, { url: receiver.url, event_types: ["heart.counted"] });
  t.is(created.status, 201, created.text);
  const { endpoint, value } = JSON.parse(created.text) as { endpoint: EndpointJson; value: string };
  const sent = await ownerApi(c.gateway.url, c.session, "POST", `/servers/${c.own}/endpoints/${endpoint.id}/test`, { username: "Tester" });
  t.is(sent.status, 200, sent.text);
  const [request] = await receiver.waitForRequests(1);
  const header = String(request?.headers["x-service-signature"]);
  const signedAt = Number(/^t=(\d+),/.exec(header)?.[1]);
  t.is(header, formatCallbackSignature([value], signedAt, request?.body ?? ""), "signed with the endpoint's own secret");
  t.like((JSON.parse(sent.text) as { exchange: Record<string, unknown> }).exchange, { url: receiver.url, status_code: 200, ok: true });

  await c.stack.prisma.callbackEndpoint.update({ where: { id: endpoint.id }, data: { disabledAt: new Date(), disabledReason: "receiver answered 410 Gone" } });
  t.like(
    (await listEndpoints(c)).endpoints.find((e) => e.id === endpoint.id),
    { disabled_reason: "receiver answered 410 Gone" },
  );
  const enabled = await ownerApi(c.gateway.url, c.session, "POST", `/servers/${c.own}/endpoints/${endpoint.id}/enable`);
  t.is(enabled.status, 200, enabled.text);
  t.like((JSON.parse(enabled.text) as { endpoint: EndpointJson }).endpoint, { id: endpoint.id, disabled_at: null });
  await ownerApi(c.gateway.url, c.session, "DELETE", `/servers/${c.own}/endpoints/${endpoint.id}`);
});

test("dashboard: another owner's server or endpoint answers like a missing one and is unchanged", async (t) => {
  const c = t.context;
  const onOtherServer = await ownerApi(c.gateway.url, c.session, "GET", `/servers/${c.other}/endpoints`);
  t.deepEqual({ status: onOtherServer.status, text: onOtherServer.text }, { status: 404, text: '{"error":"unknown server"}' });
  const addToOther = await ownerApi(c.gateway.url, c.session, "POST", `/servers/${c.other}/endpoints`, {
    url: "https://evil.example/",
    event_types: ["heart.counted"],
  });
  t.is(addToOther.status, 404, addToOther.text);
  for (const [method, suffix, body] of [
    ["PUT", "", { url: "https://evil.example/" }],
    ["DELETE", "", undefined],
    ["POST", "/secret/reveal", {}],
  ] as const) {
    const missing = await ownerApi(c.gateway.url, c.session, method, `/servers/${c.own}/endpoints/${randomUUID()}${suffix}`, body);
    const foreign = await ownerApi(c.gateway.url, c.session, method, `/servers/${c.own}/endpoints/${c.otherEndpoint}${suffix}`, body);
    t.deepEqual({ status: foreign.status, text: foreign.text }, { status: 404, text: '{"error":"unknown endpoint"}' }, `${method} ${suffix}`);
    t.deepEqual(foreign.text, missing.text);
  }
  const theirs = await c.stack.clients.admin.listEndpoints({ serverId: c.other });
  t.like(
    theirs.endpoints.find((e) => e.id === c.otherEndpoint),
    { url: "https://other.example/hook" },
  );
  t.is((await c.stack.clients.admin.listEndpoints({ serverId: c.other })).endpoints.length, 2);
});

test("dashboard: adding or deleting an endpoint without the CSRF token is refused and changes nothing", async (t) => {
  const c = t.context;
  const count = (await listEndpoints(c)).endpoints.length;
  const add = await fetch(`${c.gateway.url}/dashboard/api/servers/${c.own}/endpoints`, {
    method: "POST",
    headers: { cookie: c.session.cookie, "content-type": "application/json" },
    body: JSON.stringify({ url: "https://hooks.example/csrf", event_types: ["heart.counted"] }),
  });
  t.is(add.status, 403);
  const defaultId = (await listEndpoints(c)).endpoints[0]?.id ?? "";
  const remove = await fetch(`${c.gateway.url}/dashboard/api/servers/${c.own}/endpoints/${defaultId}`, {
    method: "DELETE",
    headers: { cookie: c.session.cookie, "x-csrf-token": c.session.csrf, origin: "https://evil.example" },
  });
  t.is(remove.status, 403);
  t.is((await listEndpoints(c)).endpoints.length, count);
});
