/**
 * Internal API authentication, for every RPC of every hosted service, over Connect,
 * gRPC-Web and a stock @grpc/grpc-js client: no token, a wrong token and a malformed
 * header are `unauthenticated`; a token without the RPC's scope is `permission_denied`
 * naming the scope; a token with exactly that scope gets through. Plus revocation, the
 * development flag, the tokens CLI, and that no token ever reaches a log line.
 */
import anyTest, { type TestFn } from "ava";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import * as grpc from "@grpc/grpc-js";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { RPC_ACCESS, rpcKey } from "../../services/access/rpc-access.js";
import { SCOPES, type Scope } from "../../services/access/scopes.js";
import { createReferralServiceServer } from "../../services/referral-service/server.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createMetrics } from "../../services/shared/runtime/metrics.js";
import { createSecretBox } from "../../services/shared/runtime/secrets.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";
import { eventually } from "../helpers/eventually.js";
import { createGrpcJsClient } from "../helpers/grpc-js.js";
import { hostedServices } from "../helpers/hosted-services.js";
import { REPO_ROOT } from "../../scripts/harness/processes.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { startGatewayStack } from "./gateway-stack.js";
import { randomBytes } from "node:crypto";

const run = promisify(execFile);
const test = anyTest as TestFn<{ stack: TestStack; tokens: Record<Scope, string> }>;
const WRONG_TOKEN = `rst_${"w".repeat(43)}`;

test.before(async (t) => {
  const stack = await startStack({ gateway: false });
  const tokens = {} as Record<Scope, string>;
  for (const scope of SCOPES) {
    tokens[scope] = (await stack.clients.access.createServiceToken({ name: `only-${scope.replace(":", "-")}`, scopes: [scope] })).token;
  }
  t.context = { stack, tokens };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

/** A scope that does not grant `required` (never admin). */
function otherScope(required: Scope): Scope {
  return required === "read" ? "hearts:cast" : "read";
}

/** Calls `method` over a Connect-family transport; returns the Connect code (or "ok") and the message. */
async function callConnect(
  transport: Transport,
  service: DescService,
  method: DescMethod,
  authorization?: string,
): Promise<{ code: Code | "ok"; message: string }> {
  const client = createClient(service, transport) as unknown as Record<string, (input: object, opts: object) => Promise<unknown>>;
  try {
    await client[method.localName]!({}, { headers: authorization === undefined ? {} : { authorization }, timeoutMs: 10_000 });
    return { code: "ok", message: "" };
  } catch (error) {
    const e = ConnectError.from(error);
    return { code: e.code, message: e.rawMessage };
  }
}

const GRPC_CODE: Partial<Record<Code, grpc.status>> = {
  [Code.Unauthenticated]: grpc.status.UNAUTHENTICATED,
  [Code.PermissionDenied]: grpc.status.PERMISSION_DENIED,
};

for (const service of hostedServices()) {
  for (const [protocol, makeTransport] of [
    ["Connect", (url: string) => createConnectTransport({ baseUrl: url, httpVersion: "2" })],
    ["gRPC-Web", (url: string) => createGrpcWebTransport({ baseUrl: url, httpVersion: "2" })],
  ] as const) {
    test(`${service.typeName} over ${protocol}: every RPC refuses a missing, wrong or malformed token (unauthenticated) and a token without its scope (permission_denied); its own scope gets through`, async (t) => {
      const { stack, tokens } = t.context;
      const transport = makeTransport(stack.rpcUrl);
      for (const method of service.methods) {
        const rule = RPC_ACCESS[rpcKey(service.typeName, method.name)]!;
        const name = `${service.typeName}/${method.name}`;
        t.deepEqual(
          await callConnect(transport, service, method),
          { code: Code.Unauthenticated, message: "missing service token (send the header authorization with the value Bearer <token>)" },
          name,
        );
        t.deepEqual(
          await callConnect(transport, service, method, `Bearer ${WRONG_TOKEN}`),
          { code: Code.Unauthenticated, message: "invalid or revoked service token" },
          name,
        );
        t.deepEqual(
          await callConnect(transport, service, method, `Basic ${TEST_SERVICE_TOKEN}`),
          { code: Code.Unauthenticated, message: "malformed authorization header (expected Bearer <token>)" },
          name,
        );
        const denied = await callConnect(transport, service, method, `Bearer ${tokens[otherScope(rule.scope)]}`);
        t.deepEqual(
          denied,
          { code: Code.PermissionDenied, message: `this token lacks the scope "${rule.scope}" that ${service.typeName}.${method.name} requires` },
          name,
        );
        const allowed = await callConnect(transport, service, method, `Bearer ${tokens[rule.scope]}`);
        t.false(allowed.code === Code.Unauthenticated || allowed.code === Code.PermissionDenied, `${name} with scope ${rule.scope}: ${allowed.message}`);
        const asAdmin = await callConnect(transport, service, method, `Bearer ${tokens.admin}`);
        t.false(asAdmin.code === Code.Unauthenticated || asAdmin.code === Code.PermissionDenied, `${name} with admin: ${asAdmin.message}`);
      }
    });
  }

  test(`${service.typeName} over gRPC with a stock @grpc/grpc-js client: every RPC answers UNAUTHENTICATED without or with a wrong token, PERMISSION_DENIED without its scope, and gets through with it`, async (t) => {
    const { stack, tokens } = t.context;
    const clients = {
      none: createGrpcJsClient(service, stack.rpcUrl, null),
      wrong: createGrpcJsClient(service, stack.rpcUrl, WRONG_TOKEN),
      ...Object.fromEntries(Object.entries(tokens).map(([scope, token]) => [scope, createGrpcJsClient(service, stack.rpcUrl, token)])),
    } as Record<string, ReturnType<typeof createGrpcJsClient>>;
    try {
      for (const method of service.methods) {
        const rule = RPC_ACCESS[rpcKey(service.typeName, method.name)]!;
        const name = `${service.typeName}/${method.name}`;
        for (const [who, details] of [
          ["none", "missing service token (send the header authorization with the value Bearer <token>)"],
          ["wrong", "invalid or revoked service token"],
        ] as const) {
          const outcome = await clients[who]!.call(method);
          t.false(outcome.ok, `${name} without a valid token`);
          if (!outcome.ok) t.like(outcome.error, { code: GRPC_CODE[Code.Unauthenticated], details }, name);
        }
        const denied = await clients[otherScope(rule.scope)]!.call(method);
        t.false(denied.ok);
        if (!denied.ok) {
          t.is(denied.error.code, grpc.status.PERMISSION_DENIED, name);
          // connect-node percent-encodes ":" in grpc-message and grpc-js's decodeURI leaves it encoded ("clicks%3Arecord").
          t.is(decodeURIComponent(denied.error.details), `this token lacks the scope "${rule.scope}" that ${service.typeName}.${method.name} requires`, name);
        }
        const allowed = await clients[rule.scope]!.call(method);
        if (!allowed.ok)
          t.false([grpc.status.UNAUTHENTICATED, grpc.status.PERMISSION_DENIED].includes(allowed.error.code), `${name}: ${allowed.error.details}`);
      }
    } finally {
      for (const client of Object.values(clients)) client.close();
    }
  });
}

test("a revoked token stops working (within the token cache lifetime); tokens are listed without values", async (t) => {
  const { stack } = t.context;
  const created = await stack.clients.access.createServiceToken({ name: "to-revoke", scopes: ["read"] });
  t.regex(created.token, /^rst_[A-Za-z0-9_-]{43}$/);
  const client = createClient(ServerAdminService, createServiceTransport(stack.rpcUrl, created.token));
  await client.listServers({});
  const revoked = await stack.clients.access.revokeServiceToken({ token: "to-revoke" });
  t.truthy(revoked.info?.revokedAt);
  const code = await eventually(
    async () => {
      const outcome = await client.listServers({}).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      return outcome?.code === Code.Unauthenticated ? outcome : undefined;
    },
    { timeoutMs: 10_000, message: "revoked token refused" },
  );
  t.is(code.rawMessage, "invalid or revoked service token");
  const listed = await stack.clients.access.listServiceTokens({});
  t.true(listed.tokens.some((x) => x.name === "to-revoke" && x.revokedAt !== undefined));
  t.false(JSON.stringify(listed.tokens.map((x) => ({ ...x, createdAt: undefined, revokedAt: undefined }))).includes(created.token));
  // Creating a second token under a taken name is a conflict; an unknown scope is refused.
  await t.throwsAsync(stack.clients.access.createServiceToken({ name: "to-revoke", scopes: ["read"] }), {
    message: /already_exists.*a service token named "to-revoke" exists/,
  });
  await t.throwsAsync(stack.clients.access.createServiceToken({ name: "x", scopes: ["root"] }), { message: /invalid_argument.*unknown scope "root"/ });
});

test("the development flag (ALLOW_UNAUTHENTICATED_RPC) lets a call without a token through as admin; a wrong token is still refused", async (t) => {
  const { stack } = t.context;
  const server = createReferralServiceServer({
    prisma: stack.prisma,
    secretBox: createSecretBox(randomBytes(32)),
    log: createLogger("test", "silent"),
    metrics: createMetrics("dev"),
    now: () => new Date(),
    allowInsecureCallbacks: true,
    callbackTimeoutMs: 1_000,
    publicBaseUrl: "http://127.0.0.1:9",
    auth: { allowUnauthenticated: true },
  });
  const port = await server.listen(0);
  try {
    const client = createClient(ServerAdminService, createConnectTransport({ baseUrl: `http://127.0.0.1:${port}`, httpVersion: "2" }));
    const { server: created } = await client.createServer({ name: "dev mode" });
    t.is(created?.name, "dev mode");
    const wrong = await client.listServers({}, { headers: { authorization: `Bearer ${WRONG_TOKEN}` } }).catch((e: unknown) => ConnectError.from(e));
    t.is((wrong as ConnectError).code, Code.Unauthenticated);
  } finally {
    await server.close();
  }
});

test("npm run tokens: create prints the token once (it works with exactly its scopes), list never prints values, revoke stops it", async (t) => {
  const { stack } = t.context;
  const env = { ...process.env, DATABASE_URL: stack.db.url };
  const cli = (...args: string[]) => run(process.execPath, ["--import", "tsx", "scripts/tokens.ts", ...args], { cwd: REPO_ROOT, env, timeout: 60_000 });
  const created = await cli("create", "--name", "cli-reader", "--scopes", "read");
  const token = created.stdout.trim();
  t.regex(token, /^rst_[A-Za-z0-9_-]{43}$/);
  t.regex(created.stderr, /created service token "cli-reader" \(scopes read\)/);
  const client = createClient(ServerAdminService, createServiceTransport(stack.rpcUrl, token));
  await client.listServers({});
  const denied = await client.createServer({ name: "nope" }).catch((e: unknown) => ConnectError.from(e));
  t.is((denied as ConnectError).code, Code.PermissionDenied);
  const listed = await cli("list");
  t.regex(listed.stdout, /cli-reader {2}read {2}created /);
  t.false(listed.stdout.includes(token), "list never prints a value");
  const revoked = await cli("revoke", "--name", "cli-reader");
  t.regex(revoked.stdout, /revoked service token "cli-reader"/);
  const usage = await cli("create", "--name", "x").catch((e: { code: number; stderr: string }) => e);
  t.is((usage as { code: number }).code, 2);
  t.regex((usage as { stderr: string }).stderr, /create needs --name and --scopes/);
  const badScope = await cli("create", "--name", "x", "--scopes", "root").catch((e: { code: number; stderr: string }) => e);
  t.is((badScope as { code: number }).code, 1);
  t.regex((badScope as { stderr: string }).stderr, /unknown scope "root"/);
});

test("tokens never reach a log line: not the service's (rejected or accepted calls) nor the gateway's", async (t) => {
  const gw = await startGatewayStack();
  try {
    const transport = createConnectTransport({ baseUrl: gw.serviceUrl, httpVersion: "2" });
    const admin = createClient(ServerAdminService, transport);
    await admin.listServers({}, { headers: { authorization: `Bearer ${WRONG_TOKEN}` } }).catch(() => undefined);
    await admin.listServers({}, { headers: { authorization: `Bearer ${TEST_SERVICE_TOKEN}` } });
    await gw.createServer();
    const all = [...gw.serviceLog.raw, ...gw.gatewayLog.raw].join("\n");
    t.true(
      gw.serviceLog.raw.some((line) => line.includes("rpc rejected")),
      "the rejection itself is logged",
    );
    for (const token of [WRONG_TOKEN, TEST_SERVICE_TOKEN]) t.false(all.includes(token));
  } finally {
    await gw.close();
  }
});
