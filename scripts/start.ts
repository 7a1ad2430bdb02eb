/**
 * `npm start`: the whole system in one process.
 *  - With neither DATABASE_URL nor KAFKA_BROKERS: embedded PostgreSQL (PGlite, data
 *    kept in DATA_DIR across restarts) and an in-process bus in place of Kafka.
 *  - With DATABASE_URL and/or KAFKA_BROKERS: the real PostgreSQL and/or Kafka.
 * Migrates on start, seeds a demo server on the first run, prints the URLs and a
 * copy-paste example request. The same factories and the same process skeleton (runService:
 * signals, drain, exit codes) as the separate processes.
 */
import { insecureCallbacksNotice } from "./lib/callbacks-notice.js";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createHash, randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { join, relative, resolve } from "node:path";
import { createEnvReader } from "../services/shared/runtime/config.js";
import { runService, type ServiceContext, type ServiceParts } from "../services/shared/runtime/run-service.js";
import { createPrisma, type PrismaClient } from "../services/shared/adapters/db.js";
import { verifySecretsKey } from "../services/shared/adapters/secrets-key-check.js";
import { SigningKeyStatus } from "../gen/proto/servers/v1/servers_pb.js";
import { readinessChecks } from "../services/shared/adapters/readiness.js";
import { ALL_TOPICS, type EventBus } from "../services/shared/adapters/bus.js";
import { createKafkaBus, ensureTopics } from "../services/shared/adapters/kafka-bus.js";
import { createMemoryBus } from "../services/shared/adapters/memory-bus.js";
import { redactUrl } from "../services/shared/runtime/log.js";
import { DEFAULT_GATEWAY_OPS_PORT } from "../gateway/config.js";
import { readKafkaTopicRetentionHours, readPort, readSecretBox } from "../services/shared/runtime/process-config.js";
import { createSecretBox, parseSecretsKey, type SecretBox } from "../services/shared/runtime/secrets.js";
import { startEmbeddedPostgres } from "./infra/embedded-postgres.js";
import { createReferralServiceServer } from "../services/referral-service/server.js";
import { createRelay } from "../services/relay/relay.js";
import { readDispatchSettings } from "../services/delivery/pipeline/config.js";
import { createDeliveryWorker } from "../services/delivery/pipeline/worker.js";
import { createPublicGateway } from "../gateway/public-gateway.js";
import { createReferralServiceClients, type ReferralServiceClients } from "../gateway/clients.js";
import { loadOrCreateDashboardToken } from "../gateway/dashboard/config.js";
import { createAccessClient } from "../gateway/dashboard/clients.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { ensureServiceToken } from "../services/access/service-tokens.js";
import { generateServiceToken } from "../services/shared/runtime/secrets.js";
import { MIN_SERVICE_TOKEN_CHARS, readServiceToken } from "../services/shared/runtime/process-config.js";
import { createServiceTransport } from "../services/shared/rpc/service-transport.js";
import { loadOrCreateTokenFile } from "../services/shared/runtime/token-file.js";
import { applyMigrations } from "./db/schema-engine.js";
import { readFraudRules } from "../services/hearts/read-fraud-rules.js";
import { readAbuseRules } from "../services/referral/read-abuse-rules.js";
import { readAddressSettings } from "../services/shared/runtime/address-settings.js";
import { readRetentionSettings } from "../services/retention/retention-settings.js";
import { createRetentionLoop } from "../services/retention/run-retention.js";
import { createPeriodCloserLoop, readPeriodCloserSettings } from "../services/rewards/close-periods.js";
import { createGoalPayerLoop, readGoalPayerSettings } from "../services/rewards/pay-reached-goals.js";
import { createDiscordRest, readDiscordApiBaseUrl } from "../services/shared/adapters/discord-rest.js";
import { createVoterRoleLoop, readVoterRoleJobSettings } from "../services/voter-roles/give-voter-roles.js";
import { createProcessReminders, readReminderSettings } from "../services/reminders/reminder-settings.js";
import { createAlertLoop, readAlertSettings } from "../services/alerts/alert-settings.js";

function loadConfig() {
  const r = createEnvReader();
  const dataDir = resolve(r.string("DATA_DIR", ".data"));
  const explicitKey = r.optionalString("SECRETS_KEY") ?? r.optionalString("SECRETS_KEY_FILE");
  const fraudRules = readFraudRules(r);
  return r.finish({
    dataDir,
    host: r.string("HOST", "127.0.0.1"),
    port: readPort(r, "PORT", 8080),
    opsPort: readPort(r, "OPS_PORT", DEFAULT_GATEWAY_OPS_PORT),
    rpcPort: readPort(r, "REFERRAL_SERVICE_PORT", 8081),
    databaseUrl: r.optionalString("DATABASE_URL"),
    kafkaBrokers: r.list("KAFKA_BROKERS", []),
    kafkaTopicRetentionHours: readKafkaTopicRetentionHours(r),
    publicBaseUrl: r.optionalString("PUBLIC_BASE_URL"),
    secretBox: explicitKey ? readSecretBox(r) : undefined,
    dispatch: readDispatchSettings(r),
    fraudRules,
    abuseRules: readAbuseRules(r),
    addresses: readAddressSettings(r),
    adminToken: readServiceToken(r, "ADMIN_SERVICE_TOKEN", { required: false }),
    retention: readRetentionSettings(r, fraudRules),
    periodCloser: readPeriodCloserSettings(r),
    goalPayer: readGoalPayerSettings(r),
    reminders: readReminderSettings(r),
    discordApiBaseUrl: readDiscordApiBaseUrl(r),
    voterRoles: readVoterRoleJobSettings(r),
    alerts: readAlertSettings(r),
  });
}

/** Name of the file holding the all-in-one mode's admin service token. */
const SERVICE_TOKEN_FILE = "service-token";
/** The demo owner (an account id of the list) that owns the demo server. */
const DEMO_OWNER_ID = "demo-owner";

/** The embedded default keeps its secrets key in the data folder (created once, mode 0600). */
function loadOrCreateSecretBox(dataDir: string): SecretBox {
  const path = join(dataDir, "secrets.key");
  if (!existsSync(path)) writeFileSync(path, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600 });
  const key = parseSecretsKey(readFileSync(path, "utf8"));
  if (!key) throw new Error(`${path} does not hold a 32-byte key; move it away to create a new one (secrets sealed with it become unreadable)`);
  return createSecretBox(key);
}

/** A path as the user can paste it from the project folder: relative inside it, absolute outside. */
function displayPath(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel === "" ? "." : rel.startsWith("..") ? path : rel;
}

/** The demo server of one database and the example request printed for it. */
interface Demo {
  serverId: string;
  /** A click token of the demo server whose example has not been sent yet (or was sent: see `sent`). */
  token: string;
  /** The referee the example registers. */
  referee: string;
}

/** Files of the demo of the database in use: one pair per database, so switching DATABASE_URL never prints another database's example. */
function demoFiles(dataDir: string, databaseUrl: string | undefined) {
  // The embedded database keeps the historical names; a real database gets a suffix derived from its URL without the password.
  const suffix = databaseUrl ? `-${createHash("sha256").update(redactUrl(databaseUrl)).digest("hex").slice(0, 12)}` : "";
  return { demo: join(dataDir, `demo${suffix}.json`), secret: join(dataDir, `demo${suffix}-referral-secret`) };
}

const DEMO_REFERRER = "demo-referrer";
const demoEventId = (referee: string) => `reg-${referee}`;

/**
 * The demo of the database in use, so that the printed example works against THIS database:
 *  - the recorded demo is reused when its server still exists with referrals on, its secret file
 *    holds one of the server's active secrets and its click token exists;
 *  - once its example was sent, a fresh click and referee are taken, so the next paste registers again;
 *  - otherwise, on a database with no servers (or whose recorded demo is gone), a demo server is created.
 * Returns undefined when the database already has other servers and no usable demo: nothing is seeded there.
 */
async function prepareDemo(
  clients: ReferralServiceClients,
  access: ReturnType<typeof createAccessClient>,
  prisma: PrismaClient,
  dataDir: string,
  databaseUrl: string | undefined,
): Promise<{ demo: Demo; secretPath: string } | undefined> {
  const files = demoFiles(dataDir, databaseUrl);
  let demo = existsSync(files.demo) ? (JSON.parse(readFileSync(files.demo, "utf8")) as Partial<Demo>) : undefined;
  const usable = demo?.serverId && demo.token && (await isDemoUsable(clients, prisma, { serverId: demo.serverId, token: demo.token }, files.secret));
  if (!usable) {
    const { servers } = await clients.admin.listServers({});
    if (servers.length > 0 && demo === undefined) return undefined;
    const { server } = await clients.admin.createServer({ name: "Demo Server", registrationUrl: "https://example.com/register" });
    if (!server) return undefined;
    await clients.admin.setReferralsEnabled({ serverId: server.id, enabled: true });
    // Owned by the demo owner, so a login link for "demo-owner" shows it.
    await access.createOwner({ ownerId: DEMO_OWNER_ID, displayName: "Demo Owner" }).catch((error: unknown) => {
      // Failure policy: the demo owner exists from an earlier demo (already_exists); anything else stops the start.
      if (!(error instanceof ConnectError && error.code === Code.AlreadyExists)) throw error;
    });
    await access.assignServer({ serverId: server.id, ownerId: DEMO_OWNER_ID });
    const { secret } = await clients.admin.createReferralSecret({ serverId: server.id });
    writeFileSync(files.secret, secret, { mode: 0o600 });
    const { token } = await clients.referral.recordClick({ serverId: server.id, referrerIdentity: DEMO_REFERRER });
    demo = { serverId: server.id, token, referee: "player-1" };
  }
  let current: Demo = { serverId: demo!.serverId!, token: demo!.token!, referee: demo!.referee ?? "player-1" };
  const sent = await prisma.referralEvent.findFirst({
    where: { token: current.token, type: "registered", serverEventId: demoEventId(current.referee) },
    select: { id: true },
  });
  if (sent) {
    const { token } = await clients.referral.recordClick({ serverId: current.serverId, referrerIdentity: DEMO_REFERRER });
    const n = Number(/(\d+)$/.exec(current.referee)?.[1] ?? "1") + 1;
    current = { serverId: current.serverId, token, referee: `player-${n}` };
  }
  writeFileSync(files.demo, JSON.stringify(current, null, 2));
  return { demo: current, secretPath: files.secret };
}

/** True when the demo's example would be accepted: server with referrals on, the secret file's value active, the token known. */
async function isDemoUsable(
  clients: ReferralServiceClients,
  prisma: PrismaClient,
  demo: { serverId: string; token: string },
  secretPath: string,
): Promise<boolean> {
  if (!existsSync(secretPath)) return false;
  const secret = readFileSync(secretPath, "utf8").trim();
  const keys = await clients.admin.resolveSigningKeys({ serverId: demo.serverId });
  if (keys.status !== SigningKeyStatus.OK || !keys.keys.some((k) => Buffer.from(k.secret).toString("utf8") === secret)) return false;
  const click = await prisma.referralClick.findUnique({ where: { token: demo.token }, select: { serverId: true } });
  return click?.serverId === demo.serverId;
}

function printBanner(opts: {
  gatewayUrl: string;
  opsUrl: string;
  rpcUrl: string;
  storage: string;
  bus: string;
  demo: { demo: Demo; secretPath: string } | undefined;
  dashboardTokenLocation: string;
  /** The admin token's file, or undefined when it comes from ADMIN_SERVICE_TOKEN. */
  serviceTokenFile: string | undefined;
  /** ALLOW_INSECURE_CALLBACKS: the banner says whether the SSRF guard is lifted. */
  allowInsecureCallbacks: boolean;
}) {
  const lines = [
    "",
    `Referral service is up (${opts.storage}; ${opts.bus}).`,
    `  Gateway (public):          ${opts.gatewayUrl}`,
    `    ingest:                  POST ${opts.gatewayUrl}/api/referral/events`,
    `    OpenAPI:                 ${opts.gatewayUrl}/openapi/referral.json`,
    `    referral links:          ${opts.gatewayUrl}/r/<server_id>?referrer=<player>`,
    `    health:                  ${opts.gatewayUrl}/healthz  ${opts.gatewayUrl}/readyz`,
    `  Ops (health, metrics):     ${opts.opsUrl}/healthz  ${opts.opsUrl}/readyz  ${opts.opsUrl}/metrics`,
    `    dashboard:               ${opts.gatewayUrl}/dashboard  (sign-in token: ${opts.dashboardTokenLocation})`,
    `  Referral service (internal; Connect, gRPC, gRPC-Web over HTTP/2): ${opts.rpcUrl}`,
    `    admin service token:     ${opts.serviceTokenFile ?? "the ADMIN_SERVICE_TOKEN environment variable"}  (send it as authorization: Bearer <token>)`,
    insecureCallbacksNotice(opts.allowInsecureCallbacks),
    "",
    "Example: a one-time dashboard login link for the demo owner (open the printed url within 5 minutes):",
    "",
    opts.serviceTokenFile ? `  TOKEN=$(cat ${opts.serviceTokenFile})` : "  TOKEN=$ADMIN_SERVICE_TOKEN",
    `  npx buf curl --schema proto --protocol grpc --http2-prior-knowledge -H "authorization: Bearer $TOKEN" \\`,
    `    -d '{"owner_id":"${DEMO_OWNER_ID}"}' ${opts.rpcUrl}/access.v1.AccessService/CreateDashboardLoginLink`,
  ];
  if (opts.demo) {
    const { demo, secretPath } = opts.demo;
    const body = JSON.stringify({
      event: "registered",
      token: demo.token,
      server_id: demo.serverId,
      referee_identity: demo.referee,
      server_event_id: demoEventId(demo.referee),
    });
    lines.push(
      "",
      "Example: a signed `registered` event for the demo server (paste into a shell; needs openssl and curl):",
      "",
      `  SECRET=$(cat ${displayPath(secretPath)})`,
      `  BODY='${body}'`,
      `  T=$(date +%s); SIG=$(printf '%s' "$T.$BODY" | openssl dgst -sha256 -hmac "$SECRET" | sed 's/^.* //')`,
      `  curl -sS -X POST ${opts.gatewayUrl}/api/referral/events -H 'Content-Type: application/json' -H "X-Service-Signature: t=$T,v1=sha256=$SIG" --data-raw "$BODY"; echo`,
      "",
      `The first paste answers {"ok":true,"referral_id":"...","state":"registered"}; a second one {"ok":true,"duplicate":true}.`,
      "(Each start prints a fresh example once the previous one was sent.)",
    );
  } else {
    lines.push("", "No example: this database already has servers and no demo server; create a referral secret for one in the dashboard.");
  }
  process.stdout.write(`${lines.join("\n")}\n\n`);
}

runService({
  name: "all-in-one",
  loadConfig() {
    // Everything the all-in-one writes (database, secrets key, dashboard token, demo secret) is private to this user.
    process.umask(0o077);
    return loadConfig();
  },
  create: createAllInOne,
});

/**
 * The whole system's parts on runService's skeleton (signals, drain, exit codes, start failures,
 * the ops server). Unlike the four mains, the wiring is asynchronous: the embedded database is
 * started and migrated, and the secrets key checked, before the parts that need the client exist;
 * the referral service listens here too (the gateway's clients need its port). The start steps
 * then open the gateway, start the relay and the dispatcher, seed the demo and print the banner:
 * ready only after that, so a probe never races the printed example.
 */
async function createAllInOne(config: ReturnType<typeof loadConfig>, { log, metrics, startup, isDraining }: ServiceContext): Promise<ServiceParts> {
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  chmodSync(config.dataDir, 0o700);
  const stops: (() => Promise<void>)[] = [];

  let databaseUrl = config.databaseUrl;
  let storage = `PostgreSQL at ${databaseUrl ? redactUrl(databaseUrl) : ""}`;
  if (!databaseUrl) {
    const embedded = await startEmbeddedPostgres(join(config.dataDir, "pg"));
    stops.push(() => embedded.stop());
    databaseUrl = embedded.url;
    storage = `embedded PostgreSQL (PGlite) in ${displayPath(join(config.dataDir, "pg"))}`;
  }
  const { applied } = await applyMigrations(databaseUrl, { log: (line) => log.info(line) });
  log.info({ applied: applied.length }, "database migrated");

  let bus: EventBus;
  let busLabel: string;
  if (config.kafkaBrokers.length > 0) {
    await ensureTopics(config.kafkaBrokers, [...ALL_TOPICS], undefined, { topicRetentionHours: config.kafkaTopicRetentionHours, log });
    bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: "all-in-one", log });
    busLabel = `Kafka at ${config.kafkaBrokers.join(",")}`;
  } else {
    bus = createMemoryBus();
    busLabel = "in-process bus in place of Kafka";
  }

  const secretBox = config.secretBox ?? loadOrCreateSecretBox(config.dataDir);
  const prisma = createPrisma(databaseUrl, { maxConnections: config.databaseUrl ? 20 : 8, namedStatements: Boolean(config.databaseUrl) });
  // A key that cannot open the stored secrets stops the start here (exit 2), also in the embedded mode.
  await verifySecretsKey(prisma, secretBox);
  const now = () => new Date();
  const publicBaseUrl = config.publicBaseUrl ?? `http://127.0.0.1:${config.port}`;

  // The internal API's tokens: the admin token (ADMIN_SERVICE_TOKEN, or one kept in <DATA_DIR>/service-token, 0600),
  // and the in-process gateway's own token, new on every start (the stored hash is replaced).
  const adminToken =
    config.adminToken ??
    loadOrCreateTokenFile(join(config.dataDir, SERVICE_TOKEN_FILE), generateServiceToken, (t) => t.length >= MIN_SERVICE_TOKEN_CHARS && !/\s/.test(t));
  const serviceTokenFile = config.adminToken ? undefined : displayPath(join(config.dataDir, SERVICE_TOKEN_FILE));
  const gatewayToken = generateServiceToken();
  await ensureServiceToken(prisma, now(), { name: "admin", token: adminToken, scopes: ["admin"] });
  // admin as well: the operator dashboard (DASHBOARD_TOKEN) runs in this gateway.
  await ensureServiceToken(prisma, now(), {
    name: "gateway",
    token: gatewayToken,
    scopes: ["ingest", "pull", "claims", "clicks:record", "dashboard", "receipts", "admin"],
  });

  // E-mail vote reminders with SMTP_URL (docs/reminders.md); without it none are offered or sent.
  // The process's one Discord client (rate limits shared by every caller).
  const discord = createDiscordRest({ baseUrl: config.discordApiBaseUrl });
  // Discord DM vote reminders with DISCORD_BOT_TOKEN, through the process's one Discord client.
  const reminders = createProcessReminders({ db: prisma, secretBox, publicBaseUrl, settings: config.reminders, discord, log, now });
  // Owner alerts' scan and digests (docs/owner-alerts.md); dashboard links point at this gateway.
  const alerts = createAlertLoop({
    db: prisma,
    secretBox,
    mailer: reminders.mailer,
    discord,
    dashboardBaseUrl: publicBaseUrl,
    settings: config.alerts,
    log,
    now,
  });
  const rpc = createReferralServiceServer({
    prisma,
    secretBox,
    log,
    metrics,
    now,
    allowInsecureCallbacks: config.dispatch.allowInsecureCallbacks,
    callbackTimeoutMs: config.dispatch.callbackTimeoutMs,
    retrySchedule: config.dispatch.schedule,
    publicBaseUrl,
    fraudRules: config.fraudRules,
    abuseRules: config.abuseRules,
    addressKeyVersion: config.addresses.keyVersion,
    ...(reminders.mailer ? { mailer: reminders.mailer } : {}),
    discordDmReminders: reminders.discordDm,
  });
  const rpcPort = await rpc.listen(config.rpcPort, config.host);
  const rpcUrl = `http://127.0.0.1:${rpcPort}`;
  const clients = createReferralServiceClients(rpcUrl, gatewayToken);
  const adminTransport = createServiceTransport(rpcUrl, adminToken);

  const relay = createRelay({ prisma, bus, log, registry: metrics.registry, pollIntervalMs: 50 });
  // Retention runs in the referral service, here as in the production topology (services/referral-service/main.ts).
  const retention = createRetentionLoop({ db: prisma, settings: config.retention, log, registry: metrics.registry, now });
  const periodCloser = createPeriodCloserLoop({ prisma, settings: config.periodCloser, log, now });
  const goalPayer = createGoalPayerLoop({ prisma, settings: config.goalPayer, log, now });
  const delivery = createDeliveryWorker({ prisma, bus, secretBox, log, now, registry: metrics.registry, discord }, config.dispatch);
  // Voter roles run beside the delivery worker, as in the delivery process (services/delivery/main.ts), on the one Discord client.
  const voterRoles = createVoterRoleLoop({ db: prisma, discord, secretBox, log, now, ...config.voterRoles });

  const checks = [
    startup.check,
    ...readinessChecks({ prisma, bus, busName: config.kafkaBrokers.length > 0 ? "kafka" : "bus", databaseUrl, brokers: config.kafkaBrokers }),
    { name: "relay", check: () => relay.checkProgress() },
    ...delivery.checks,
  ];
  // The owners' dashboard: DASHBOARD_TOKEN, or a token generated once into <DATA_DIR>/dashboard-token (0600).
  const dashboard = loadOrCreateDashboardToken(config.dataDir);
  const gateway = createPublicGateway({
    referralServiceUrl: rpcUrl,
    serviceToken: gatewayToken,
    dashboardToken: dashboard.token,
    publicBaseUrl,
    log,
    metrics,
    now,
    checks,
    isDraining,
    settings: { remindersEnabled: reminders.mailer !== undefined, discordDmRemindersEnabled: reminders.discordDm },
  });

  return {
    checks,
    async start(opsPort) {
      await new Promise<void>((resolveListen, reject) => {
        gateway.once("error", reject);
        gateway.listen(config.port, config.host, resolveListen);
      });
      const gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
      relay.start();
      await delivery.start();
      retention.start();
      periodCloser.start();
      goalPayer.start();
      reminders.start();
      voterRoles.start();
      alerts.start();
      const demo = await prepareDemo(clients, createAccessClient(adminTransport), prisma, config.dataDir, config.databaseUrl);
      printBanner({
        gatewayUrl,
        opsUrl: `http://127.0.0.1:${opsPort}`,
        rpcUrl,
        storage,
        bus: busLabel,
        demo,
        dashboardTokenLocation: dashboard.location,
        serviceTokenFile,
        allowInsecureCallbacks: config.dispatch.allowInsecureCallbacks,
      });
      return true;
    },
    // The public edge stops taking requests first; the ops server closes after it (runService).
    drain: () =>
      new Promise<void>((r) => {
        gateway.close(() => r());
        gateway.closeIdleConnections();
      }),
    async close() {
      await retention.stop();
      await periodCloser.stop();
      await goalPayer.stop();
      await reminders.stop();
      await voterRoles.stop();
      await alerts.stop();
      await discord.close();
      await rpc.close();
      await relay.stop();
      await delivery.stop();
      await bus.close();
      await prisma.$disconnect();
      for (const stop of stops.reverse()) await stop();
    },
  };
}
