/**
 * Test harness for the hearts and delivery tests (on startStack, the tests' one stack builder):
 * a fresh database per test file, HeartService and DeliveryService (production routes and
 * interceptor) behind a real HTTP/2 Connect server, fixtures that insert servers and secrets, and an
 * independent verifier of callback signatures (node:crypto, not the project's signer).
 */
import { createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import type { DeliveryService } from "../../gen/proto/delivery/v1/delivery_pb.js";
import type { HeartService } from "../../gen/proto/hearts/v1/hearts_pb.js";
import type { OperatorService } from "../../gen/proto/ops/v1/ops_pb.js";
import type { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";
import type { DeliveryRouteDeps } from "../../services/delivery/rpc/routes.js";
import type { RetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import type { FraudRules } from "../../services/hearts/domain/fraud-rules.js";
import type { CastHeartBatchOptions } from "../../services/hearts/cast-heart-batch.js";
import type { PrismaClient } from "../../services/shared/adapters/db.js";
import type { CoreDeps } from "../../services/shared/adapters/deps.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { generateCallbackSecret, generateKid, generateReferralSecret, type SecretBox } from "../../services/shared/runtime/secrets.js";
import type { TestDatabase } from "./db.js";
import { startStack } from "./stack.js";
import type { Client } from "@connectrpc/connect";
import type { ExecutionContext } from "ava";
import pg from "pg";
import { createDispatcher, type Dispatcher, type DispatcherOptions } from "../../services/delivery/pipeline/dispatcher.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { insertDelivery } from "../../services/delivery/pipeline/insert-deliveries.js";
import { unparkDeliveries } from "../../services/delivery/pipeline/write-deliveries.js";
import { startReceiver, type Receiver } from "./receiver.js";

/** A clock the test sets and advances; `real()` follows the wall clock. */
export interface TestClock {
  now(): Date;
  set(at: Date | string): void;
  advanceMs(ms: number): void;
}

/** A clock fixed at `start` until moved. */
export function createTestClock(start: Date | string): TestClock {
  let current = new Date(start);
  return {
    now: () => new Date(current),
    set: (at) => void (current = new Date(at)),
    advanceMs: (ms) => void (current = new Date(current.getTime() + ms)),
  };
}

/** A running harness. */
export interface Harness {
  db: TestDatabase;
  deps: CoreDeps & DeliveryRouteDeps;
  hearts: Client<typeof HeartService>;
  delivery: Client<typeof DeliveryService>;
  operator: Client<typeof OperatorService>;
  admin: Client<typeof ServerAdminService>;
  close(): Promise<void>;
}

/** Starts the harness with the wall clock unless `now` is given. */
export async function startHarness(
  opts: {
    now?: () => Date;
    fraudRules?: FraudRules;
    allowInsecureCallbacks?: boolean;
    publicBaseUrl?: string;
    callbackTimeoutMs?: number;
    maxConnections?: number;
    retrySchedule?: RetrySchedule;
    castHeartBatch?: CastHeartBatchOptions;
  } = {},
): Promise<Harness> {
  const log = createLogger("test", process.env.LOG_LEVEL ?? "silent");
  const now = opts.now ?? (() => new Date());
  const allowInsecureCallbacks = opts.allowInsecureCallbacks ?? true;
  const callbackTimeoutMs = opts.callbackTimeoutMs ?? 2_000;
  const publicBaseUrl = opts.publicBaseUrl ?? "http://127.0.0.1:9";
  // The production wiring of the referral service process (all routes, interceptor, HTTP/2 server).
  const stack = await startStack({
    gateway: false,
    log,
    now,
    maxConnections: opts.maxConnections ?? 30,
    allowInsecureCallbacks,
    callbackTimeoutMs,
    publicBaseUrl,
    ...(opts.fraudRules ? { fraudRules: opts.fraudRules } : {}),
    ...(opts.retrySchedule ? { retrySchedule: opts.retrySchedule } : {}),
    ...(opts.castHeartBatch ? { castHeartBatch: opts.castHeartBatch } : {}),
  });
  const deps: CoreDeps & DeliveryRouteDeps = {
    prisma: stack.prisma,
    secretBox: stack.secretBox,
    log,
    now,
    allowInsecureCallbacks,
    callbackTimeoutMs,
    publicBaseUrl,
    ...(opts.retrySchedule ? { retrySchedule: opts.retrySchedule } : {}),
  };
  return {
    db: stack.db,
    deps,
    hearts: stack.clients.hearts,
    delivery: stack.clients.delivery,
    operator: stack.clients.operator,
    admin: stack.clients.admin,
    close: () => stack.close(),
  };
}

/** Inserts a server (its default endpoint comes with it) with the callback settings on that endpoint; returns its id. */
export async function insertServer(
  prisma: PrismaClient,
  opts: { callbackUrl?: string | null; standardWebhooks?: boolean; referralsEnabled?: boolean; name?: string } = {},
): Promise<string> {
  const server = await prisma.server.create({
    data: {
      name: opts.name ?? "Test server",
      referralsEnabled: opts.referralsEnabled ?? true,
    },
  });
  await setDefaultEndpoint(prisma, server.id, { url: opts.callbackUrl ?? null, standardWebhooks: opts.standardWebhooks ?? false });
  return server.id;
}

/** The server's default callback endpoint (where the callback settings of a server live). */
export async function defaultEndpoint(prisma: PrismaClient, serverId: string) {
  return prisma.callbackEndpoint.findFirstOrThrow({ where: { serverId, isDefault: true } });
}

/**
 * Writes callback settings straight to the server's default endpoint (what a test sets up without the RPC), and, as
 * the RPCs do, gives its parked held deliveries back to the dispatcher.
 */
export async function setDefaultEndpoint(
  prisma: PrismaClient,
  serverId: string,
  data: { url?: string | null; standardWebhooks?: boolean; disabledAt?: Date | null; disabledReason?: string | null },
): Promise<void> {
  await prisma.$transaction(async (tx) => {
    await tx.callbackEndpoint.updateMany({ where: { serverId, isDefault: true }, data });
    const endpoint = await tx.callbackEndpoint.findFirst({ where: { serverId, isDefault: true } });
    if (endpoint) await unparkDeliveries(tx, { serverId, endpointId: endpoint.id });
  });
}

/** Inserts an encrypted secret of `purpose` (a callback one gives its endpoint's parked deliveries back, as the RPCs do); returns its plaintext and kid. */
export async function insertSecret(
  prisma: PrismaClient,
  secretBox: SecretBox,
  serverId: string,
  purpose: "callback" | "referral",
  opts: { createdAt?: Date; expiresAt?: Date | null; revokedAt?: Date | null } = {},
): Promise<{ secret: string; kid: string }> {
  const secret = purpose === "callback" ? generateCallbackSecret() : generateReferralSecret();
  const kid = generateKid();
  // A callback secret belongs to the server's default endpoint.
  const endpointId = purpose === "callback" ? (await defaultEndpoint(prisma, serverId)).id : null;
  await prisma.serverSecret.create({
    data: {
      id: randomUUID(),
      serverId,
      endpointId,
      purpose,
      kid,
      ciphertext: secretBox.seal(secret),
      createdAt: opts.createdAt ?? new Date(),
      expiresAt: opts.expiresAt ?? null,
      revokedAt: opts.revokedAt ?? null,
    },
  });
  if (endpointId !== null) await prisma.$transaction((tx) => unparkDeliveries(tx, { serverId, endpointId }));
  return { secret, kid };
}

/** A parsed `t=<unix>,v1=<hex>[,v1=<hex>]` callback header. */
export interface ParsedCallbackSignature {
  t: number;
  v1: string[];
}

/** Parses the callback signature header independently of the project's code. */
export function parseCallbackSignature(header: string | undefined): ParsedCallbackSignature | null {
  if (!header) return null;
  const match = /^t=(\d+)((?:,v1=[0-9a-f]{64})+)$/.exec(header);
  if (!match?.[1] || !match[2]) return null;
  return {
    t: Number(match[1]),
    v1: match[2]
      .slice(1)
      .split(",")
      .map((p) => p.slice(3)),
  };
}

/** The expected callback MAC, computed here with node:crypto: HMAC-SHA256(secret, "<t>.<raw body>") hex. */
export function expectedCallbackMac(secret: string, t: number, rawBody: Buffer): string {
  return createHmac("sha256", secret)
    .update(Buffer.concat([Buffer.from(`${t}.`), rawBody]))
    .digest("hex");
}

/** The expected Standard Webhooks signature: base64 HMAC-SHA256(base64-decoded whsec_ key, "<id>.<t>.<body>"). */
export function expectedStandardWebhookSignature(secret: string, id: string, t: number, rawBody: Buffer): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  return createHmac("sha256", key)
    .update(Buffer.concat([Buffer.from(`${id}.${t}.`), rawBody]))
    .digest("base64");
}

/** Constant-time hex comparison, as a receiver would do it. */
export function hexEquals(a: string, b: string): boolean {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

/** One test's dispatch world: its harness, and the dispatchers and receivers it starts, all closed when the test ends. */
export interface DispatchWorld {
  h: Harness;
  /** A dispatcher on the world's database and clock; `scheduleText` replaces the world's retry schedule. */
  dispatcher(opts?: Partial<DispatcherOptions> & { scheduleText?: string }): Dispatcher;
  receiver(opts?: Parameters<typeof startReceiver>[0]): Promise<Receiver>;
  /** Runs `close` when the test ends, with the receivers. */
  onClose(close: () => Promise<void>): void;
}

/**
 * Starts a harness for one test, with dispatchers polling every 25 ms, insecure URLs allowed, the
 * retry schedule `scheduleText` (default "100ms,200ms,300ms", no jitter) and `timeoutMs` (default 2 s).
 * At the end, receivers close first (that ends hanging attempts, so the dispatchers stop promptly).
 */
export async function startDispatchWorld(
  t: ExecutionContext,
  opts: { harness?: Parameters<typeof startHarness>[0]; scheduleText?: string; timeoutMs?: number } = {},
): Promise<DispatchWorld> {
  const h = await startHarness(opts.harness);
  const dispatchers: Dispatcher[] = [];
  const closers: Array<() => Promise<void>> = [];
  t.teardown(async () => {
    await Promise.all(closers.map((close) => close()));
    await Promise.all(dispatchers.map((d) => d.stop()));
    await h.close();
  });
  return {
    h,
    dispatcher({ scheduleText, ...rest } = {}) {
      const d = createDispatcher({
        prisma: h.db.prisma,
        secretBox: h.deps.secretBox,
        log: h.deps.log,
        now: opts.harness?.now ?? (() => new Date()),
        schedule: parseRetrySchedule(scheduleText ?? opts.scheduleText ?? "100ms,200ms,300ms", { jitterRatio: 0 }),
        timeoutMs: opts.timeoutMs ?? 2_000,
        allowInsecure: true,
        pollIntervalMs: 25,
        ...rest,
      });
      dispatchers.push(d);
      return d;
    },
    async receiver(o) {
      const r = await startReceiver(o);
      closers.push(() => r.close());
      return r;
    },
    onClose(close) {
      closers.push(close);
    },
  };
}

/** Stores a counted heart's delivery the way the consumer does (period 2026-03, no streak); returns its heart id. */
export async function addDelivery(h: Harness, serverId: string, opts: { username?: string; voterIdentity?: string } = {}): Promise<string> {
  const heartId = randomUUID();
  await insertDelivery(h.db.prisma, {
    heartId,
    serverId,
    eventType: "heart.counted",
    username: opts.username ?? "Steve",
    voterIdentity: opts.voterIdentity ?? `voter-${heartId}`,
    period: "2026-03",
    streakDay: null,
    countedAt: new Date(),
  });
  return heartId;
}

/** A harness on a test clock with a small pool of its own for recordingClient (test/helpers/rows-read.ts): the bounded-reads tests' world. */
export interface MeasuredHarness {
  h: Harness;
  clock: TestClock;
  pool: pg.Pool;
}

/** Starts a MeasuredHarness whose clock reads `start`; `close` ends its pool, then the harness. */
export async function startMeasuredHarness(start: string): Promise<MeasuredHarness & { close(): Promise<void> }> {
  const clock = createTestClock(start);
  const h = await startHarness({ now: () => clock.now(), maxConnections: 10 });
  const pool = new pg.Pool({ connectionString: h.db.url, max: 2 });
  // Failure policy: an idle connection the server ends (a test in another file restarting or draining the shared
  // PostgreSQL) is dropped by the pool and replaced on the next query; without a listener its 'error' event would end
  // the test process.
  pool.on("error", () => undefined);
  return {
    h,
    clock,
    pool,
    close: async () => {
      await pool.end();
      await h.close();
    },
  };
}
