/**
 * The containers, without a Docker engine:
 *  - docker-compose.yml is loaded by compose-go, the Compose loader Docker Compose itself uses
 *    (scripts/infra/compose-config: parse, interpolate, merge, validate against the Compose
 *    specification's schema, normalise), and the resolved project is checked: only the gateway
 *    publishes a port, restart policies, Kafka's data on its volume, every README setting passed
 *    to the processes that use it, every app service running `node` on compiled JavaScript;
 *  - the image's entry command (the Dockerfile's ENTRYPOINT, tini, plus each compose command) runs
 *    here with the compose environment after `npm run build`, against real PostgreSQL and Kafka:
 *    the migration exits 0, each process gets ready, and SIGTERM (sent to tini, PID 1 in the
 *    container) drains node and exits 0.
 */
import test, { type ExecutionContext } from "ava";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { freePorts, REPO_ROOT, useProcesses, type ProcessGroup } from "../../scripts/harness/processes.js";
import { newSecretsKey, precreateTopics } from "../../scripts/harness/e2e-support.js";

const run = promisify(execFile);

/** The part of compose-go's resolved project these tests read. */
interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[] | null;
  entrypoint?: string[] | null;
  environment?: Record<string, string | null>;
  ports?: Array<{ target: number; published: string }>;
  restart?: string;
  volumes?: Array<{ type: string; source: string; target: string }>;
}
interface ComposeProject {
  services: Record<string, ComposeService>;
}

/** The services built from this repository's image, by the process each runs. */
const APP_SERVICES = ["migrate", "referral-service", "gateway", "relay", "delivery"] as const;
/** README "Used by" names -> compose services. */
const PROCESS_SERVICES: Record<string, string[]> = {
  gateway: ["gateway"],
  "referral service": ["referral-service"],
  relay: ["relay"],
  delivery: ["delivery"],
  all: ["gateway", "referral-service", "relay", "delivery"],
};
/** Settings set to fixed values inside the compose network (ports and addresses of the containers). */
const FIXED_IN_COMPOSE = new Set(["PORT", "OPS_PORT", "HOST", "REFERRAL_SERVICE_URL"]);
/** Settings the compose file deliberately leaves out, and why. */
const NOT_IN_COMPOSE: Record<string, string> = {
  SECRETS_KEY_FILE: "compose requires SECRETS_KEY itself; a key file needs a mounted secret, which the README describes",
};

const composeDir = mkdtempSync(join(tmpdir(), "compose-config-"));
const composeConfig = join(composeDir, "compose-config");

test.before(async () => {
  // Built once; go.sum pins compose-go, fetched through the Go module proxy on a fresh machine.
  await run("go", ["build", "-o", composeConfig, "."], { cwd: join(REPO_ROOT, "scripts/infra/compose-config"), timeout: 300_000 });
});
test.after.always(() => rmSync(composeDir, { recursive: true, force: true }));

/** The two service tokens compose requires (ADMIN_SERVICE_TOKEN, GATEWAY_SERVICE_TOKEN), fresh per load unless `env` gives them. */
const serviceTokens = () => ({ ADMIN_SERVICE_TOKEN: randomBytes(32).toString("base64"), GATEWAY_SERVICE_TOKEN: randomBytes(32).toString("base64") });

/** Loads docker-compose.yml with compose-go in the given environment (on top of PATH, HOME and the service tokens only). */
async function loadCompose(env: Record<string, string>, opts: { tokens?: boolean } = {}): Promise<ComposeProject> {
  const { stdout } = await run(composeConfig, [join(REPO_ROOT, "docker-compose.yml")], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...(opts.tokens === false ? {} : serviceTokens()), ...env },
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(stdout) as ComposeProject;
}

/** The Dockerfile's last stage: its ENTRYPOINT (exec form) and ENV settings. */
function imageRuntime(): { entrypoint: string[]; env: Record<string, string> } {
  const dockerfile = readFileSync(join(REPO_ROOT, "Dockerfile"), "utf8");
  const lastStage = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
  const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(lastStage)?.[1];
  const env: Record<string, string> = {};
  for (const [, name, value] of lastStage.matchAll(/^ENV (\w+)=(\S+)$/gm)) env[name!] = value!;
  return { entrypoint: entrypoint ? (JSON.parse(entrypoint) as string[]) : [], env };
}

/** The settings table of the README: each setting and the processes its "Used by" cell names. */
function readmeSettings(): Array<{ name: string; services: string[] }> {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const table = readme.slice(readme.indexOf("## Settings"));
  const rows: Array<{ name: string; services: string[] }> = [];
  for (const [, names, usedBy] of table.matchAll(/^\| (`[A-Z_]+`(?:, `[A-Z_]+`)*) \| ([^|]+) \|/gm)) {
    const services = Object.entries(PROCESS_SERVICES)
      .filter(([process]) => new RegExp(`\\b${process}\\b`).test(usedBy!.replace(/npm start[^,;]*/g, "")))
      .flatMap(([, s]) => s);
    for (const [, name] of names!.matchAll(/`([A-Z_]+)`/g)) rows.push({ name: name!, services });
  }
  return rows;
}

test("docker-compose.yml loads with compose-go (the Compose specification's schema, interpolation and merges)", async (t) => {
  const project = await loadCompose({ SECRETS_KEY: newSecretsKey() });
  t.deepEqual(Object.keys(project.services).sort(), ["delivery", "gateway", "kafka", "migrate", "postgres", "referral-service", "relay"]);
});

test("without SECRETS_KEY the compose file refuses to load and says how to make one", async (t) => {
  const error = await t.throwsAsync(loadCompose({}));
  t.regex(String((error as { stderr?: string }).stderr), /SECRETS_KEY.*openssl rand -base64 32/);
});

test("without ADMIN_SERVICE_TOKEN or GATEWAY_SERVICE_TOKEN the compose file refuses to load and says how to make one", async (t) => {
  for (const missing of ["ADMIN_SERVICE_TOKEN", "GATEWAY_SERVICE_TOKEN"]) {
    const tokens: Record<string, string> = serviceTokens();
    delete tokens[missing];
    const error = await t.throwsAsync(loadCompose({ SECRETS_KEY: newSecretsKey(), ...tokens }, { tokens: false }));
    t.regex(String((error as { stderr?: string }).stderr), new RegExp(`${missing}.*openssl rand -base64 32`), missing);
  }
});

test("only the gateway publishes a port (8080 by default, GATEWAY_PUBLISH to change it); PostgreSQL, Kafka, the RPC port and the ops ports stay internal", async (t) => {
  const project = await loadCompose({ SECRETS_KEY: newSecretsKey() });
  const published = Object.entries(project.services).filter(([, s]) => (s.ports ?? []).length > 0);
  t.deepEqual(
    published.map(([name]) => name),
    ["gateway"],
  );
  t.like(project.services.gateway?.ports, [{ target: 8080, published: "8080" }]);
  const moved = await loadCompose({ SECRETS_KEY: newSecretsKey(), GATEWAY_PUBLISH: "18080" });
  t.like(moved.services.gateway?.ports, [{ target: 8080, published: "18080" }]);
});

test("every long-running service restarts unless stopped, the migration runs once, and Kafka keeps its data on its volume (KAFKA_LOG_DIRS)", async (t) => {
  const { services } = await loadCompose({ SECRETS_KEY: newSecretsKey() });
  for (const [name, service] of Object.entries(services)) t.is(service.restart, name === "migrate" ? "no" : "unless-stopped", name);
  const kafka = services.kafka!;
  const dataVolume = kafka.volumes?.find((v) => v.type === "volume" && v.source === "kafkadata");
  t.truthy(dataVolume);
  t.is(kafka.environment?.KAFKA_LOG_DIRS, dataVolume?.target);
});

test("every app service runs the repository's image: tini as entrypoint, then `node` directly on compiled JavaScript in dist/", async (t) => {
  const { services } = await loadCompose({ SECRETS_KEY: newSecretsKey() });
  t.deepEqual(imageRuntime().entrypoint, ["/usr/bin/tini", "--"], "the image's init forwards signals to node");
  for (const name of APP_SERVICES) {
    const service = services[name]!;
    t.regex(service.image ?? "", /^referral-callbacks:/, name);
    t.is(service.build?.dockerfile, "Dockerfile", name);
    t.is(service.entrypoint ?? null, null, `${name} keeps the image's entrypoint`);
    t.is(service.command?.[0], "node", name);
    t.regex(service.command?.[1] ?? "", /^dist\/.+\.js$/, name);
  }
});

test("every setting of the README's table reaches the compose services of the processes that use it, passed through from the environment", async (t) => {
  const settings = readmeSettings();
  t.true(settings.length >= 20, "the README's settings table was read");
  const markers = Object.fromEntries(settings.map(({ name }) => [name, `marker-${name.toLowerCase()}`]));
  const { services } = await loadCompose({ ...markers, SECRETS_KEY: newSecretsKey(), DASHBOARD_TOKEN: markers.DASHBOARD_TOKEN! });
  for (const { name, services: users } of settings) {
    if (NOT_IN_COMPOSE[name]) continue;
    for (const service of users) {
      const environment = services[service]?.environment ?? {};
      t.true(name in environment, `${name} is not set on ${service}`);
      if (!FIXED_IN_COMPOSE.has(name) && name !== "SECRETS_KEY")
        t.is(environment[name], markers[name], `${name} on ${service} is not taken from the environment`);
    }
  }
});

/** Starts one compose service's command as the image would run it, with its compose environment and `overrides`. */
function startService(group: ProcessGroup, project: ComposeProject, name: string, overrides: Record<string, string>) {
  const image = imageRuntime();
  const service = project.services[name]!;
  const env: Record<string, string | undefined> = { ...image.env };
  for (const [key, value] of Object.entries(service.environment ?? {})) env[key] = value ?? "";
  // Outside a container tini is not PID 1; as a child subreaper it reaps like PID 1 does (and stays quiet).
  const outsideDocker = { TINI_SUBREAPER: "1" };
  return group.spawn({
    name,
    file: service.command!.join(" "),
    argv: [...image.entrypoint, ...service.command!],
    env: { ...env, ...outsideDocker, ...overrides },
  });
}

async function stopDrained(t: ExecutionContext, proc: ReturnType<typeof startService>): Promise<void> {
  t.deepEqual(await proc.stop(), { code: 0, signal: null }, `${proc.name} drains and exits 0 on SIGTERM`);
  t.regex(proc.output, /"msg":"drained; exiting"/, proc.name);
}

let db: TestDatabase | undefined;
test.after.always(async () => {
  await db?.drop();
});

test.serial(
  "the image's entry command, outside Docker with the compose environment: migrate exits 0, each process becomes ready, SIGTERM to tini drains node and exits 0",
  async (t) => {
    t.timeout(300_000);
    const brokers = process.env.KAFKA_BROKERS!;
    await run(process.execPath, ["--import", "tsx", "scripts/build.ts"], { cwd: REPO_ROOT, timeout: 180_000 });
    // An empty database: the image's own migration command creates the schema.
    db = await createTestDatabase({ maxConnections: 1 });
    await db.prisma.$executeRawUnsafe("DROP SCHEMA public CASCADE");
    await db.prisma.$executeRawUnsafe("CREATE SCHEMA public");
    await precreateTopics(brokers);

    const secretsKey = newSecretsKey();
    const project = await loadCompose({ SECRETS_KEY: secretsKey, DATABASE_URL: db.url, KAFKA_BROKERS: brokers, ALLOW_INSECURE_CALLBACKS: "true" });
    const group = useProcesses(t);
    const migrate = startService(group, project, "migrate", {});
    t.deepEqual(await migrate.exited, { code: 0, signal: null }, "the migration step exits 0");

    const [rpcPort, referralOps, gatewayPort, gatewayOps, relayOps, deliveryOps] = await freePorts(6);
    const referral = startService(group, project, "referral-service", { PORT: String(rpcPort), OPS_PORT: String(referralOps) });
    await referral.waitReady(`http://127.0.0.1:${referralOps}/readyz`, 60_000);
    const gateway = startService(group, project, "gateway", {
      PORT: String(gatewayPort),
      OPS_PORT: String(gatewayOps),
      REFERRAL_SERVICE_URL: `http://127.0.0.1:${rpcPort}`,
    });
    await gateway.waitReady(`http://127.0.0.1:${gatewayPort}/readyz`, 60_000);
    const relay = startService(group, project, "relay", { OPS_PORT: String(relayOps) });
    const delivery = startService(group, project, "delivery", { OPS_PORT: String(deliveryOps), KAFKA_GROUP_ID: `containers-${Date.now()}` });
    await relay.waitReady(`http://127.0.0.1:${relayOps}/readyz`, 60_000);
    await delivery.waitReady(`http://127.0.0.1:${deliveryOps}/readyz`, 90_000);

    // A normal start logs no error: in particular the delivery service's consumer does not meet an
    // unavailable group coordinator (it is awaited before the consumer joins).
    for (const proc of [referral, gateway, relay, delivery])
      t.false(/"level":50/.test(proc.stdout), `${proc.name} logged an error at a normal start:\n${proc.stdout}`);
    const front = await fetch(`http://127.0.0.1:${gatewayPort}/`);
    t.is(front.status, 200, "the compiled gateway serves its front page (docs copied into dist/)");
    for (const proc of [gateway, relay, delivery, referral]) await stopDrained(t, proc);
  },
);
