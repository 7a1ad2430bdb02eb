/**
 * While the referral service is down, the public gateway answers the contract's retryable 503 with
 * Retry-After (gateway/http-errors.ts, the one error table), never a 500 `internal error`: for the
 * key lookup and for ApplyEvent of ingest, and the cause is logged with the request id.
 */
import test from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { createReferralServiceClients } from "../../gateway/clients.js";
import { fromRpcError, SERVICE_DOWN_RETRY_AFTER_S } from "../../gateway/http-errors.js";
import { ERROR_TEXT } from "../../services/shared/contract.js";
import { TEST_SERVICE_TOKEN } from "../helpers/service-token.js";
import { startGatewayStack } from "./gateway-stack.js";

/** Port 9 (discard) on loopback has no listener here: every call fails as Unavailable. */
const deadClients = () => createReferralServiceClients("http://127.0.0.1:9", TEST_SERVICE_TOKEN);

test("the table: Unavailable on the public API is 503 with Retry-After, cause kept for the log", (t) => {
  const cause = new ConnectError("connect ECONNREFUSED 127.0.0.1:9", Code.Unavailable);
  const mapped = fromRpcError(cause);
  t.deepEqual(mapped.reply, { status: 503, body: { error: ERROR_TEXT.overloaded }, headers: { "retry-after": String(SERVICE_DOWN_RETRY_AFTER_S) } });
  t.is(mapped.cause, cause);
  t.true(SERVICE_DOWN_RETRY_AFTER_S >= 1 && SERVICE_DOWN_RETRY_AFTER_S <= 60);
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
