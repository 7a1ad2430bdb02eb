/**
 * `npm start` (scripts/start.ts) as a newcomer runs it: no DATABASE_URL, no
 * KAFKA_BROKERS, a fresh data folder. It must come up on its own (embedded
 * PostgreSQL, in-process bus), print a copy-paste example that works as printed,
 * drain on SIGTERM, and keep its data across restarts, without ever printing a secret.
 */
import test from "ava";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { openToOthers } from "../helpers/file-modes.js";
import { eventually } from "../helpers/eventually.js";
import { randomBytes } from "node:crypto";
import { freePorts, REPO_ROOT, useProcesses, type ProcessGroup } from "../../scripts/harness/processes.js";
import { openLoginLink, ownerApi } from "../helpers/owner-session.js";
import { configProblems } from "../../scripts/harness/e2e-support.js";
import { SECRETS_KEY_MISMATCH } from "../../services/shared/adapters/secrets-key-check.js";
import { createClient } from "@connectrpc/connect";
import { HeartService } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";

const run = promisify(execFile);

/** The banner's example: the four shell lines from `SECRET=` to the curl line, exactly as printed (complete: up to its newline). */
const EXAMPLE = /^( {2}SECRET=.*\n {2}BODY=.*\n {2}T=.*\n {2}curl .*)\n/m;
/** The banner's login link example: TOKEN= and the buf curl command (two lines), exactly as printed. */
const LOGIN_EXAMPLE = /^( {2}TOKEN=.*\n {2}npx buf curl .*\\\n {4}-d .*CreateDashboardLoginLink)\n/m;

async function startAllInOne(
  group: ProcessGroup,
  opts: { name: string; dataDir: string; port: number; rpcPort: number; opsPort: number; secretsKey?: string },
) {
  const proc = group.spawn({
    name: opts.name,
    file: "scripts/start.ts",
    env: {
      DATA_DIR: opts.dataDir,
      PORT: String(opts.port),
      REFERRAL_SERVICE_PORT: String(opts.rpcPort),
      OPS_PORT: String(opts.opsPort),
      LOG_LEVEL: "info",
      // The embedded default: neither may reach the process (the helper's base env has neither; this states it).
      DATABASE_URL: undefined,
      KAFKA_BROKERS: undefined,
      SECRETS_KEY: opts.secretsKey,
    },
  });
  await proc.waitReady(`http://127.0.0.1:${opts.port}/readyz`, 60_000);
  // /readyz can answer before the demo is seeded; the banner comes right after.
  const [, example] = await proc.waitForOutput(EXAMPLE, 30_000);
  return { proc, example: example! };
}

/** Runs the example with bash from the repository root (where `npm start` runs), as a user pasting it would. */
async function runExample(script: string): Promise<Record<string, unknown>> {
  const { stdout } = await run("bash", ["-c", script], { cwd: REPO_ROOT, timeout: 20_000 });
  return JSON.parse(stdout.trim()) as Record<string, unknown>;
}

test("npm start with no DATABASE_URL/KAFKA_BROKERS: ready within 60 s, the banner's example works as printed, SIGTERM exits 0, a restart on the same DATA_DIR keeps the data (duplicate) and prints a fresh working example, a foreign SECRETS_KEY exits 2, and no secret is printed", async (t) => {
  t.timeout(180_000);
  const dataDir = mkdtempSync(join(tmpdir(), "e2e-embedded-"));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const group = useProcesses(t);
  const [port, rpcPort, opsPort] = await freePorts(3);

  const first = await startAllInOne(group, { name: "npm start #1", dataDir, port: port!, rpcPort: rpcPort!, opsPort: opsPort! });
  t.regex(first.proc.stdout, /embedded PostgreSQL \(PGlite\)/);
  t.regex(first.proc.stdout, /in-process bus in place of Kafka/);
  t.true(first.example.includes(`http://127.0.0.1:${port}/api/referral/events`), "the example targets this gateway");

  const registered = await runExample(first.example);
  t.deepEqual(Object.keys(registered).sort(), ["ok", "referral_id", "state"]);
  t.is(registered.ok, true);
  t.is(registered.state, "registered");
  t.regex(String(registered.referral_id), /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

  t.is((await fetch(`http://127.0.0.1:${port}/metrics`)).status, 404, "no /metrics on the public port");
  t.regex(await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text(), /requests_total/, "/metrics on the ops port");
  // Retention runs here as in the referral service: its first pass starts with the process.
  await eventually(
    async () => /retention_oldest_row_age_seconds\{rule="published_outbox"/.test(await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text()),
    {
      message: "the retention loop's first pass on /metrics",
    },
  );
  // The newcomer's way to the owner dashboard: run the printed buf curl, open the link it mints.
  const [, loginExample] = await first.proc.waitForOutput(LOGIN_EXAMPLE, 30_000);
  const { stdout: minted } = await run("bash", ["-c", loginExample!], { cwd: REPO_ROOT, timeout: 60_000 });
  const { url } = JSON.parse(minted) as { url: string };
  t.true(url.startsWith(`http://127.0.0.1:${port}/dashboard/login?token=dl_`), url);
  const session = await openLoginLink(`http://127.0.0.1:${port}`, url);
  const owned = JSON.parse((await ownerApi(`http://127.0.0.1:${port}`, session, "GET", "/servers")).text) as { servers: { name: string }[] };
  t.deepEqual(
    owned.servers.map((s) => s.name),
    ["Demo Server"],
    "the demo owner sees the demo server",
  );
  // A voter's receipt in the all-in-one (PGlite, the in-process gateway and its own token): the link opens here.
  const hearts = createClient(HeartService, createServiceTransport(`http://127.0.0.1:${rpcPort}`, readFileSync(join(dataDir, "service-token"), "utf8").trim()));
  const demoId = (owned.servers[0] as { id?: string } | undefined)?.id ?? "";
  const cast = await hearts.castHeart({ serverId: demoId, username: "Steve", voterIdentity: "embedded-voter", ip: "203.0.113.9", userAgent: "Mozilla/5.0" });
  t.true(cast.receiptUrl.startsWith(`http://127.0.0.1:${port}/receipts/`), cast.receiptUrl);
  t.like(await (await fetch(`${cast.receiptUrl}.json`)).json(), { server_name: "Demo Server", username: "Steve", outcome: "counted" });

  t.deepEqual(await first.proc.stop(), { code: 0, signal: null }, "SIGTERM drains and exits 0");
  t.deepEqual(openToOthers(dataDir), [], "the data folder (database, secrets key, tokens) is private to the user");

  const second = await startAllInOne(group, { name: "npm start #2", dataDir, port: port!, rpcPort: rpcPort!, opsPort: opsPort! });
  t.not(second.example, first.example, "the restart does not offer the already-sent example as a first paste");
  t.deepEqual(await runExample(first.example), { ok: true, duplicate: true }, "the first run's event is remembered across the restart");
  t.like(await runExample(second.example), { ok: true, state: "registered" }, "the restart's example registers, as its banner says");
  t.deepEqual(await second.proc.stop(), { code: 0, signal: null });

  // The embedded database's secrets were sealed with DATA_DIR/secrets.key: another key stops the start.
  const foreignKey = randomBytes(32).toString("base64");
  const third = group.spawn({
    name: "npm start #3 (foreign SECRETS_KEY)",
    file: "scripts/start.ts",
    env: {
      DATA_DIR: dataDir,
      PORT: String(port),
      REFERRAL_SERVICE_PORT: String(rpcPort),
      DATABASE_URL: undefined,
      KAFKA_BROKERS: undefined,
      SECRETS_KEY: foreignKey,
    },
  });
  const thirdExit = await Promise.race([
    third.exited,
    third.waitForOutput(/Referral service is up/, 120_000).then(
      () => undefined,
      () => third.exited,
    ),
  ]);
  t.is(thirdExit?.code, 2, `a foreign SECRETS_KEY exits 2:\n${third.output}`);
  t.deepEqual(configProblems(third.stdout), [SECRETS_KEY_MISMATCH]);
  t.false(third.output.includes(foreignKey));

  const referralSecret = readFileSync(join(dataDir, "demo-referral-secret"), "utf8").trim();
  const secretsKey = readFileSync(join(dataDir, "secrets.key"), "utf8").trim();
  t.true(referralSecret.length >= 16 && secretsKey.length >= 16);
  // Any other secret the data folder holds (the dashboard sign-in token) must not be printed either.
  const dashboardTokenPath = join(dataDir, "dashboard-token");
  const secrets = {
    "referral secret": referralSecret,
    "secrets key": secretsKey,
    "admin service token": readFileSync(join(dataDir, "service-token"), "utf8").trim(),
    ...(existsSync(dashboardTokenPath) ? { "dashboard token": readFileSync(dashboardTokenPath, "utf8").trim() } : {}),
  };
  for (const proc of [first.proc, second.proc, third]) {
    for (const [what, value] of Object.entries(secrets)) t.false(proc.output.includes(value), `${proc.name} printed the ${what}`);
  }
});
