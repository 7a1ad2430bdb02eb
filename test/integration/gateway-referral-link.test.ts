/**
 * GET /r/<server_id>?referrer=<identity> against the real stack: the click is recorded
 * by ReferralService.RecordClick and the visitor is sent to the registration URL with
 * the token appended; that token then works for a signed `registered` event.
 */
import test from "ava";
import { startGatewayStack, type GatewayStack } from "./gateway-stack.js";

let stack: GatewayStack;
test.before(async () => {
  stack = await startGatewayStack();
});
test.after.always(async () => {
  await stack?.close();
});

const follow = (path: string, init: RequestInit = {}) => fetch(`${stack.baseUrl}${path}`, { redirect: "manual", ...init });

test("referral link -> 302 to the registration URL with ref_token appended, and the click is recorded for the referrer", async (t) => {
  const server = await stack.createServer({ registrationUrl: "https://play.example.org/register?lang=en" });
  const res = await follow(`/r/${server.serverId}?referrer=${encodeURIComponent("Alex Referrer")}`, { headers: { "user-agent": "link-test/1.0" } });
  t.is(res.status, 302);
  t.is(res.headers.get("cache-control"), "no-store");
  const location = new URL(res.headers.get("location") ?? "");
  t.is(`${location.origin}${location.pathname}`, "https://play.example.org/register");
  t.is(location.searchParams.get("lang"), "en");
  const token = location.searchParams.get("ref_token") ?? "";
  t.regex(token, /^[A-Za-z0-9_-]{22,}$/);
  const click = await stack.db.prisma.referralClick.findUnique({ where: { token } });
  t.like(click, { serverId: server.serverId, referrerIdentity: "Alex Referrer", userAgent: "link-test/1.0" });
  t.truthy(click?.ip);
});

test("the token from the link works for a signed registered event (click -> registration page -> backend POST)", async (t) => {
  const server = await stack.createServer({ registrationUrl: "https://play.example.org/register" });
  const res = await follow(`/r/${server.serverId}?referrer=alex`);
  const token = new URL(res.headers.get("location") ?? "").searchParams.get("ref_token");
  const event = { event: "registered", token, server_id: server.serverId, referee_identity: "acct-1", server_event_id: "reg-acct-1" };
  const posted = await stack.postSigned(server, event);
  t.is(posted.status, 200, posted.text);
  t.like(JSON.parse(posted.text), { ok: true, state: "registered" });
});

test("no registration URL -> 200 {token}", async (t) => {
  const server = await stack.createServer();
  const res = await follow(`/r/${server.serverId}?referrer=alex`);
  t.is(res.status, 200);
  t.is(res.headers.get("content-type"), "application/json");
  const text = await res.text();
  const { token } = JSON.parse(text) as { token: string };
  t.is(text, JSON.stringify({ token }));
  t.truthy(await stack.db.prisma.referralClick.findUnique({ where: { token } }));
});

test("each visit records a new click with a new token", async (t) => {
  const server = await stack.createServer();
  const a = ((await (await follow(`/r/${server.serverId}?referrer=alex`)).json()) as { token: string }).token;
  const b = ((await (await follow(`/r/${server.serverId}?referrer=alex`)).json()) as { token: string }).token;
  t.not(a, b);
});

test("unknown server -> 404 `unknown server`", async (t) => {
  const res = await follow("/r/5b0f8c4e-2d1a-4e3b-9c7d-6a5f4e3d2c1b?referrer=alex");
  t.is(res.status, 404);
  t.is(await res.text(), JSON.stringify({ error: "unknown server" }));
});

test("a server id that is not a uuid -> 404 `unknown server`", async (t) => {
  for (const id of ["my-server", "%E0%A4%A", "x".repeat(300)]) {
    const res = await follow(`/r/${id}?referrer=alex`);
    t.is(res.status, 404, id);
    t.is(await res.text(), JSON.stringify({ error: "unknown server" }));
  }
});

test("referrals disabled -> 404 `referrals not enabled for this server`", async (t) => {
  const server = await stack.createServer({ referrals: false });
  const res = await follow(`/r/${server.serverId}?referrer=alex`);
  t.is(res.status, 404);
  t.is(await res.text(), JSON.stringify({ error: "referrals not enabled for this server" }));
});

test("missing or blank referrer -> 400 `referrer is required`, and no click is recorded", async (t) => {
  const server = await stack.createServer();
  for (const query of ["", "?referrer=", "?referrer=%20%20", "?other=1"]) {
    const res = await follow(`/r/${server.serverId}${query}`);
    t.is(res.status, 400, query);
    t.is(await res.text(), JSON.stringify({ error: "referrer is required" }));
  }
  t.is(await stack.db.prisma.referralClick.count({ where: { serverId: server.serverId } }), 0);
});

test("only GET is allowed on the referral link: others -> 405 with Allow: GET", async (t) => {
  const server = await stack.createServer();
  for (const method of ["POST", "HEAD", "DELETE"]) {
    const res = await follow(`/r/${server.serverId}?referrer=alex`, { method });
    t.is(res.status, 405, method);
    t.is(res.headers.get("allow"), "GET");
  }
});

test("a path below the link (/r/<id>/more) or an empty id -> 404 `not found`", async (t) => {
  for (const path of ["/r/", "/r/a/b?referrer=x"]) {
    const res = await follow(path);
    t.is(res.status, 404, path);
    t.is(await res.text(), JSON.stringify({ error: "not found" }));
  }
});

test("the click records the socket address, or with trustProxy the last X-Forwarded-For entry", async (t) => {
  const proxied = await startGatewayStack({ gatewayOverrides: () => ({ trustProxy: true }) });
  try {
    const server = await proxied.createServer();
    const headers = { "x-forwarded-for": "198.51.100.1, 203.0.113.9" };
    const viaProxy = (await (await fetch(`${proxied.baseUrl}/r/${server.serverId}?referrer=a`, { headers })).json()) as { token: string };
    t.is((await proxied.db.prisma.referralClick.findUnique({ where: { token: viaProxy.token } }))?.ip, "203.0.113.9");
  } finally {
    await proxied.close();
  }
  const server = await stack.createServer();
  const direct = (await (await follow(`/r/${server.serverId}?referrer=a`, { headers: { "x-forwarded-for": "198.51.100.1" } })).json()) as { token: string };
  t.regex((await stack.db.prisma.referralClick.findUnique({ where: { token: direct.token } }))?.ip ?? "", /127\.0\.0\.1$/);
});
