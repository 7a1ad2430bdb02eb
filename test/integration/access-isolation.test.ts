/**
 * Owner isolation, route by route and RPC by RPC. Owners A and B each own a server
 * with referrals, a referral secret, a callback secret, a click, a referral, a counted
 * heart and a delivery; a third server has no owner. Signed in as A:
 *
 * - every dashboard API route (enumerated from ROUTES in gateway/dashboard/api.ts, so
 *   routes added later are covered) with B's ids answers 404/403, and the same route
 *   with A's ids is not refused (so the check is not "refuse everything");
 * - every RPC of every hosted service, called for A's session (x-dashboard-session),
 *   refuses B's and the unowned server's resources with the exact answer a missing one
 *   gets, refuses RPCs not meant for owners, and narrows lists to A's servers;
 * - no answer ever carries B's secrets, ids or names.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { ROUTES } from "../../gateway/dashboard/api.js";
import { DASHBOARD_SESSION_HEADER } from "../../services/access/auth-interceptor.js";
import { RPC_ACCESS, rpcKey, type OwnedResource } from "../../services/access/rpc-access.js";
import { insertDelivery } from "../../services/delivery/pipeline/insert-deliveries.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createServiceTransport, withHeaders } from "../../services/shared/rpc/service-transport.js";
import { ReferralEventType } from "../../gen/proto/referral/v1/referral_pb.js";
import { hostedServices } from "../helpers/hosted-services.js";
import { ownerApi, signInOwner, startDashboardGateway, type DashboardGateway, type OwnerSession } from "../helpers/owner-session.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";

/** What one owner has; B's values must never reach A. */
interface OwnerData {
  ownerId: string;
  serverId: string;
  serverName: string;
  kid: string;
  referralSecret: string;
  callbackSecret: string;
  deliveryId: string;
  referralId: string;
  heartId: string;
  /** A non-default callback endpoint of the server. */
  endpointId: string;
  /** A network goal over the server. */
  goalId: string;
}

interface Context {
  stack: TestStack;
  gateway: DashboardGateway;
  /** The gateway's own token: ingest, clicks:record and dashboard, not admin. */
  gatewayToken: string;
  a: OwnerData;
  b: OwnerData;
  unowned: OwnerData;
  sessionA: OwnerSession;
}
const test = anyTest as TestFn<Context>;
let ipCounter = 0;

async function seedOwner(stack: TestStack, ownerId: string | undefined): Promise<OwnerData> {
  const { admin, referral, hearts, access } = stack.clients;
  const serverName = `server-of-${ownerId ?? "nobody"}-${randomBytes(3).toString("hex")}`;
  const { server } = await admin.createServer({ name: serverName, registrationUrl: "https://example.com/register" });
  const serverId = server!.id;
  if (ownerId) {
    await access.createOwner({ ownerId, displayName: `Owner ${ownerId}` });
    await access.assignServer({ serverId, ownerId });
  }
  await admin.setReferralsEnabled({ serverId, enabled: true });
  const created = await admin.createReferralSecret({ serverId });
  await admin.setCallbackSettings({ serverId, callbackUrl: "http://127.0.0.1:9/hook", standardWebhooks: false });
  const callbackSecret = (await admin.revealCallbackSecret({ serverId })).secret;
  const { token } = await referral.recordClick({ serverId, referrerIdentity: "referrer-1" });
  const applied = await referral.applyEvent({ serverId, event: ReferralEventType.REGISTERED, token, refereeIdentity: "player-1", serverEventId: "reg-1" });
  ipCounter += 1;
  const heart = await hearts.castHeart({
    serverId,
    username: "Steve",
    voterIdentity: `voter-${ipCounter}`,
    ip: `203.0.113.${ipCounter}`,
    userAgent: "Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0",
  });
  const heartId = heart.heartId || randomUUID();
  await insertDelivery(stack.prisma, {
    heartId,
    serverId,
    eventType: "heart.counted",
    username: "Steve",
    voterIdentity: "v",
    period: "2026-11",
    streakDay: 1,
    countedAt: new Date(),
  });
  const delivery = await stack.prisma.delivery.findFirstOrThrow({ where: { serverId } });
  const endpoint = await admin.createEndpoint({ serverId, url: "http://127.0.0.1:9/other-hook", eventTypes: ["referral.qualified"] });
  const { goalId } = await stack.clients.goals.putNetworkGoal({
    name: `goal-of-${ownerId ?? "nobody"}`,
    serverIds: [serverId],
    target: 10,
    payees: "online",
    rewardsJson: '[{"commands":["give @a cake 1"]}]',
  });
  return {
    ownerId: ownerId ?? "",
    serverId,
    serverName,
    kid: created.info!.kid,
    referralSecret: created.secret,
    callbackSecret,
    deliveryId: delivery.id,
    referralId: applied.outcome.case === "applied" ? applied.outcome.value.referralId : "",
    heartId,
    endpointId: endpoint.endpoint?.id ?? "",
    goalId,
  };
}

test.before(async (t) => {
  let gatewayUrl = "";
  const stack = await startStack({
    gateway: false,
    get publicBaseUrl() {
      return gatewayUrl;
    },
  });
  const gatewayToken = (await stack.clients.access.createServiceToken({ name: "gateway", scopes: ["ingest", "pull", "clicks:record", "dashboard"] })).token;
  const gateway = await startDashboardGateway({ rpcUrl: stack.rpcUrl, token: gatewayToken, log: createLogger("test", "silent") });
  gatewayUrl = gateway.url;
  const a = await seedOwner(stack, "owner-a");
  const b = await seedOwner(stack, "owner-b");
  const unowned = await seedOwner(stack, undefined);
  const sessionA = await signInOwner(stack.clients.access, gateway.url, "owner-a");
  t.context = { stack, gateway, gatewayToken, a, b, unowned, sessionA };
});
test.after.always(async (t) => {
  await t.context.gateway?.close();
  await t.context.stack?.close();
});

/** Every value of B (and of the unowned server) that must never appear in an answer to A. */
function forbiddenValues(c: Context): string[] {
  return [c.b, c.unowned].flatMap((d) => [d.serverId, d.serverName, d.referralSecret, d.callbackSecret, d.deliveryId, d.referralId, d.endpointId, d.goalId]);
}

/** Fills a route's path parameters from one owner's data. */
function fillPath(path: string, d: OwnerData): string {
  return path.replace(/:([A-Za-z]+)/g, (_, name: string) => {
    const value = { serverId: d.serverId, deliveryId: d.deliveryId, kid: d.kid, referralId: d.referralId, endpointId: d.endpointId, goalId: d.goalId }[name];
    if (value === undefined) throw new Error(`no isolation fixture for :${name}; add one to fillPath`);
    return encodeURIComponent(value);
  });
}

test("every dashboard API route: owner A gets 404/403 for owner B's and the unowned server's resources, and never sees their ids, names or secrets", async (t) => {
  const c = t.context;
  t.true(ROUTES.length >= 20, "the route table is enumerated");
  const forbidden = forbiddenValues(c);
  for (const route of ROUTES) {
    const name = `${route.method} ${route.path}`;
    if (route.names.length === 0) {
      // No resource in the path: the answer is A's own view (lists, ranking, session, create).
      const res = await ownerApi(c.gateway.url, c.sessionA, route.method, route.path, route.method === "GET" ? undefined : { name: "A's new server" });
      t.true(res.status < 500, `${name}: ${res.status} ${res.text}`);
      for (const value of forbidden) t.false(res.text.includes(value), `${name} leaked ${value}`);
      continue;
    }
    for (const other of [c.b, c.unowned]) {
      const res = await ownerApi(c.gateway.url, c.sessionA, route.method, fillPath(route.path, other), route.method === "GET" ? undefined : {});
      t.true(res.status === 404 || res.status === 403, `${name} on ${other === c.b ? "B's" : "the unowned"} resource: ${res.status} ${res.text}`);
      t.regex(JSON.parse(res.text).error as string, /^unknown (server|delivery|goal)$/, name);
      for (const value of forbidden) t.false(res.text.includes(value), `${name} leaked ${value}`);
    }
    if (route.names.includes("endpointId")) {
      // A's own server with B's endpoint: the same answer as an endpoint that does not exist.
      const body = route.method === "GET" ? undefined : {};
      const missing = await ownerApi(c.gateway.url, c.sessionA, route.method, fillPath(route.path, { ...c.a, endpointId: randomUUID() }), body);
      const foreign = await ownerApi(c.gateway.url, c.sessionA, route.method, fillPath(route.path, { ...c.a, endpointId: c.b.endpointId }), body);
      t.deepEqual({ status: foreign.status, text: foreign.text }, { status: 404, text: '{"error":"unknown endpoint"}' }, `${name} with B's endpoint`);
      t.deepEqual(
        { status: missing.status, text: missing.text },
        { status: foreign.status, text: foreign.text },
        `${name}: B's endpoint answers like a missing one`,
      );
    }
  }
});

test("every dashboard API route with owner A's own ids is not refused (the check scopes, it does not block)", async (t) => {
  const c = t.context;
  for (const route of ROUTES.filter((r) => r.names.length > 0)) {
    const res = await ownerApi(c.gateway.url, c.sessionA, route.method, fillPath(route.path, c.a), route.method === "GET" ? undefined : {});
    t.false(res.status === 401 || res.status === 403, `${route.method} ${route.path}: ${res.status} ${res.text}`);
    t.false(/^\{"error":"unknown (server|delivery|goal)"\}$/.test(res.text), `${route.method} ${route.path}: ${res.text}`);
  }
});

test("owner A's lists hold only A's servers: GET /servers, the hearts ranking; a server A creates is A's", async (t) => {
  const c = t.context;
  const servers = JSON.parse((await ownerApi(c.gateway.url, c.sessionA, "GET", "/servers")).text) as { servers: { id: string }[] };
  t.true(servers.servers.length >= 1);
  // Read after the list: other tests of this file create servers for A concurrently, so the list is checked to hold A's
  // servers only (each one A's, A's own seeded server among them), not to equal a count taken at another moment.
  const mine = (await c.stack.clients.access.listOwnerServers({ ownerId: "owner-a" })).servers.map((s) => s.id);
  for (const id of servers.servers.map((s) => s.id)) t.true(mine.includes(id), id);
  t.true(servers.servers.some((s) => s.id === c.a.serverId));
  const ranking = JSON.parse((await ownerApi(c.gateway.url, c.sessionA, "GET", "/hearts/ranking")).text) as { entries: { server_id: string }[] };
  t.true(ranking.entries.length >= 1);
  for (const e of ranking.entries) t.true(mine.includes(e.server_id), e.server_id);
  const created = JSON.parse((await ownerApi(c.gateway.url, c.sessionA, "POST", "/servers", { name: "made by A" })).text) as { server: { id: string } };
  t.is((await c.stack.clients.admin.getServer({ serverId: created.server.id })).server?.ownerId, "owner-a");
});

/** A request for `method` naming `d`'s resource in the rule's field. */
function inputFor(field: string, resource: OwnedResource, d: OwnerData): Record<string, unknown> {
  const id = { server: d.serverId, delivery: d.deliveryId, referral: d.referralId }[resource];
  return { [field]: id, kid: d.kid, event: "registered", username: "Steve" };
}

const NOT_FOUND_TEXT: Record<OwnedResource, string> = { server: "unknown server", delivery: "unknown delivery", referral: "referral not found" };

test("every RPC for owner A's session: B's and unowned resources answer exactly like missing ones, RPCs not meant for owners are refused, A's own get through", async (t) => {
  const c = t.context;
  const transport = withHeaders(createServiceTransport(c.stack.rpcUrl, c.gatewayToken), { [DASHBOARD_SESSION_HEADER]: c.sessionA.sessionToken });
  const forbidden = forbiddenValues(c);
  let owned = 0;
  for (const service of hostedServices()) {
    const client = createClient(service, transport) as unknown as Record<string, (input: object) => Promise<unknown>>;
    const call = async (localName: string, input: object) => {
      try {
        return { code: "ok" as const, text: JSON.stringify(await client[localName]!(input), (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)) };
      } catch (error) {
        const e = ConnectError.from(error);
        return { code: e.code, text: e.rawMessage };
      }
    };
    for (const method of service.methods) {
      const rule = RPC_ACCESS[rpcKey(service.typeName, method.name)]!;
      const name = `${service.typeName}/${method.name}`;
      if (rule.owner.kind === "none") {
        t.deepEqual(
          await call(method.localName, {}),
          { code: Code.PermissionDenied, text: `${service.typeName}.${method.name} is not available to dashboard sessions` },
          name,
        );
        continue;
      }
      if (rule.owner.kind === "own") {
        const res = await call(method.localName, { name: "own-list check" });
        for (const value of forbidden) t.false(res.text.includes(value), `${name} leaked ${value}`);
        continue;
      }
      owned += 1;
      const { field, resource } = rule.owner;
      const missing = await call(
        method.localName,
        inputFor(field, resource, { ...c.b, serverId: randomUUID(), deliveryId: randomUUID(), referralId: randomUUID() }),
      );
      t.deepEqual(missing, { code: Code.NotFound, text: NOT_FOUND_TEXT[resource] }, `${name}: a missing ${resource}`);
      for (const other of [c.b, c.unowned]) {
        t.deepEqual(await call(method.localName, inputFor(field, resource, other)), missing, `${name}: another owner's ${resource} answers like a missing one`);
      }
      const own = await call(method.localName, inputFor(field, resource, c.a));
      t.false(
        own.code === Code.PermissionDenied || own.code === Code.Unauthenticated || own.text === NOT_FOUND_TEXT[resource],
        `${name} on A's own: ${own.text}`,
      );
    }
  }
  t.true(owned >= 20, "the owner-scoped RPCs were all exercised");
});

test("B's secrets are never revealed to A: reveal routes and RPCs answer 404, and B's secrets still are B's", async (t) => {
  const c = t.context;
  for (const path of [`/servers/${c.b.serverId}/referral-secrets/${c.b.kid}/reveal`, `/servers/${c.b.serverId}/callback-secret/reveal`]) {
    const res = await ownerApi(c.gateway.url, c.sessionA, "POST", path, {});
    t.is(res.status, 404);
    t.false(res.text.includes(c.b.referralSecret) || res.text.includes(c.b.callbackSecret));
  }
  // B's session reveals them (the same routes work for their owner).
  const sessionB = await signInOwner(c.stack.clients.access, c.gateway.url, "owner-b");
  const revealed = await ownerApi(c.gateway.url, sessionB, "POST", `/servers/${c.b.serverId}/referral-secrets/${c.b.kid}/reveal`, {});
  t.is(revealed.status, 200);
  t.is((JSON.parse(revealed.text) as { value: string }).value, c.b.referralSecret);
});

test("a session acting without the gateway's dashboard scope, or after revocation, is refused", async (t) => {
  const c = t.context;
  const readOnly = (await c.stack.clients.access.createServiceToken({ name: "read-only", scopes: ["read"] })).token;
  // Owner C: revoking C's sessions leaves A's (used by the other tests) alone.
  const session = await signInOwner(c.stack.clients.access, c.gateway.url, "owner-c");
  const second = await signInOwner(c.stack.clients.access, c.gateway.url, "owner-c");
  const asReader = createClient(
    hostedServices().find((s) => s.name === "ServerAdminService")!,
    withHeaders(createServiceTransport(c.stack.rpcUrl, readOnly), { [DASHBOARD_SESSION_HEADER]: session.sessionToken }),
  ) as unknown as {
    listServers(i: object): Promise<unknown>;
  };
  const err = await asReader.listServers({}).catch((e: unknown) => ConnectError.from(e));
  t.is((err as ConnectError).code, Code.PermissionDenied);
  t.is(await ownerApi(c.gateway.url, session, "GET", "/servers").then((r) => r.status), 200);

  const listed = await c.stack.clients.access.listDashboardSessions({ ownerId: "owner-c" });
  t.is(listed.sessions.length, 2);
  const one = await c.stack.clients.access.revokeDashboardSessions({ ownerId: "owner-c", sessionId: listed.sessions[0]!.id });
  t.is(one.revoked, 1, "one session by id");
  const { revoked } = await c.stack.clients.access.revokeDashboardSessions({ ownerId: "owner-c", sessionId: "" });
  t.is(revoked, 1, "then every other live session of C");
  t.is((await ownerApi(c.gateway.url, second, "GET", "/servers")).status, 401);
  const after = await ownerApi(c.gateway.url, session, "GET", "/servers");
  t.is(after.status, 401);
  t.deepEqual(JSON.parse(after.text), { error: "the dashboard session expired or was revoked (open a new login link)" });
  t.regex(after.headers.get("set-cookie") ?? "", /^dashboard_session=; Path=\/dashboard; Max-Age=0; HttpOnly; SameSite=Strict$/, "the cookie is cleared");
});

test.serial("a login link works once and only before it expires; a session ends after 12 hours; signing out ends it at once", async (t) => {
  const c = t.context;
  const { access } = c.stack.clients;
  await access.createOwner({ ownerId: "owner-d", displayName: "D" });
  const { url, expiresAt } = await access.createDashboardLoginLink({ ownerId: "owner-d" });
  t.is(Number(expiresAt!.seconds) * 1000 - Date.now() <= 300_000, true, "5 minutes by default");
  t.regex(url, new RegExp(`^${c.gateway.url}/dashboard/login\\?token=dl_[A-Za-z0-9_-]{43}$`));
  const link = new URL(url);
  const first = await fetch(url, { redirect: "manual" });
  t.is(first.status, 303);
  t.is(first.headers.get("location"), "/dashboard");
  t.regex(first.headers.get("set-cookie") ?? "", /^dashboard_session=ds_[A-Za-z0-9_-]{43}; Path=\/dashboard; Max-Age=43\d{3}; HttpOnly; SameSite=Strict$/);
  const again = await fetch(url, { redirect: "manual" });
  t.is(again.status, 404, "one-time");
  t.true((await again.text()).includes("this login link is invalid or expired or already used (ask for a new one)"));
  t.is((await fetch(`${c.gateway.url}${link.pathname}?token=dl_forged`, { redirect: "manual" })).status, 404);
  t.is((await fetch(`${c.gateway.url}${link.pathname}`, { redirect: "manual" })).status, 400, "no token");
  t.is((await fetch(url, { method: "HEAD", redirect: "manual" })).status, 405, "only GET redeems");

  const late = await access.createDashboardLoginLink({ ownerId: "owner-d", ttlSeconds: 60n });
  const session = await signInOwner(access, c.gateway.url, "owner-d");
  const realNow = c.stack.clock.now;
  try {
    c.stack.clock.now = () => new Date(Date.now() + 61_000);
    t.is((await fetch(late.url, { redirect: "manual" })).status, 404, "expired link");
    t.is((await ownerApi(c.gateway.url, session, "GET", "/servers")).status, 200, "the session still lives");
    c.stack.clock.now = () => new Date(Date.now() + 12 * 3600_000 + 1_000);
    t.is((await ownerApi(c.gateway.url, session, "GET", "/servers")).status, 401, "sessions expire after 12 h");
  } finally {
    c.stack.clock.now = realNow;
  }
  const live = await signInOwner(access, c.gateway.url, "owner-d");
  const out = await ownerApi(c.gateway.url, live, "POST", "/session/logout", {});
  t.is(out.status, 200);
  t.regex(out.headers.get("set-cookie") ?? "", /Max-Age=0/);
  t.is((await ownerApi(c.gateway.url, live, "GET", "/servers")).status, 401, "signed out: the session is gone on the server");
});

test("CSRF: a state-changing call with the session cookie needs X-CSRF-Token, a same-origin Origin and Sec-Fetch-Site", async (t) => {
  const c = t.context;
  const path = `${c.gateway.url}/dashboard/api/servers/${c.a.serverId}/referrals`;
  const send = (headers: Record<string, string>) =>
    fetch(path, {
      method: "PUT",
      headers: { cookie: c.sessionA.cookie, "content-type": "application/json", ...headers },
      body: JSON.stringify({ enabled: true }),
    });
  const host = new URL(c.gateway.url).host;
  for (const [why, headers, error] of [
    ["no CSRF token", {}, "missing or invalid CSRF token: send X-CSRF-Token from GET /dashboard/api/session"],
    ["a wrong CSRF token", { "x-csrf-token": "x".repeat(43) }, "missing or invalid CSRF token: send X-CSRF-Token from GET /dashboard/api/session"],
    ["another site's Origin", { "x-csrf-token": c.sessionA.csrf, origin: "https://evil.example" }, "cross-origin request refused"],
    ["Origin null", { "x-csrf-token": c.sessionA.csrf, origin: "null" }, "cross-origin request refused"],
    ["Sec-Fetch-Site cross-site", { "x-csrf-token": c.sessionA.csrf, "sec-fetch-site": "cross-site" }, "cross-site request refused"],
    ["Sec-Fetch-Site same-site", { "x-csrf-token": c.sessionA.csrf, "sec-fetch-site": "same-site" }, "cross-site request refused"],
  ] as const) {
    const res = await send(headers);
    t.is(res.status, 403, why);
    t.deepEqual(await res.json(), { error: error }, why);
  }
  const ok = await send({ "x-csrf-token": c.sessionA.csrf, origin: `http://${host}`, "sec-fetch-site": "same-origin" });
  t.is(ok.status, 200);
  // GET needs no CSRF token (it changes nothing).
  t.is((await fetch(`${c.gateway.url}/dashboard/api/servers`, { headers: { cookie: c.sessionA.cookie } })).status, 200);
});

test("without a session cookie or operator token the API is 401; without DASHBOARD_TOKEN no bearer token is accepted", async (t) => {
  const c = t.context;
  // Every route of the table, unauthenticated, with the ids of a real server: 401, nothing leaks.
  for (const route of ROUTES) {
    const res = await fetch(`${c.gateway.url}/dashboard/api${fillPath(route.path, c.a)}`, {
      method: route.method,
      headers: { "content-type": "application/json" },
      body: route.method === "GET" ? undefined : "{}",
    });
    t.is(res.status, 401, `${route.method} ${route.path}`);
    t.deepEqual(await res.json(), { error: "missing or invalid dashboard token" });
  }
  const cases: Record<string, string>[] = [{}, { cookie: "dashboard_session=ds_forged" }, { authorization: "Bearer anything-at-all-here" }];
  for (const headers of cases) {
    const res = await fetch(`${c.gateway.url}/dashboard/api/servers`, { headers });
    t.is(res.status, 401, JSON.stringify(headers));
  }
});

test("a gateway whose own service token is refused answers 503 (an operator must fix the token; logged), never 'session expired' and never data", async (t) => {
  const c = t.context;
  const operatorToken = `op-${randomBytes(16).toString("hex")}`;
  const broken = await startDashboardGateway({ rpcUrl: c.stack.rpcUrl, token: `rst_${"z".repeat(43)}`, operatorToken, log: createLogger("test", "silent") });
  try {
    for (const headers of [{ authorization: `Bearer ${operatorToken}` }, { cookie: c.sessionA.cookie }] as Record<string, string>[]) {
      const res = await fetch(`${broken.url}/dashboard/api/servers`, { headers });
      t.is(res.status, 503);
      const body = (await res.json()) as Record<string, unknown>;
      t.deepEqual(Object.keys(body), ["error"], "an error text, no data");
      t.notRegex(String(body.error), /session|expired|token|scope/i, "nothing for the owner to act on, nothing about the token");
    }
  } finally {
    await broken.close();
  }
});

test("with an https public URL (secureCookies) the session cookie is also Secure", async (t) => {
  const c = t.context;
  const secure = await startDashboardGateway({ rpcUrl: c.stack.rpcUrl, token: c.gatewayToken, secureCookies: true, log: createLogger("test", "silent") });
  try {
    const { url } = await c.stack.clients.access.createDashboardLoginLink({ ownerId: "owner-a" });
    const link = new URL(url);
    const res = await fetch(`${secure.url}${link.pathname}${link.search}`, { redirect: "manual" });
    t.is(res.status, 303);
    t.regex(res.headers.get("set-cookie") ?? "", /; HttpOnly; SameSite=Strict; Secure$/);
  } finally {
    await secure.close();
  }
});
