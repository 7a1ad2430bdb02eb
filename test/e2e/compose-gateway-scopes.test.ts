/**
 * Least privilege for the gateway's service token in docker-compose.yml: loaded by compose-go
 * (scripts/infra/compose-config, as Docker Compose itself loads it), the referral service's
 * environment is read by the referral service's own settings reader (readAccessSettings), and the
 * token named "gateway" holds the scopes the gateway needs (README: ingest, pull, clicks:record,
 * dashboard, receipts), not `admin`, unless the operator adds it (for the operator dashboard, DASHBOARD_TOKEN).
 */
import test from "ava";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { DEFAULT_GATEWAY_SCOPES, readAccessSettings } from "../../services/access/bootstrap.js";
import { grants } from "../../services/access/scopes.js";
import { createEnvReader } from "../../services/shared/runtime/config.js";
import { REPO_ROOT } from "../../scripts/harness/processes.js";

const run = promisify(execFile);
const composeDir = mkdtempSync(join(tmpdir(), "compose-scopes-"));
const composeConfig = join(composeDir, "compose-config");

test.before(async () => {
  await run("go", ["build", "-o", composeConfig, "."], { cwd: join(REPO_ROOT, "scripts/infra/compose-config"), timeout: 300_000 });
});
test.after.always(() => rmSync(composeDir, { recursive: true, force: true }));

/** The referral service's environment as compose resolves it from `env` (plus the required secrets). */
async function referralServiceEnv(env: Record<string, string>): Promise<Record<string, string>> {
  const { stdout } = await run(composeConfig, [join(REPO_ROOT, "docker-compose.yml")], {
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      SECRETS_KEY: randomBytes(32).toString("base64"),
      ADMIN_SERVICE_TOKEN: randomBytes(32).toString("base64"),
      GATEWAY_SERVICE_TOKEN: randomBytes(32).toString("base64"),
      ...env,
    },
    maxBuffer: 16 * 1024 * 1024,
  });
  const project = JSON.parse(stdout) as { services: Record<string, { environment?: Record<string, string | null> }> };
  const environment = project.services["referral-service"]?.environment ?? {};
  return Object.fromEntries(Object.entries(environment).map(([name, value]) => [name, value ?? ""]));
}

function gatewayTokenScopes(env: Record<string, string>): readonly string[] {
  const reader = createEnvReader(env);
  const settings = reader.finish(readAccessSettings(reader));
  const gateway = settings.bootstrapTokens.find((t) => t.name === "gateway");
  if (gateway === undefined) throw new Error("compose gives the referral service no gateway token");
  return gateway.scopes;
}

test("by default the gateway's token gets the gateway's scopes (ingest, pull, claims, clicks:record, dashboard, receipts), never admin", async (t) => {
  const scopes = gatewayTokenScopes(await referralServiceEnv({}));
  t.deepEqual([...scopes], ["ingest", "pull", "claims", "clicks:record", "dashboard", "receipts"]);
  t.deepEqual([...scopes], [...DEFAULT_GATEWAY_SCOPES], "the process's own default, one home");
  t.false(grants(scopes, "admin"));
  // Setting DASHBOARD_TOKEN alone does not widen it either: the operator adds admin on purpose.
  t.false(grants(gatewayTokenScopes(await referralServiceEnv({ DASHBOARD_TOKEN: "d".repeat(48) })), "admin"));
});

test("GATEWAY_SERVICE_TOKEN_SCOPES from the shell reaches the referral service (add admin for the operator dashboard)", async (t) => {
  const scopes = gatewayTokenScopes(await referralServiceEnv({ GATEWAY_SERVICE_TOKEN_SCOPES: "ingest,pull,clicks:record,dashboard,admin" }));
  t.deepEqual([...scopes], ["ingest", "pull", "clicks:record", "dashboard", "admin"]);
});
