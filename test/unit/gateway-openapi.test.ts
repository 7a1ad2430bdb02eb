import test from "ava";
import { createConfig, lintFromString } from "@redocly/openapi-core";
import { createReferralServiceClients } from "../../gateway/clients.js";
import { PLUGIN_PRESET_PATHS } from "../../gateway/handle-vote-claim.js";
import { DOCS_PREFIX, LANDING_PATH } from "../../gateway/landing.js";
import { OPENAPI_PATH, openApiDocument } from "../../gateway/openapi.js";
import { listGatewayRoutes } from "../../gateway/server.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createMetrics } from "../../services/shared/runtime/metrics.js";
import { PERIOD_PATTERN } from "../../services/shared/values/period.js";
import { validateAgainstOpenApi, validateHeartCallbackHeaders, validateHeartEvent, validateRequestBody } from "../integration/openapi-validate.js";

test("the OpenAPI document passes the Redocly recommended ruleset with no problems", async (t) => {
  const config = await createConfig({ extends: ["recommended"] });
  const problems = await lintFromString({ source: JSON.stringify(openApiDocument), absoluteRef: "/openapi/referral.json", config });
  t.deepEqual(
    problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer ?? "?"}`),
    [],
  );
});

// The document's own examples, validated by Ajv 2020 (independently of Redocly's checker).
type Examples = Record<string, { value: unknown }>;
const doc = openApiDocument as unknown as {
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { examples?: Examples }> }> }>>;
};

test("every response example in the document validates against its response schema (Ajv 2020)", (t) => {
  let checked = 0;
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      for (const [status, response] of Object.entries(operation.responses)) {
        for (const [name, example] of Object.entries(response.content?.["application/json"]?.examples ?? {})) {
          t.deepEqual(validateAgainstOpenApi(path, method, status, example.value).errors, [], `${method} ${path} ${status} ${name}`);
          checked++;
        }
      }
    }
  }
  t.true(checked >= 15);
});

test("the document pins the contract's identity: OpenAPI 3.1, version 1.0.0, the signature scheme and webhooks.heartCallback", (t) => {
  t.is(openApiDocument.openapi, "3.1.0");
  t.is(openApiDocument.info.version, "1.0.0");
  t.like(openApiDocument.components.securitySchemes.ServiceSignature, { type: "apiKey", in: "header", name: "X-Service-Signature" });
  t.is(openApiDocument.webhooks.heartCallback.post.requestBody.content["application/json"].schema.$ref, "#/components/schemas/HeartEvent");
  t.is(openApiDocument.components.schemas.ReferralEvent.additionalProperties, true);
});

test("OkResponse allows exactly one outcome shape", (t) => {
  const ok = (body: unknown) => validateAgainstOpenApi("/api/referral/events", "post", 200, body).valid;
  t.true(ok({ ok: true, referral_id: "0b9e4c52-8a51-4c43-a6f5-8e2f7a1d3c90", state: "reversed" }));
  t.true(ok({ ok: true, duplicate: true }));
  t.true(ok({ ok: true, ignored: "first_touch_conflict" }));
  t.true(ok({ ok: true, test: true }));
  t.false(ok({ ok: true }));
  t.false(ok({ ok: false, duplicate: true }));
  t.false(ok({ ok: true, duplicate: true, test: true }));
  t.false(ok({ ok: true, referral_id: "not-a-uuid", state: "registered" }));
  t.false(ok({ ok: true, referral_id: "0b9e4c52-8a51-4c43-a6f5-8e2f7a1d3c90", state: "clicked" }));
});

test("error bodies: {error} only, and the 422 body needs from and event", (t) => {
  const v = (status: number, body: unknown) => validateAgainstOpenApi("/api/referral/events", "post", status, body).valid;
  t.true(v(401, { error: "signature rejected: stale" }));
  t.false(v(401, { message: "signature rejected: stale" }));
  t.false(v(422, { error: "invalid state transition" }));
  t.true(v(422, { error: "invalid state transition", from: "clicked", event: "qualified" }));
  t.false(v(418, { error: "teapot" }), "an undocumented status is invalid");
});

test("ReferralEvent: registered needs referee_identity, unknown fields are accepted", (t) => {
  const v = (body: unknown) => validateRequestBody("/api/referral/events", "post", body).valid;
  const base = { event: "registered", token: "tok", server_id: "s", server_event_id: "e" };
  t.false(v(base));
  t.true(v({ ...base, referee_identity: "p1", extra: 1 }));
  t.true(v({ ...base, event: "qualified" }));
  t.false(v({ ...base, event: "clicked", referee_identity: "p1" }));
  t.false(v({ ...base, referee_identity: "p1", ts: 1.5 }));
});

const heart = {
  event: "heart.counted",
  server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
  username: "Steve_42",
  heart_id: "3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b",
  period: "2026-01",
  timestamp: 1767225600,
  streak_day: 3,
};

test("HeartEvent: the contract's table - streak_day optional, period YYYY-MM, uuids, int64 timestamp", (t) => {
  t.deepEqual(validateHeartEvent(heart).errors, []);
  const { streak_day: _omitted, ...withoutStreak } = heart;
  t.true(validateHeartEvent(withoutStreak).valid, "streak_day may be omitted");
  t.true(validateHeartEvent({ ...withoutStreak, event: "heart.test", heart_id: "00000000-0000-0000-0000-000000000000" }).valid);
  for (const [field, value] of Object.entries({
    period: "2026-1",
    event: "heart.other",
    heart_id: "nope",
    server_id: 5,
    timestamp: "1767225600",
    streak_day: 1.5,
  })) {
    t.false(validateHeartEvent({ ...heart, [field]: value }).valid, `${field}=${String(value)}`);
  }
  for (const field of ["event", "server_id", "username", "heart_id", "period", "timestamp"]) {
    const { [field]: _dropped, ...rest } = heart as Record<string, unknown>;
    t.false(validateHeartEvent(rest).valid, `missing ${field}`);
  }
  t.deepEqual(validateHeartEvent({ ...heart, vote_id: "x" }).errors, ["/ has a field the contract does not list: vote_id"]);
});

test("heart callback headers: X-Service-Event and X-Service-Signature t=<unix>,v1=<hex> (one v1 per active secret)", (t) => {
  const mac = "a".repeat(64);
  t.true(validateHeartCallbackHeaders({ "X-Service-Event": "heart.counted", "X-Service-Signature": `t=1767225600,v1=${mac}` }).valid);
  t.true(validateHeartCallbackHeaders({ "x-service-event": "heart.test", "x-service-signature": `t=1767225600,v1=${mac},v1=${"b".repeat(64)}` }).valid);
  t.false(validateHeartCallbackHeaders({ "X-Service-Event": "heart.counted", "X-Service-Signature": `t=1767225600,v1=sha256=${mac}` }).valid);
  t.false(validateHeartCallbackHeaders({ "X-Service-Event": "heart.counted" }).valid);
  t.false(validateHeartCallbackHeaders({ "X-Service-Event": "heart.other", "X-Service-Signature": `t=1,v1=${mac}` }).valid);
});

test("every period in the document takes the one period rule (services/shared/values/period.ts): a real month, 01-12", (t) => {
  const patterns: string[] = [];
  const walk = (node: unknown, key: string): void => {
    if (node === null || typeof node !== "object") return;
    const schema = node as { pattern?: unknown };
    if (key === "period" && typeof schema.pattern === "string") patterns.push(schema.pattern);
    for (const [name, child] of Object.entries(node)) walk(child, name);
  };
  walk(openApiDocument, "");
  t.true(patterns.length >= 2, "the pull list and the heart callback both carry a period");
  for (const pattern of patterns) {
    t.is(pattern, PERIOD_PATTERN.source);
    for (const bad of ["2026-13", "2026-00"]) t.false(new RegExp(pattern).test(bad), `${bad} is not a month`);
    t.true(new RegExp(pattern).test("2026-12"));
  }
});

/** Routes that are no API: the front page, the docs, this document, and the plugins' preset aliases (described under /api/votes). */
const NOT_IN_DOCUMENT = new Set([LANDING_PATH, `${DOCS_PREFIX}:file`, OPENAPI_PATH, ...PLUGIN_PRESET_PATHS.map(({ path }) => path)]);

test("every route of the gateway's route table is an operation of the document (its method at its path), but the pages, the docs and the document itself", (t) => {
  const routes = listGatewayRoutes({
    // Building the table calls nothing: a down referral service is enough.
    ...createReferralServiceClients("http://127.0.0.1:9", "openapi-routes-test-token"),
    log: createLogger("gateway-openapi-test", "silent"),
    metrics: createMetrics("gateway_openapi_test"),
    now: () => new Date(),
  });
  const documented = routes.filter(({ name }) => !NOT_IN_DOCUMENT.has(name));
  t.true(documented.length >= 15, "the route table is enumerated");
  const missing = documented
    .map(({ method, name }) => ({ method: method.toLowerCase(), path: name.replace(/:([a-z_]+)/g, "{$1}") }))
    .filter(({ method, path }) => doc.paths[path]?.[method] === undefined)
    .map(({ method, path }) => `${method.toUpperCase()} ${path}`);
  t.deepEqual(missing, [], "routes the OpenAPI document does not describe");
});
