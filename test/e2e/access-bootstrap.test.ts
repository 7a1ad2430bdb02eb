/**
 * How tokens get into a deployment, with the real processes: the referral service
 * refuses to start when no token could call it (exit 2, the fix in the message, no
 * token echoed); with ADMIN_SERVICE_TOKEN and GATEWAY_SERVICE_TOKEN it upserts both
 * (hashes only), the admin token manages servers, the gateway token cannot, and a
 * gateway process with REFERRAL_SERVICE_TOKEN becomes ready (its readiness is an RPC).
 */
import test from "ava";
import { randomBytes } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { hashToken } from "../../services/shared/runtime/secrets.js";
import { createTestDatabase } from "../../scripts/harness/db.js";
import { freePort, useProcesses } from "../../scripts/harness/processes.js";
import { configProblems, newSecretsKey, startGatewayProcess, startReferralServiceProcess } from "../../scripts/harness/e2e-support.js";

test("the referral service refuses to start with no service token (exit 2); with ADMIN_SERVICE_TOKEN and GATEWAY_SERVICE_TOKEN it starts and each token has its own scopes", async (t) => {
  t.timeout(120_000);
  const db = await createTestDatabase({ maxConnections: 2 });
  t.teardown(() => db.drop());
  await db.prisma.serviceToken.deleteMany({});
  const group = useProcesses(t);
  const secretsKey = newSecretsKey();

  const refused = group.spawn({
    name: "referral-service (no token)",
    file: "services/referral-service/main.ts",
    env: { DATABASE_URL: db.url, SECRETS_KEY: secretsKey, PORT: "0", OPS_PORT: "0" },
  });
  t.is((await refused.exited).code, 2);
  const problems = configProblems(refused.stdout) ?? [];
  t.is(problems.length, 1);
  t.regex(problems[0] ?? "", /^no service token is configured, so nothing could call the referral service: set ADMIN_SERVICE_TOKEN and GATEWAY_SERVICE_TOKEN/);

  const adminToken = randomBytes(32).toString("base64");
  const gatewayToken = randomBytes(32).toString("base64");
  const service = await startReferralServiceProcess(
    group,
    { databaseUrl: db.url, kafkaBrokers: "", secretsKey, groupId: "unused" },
    { env: { ADMIN_SERVICE_TOKEN: adminToken, GATEWAY_SERVICE_TOKEN: gatewayToken } },
  );
  const stored = await db.prisma.serviceToken.findMany({ orderBy: { name: "asc" } });
  t.deepEqual(
    stored.map((s) => ({ name: s.name, scopes: s.scopes, tokenHash: s.tokenHash })),
    [
      { name: "admin", scopes: ["admin"], tokenHash: hashToken(adminToken) },
      { name: "gateway", scopes: ["ingest", "pull", "claims", "clicks:record", "dashboard", "receipts"], tokenHash: hashToken(gatewayToken) },
    ],
    "only hashes are stored",
  );
  const asAdmin = createClient(ServerAdminService, createServiceTransport(service.rpcUrl, adminToken));
  const { server } = await asAdmin.createServer({ name: "bootstrapped" });
  t.truthy(server?.id);
  const asGateway = createClient(ServerAdminService, createServiceTransport(service.rpcUrl, gatewayToken));
  const denied = await asGateway.createServer({ name: "nope" }).catch((e: unknown) => ConnectError.from(e));
  t.is((denied as ConnectError).code, Code.PermissionDenied);
  await asGateway.resolveSigningKeys({ serverId: server!.id });

  // The gateway process with its token: ready means its readiness RPC (ResolveSigningKeys) is accepted.
  const gateway = await startGatewayProcess(group, {
    port: await freePort(),
    referralServiceUrl: service.rpcUrl,
    env: { REFERRAL_SERVICE_TOKEN: gatewayToken },
  });
  t.is((await fetch(`${gateway.url}/readyz`)).status, 200);
  for (const proc of [refused, service.proc, gateway.proc]) {
    t.false(proc.output.includes(adminToken) || proc.output.includes(gatewayToken), `${proc.name} printed a token`);
  }
});
