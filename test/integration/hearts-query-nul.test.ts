/**
 * The hearts search (HeartService.ListHearts `query`, the dashboard's Hearts search) refuses a
 * NUL character like every other text field: invalid_argument / 400 naming the field, from the
 * one field table (services/shared/values/field-rules.ts), never a 500 from PostgreSQL.
 */
import anyTest, { type TestFn } from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { createServiceClients, startStack, type TestStack } from "../../scripts/harness/stack.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { nulText, tooLongText } from "../../services/shared/values/field-rules.js";

const DASHBOARD_TOKEN = "dash-hearts-query-nul-test-token-0123456789";

interface Context {
  stack: TestStack;
  gatewayUrl: string;
  serverId: string;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const stack = await startStack({ gateway: false, log: createLogger("hearts-query-nul", process.env.TEST_LOG_LEVEL ?? "silent") });
  const gateway = await stack.startGateway({ dashboard: { token: DASHBOARD_TOKEN } });
  const created = await stack.clients.admin.createServer({ name: "nul-search", registrationUrl: "" });
  t.context = { stack, gatewayUrl: gateway.url, serverId: created.server?.id ?? "" };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

async function rpcError(promise: Promise<unknown>): Promise<{ code: Code; message: string }> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ConnectError) return { code: error.code, message: error.rawMessage };
    throw error;
  }
  throw new Error("the call succeeded");
}

test("ListHearts over Connect (JSON and binary): a NUL in query is InvalidArgument naming query", async (t) => {
  const { stack, serverId } = t.context;
  const expected = { code: Code.InvalidArgument, message: nulText("query") };
  t.is(expected.message, "query must not contain NUL characters");
  t.deepEqual(await rpcError(stack.clients.hearts.listHearts({ serverId, query: "ste\u0000ve" })), expected);
  t.deepEqual(await rpcError(stack.clients.hearts.listHearts({ serverId, query: "\u0000" })), expected);
  // The binary Connect format (what the gateway and the dashboard send).
  const binary = createServiceClients(stack.rpcUrl);
  t.deepEqual(await rpcError(binary.hearts.listHearts({ serverId, query: "a\u0000" })), expected);
  // The length bound keeps its text, now from the same table.
  t.deepEqual(await rpcError(stack.clients.hearts.listHearts({ serverId, query: "x".repeat(201) })), {
    code: Code.InvalidArgument,
    message: tooLongText("query"),
  });
  // An ordinary search still works.
  t.deepEqual((await stack.clients.hearts.listHearts({ serverId, query: "steve" })).hearts, []);
});

test("the dashboard's Hearts search: ?q= with a NUL is 400 naming query, not 500", async (t) => {
  const { gatewayUrl, serverId } = t.context;
  const res = await fetch(`${gatewayUrl}/dashboard/api/servers/${serverId}/hearts?q=ste%00ve`, {
    headers: { authorization: `Bearer ${DASHBOARD_TOKEN}` },
  });
  t.is(res.status, 400);
  t.deepEqual(await res.json(), { error: "query must not contain NUL characters" });
  const ok = await fetch(`${gatewayUrl}/dashboard/api/servers/${serverId}/hearts?q=steve`, { headers: { authorization: `Bearer ${DASHBOARD_TOKEN}` } });
  t.is(ok.status, 200);
});
