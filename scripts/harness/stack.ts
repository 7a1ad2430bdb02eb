/**
 * The one stack builder of the tests: the production wiring in-process on free ports, each part
 * optional. Always the referral service (createReferralServiceServer) on a fresh database; with
 * `gateway` the public gateway in front of it; with `pipeline` the events' way out (a Kafka bus
 * on KAFKA_BROKERS, the outbox relay and a delivery worker, createDeliveryWorker); more gateways
 * (for example with the dashboard) through `startGateway`. Nothing is mocked.
 */
import type http from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { createClient, type Client } from "@connectrpc/connect";
import type { Logger } from "pino";
import { OperatorService } from "../../gen/proto/ops/v1/ops_pb.js";
import { createRpcClients, type RpcClients } from "../../services/shared/rpc/service-clients.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { TEST_SERVICE_TOKEN } from "./service-token.js";
import { createReferralServiceServer, type ReferralServiceDeps } from "../../services/referral-service/server.js";
import { createGatewayServer, type GatewayDeps } from "../../gateway/server.js";
import { createMailer } from "../../services/shared/adapters/mailer.js";
import { createReferralServiceClients, type ReferralServiceClients } from "../../gateway/clients.js";
import { createDashboardRoutes } from "../../gateway/dashboard/routes.js";
import { createDeliveryWorker, type DeliveryWorker, type DeliveryWorkerSettings } from "../../services/delivery/pipeline/worker.js";
import { createRelay } from "../../services/relay/relay.js";
import { ALL_TOPICS, type EventBus } from "../../services/shared/adapters/bus.js";
import { createKafkaBus, ensureTopics } from "../../services/shared/adapters/kafka-bus.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createMetrics, type Metrics } from "../../services/shared/runtime/metrics.js";
import { createSecretBox, type SecretBox } from "../../services/shared/runtime/secrets.js";
import type { PrismaClient } from "../../services/shared/adapters/db.js";
import { createTestDatabase, type TestDatabase } from "./db.js";

/** Connect clients of every internal service. */
export type ServiceClients = RpcClients & { operator: Client<typeof OperatorService> };

/** The scopes of a gateway's own service token, as the all-in-one gives its gateway. */
export const GATEWAY_TOKEN_SCOPES = ["ingest", "pull", "claims", "clicks:record", "dashboard", "receipts", "admin"];

/** A gateway started by `startGateway`. */
export interface TestGateway {
  server: http.Server;
  url: string;
  metrics: Metrics;
  close(): Promise<void>;
}

/** The events' way out: the bus, the outbox relay and the delivery worker. */
export interface TestPipeline {
  bus: EventBus;
  relay: ReturnType<typeof createRelay>;
  delivery: DeliveryWorker;
}

/** A running referral service (and optionally gateway and pipeline) on a database of its own. */
export interface TestStack {
  db: TestDatabase;
  prisma: PrismaClient;
  secretBox: SecretBox;
  /** The referral service's logger. */
  log: Logger;
  /** The referral service's metrics (what its /metrics serves). */
  metrics: Metrics;
  /** Base URL of the referral service (HTTP/2 cleartext). */
  rpcUrl: string;
  clients: ServiceClients;
  /** Base URL of the public gateway, when started (`gateway`). */
  gatewayUrl: string;
  /** The relay and delivery worker, when started (`pipeline`). */
  pipeline: TestPipeline | undefined;
  /** Overridable clock of the whole stack (read on every call, so replacing `now` moves every part). */
  clock: { now: () => Date };
  /**
   * Starts one more gateway in front of this referral service, closed with the stack. With `dashboard`,
   * the owners' dashboard too (`token` is its DASHBOARD_TOKEN; undefined leaves the operator sign-in off).
   * `serviceToken` "gateway" (default with a dashboard) is a token of the gateway's own scopes, made once per stack.
   */
  startGateway(opts?: {
    log?: Logger;
    metrics?: Metrics;
    dashboard?: { token: string | undefined; log?: Logger };
    serviceToken?: "test" | "gateway";
    overrides?: (ctx: { clients: ReferralServiceClients; metrics: Metrics }) => Partial<GatewayDeps>;
  }): Promise<TestGateway>;
  close(): Promise<void>;
}

/** Options of `startStack`. */
export interface StackOptions {
  /** Start the public gateway (the test service token) in front of the referral service; default true. */
  gateway?: boolean;
  allowInsecureCallbacks?: boolean;
  callbackTimeoutMs?: number;
  /** Default: the URL of the stack's gateway. */
  publicBaseUrl?: string;
  /** The referral service's logger; default a silent one (TEST_LOG_LEVEL). */
  log?: Logger;
  /** The stack's clock; default the wall clock. */
  now?: () => Date;
  /** Database connections; default 30. */
  maxConnections?: number;
  /** A database of the caller's (createPrivateDatabase: a server the test may stop); default a fresh clone of the template. close() drops it too. */
  database?: TestDatabase;
  fraudRules?: ReferralServiceDeps["fraudRules"];
  retrySchedule?: ReferralServiceDeps["retrySchedule"];
  /** ApplyEvent's group-commit bounds (tests of overload shrink them). */
  applyEventBatch?: ReferralServiceDeps["applyEventBatch"];
  /** CastHeart's group-commit bounds (tests of overload shrink them). */
  castHeartBatch?: ReferralServiceDeps["castHeartBatch"];
  /**
   * The relay and a delivery worker on a Kafka bus (KAFKA_BROKERS), started before `startStack` returns.
   * `name` prefixes the bus's client id and the worker's consumer group, both unique per stack.
   */
  pipeline?: { name: string; delivery?: DeliveryWorkerSettings };
  /** E-mail vote reminders on, mailed through this SMTP server (SMTP_URL; a local sink in tests): the referral service gets a mailer, the gateway shows the opt-in form. */
  reminders?: { smtpUrl: string; from?: string };
  /** Discord DM vote reminders on (as with DISCORD_BOT_TOKEN): the referral service takes DM opt-ins, the gateway offers them. */
  discordDmReminders?: boolean;
}

/** Creates Connect clients for a referral service base URL, authenticated with `token` (default: the test admin token). */
export function createServiceClients(baseUrl: string, token: string = TEST_SERVICE_TOKEN): ServiceClients {
  const transport = createServiceTransport(baseUrl, token, { useBinaryFormat: false });
  return { ...createRpcClients(transport), operator: createClient(OperatorService, transport) };
}

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** Starts the stack; `close()` stops every part it started and drops the database. */
export async function startStack(opts: StackOptions = {}): Promise<TestStack> {
  const db = opts.database ?? (await createTestDatabase({ maxConnections: opts.maxConnections ?? 30 }));
  const secretBox = createSecretBox(randomBytes(32));
  const log = opts.log ?? createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");
  const clock = { now: opts.now ?? (() => new Date()) };
  const now = () => clock.now();
  let gatewayUrl = "";
  const metrics = createMetrics("referral-service");
  const mailer = opts.reminders ? createMailer({ smtpUrl: opts.reminders.smtpUrl, from: opts.reminders.from ?? "reminders@list.example" }) : undefined;
  const rpc = createReferralServiceServer({
    prisma: db.prisma,
    secretBox,
    log,
    metrics,
    now,
    allowInsecureCallbacks: opts.allowInsecureCallbacks ?? true,
    callbackTimeoutMs: opts.callbackTimeoutMs ?? 10_000,
    get publicBaseUrl() {
      return opts.publicBaseUrl ?? gatewayUrl;
    },
    ...(opts.fraudRules ? { fraudRules: opts.fraudRules } : {}),
    ...(opts.retrySchedule ? { retrySchedule: opts.retrySchedule } : {}),
    ...(opts.applyEventBatch ? { applyEventBatch: opts.applyEventBatch } : {}),
    ...(opts.castHeartBatch ? { castHeartBatch: opts.castHeartBatch } : {}),
    ...(mailer ? { mailer } : {}),
    ...(opts.discordDmReminders ? { discordDmReminders: true } : {}),
  });
  const rpcPort = await rpc.listen(0);
  const rpcUrl = `http://127.0.0.1:${rpcPort}`;
  const clients = createServiceClients(rpcUrl);
  const gateways: http.Server[] = [];
  let gatewayToken: Promise<string> | undefined;

  const startGateway: TestStack["startGateway"] = async (g = {}) => {
    const useGatewayToken = (g.serviceToken ?? (g.dashboard ? "gateway" : "test")) === "gateway";
    // The gateway's own service token, as in production: the ingest path, owners' sessions, and admin for the operator dashboard.
    gatewayToken ??= useGatewayToken ? clients.access.createServiceToken({ name: "gateway", scopes: GATEWAY_TOKEN_SCOPES }).then((r) => r.token) : undefined;
    const token = useGatewayToken ? await gatewayToken! : TEST_SERVICE_TOKEN;
    const gatewayClients = createReferralServiceClients(rpcUrl, token);
    const metrics = g.metrics ?? createMetrics("gateway");
    const gatewayLog = g.log ?? log;
    const server = createGatewayServer({
      ...gatewayClients,
      log: gatewayLog,
      metrics,
      now,
      ...(mailer ? { remindersEnabled: true } : {}),
      ...(opts.discordDmReminders ? { discordDmRemindersEnabled: true } : {}),
      ...(g.dashboard
        ? {
            extraRoutes: createDashboardRoutes({
              transport: createServiceTransport(rpcUrl, token),
              token: g.dashboard.token,
              log: g.dashboard.log ?? gatewayLog,
            }),
          }
        : {}),
      ...g.overrides?.({ clients: gatewayClients, metrics }),
    });
    gateways.push(server);
    const url = await listen(server);
    return { server, url, metrics, close: () => closeServer(server) };
  };

  if (opts.gateway !== false) gatewayUrl = (await startGateway()).url;

  let pipeline: TestPipeline | undefined;
  if (opts.pipeline) {
    const brokers = (process.env.KAFKA_BROKERS ?? "").split(",").filter(Boolean);
    if (brokers.length === 0) throw new Error("KAFKA_BROKERS is not set: run tests with a pipeline through `npm test`");
    await ensureTopics(brokers, [...ALL_TOPICS]);
    // A client id and consumer group of this stack's own; other files' hearts name servers this database lacks, so they are skipped.
    const unique = `${opts.pipeline.name}-${randomBytes(4).toString("hex")}`;
    const bus = createKafkaBus({ brokers, clientId: unique, log });
    const relay = createRelay({ prisma: db.prisma, bus, log, pollIntervalMs: 50 });
    const delivery = createDeliveryWorker(
      { prisma: db.prisma, bus, secretBox, log, now },
      { groupId: unique, allowInsecureCallbacks: opts.allowInsecureCallbacks ?? true, ...opts.pipeline.delivery },
    );
    relay.start();
    await delivery.start();
    pipeline = { bus, relay, delivery };
  }

  return {
    db,
    prisma: db.prisma,
    secretBox,
    log,
    metrics,
    rpcUrl,
    clients,
    gatewayUrl,
    pipeline,
    clock,
    startGateway,
    async close() {
      for (const gateway of gateways) await closeServer(gateway);
      if (pipeline) {
        await pipeline.delivery.stop();
        await pipeline.relay.stop();
        await pipeline.bus.close();
      }
      await rpc.close();
      mailer?.close();
      await db.drop();
    },
  };
}
