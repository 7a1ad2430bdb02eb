/**
 * Misconfiguration that only shows against real servers, each process run as a real OS process:
 *  - a SECRETS_KEY other than the one that sealed the database's secrets stops the start with
 *    exit 2 and one problem naming it (a check value in `secrets_key_check`), instead of 500s later;
 *  - an unreachable database or broker is logged on the first failed attempt (each attempt is
 *    bounded well under 10 s) with what was tried, while /healthz answers and /readyz says what the
 *    process waits for; SIGTERM still drains and exits 0;
 *  - `npm start` with DATABASE_URL prints an example that works against THAT database, also after
 *    a restart (a fresh one once the previous one was sent).
 */
import test, { type ExecutionContext } from "ava";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { freePorts, jsonLines, REPO_ROOT, useProcesses, type ManagedProcess } from "../../scripts/harness/processes.js";
import { configProblems, newSecretsKey, startReferralServiceProcess, type SystemSettings } from "../../scripts/harness/e2e-support.js";
import { DEPENDENCY_ATTEMPT_TIMEOUT_MS } from "../../services/shared/runtime/startup.js";
import { SECRETS_KEY_MISMATCH } from "../../services/shared/adapters/secrets-key-check.js";

const run = promisify(execFile);

let db: TestDatabase;
test.before(async () => {
  db = await createTestDatabase({ maxConnections: 2 });
});
test.after.always(async () => {
  await db?.drop();
});

/** A TCP port nothing listens on (free a moment ago). */
async function closedPort(): Promise<number> {
  const [port] = await freePorts(1);
  return port!;
}

const settings = (secretsKey: string, databaseUrl = db.url): SystemSettings => ({
  databaseUrl,
  kafkaBrokers: process.env.KAFKA_BROKERS ?? "",
  secretsKey,
  groupId: "unused",
});

/**
 * Waits for the process's exit and returns the listed problems (exit 2 expected). Printing
 * `passedCheck` first means the start went past the check: the test fails at once instead of hanging.
 */
async function expectConfigExit(t: ExecutionContext, proc: ManagedProcess, passedCheck: RegExp, secrets: string[]): Promise<string[]> {
  const exit = await Promise.race([
    proc.exited,
    proc.waitForOutput(passedCheck, 120_000).then(
      () => undefined,
      () => proc.exited,
    ),
  ]);
  if (!exit) {
    t.fail(`the start went past the key check (printed ${passedCheck}):\n${proc.output}`);
    return [];
  }
  t.is(exit.code, 2, `exit 2 on a bad configuration:\n${proc.output}`);
  const problems = configProblems(proc.stdout) ?? [];
  for (const secret of secrets) t.false(proc.output.includes(secret), "a secret value appears in the output");
  return problems;
}

test.serial(
  "referral service and delivery with a SECRETS_KEY other than the one that sealed the database's secrets exit 2 naming the mismatch, echoing no key",
  async (t) => {
    const group = useProcesses(t);
    const original = newSecretsKey();
    // The first process on the database seals the check value with its key.
    const first = await startReferralServiceProcess(group, settings(original));
    t.deepEqual(await first.proc.stop(), { code: 0, signal: null });

    const wrong = newSecretsKey();
    const referral = group.spawn({
      name: "referral-service (wrong key)",
      file: "services/referral-service/main.ts",
      env: { DATABASE_URL: db.url, SECRETS_KEY: wrong, PORT: "0", OPS_PORT: "0" },
    });
    t.deepEqual(await expectConfigExit(t, referral, /referral service listening/, [wrong, original]), [SECRETS_KEY_MISMATCH]);

    const delivery = group.spawn({
      name: "delivery (wrong key)",
      file: "services/delivery/main.ts",
      // The key is checked before Kafka is awaited: a closed broker port does not delay the answer.
      env: { DATABASE_URL: db.url, KAFKA_BROKERS: `127.0.0.1:${await closedPort()}`, SECRETS_KEY: wrong, OPS_PORT: "0" },
    });
    t.deepEqual(await expectConfigExit(t, delivery, /cannot reach kafka/, [wrong, original]), [SECRETS_KEY_MISMATCH]);

    // The original key still starts.
    const again = await startReferralServiceProcess(group, settings(original));
    t.deepEqual(await again.proc.stop(), { code: 0, signal: null });
  },
);

/** The first "cannot reach <dependency>" error line of a process. */
async function firstUnreachableLine(proc: ManagedProcess, dependency: string): Promise<Record<string, unknown>> {
  await proc.waitForOutput(new RegExp(`"msg":"cannot reach ${dependency} at [^\\n]*\\n`), 60_000);
  return jsonLines(proc.stdout).find((l) => String(l.msg).startsWith(`cannot reach ${dependency}`))!;
}

/** /healthz answers 200 while the start waits; /readyz answers 503 with the startup check naming what it waits for. */
async function checkOpsWhileWaiting(t: ExecutionContext, opsPort: number, waitingFor: RegExp): Promise<void> {
  const health = await fetch(`http://127.0.0.1:${opsPort}/healthz`);
  t.is(health.status, 200);
  const ready = await fetch(`http://127.0.0.1:${opsPort}/readyz`);
  t.is(ready.status, 503);
  const body = (await ready.json()) as { checks: Record<string, string> };
  t.regex(body.checks.startup ?? "", waitingFor);
}

test("the bound of one attempt to reach a dependency keeps the first report well within 10 s", (t) => {
  t.true(DEPENDENCY_ATTEMPT_TIMEOUT_MS <= 6_000);
});

test("relay with an unreachable broker: the first failed attempt is logged naming kafka and the brokers tried, /healthz 200, /readyz 503 saying why, SIGTERM exits 0", async (t) => {
  const group = useProcesses(t);
  const [opsPort] = await freePorts(1);
  const broker = `127.0.0.1:${await closedPort()}`;
  const relay = group.spawn({
    name: "relay",
    file: "services/relay/main.ts",
    env: { DATABASE_URL: db.url, KAFKA_BROKERS: broker, OPS_PORT: String(opsPort), LOG_LEVEL: "info" },
  });
  const line = await firstUnreachableLine(relay, "kafka");
  t.is(line.attempts, 1, "reported on the first failed attempt, not after retries");
  t.is(line.target, broker);
  t.regex(String(line.error), /ECONNREFUSED/);
  await checkOpsWhileWaiting(t, opsPort!, new RegExp(`^down: waiting for kafka at ${broker}: .*ECONNREFUSED`));
  t.deepEqual(await relay.stop(), { code: 0, signal: null });
});

test("delivery with an unreachable broker: reported on the first attempt with the brokers tried, /readyz 503 saying why, SIGTERM exits 0", async (t) => {
  // A database of its own: the key check (before Kafka is awaited) must pass with this test's key.
  const own = await createTestDatabase({ maxConnections: 1 });
  t.teardown(() => own.drop());
  const group = useProcesses(t);
  const [opsPort] = await freePorts(1);
  const broker = `127.0.0.1:${await closedPort()}`;
  const delivery = group.spawn({
    name: "delivery",
    file: "services/delivery/main.ts",
    env: { DATABASE_URL: own.url, KAFKA_BROKERS: broker, SECRETS_KEY: newSecretsKey(), OPS_PORT: String(opsPort), KAFKA_GROUP_ID: "misconfiguration-test" },
  });
  const line = await firstUnreachableLine(delivery, "kafka");
  t.is(line.attempts, 1);
  t.is(line.target, broker);
  await checkOpsWhileWaiting(t, opsPort!, /^down: waiting for kafka at /);
  t.deepEqual(await delivery.stop(), { code: 0, signal: null });
});

test("referral service and relay with an unreachable database: the first failed attempt names the database without its password, /healthz 200, /readyz 503 saying why", async (t) => {
  const group = useProcesses(t);
  const password = `pw-${Math.random().toString(36).slice(2)}`;
  const databaseUrl = `postgresql://app:${password}@127.0.0.1:${await closedPort()}/referral`;
  const [referralOps, relayOps] = await freePorts(2);
  const referral = group.spawn({
    name: "referral-service",
    file: "services/referral-service/main.ts",
    env: { DATABASE_URL: databaseUrl, SECRETS_KEY: newSecretsKey(), PORT: "0", OPS_PORT: String(referralOps) },
  });
  const relay = group.spawn({
    name: "relay",
    file: "services/relay/main.ts",
    env: { DATABASE_URL: databaseUrl, KAFKA_BROKERS: process.env.KAFKA_BROKERS ?? "127.0.0.1:9092", OPS_PORT: String(relayOps) },
  });
  for (const [proc, opsPort] of [
    [referral, referralOps!],
    [relay, relayOps!],
  ] as const) {
    const line = await firstUnreachableLine(proc, "database");
    t.is(line.attempts, 1);
    t.is(line.target, databaseUrl.replace(password, "***"));
    // The start-up ping runs on the one executor (node-postgres): the cause is the driver's.
    t.regex(String(line.error), /ECONNREFUSED 127\.0\.0\.1/);
    await checkOpsWhileWaiting(t, opsPort, /^down: waiting for database at postgresql:\/\/app:\*\*\*@/);
    t.false(proc.output.includes(password), "the database password is never printed");
    t.deepEqual(await proc.stop(), { code: 0, signal: null });
  }
});

/** The banner's example: the four shell lines from `SECRET=` to the curl line. */
const EXAMPLE = /^( {2}SECRET=.*\n {2}BODY=.*\n {2}T=.*\n {2}curl .*)\n/m;

test("npm start with DATABASE_URL prints an example that works against that database, ignoring another database's demo in DATA_DIR; after a restart the printed example registers again", async (t) => {
  t.timeout(120_000);
  const own = await createTestDatabase({ maxConnections: 1 });
  t.teardown(() => own.drop());
  const dataDir = mkdtempSync(join(tmpdir(), "e2e-start-db-"));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  // What an earlier embedded run leaves behind: a demo of ANOTHER database.
  writeFileSync(join(dataDir, "demo.json"), JSON.stringify({ serverId: "7d3f4a10-0000-4000-8000-000000000000", token: "from-the-embedded-database" }));
  writeFileSync(join(dataDir, "demo-referral-secret"), "rsec_from_the_embedded_database");
  const group = useProcesses(t);
  const [port, rpcPort] = await freePorts(2);
  const start = async (name: string) => {
    const proc = group.spawn({
      name,
      file: "scripts/start.ts",
      env: { DATABASE_URL: own.url, KAFKA_BROKERS: undefined, DATA_DIR: dataDir, PORT: String(port), REFERRAL_SERVICE_PORT: String(rpcPort) },
    });
    const [, example] = await proc.waitForOutput(EXAMPLE, 90_000);
    return { proc, example: example! };
  };
  const paste = async (script: string) =>
    JSON.parse((await run("bash", ["-c", script], { cwd: REPO_ROOT, timeout: 20_000 })).stdout.trim()) as Record<string, unknown>;

  const first = await start("npm start #1");
  t.false(first.example.includes("from-the-embedded-database"));
  t.like(await paste(first.example), { ok: true, state: "registered" });
  t.deepEqual(await first.proc.stop(), { code: 0, signal: null });

  const second = await start("npm start #2");
  t.not(second.example, first.example, "the sent example is not printed again as if new");
  t.like(await paste(second.example), { ok: true, state: "registered" }, "the restart's example registers");
  t.deepEqual(await paste(first.example), { ok: true, duplicate: true }, "the first example's event is remembered");
  t.deepEqual(await second.proc.stop(), { code: 0, signal: null });
});
