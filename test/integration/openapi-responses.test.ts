/**
 * The OpenAPI document against the running gateway: the served document is the
 * lint-clean one, and REAL responses for every status the gateway produces validate
 * against the document's response schemas (Ajv 2020).
 */
import test from "ava";
import { createConfig, lintFromString } from "@redocly/openapi-core";
import { createReferralServiceClients } from "../../gateway/clients.js";
import { openApiDocument } from "../../gateway/openapi.js";
import { startGatewayStack, type GatewayStack, type RawResponse, type TestServer } from "./gateway-stack.js";
import { validateAgainstOpenApi } from "./openapi-validate.js";

const INGEST = "/api/referral/events";
let stack: GatewayStack;
let server: TestServer;
test.before(async () => {
  stack = await startGatewayStack();
  server = await stack.createServer();
});
test.after.always(async () => {
  await stack?.close();
});

let seq = 0;
async function registeredBody(overrides: Record<string, unknown> = {}) {
  const token = await stack.click(server.serverId, `referrer-${++seq}`);
  return { event: "registered", token, server_id: server.serverId, referee_identity: `oa-${seq}`, server_event_id: `reg-oa-${seq}`, ...overrides };
}

const assertValid = (
  t: { deepEqual(a: unknown, b: unknown, m?: string): void; is(a: unknown, b: unknown, m?: string): void },
  res: RawResponse,
  status: number,
  path = INGEST,
  method = "post",
) => {
  t.is(res.status, status, res.text);
  t.deepEqual(validateAgainstOpenApi(path, method, res.status, res.text === "" ? undefined : JSON.parse(res.text)).errors, [], `${status} ${res.text}`);
};

test("GET /openapi/referral.json serves the document as JSON, and the served bytes pass the Redocly recommended lint", async (t) => {
  const res = await fetch(`${stack.baseUrl}/openapi/referral.json`);
  t.is(res.status, 200);
  t.is(res.headers.get("content-type"), "application/json");
  const text = await res.text();
  t.deepEqual(JSON.parse(text), JSON.parse(JSON.stringify(openApiDocument)));
  const problems = await lintFromString({ source: text, absoluteRef: "/openapi/referral.json", config: await createConfig({ extends: ["recommended"] }) });
  t.deepEqual(
    problems.map((p) => `${p.ruleId}: ${p.message}`),
    [],
  );
});

test("real 200 responses (applied, duplicate, first-touch conflict, test) validate against OkResponse", async (t) => {
  const body = await registeredBody();
  assertValid(t, await stack.postSigned(server, body), 200);
  assertValid(t, await stack.postSigned(server, body), 200);
  const rival = await stack.click(server.serverId, "rival");
  assertValid(t, await stack.postSigned(server, { ...body, token: rival, server_event_id: "reg-rival" }), 200);
  assertValid(t, await stack.postSigned(server, await registeredBody({ test: true })), 200);
  const later = { token: body.token, server_id: server.serverId };
  assertValid(t, await stack.postSigned(server, { ...later, event: "qualified", server_event_id: "q-oa" }), 200);
  assertValid(t, await stack.postSigned(server, { ...later, event: "reversed", server_event_id: "r-oa" }), 200);
});

test("real 400 responses validate against ErrorResponse", async (t) => {
  assertValid(t, await stack.postRaw("{}"), 400);
  assertValid(t, await stack.postSigned(server, "[]"), 400);
  assertValid(t, await stack.postSigned(server, await registeredBody({ event: "nope" })), 400);
  assertValid(t, await stack.postSigned(server, await registeredBody({ referee_identity: "" })), 400);
  assertValid(t, await stack.postSigned(server, await registeredBody({ server_event_id: 5 })), 400);
});

test("real 401 responses validate against ErrorResponse", async (t) => {
  assertValid(t, await stack.postSigned({ secret: "rsec_wrong" }, await registeredBody()), 401);
  assertValid(t, await stack.postSigned(server, await registeredBody(), { t: Math.floor(Date.now() / 1000) - 400 }), 401);
});

test("real 404 responses validate against ErrorResponse", async (t) => {
  assertValid(t, await stack.postSigned(server, await registeredBody({ server_id: "5b0f8c4e-2d1a-4e3b-9c7d-6a5f4e3d2c1b" })), 404);
  assertValid(t, await stack.postSigned(server, await registeredBody({ token: "unknown" })), 404);
  const off = await stack.createServer({ referrals: false });
  assertValid(t, await stack.postSigned(off, { event: "registered", token: "x", server_id: off.serverId, referee_identity: "p", server_event_id: "e" }), 404);
});

test("a real 413 response validates against ErrorResponse", async (t) => {
  assertValid(t, await stack.postRaw("x".repeat(70_000)), 413);
});

test("a real 422 response validates against TransitionErrorResponse", async (t) => {
  const token = await stack.click(server.serverId);
  assertValid(t, await stack.postSigned(server, { event: "reversed", token, server_id: server.serverId, server_event_id: "rev-422" }), 422);
});

test("a real 500 response validates against ErrorResponse; so does the 503 of a refused gateway token", async (t) => {
  const body = { event: "registered", token: "t", server_id: "5b0f8c4e-2d1a-4e3b-9c7d-6a5f4e3d2c1b", referee_identity: "p", server_event_id: "e" };
  // A failure the gateway cannot classify (a bug: a key lookup that throws a plain error) answers 500.
  const broken = await startGatewayStack({
    gatewayOverrides: ({ clients }) => ({
      admin: {
        ...clients.admin,
        resolveSigningKeys: async () => {
          throw new Error("an unexpected failure");
        },
      },
    }),
  });
  try {
    assertValid(t, await broken.postSigned({ secret: "rsec_x" }, body), 500);
  } finally {
    await broken.close();
  }
  // A gateway whose own service token the referral service refuses (a misconfiguration) answers 503 with Retry-After.
  const refused = await startGatewayStack({
    gatewayOverrides: () => createReferralServiceClients(stack.serviceUrl, "rst_not-a-token-the-service-knows-0123456789"),
  });
  try {
    assertValid(t, await refused.postSigned({ secret: "rsec_x" }, body), 503);
  } finally {
    await refused.close();
  }
});

test("real referral-link responses (302, 200, 400, 404) validate against the document", async (t) => {
  const get = async (path: string): Promise<RawResponse> => {
    const res = await fetch(`${stack.baseUrl}${path}`, { redirect: "manual" });
    return { status: res.status, text: await res.text(), headers: res.headers };
  };
  const linked = await stack.createServer({ registrationUrl: "https://play.example.org/register" });
  const path = "/r/{server_id}";
  assertValid(t, await get(`/r/${linked.serverId}?referrer=a`), 302, path, "get");
  assertValid(t, await get(`/r/${server.serverId}?referrer=a`), 200, path, "get");
  assertValid(t, await get(`/r/${server.serverId}`), 400, path, "get");
  assertValid(t, await get("/r/5b0f8c4e-2d1a-4e3b-9c7d-6a5f4e3d2c1b?referrer=a"), 404, path, "get");
});
