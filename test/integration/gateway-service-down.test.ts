/**
 * While the referral service is down, the public gateway answers a retryable 503 with Retry-After
 * (gateway/http-errors.ts, the one error table), never a 500 `internal error`: for the key lookup and
 * for ApplyEvent of ingest (the contract's 503 text), for the plugins' check and claim (their own body)
 * and the pull API (a text naming the cause); the cause is logged with the request id. The database
 * being down is gateway-database-down.test.ts.
 */
import test from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { createReferralServiceClients } from "../../gateway/clients.js";
import { fromRpcError, SERVICE_DOWN_RETRY_AFTER_S } from "../../gateway/http-errors.js";
import { ERROR_TEXT } from "../../services/shared/values/contract.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { startStack } from "../../scripts/harness/stack.js";
import { captureLog, nowSeconds, startGatewayStack } from "./gateway-stack.js";

/** Port 9 (discard) on loopback has no listener here: every call fails as Unavailable. */
const deadClients = () => createReferralServiceClients("http://127.0.0.1:9", TEST_SERVICE_TOKEN);

test("the table: Unavailable is 503 with Retry-After, cause kept for the log; ingest keeps the contract's 503 text, the other public paths name the cause", (t) => {
  const cause = new ConnectError("connect ECONNREFUSED 127.0.0.1:9", Code.Unavailable);
  const retryAfter = { "retry-after": String(SERVICE_DOWN_RETRY_AFTER_S) };
  const ingest = fromRpcError(cause, "ingest");
  t.deepEqual(ingest.reply, { status: 503, body: { error: ERROR_TEXT.overloaded }, headers: retryAfter });
  t.is(ingest.cause, cause);
  t.is(ingest.failure, "service_unavailable");
  const pull = fromRpcError(cause);
  t.deepEqual(pull.reply, { status: 503, body: { error: ERROR_TEXT.unavailable }, headers: retryAfter });
  t.regex(ERROR_TEXT.unavailable, /temporarily unavailable/);
  t.notRegex(ERROR_TEXT.unavailable, /overloaded/);
  t.is(pull.cause, cause);
  t.true(SERVICE_DOWN_RETRY_AFTER_S >= 1 && SERVICE_DOWN_RETRY_AFTER_S <= 60);
});

test("referral service down: the plugins' check and claim answer 503 with their own body (0, or the not-found JSON) and Retry-After; pull names the cause", async (t) => {
  const broken = await startGatewayStack({ gatewayOverrides: () => deadClients() });
  try {
    for (const query of ["object=votes&element=claim", "action=claim"]) {
      const res = await fetch(`${broken.baseUrl}/api/votes?${query}&key=vck_x&steamid=76561198000000001`);
      t.is(res.status, 503, query);
      t.is(await res.text(), "0", query);
      t.is(res.headers.get("content-type"), "text/plain");
      t.is(res.headers.get("retry-after"), String(SERVICE_DOWN_RETRY_AFTER_S));
    }
    const json = await fetch(`${broken.baseUrl}/api/votes/json?action=status&key=vck_x&steamid=76561198000000001`);
    t.is(json.status, 503);
    t.like(await json.json(), { voted: false, claimed: false, status: "not_found" });
    t.is(json.headers.get("retry-after"), String(SERVICE_DOWN_RETRY_AFTER_S));
    const raw = JSON.stringify({ server_id: "5b0f8c4e-2d1a-4e3b-9c7d-6a5f4e3d2c1b" });
    const pull = await fetch(`${broken.baseUrl}/api/pull/hearts`, {
      method: "POST",
      headers: { "x-service-signature": formatIngestSignature("rps_x", nowSeconds(), raw) },
      body: raw,
    });
    t.is(pull.status, 503);
    t.deepEqual(await pull.json(), { error: ERROR_TEXT.unavailable });
    t.is(pull.headers.get("retry-after"), String(SERVICE_DOWN_RETRY_AFTER_S));
  } finally {
    await broken.close();
  }
});

test("referral service down for the key lookup: ingest answers 503 + Retry-After, not 500", async (t) => {
  const broken = await startGatewayStack({ gatewayOverrides: () => deadClients() });
  try {
    const body = { event: "registered", token: "t", server_id: "5b0f8c4e-2d1a-4e3b-9c7d-6a5f4e3d2c1b", referee_identity: "p", server_event_id: "e" };
    const res = await broken.postSigned({ secret: "rsec_x" }, body);
    t.is(res.status, 503);
    t.deepEqual(JSON.parse(res.text), { error: ERROR_TEXT.overloaded });
    t.is(res.headers.get("retry-after"), String(SERVICE_DOWN_RETRY_AFTER_S));
  } finally {
    await broken.close();
  }
});

test("referral service down during ApplyEvent: 503 + Retry-After, the cause logged with the request id", async (t) => {
  const broken = await startGatewayStack({ gatewayOverrides: () => ({ referral: deadClients().referral }) });
  try {
    const s = await broken.createServer();
    const token = await broken.click(s.serverId);
    const res = await broken.postSigned(
      s,
      { event: "registered", token, server_id: s.serverId, referee_identity: "p", server_event_id: "e" },
      { headers: { "x-request-id": "req-down-test" } },
    );
    t.is(res.status, 503);
    t.deepEqual(JSON.parse(res.text), { error: ERROR_TEXT.overloaded });
    t.is(res.headers.get("retry-after"), String(SERVICE_DOWN_RETRY_AFTER_S));
    const line = broken.gatewayLog.lines.find((l) => l.requestId === "req-down-test" && l.err !== undefined);
    t.truthy(line, "the cause is logged with the request id");
  } finally {
    await broken.close();
  }
});

test("the gateway's token lacks a scope at run time (changed after its start): ingest, referral links and pull answer 503 with Retry-After, never 500, logged with the cause", async (t) => {
  const stack = await startStack({ gateway: false });
  try {
    const { token } = await stack.clients.access.createServiceToken({ name: "scopeless", scopes: ["read"] });
    const log = captureLog("debug");
    const gateway = await stack.startGateway({ log: log.log, overrides: () => createReferralServiceClients(stack.rpcUrl, token) });
    const serverId = "5b0f8c4e-2d1a-4e3b-9c7d-6a5f4e3d2c1b";
    const signed = (path: string, body: unknown) => {
      const raw = JSON.stringify(body);
      return fetch(`${gateway.url}${path}`, {
        method: "POST",
        headers: { "x-service-signature": formatIngestSignature("rsec_x", nowSeconds(), raw) },
        body: raw,
      });
    };
    const ingest = await signed("/api/referral/events", { event: "registered", token: "t", server_id: serverId, referee_identity: "p", server_event_id: "e" });
    t.is(ingest.status, 503);
    t.deepEqual(await ingest.json(), { error: ERROR_TEXT.overloaded }, "ingest keeps the contract's 503 text");
    t.true(Number(ingest.headers.get("retry-after")) >= 1);
    const link = await fetch(`${gateway.url}/r/${serverId}?referrer=someone`, { redirect: "manual" });
    t.is(link.status, 503);
    t.deepEqual(await link.json(), { error: ERROR_TEXT.unavailable });
    t.true(Number(link.headers.get("retry-after")) >= 1);
    const pull = await signed("/api/pull/hearts", { server_id: serverId });
    t.is(pull.status, 503);
    t.deepEqual(await pull.json(), { error: ERROR_TEXT.unavailable });
    t.false(log.lines.some((line) => line.status === 500));
    const refused = log.lines.filter((line) => line.status === 503);
    t.is(refused.length, 3);
    t.true(refused.every((line) => line.err !== undefined && line.outcome === "service_unavailable"));
  } finally {
    await stack.close();
  }
});
