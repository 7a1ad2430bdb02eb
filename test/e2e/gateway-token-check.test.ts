/**
 * The gateway checks its own service token at start (gateway/check-service-token.ts): a wrong (not
 * missing) REFERRAL_SERVICE_TOKEN, or one without every scope its routes need, exits 2 with the reason in
 * one line (naming each missing scope) before anything listens, instead of starting, reporting ready and
 * answering those routes with errors. The referral service runs in-process on a database of its own; the
 * gateway is a real OS process.
 */
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { checkServiceToken } from "../../gateway/check-service-token.js";
import { createReferralServiceClients } from "../../gateway/clients.js";
import { DEFAULT_GATEWAY_SCOPES } from "../../services/access/bootstrap.js";
import { ConfigError } from "../../services/shared/runtime/config.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createRpcClients } from "../../services/shared/rpc/service-clients.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { freePort, useProcesses } from "../../scripts/harness/processes.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { configProblems, startGatewayProcess } from "../../scripts/harness/e2e-support.js";

const test = anyTest as TestFn<{ stack: TestStack }>;

test.before(async (t) => {
  t.context = { stack: await startStack({ gateway: false }) };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

/** The start-up check's clients: the gateway's own, plus the access client the dashboard uses. */
function tokenCheckClients(url: string, clients: ReturnType<typeof createReferralServiceClients>, token = "rst_anything-at-all-0123456789-0123456789") {
  return { ...clients, access: createRpcClients(createServiceTransport(url, token)).access };
}

/** Starts gateway/main.ts with `token` and waits for it to exit; its config problems and exit code. */
async function startWith(t: ExecutionContext<{ stack: TestStack }>, token: string) {
  const group = useProcesses(t);
  const proc = group.spawn({
    name: "gateway",
    file: "gateway/main.ts",
    env: { PORT: String(await freePort()), OPS_PORT: "0", HOST: "127.0.0.1", REFERRAL_SERVICE_URL: t.context.stack.rpcUrl, REFERRAL_SERVICE_TOKEN: token },
  });
  // A gateway that does not exit on its own (the bug: it started and listened) is killed after 60 s (tsx compiles the gateway first: slow on a loaded machine).
  const timer = setTimeout(() => void proc.kill(), 60_000);
  const exit = await proc.exited;
  clearTimeout(timer);
  return { code: exit.code, problems: configProblems(proc.stdout) ?? [], output: proc.output };
}

test("a wrong REFERRAL_SERVICE_TOKEN: exit 2 at start, one problem naming the setting, the token not echoed, nothing listening", async (t) => {
  const wrong = `rst_${randomBytes(24).toString("base64url")}`;
  const run = await startWith(t, wrong);
  t.is(run.code, 2, run.output);
  t.is(run.problems.length, 1, run.output);
  t.regex(run.problems[0] ?? "", /^REFERRAL_SERVICE_TOKEN is refused by the referral service at http:\/\/127\.0\.0\.1:\d+ /);
  t.false(run.output.includes(wrong), "the token is not echoed");
  t.false(run.output.includes("gateway listening"));
});

test("a token without the gateway's scopes: exit 2 naming every missing scope", async (t) => {
  const { token } = await t.context.stack.clients.access.createServiceToken({ name: `reader-${randomBytes(3).toString("hex")}`, scopes: ["read"] });
  const run = await startWith(t, token);
  t.is(run.code, 2, run.output);
  t.is(run.problems.length, 1, run.output);
  t.regex(run.problems[0] ?? "", /^REFERRAL_SERVICE_TOKEN lacks scopes the gateway's routes need: "ingest" \(ingest\), "pull" /);
  for (const scope of DEFAULT_GATEWAY_SCOPES) t.true((run.problems[0] ?? "").includes(`"${scope}" (`), scope);
});

test("a token with only ingest: exit 2 at start, one line naming the five missing scopes, nothing listening (it used to start, report ready and answer links, /api/votes and pull with 500)", async (t) => {
  const { token } = await t.context.stack.clients.access.createServiceToken({ name: `ingest-only-${randomBytes(3).toString("hex")}`, scopes: ["ingest"] });
  const run = await startWith(t, token);
  t.is(run.code, 2, run.output);
  t.is(run.problems.length, 1, run.output);
  const problem = run.problems[0] ?? "";
  for (const scope of DEFAULT_GATEWAY_SCOPES.filter((s) => s !== "ingest")) t.true(problem.includes(`"${scope}" (`), `${scope}: ${problem}`);
  t.false(problem.includes('"ingest" ('), problem);
  t.false(run.output.includes(token), "the token is not echoed");
  t.false(run.output.includes("gateway listening"));
});

test("the right token: the gateway says it was accepted and becomes ready", async (t) => {
  const group = useProcesses(t);
  const { token } = await t.context.stack.clients.access.createServiceToken({
    name: `gw-${randomBytes(3).toString("hex")}`,
    scopes: [...DEFAULT_GATEWAY_SCOPES],
  });
  const gateway = await startGatewayProcess(group, {
    port: await freePort(),
    referralServiceUrl: t.context.stack.rpcUrl,
    env: { REFERRAL_SERVICE_TOKEN: token },
  });
  t.regex(gateway.proc.stdout, /the referral service accepts the gateway's service token/);
  t.false(gateway.proc.stdout.includes("lacks the admin scope"), "no operator dashboard, no warning");
  // With DASHBOARD_TOKEN (the operator dashboard) the same token starts, with a warning that operators would be refused.
  const operator = await startGatewayProcess(group, {
    port: await freePort(),
    referralServiceUrl: t.context.stack.rpcUrl,
    env: { REFERRAL_SERVICE_TOKEN: token, DASHBOARD_TOKEN: randomBytes(24).toString("hex") },
  });
  t.regex(operator.proc.stdout, /DASHBOARD_TOKEN is set, but REFERRAL_SERVICE_TOKEN lacks the admin scope the operator dashboard needs/);
});

test("checkServiceToken: a referral service that does not answer is not the token's fault: logged, start continues", async (t) => {
  const clients = createReferralServiceClients("http://127.0.0.1:9", "rst_anything-at-all-0123456789-0123456789");
  const outcome = await checkServiceToken(
    { clients: tokenCheckClients("http://127.0.0.1:9", clients), log: createLogger("token-check", "silent"), referralServiceUrl: "http://127.0.0.1:9" },
    { waitMs: 300, retryMs: 50 },
  );
  t.is(outcome, "unreachable");
  const refused = createReferralServiceClients(t.context.stack.rpcUrl, "rst_not-a-known-token-0123456789-0123456789");
  const refusedClients = tokenCheckClients(t.context.stack.rpcUrl, refused, "rst_not-a-known-token-0123456789-0123456789");
  await t.throwsAsync(checkServiceToken({ clients: refusedClients, log: createLogger("token-check", "silent"), referralServiceUrl: t.context.stack.rpcUrl }), {
    instanceOf: ConfigError,
  });
});
