/**
 * The gateway's request plumbing against the real stack: request ids (echoed and
 * forwarded to the RPCs), one structured log line per request with no secrets,
 * signature values or bodies, metrics per route and status, and mounted handlers.
 */
import test from "ava";
import { createOpsHandler } from "../../services/shared/runtime/health.js";
import { eventually } from "../helpers/eventually.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { nowSeconds, startGatewayStack, type GatewayStack, type TestServer } from "./gateway-stack.js";

let stack: GatewayStack;
let server: TestServer;
test.before(async () => {
  stack = await startGatewayStack({
    gatewayOverrides: () => ({
      dashboard: true,
      // As gateway/main.ts mounts it on the public port: probes only, no /metrics.
      ops: createOpsHandler({ checks: [] }),
      extraRoutes: async (req, res) => {
        if (req.url !== "/dashboard") return false;
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("dashboard");
        return true;
      },
    }),
  });
  server = await stack.createServer();
});
test.after.always(async () => {
  await stack?.close();
});

const linesFor = (requestId: string) => stack.gatewayLog.lines.filter((l) => l.requestId === requestId);

test("a well-formed X-Request-Id is echoed in the response", async (t) => {
  const res = await fetch(`${stack.baseUrl}/openapi/referral.json`, { headers: { "x-request-id": "caller-id-123" } });
  t.is(res.headers.get("x-request-id"), "caller-id-123");
});

test("without X-Request-Id (or with a malformed one) a uuid is generated and echoed", async (t) => {
  const plain = await fetch(`${stack.baseUrl}/openapi/referral.json`);
  t.regex(plain.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);
  const odd = await fetch(`${stack.baseUrl}/openapi/referral.json`, { headers: { "x-request-id": 'has spaces and "quotes"' } });
  t.regex(odd.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);
});

test("the request id is forwarded to the referral service RPCs", async (t) => {
  const token = await stack.click(server.serverId);
  const body = { event: "registered", token, server_id: server.serverId, referee_identity: "fwd-1", server_event_id: "reg-fwd-1" };
  const res = await stack.postSigned(server, body, { headers: { "x-request-id": "forwarded-id-1" } });
  t.is(res.status, 200);
  const routes = stack.serviceLog.lines.filter((l) => l.requestId === "forwarded-id-1").map((l) => l.route);
  t.deepEqual(routes.sort(), ["referral.v1.ReferralService/ApplyEvent", "servers.v1.ServerAdminService/ResolveSigningKeys"]);
});

test("one log line per request, naming route, status and outcome, without secrets, signature values or bodies", async (t) => {
  const token = await stack.click(server.serverId);
  const raw = JSON.stringify({ event: "registered", token, server_id: server.serverId, referee_identity: "log-secret-referee", server_event_id: "reg-log" });
  const header = formatIngestSignature(server.secret, nowSeconds(), raw);
  const res = await stack.postRaw(raw, { "x-service-signature": header, "x-request-id": "log-line-1" });
  t.is(res.status, 200);
  const lines = linesFor("log-line-1");
  t.is(lines.length, 1);
  t.like(lines[0], { route: "/api/referral/events", method: "POST", status: 200, serverId: server.serverId, kid: server.kid });
  t.regex(String(lines[0]?.outcome), /^advanced_registered$/);
  const everything = stack.gatewayLog.raw.join("\n");
  const mac = header.split("sha256=")[1] ?? "";
  for (const secretish of [server.secret, mac, token, "log-secret-referee"]) t.false(everything.includes(secretish), secretish);
});

test("a rejected request is logged once with its outcome", async (t) => {
  const res = await stack.postSigned(
    { secret: "rsec_wrong" },
    { event: "registered", server_id: server.serverId },
    { headers: { "x-request-id": "log-line-401" } },
  );
  t.is(res.status, 401);
  t.like(linesFor("log-line-401"), [{ status: 401, outcome: "bad_signature", level: 30 }]);
});

test("metrics count requests by route and status", async (t) => {
  await stack.postSigned({ secret: "rsec_wrong" }, { event: "registered", server_id: server.serverId });
  await fetch(`${stack.baseUrl}/no/such/path`);
  const text = await stack.gatewayMetrics.registry.metrics();
  t.regex(text, /requests_total\{[^}]*route="\/api\/referral\/events"[^}]*code="401"[^}]*\} [1-9]/);
  t.regex(text, /requests_total\{[^}]*route="unmatched"[^}]*code="404"[^}]*\} [1-9]/);
  t.regex(text, /request_duration_seconds_count\{[^}]*route="\/api\/referral\/events"/);
});

test("/metrics is not served on the gateway's public port (the ops port serves it)", async (t) => {
  const res = await fetch(`${stack.baseUrl}/metrics`);
  t.is(res.status, 404);
  t.false((await res.text()).includes("requests_total"));
});

test("the ops handler (/healthz) and extra routes are mounted after the gateway's own routes", async (t) => {
  const health = await fetch(`${stack.baseUrl}/healthz`);
  t.is(health.status, 200);
  t.truthy(health.headers.get("x-request-id"));
  const dashboard = await fetch(`${stack.baseUrl}/dashboard`);
  t.is(await dashboard.text(), "dashboard");
});

test("an unknown path -> 404 JSON `not found`", async (t) => {
  const res = await fetch(`${stack.baseUrl}/api/referral/eventsX`, { method: "POST" });
  t.is(res.status, 404);
  t.is(await res.text(), JSON.stringify({ error: "not found" }));
});

test("/healthz, /readyz and a mounted route are logged under their own route (probes at debug level), never as unmatched", async (t) => {
  for (const path of ["/healthz", "/readyz", "/dashboard"]) {
    const requestId = `route-log-${path.slice(1)}`;
    const res = await fetch(`${stack.baseUrl}${path}`, { headers: { "x-request-id": requestId } });
    t.is(res.status, 200, path);
    await res.arrayBuffer();
    const lines = await eventually(() => {
      const found = linesFor(requestId);
      return found.length > 0 ? found : undefined;
    });
    t.is(lines.length, 1, path);
    t.like(lines[0], path === "/dashboard" ? { route: "extra", level: 30 } : { route: path, level: 20 }, path);
  }
});

test("GET / answers JSON links to the dashboard, the docs and the OpenAPI document, HTML for a browser, and every linked document is served", async (t) => {
  const res = await fetch(`${stack.baseUrl}/`);
  t.is(res.status, 200);
  t.regex(res.headers.get("content-type") ?? "", /^application\/json/);
  const { links } = (await res.json()) as { links: { dashboard: string; openapi: string; docs: Record<string, string> } };
  t.is(links.dashboard, "/dashboard");
  t.is(links.openapi, "/openapi/referral.json");
  t.deepEqual(Object.keys(links.docs).sort(), ["callbacks", "contract", "dashboard", "integration-guide", "votifier-and-pull"]);
  for (const path of [links.openapi, ...Object.values(links.docs)]) {
    const doc = await fetch(`${stack.baseUrl}${path}`);
    t.is(doc.status, 200, path);
    t.true((await doc.text()).length > 500, path);
  }
  const html = await fetch(`${stack.baseUrl}/`, { headers: { accept: "text/html,application/xhtml+xml" } });
  t.regex(html.headers.get("content-type") ?? "", /^text\/html/);
  const page = await html.text();
  for (const path of [links.dashboard, links.openapi, ...Object.values(links.docs)]) t.true(page.includes(`href="${path}"`), path);
  for (const path of ["/docs/..%2FREADME.md", "/docs/referral-rules.md", "/docs/"])
    t.is((await fetch(`${stack.baseUrl}${path}`)).status, 404, `only the listed documents are served: ${path}`);
  t.is((await fetch(`${stack.baseUrl}/`, { method: "POST" })).status, 405);
});
