/**
 * Callback benchmark: heart cast -> reward callback received, through the real
 * path (HeartService.CastHeart over Connect -> PostgreSQL transaction + outbox
 * row -> relay -> Kafka -> delivery consumer -> stored delivery -> dispatcher ->
 * signed POST) to a local receiver (scripts/harness/receiver.ts), beside:
 *
 *  - floor:       direct signed POSTs to the same receiver from one process, with the
 *                 product's own signer and sender (connection per callback, as the
 *                 dispatcher sends) and, for reference, over a keep-alive agent;
 *  - memory bus:  the same pipeline with the in-process bus (memory-bus.ts) in place of Kafka.
 *
 * Per bus: latency of hearts cast one at a time on an idle system (random gaps, so
 * casts do not phase-lock with the relay's poll), latency and callbacks/s while
 * hearts are cast continuously, and the drain rate of a backlog (the pipeline's
 * capacity with nothing else running). Real PostgreSQL and a real single-node
 * Kafka broker; traffic only to 127.0.0.1. Run: `npx tsx bench/callbacks.ts`.
 * Settings (env): BENCH_IDLE_HEARTS (25), BENCH_LOAD_MS (4000),
 * BENCH_CAST_CONCURRENCY (8), BENCH_BACKLOG (1000), BENCH_FLOOR_MS (2500),
 * BENCH_RELAY_POLL_MS (relay default), BENCH_BUSES ("memory,kafka"),
 * BENCH_TIME_LIMIT_S (170), BENCH_TAG, BENCH_LOG_LEVEL.
 */
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import http from "node:http";
import { dirname } from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { createRpcClients } from "../services/shared/rpc/service-clients.js";
import { EnvelopeSchema } from "../gen/proto/events/v1/events_pb.js";
import { Prisma } from "../gen/prisma/client.js";
import { startKafka } from "../scripts/infra/kafka.js";
import { readDispatchSettings } from "../services/delivery/pipeline/config.js";
import { createDeliveryConsumer } from "../services/delivery/pipeline/consumer.js";
import { createDispatcher } from "../services/delivery/pipeline/dispatcher.js";
import { sendCallback, signCallback } from "../services/delivery/pipeline/send-callback.js";
import { periodOf } from "../services/shared/values/period.js";
import { createReferralServiceServer } from "../services/referral-service/server.js";
import { ensureServiceToken } from "../services/access/service-tokens.js";
import { createServiceTransport } from "../services/shared/rpc/service-transport.js";
import { loadRelayConfig } from "../services/relay/config.js";
import { createRelay } from "../services/relay/relay.js";
import { ALL_TOPICS, HEARTS_TOPIC, type EventBus } from "../services/shared/adapters/bus.js";
import { createEnvReader } from "../services/shared/runtime/config.js";
import { createPrisma, type PrismaClient } from "../services/shared/adapters/db.js";
import { runSql } from "../services/shared/adapters/sql/executor.js";
import { createKafkaBus, ensureTopics } from "../services/shared/adapters/kafka-bus.js";
import { createMemoryBus } from "../services/shared/adapters/memory-bus.js";
import { createMetrics } from "../services/shared/runtime/metrics.js";
import { createSecretBox, generateServiceToken, generateCallbackSecret } from "../services/shared/runtime/secrets.js";
import { startReceiver, type Receiver, type RecordedRequest } from "../scripts/harness/receiver.js";
import {
  createBenchLogger,
  createCleanup,
  createProgress,
  envInt,
  findPidByCommandLine,
  installTimeLimit,
  loadNow,
  machineCpuMs,
  machineInfo,
  markdownTable,
  cpuBetween,
  snapshotProcessTree,
  selfCpuMs,
  startBenchPostgres,
  writeResults,
  type BenchPostgres,
  type StatementStat,
  runBench,
} from "./lib/infra.js";
import { profileWhile, type ProfileSummary } from "./lib/profile.js";
import { fmt, ratio, round, summarize, type LatencySummary } from "./lib/stats.js";

const NAME = "callbacks";
const IDLE_HEARTS = envInt("BENCH_IDLE_HEARTS", 25);
const LOAD_MS = envInt("BENCH_LOAD_MS", 4_000);
const CAST_CONCURRENCY = envInt("BENCH_CAST_CONCURRENCY", 8);
const BACKLOG = envInt("BENCH_BACKLOG", 1_000);
const BACKLOG_CAST_CONCURRENCY = 16;
const FLOOR_MS = envInt("BENCH_FLOOR_MS", 2_500);
const FLOOR_SEQUENTIAL = 300;
const SERVERS = 4;
/** Hearts of the extra, CPU-profiled backlog drain (0 skips it); profiled on the last bus only. */
const PROFILE_BACKLOG = envInt("BENCH_PROFILE_BACKLOG", 250);
const BUSES = (process.env.BENCH_BUSES ?? "memory,kafka").split(",").map((b) => b.trim()) as Array<"memory" | "kafka">;
const ARRIVAL_TIMEOUT_MS = 45_000;
const USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

/** Production defaults, read through the product's own config loaders. */
const RELAY_DEFAULTS = loadRelayConfig({ DATABASE_URL: "postgresql://127.0.0.1/x", KAFKA_BROKERS: "127.0.0.1:9092" });
const RELAY_POLL_MS = envInt("BENCH_RELAY_POLL_MS", RELAY_DEFAULTS.pollIntervalMs);
const DISPATCH = readDispatchSettings(createEnvReader({ ALLOW_INSECURE_CALLBACKS: "true" }));

const progress = createProgress(NAME);
const cleanup = createCleanup(progress);
installTimeLimit(envInt("BENCH_TIME_LIMIT_S", 170), cleanup, progress);

/** Arrival bookkeeping on the receiver: heart_id -> performance.now() of arrival. */
interface Arrivals {
  at: Map<string, number>;
  wait(heartId: string, timeoutMs: number): Promise<number>;
  waitAll(heartIds: string[], timeoutMs: number): Promise<void>;
  reset(): void;
}

function trackArrivals(receiver: Receiver): Arrivals {
  const at = new Map<string, number>();
  const waiters = new Map<string, (t: number) => void>();
  receiver.setFallback((request) => {
    const arrived = performance.now();
    try {
      const heartId = (JSON.parse(request.text) as { heart_id?: string }).heart_id ?? "";
      if (!at.has(heartId)) at.set(heartId, arrived);
      waiters.get(heartId)?.(arrived);
    } catch {
      // Failure policy: an unparseable body is still answered 200 and shows up in the signature check.
    }
    return { status: 200, body: "ok" };
  });
  return {
    at,
    wait(heartId, timeoutMs) {
      const seen = at.get(heartId);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(heartId);
          reject(new Error(`no callback for heart ${heartId} within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.set(heartId, (t) => {
          clearTimeout(timer);
          waiters.delete(heartId);
          resolve(t);
        });
      });
    },
    async waitAll(heartIds, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (heartIds.some((id) => !at.has(id))) {
        if (Date.now() > deadline)
          throw new Error(`${heartIds.filter((id) => !at.has(id)).length} of ${heartIds.length} callbacks missing after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    reset() {
      at.clear();
      receiver.requests.length = 0;
    },
  };
}

/** Checks every received callback's signature independently (node:crypto), and counts duplicates. */
function checkCallbacks(requests: RecordedRequest[], secrets: Map<string, string>): { received: number; badSignature: number; duplicates: number } {
  let badSignature = 0;
  const seen = new Set<string>();
  let duplicates = 0;
  for (const request of requests) {
    let body: { heart_id: string; server_id: string; timestamp: number };
    try {
      body = JSON.parse(request.text) as typeof body;
    } catch {
      // Failure policy: a body that is not JSON cannot carry a valid signature for this check; count it as bad.
      badSignature++;
      continue;
    }
    if (seen.has(body.heart_id)) duplicates++;
    seen.add(body.heart_id);
    const header = String(request.headers["x-service-signature"] ?? "");
    const match = /^t=(\d+),v1=([0-9a-f]{64})/.exec(header);
    const secret = secrets.get(body.server_id);
    if (!match || !secret || Number(match[1]) !== body.timestamp) {
      badSignature++;
      continue;
    }
    const expected = createHmac("sha256", secret).update(`${match[1]}.`).update(request.body).digest();
    if (!timingSafeEqual(expected, Buffer.from(match[2] ?? "", "hex"))) badSignature++;
  }
  return { received: requests.length, badSignature, duplicates };
}

/** The floor: signed POSTs straight to the receiver from this process. */
async function runFloor(receiver: Receiver, arrivals: Arrivals) {
  const secret = generateCallbackSecret();
  const serverId = randomUUID();
  const secrets = new Map([[serverId, secret]]);
  const now = () => new Date();
  const signed = () =>
    signCallback({
      url: receiver.url,
      fields: { event: "heart.counted", serverId, username: "bench_player", heartId: randomUUID(), period: periodOf(new Date()), streakDay: 3 },
      secretsNewestFirst: [secret],
      standardWebhooks: false,
      t: Math.floor(Date.now() / 1000),
    });
  const viaProductSender = async () => {
    const outcome = await sendCallback(signed(), { timeoutMs: DISPATCH.callbackTimeoutMs, allowInsecure: true, now });
    if (outcome.kind !== "delivered") throw new Error(`floor callback not delivered: ${JSON.stringify(outcome)}`);
  };
  const keepAlive = new http.Agent({ keepAlive: true, maxSockets: DISPATCH.concurrency });
  const viaKeepAlive = () =>
    new Promise<void>((resolve, reject) => {
      const request = signed();
      const url = new URL(request.url);
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: "POST",
          agent: keepAlive,
          headers: { ...request.headers, "Content-Length": Buffer.byteLength(request.body) },
        },
        (res) => {
          res.resume();
          res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`floor keep-alive got ${res.statusCode}`))));
        },
      );
      req.on("error", reject);
      req.end(request.body);
    });

  const sequential = async (fn: () => Promise<void>, n: number) => {
    for (let i = 0; i < 20; i++) await fn();
    const samples: number[] = [];
    for (let i = 0; i < n; i++) {
      const started = performance.now();
      await fn();
      samples.push(performance.now() - started);
    }
    return summarize(samples);
  };
  const sustained = async (fn: () => Promise<void>, concurrency: number, durationMs: number) => {
    const samples: number[] = [];
    const cpuBefore = selfCpuMs();
    const started = performance.now();
    const deadline = started + durationMs;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < deadline) {
          const t = performance.now();
          await fn();
          samples.push(performance.now() - t);
        }
      }),
    );
    const elapsed = performance.now() - started;
    return {
      callbacksPerSecond: round((samples.length / elapsed) * 1000, 1),
      latency: summarize(samples),
      cpuMsPerCallback: round((selfCpuMs() - cpuBefore) / samples.length, 3),
    };
  };

  arrivals.reset();
  const result = {
    sequentialProductSender: await sequential(viaProductSender, FLOOR_SEQUENTIAL),
    sequentialKeepAlive: await sequential(viaKeepAlive, FLOOR_SEQUENTIAL),
    sustainedProductSender: await sustained(viaProductSender, DISPATCH.concurrency, FLOOR_MS),
    sustainedKeepAlive: await sustained(viaKeepAlive, DISPATCH.concurrency, FLOOR_MS),
    concurrency: DISPATCH.concurrency,
    signatures: checkCallbacks(receiver.requests, secrets),
  };
  keepAlive.destroy();
  arrivals.reset();
  return result;
}

/** Where a callback's time goes, stage by stage (p50 / p95 ms over a set of hearts). */
interface StageBreakdown {
  hearts: number;
  stages: Array<{ stage: string; p50: number; p95: number }>;
}

const STAGES = [
  "CastHeart RPC (validation, fraud counts, counting transaction with the outbox row)",
  "committed -> relay pass picks the outbox row (relay poll wait)",
  "relay pass -> delivery row stored (publish, bus, consumer insert)",
  "delivery stored -> attempt starts (dispatcher wake, claim, secrets, streak)",
  "attempt starts -> callback arrives (sign, connect, POST)",
] as const;

/**
 * Splits cast -> callback into stages from the rows the pipeline writes: the
 * outbox row's published_at (the relay transaction's start), the delivery's
 * created_at (the consumer's insert), the first attempt's started_at, and the
 * receiver's arrival time. Database times have millisecond precision.
 */
async function breakDownStages(
  prisma: PrismaClient,
  heartIds: string[],
  castStarts: Map<string, number>,
  rpcMs: Map<string, number>,
  arrivals: Arrivals,
): Promise<StageBreakdown> {
  const wanted = new Set(heartIds);
  const outbox = await runSql<{ payload: Uint8Array; published_at: Date | null }>(
    prisma,
    Prisma.sql`
      SELECT payload, published_at FROM outbox WHERE topic = ${HEARTS_TOPIC}`,
  );
  const publishedAt = new Map<string, number>();
  for (const row of outbox) {
    const envelope = fromBinary(EnvelopeSchema, row.payload);
    if (envelope.payload.case === "heartCounted" && wanted.has(envelope.payload.value.heartId) && row.published_at) {
      publishedAt.set(envelope.payload.value.heartId, row.published_at.getTime());
    }
  }
  const deliveries = await runSql<{ heart_id: string; created_at: Date; started_at: Date | null }>(
    prisma,
    Prisma.sql`
      SELECT d.heart_id::text, d.created_at, a.started_at
      FROM deliveries d LEFT JOIN delivery_attempts a ON a.delivery_id = d.id AND a.attempt = 1
      WHERE d.heart_id = ANY(${heartIds}::uuid[])`,
  );
  const columns: number[][] = STAGES.map(() => []);
  for (const row of deliveries) {
    const id = row.heart_id;
    const cast = castStarts.get(id);
    const rpc = rpcMs.get(id);
    const published = publishedAt.get(id);
    const arrived = arrivals.at.get(id);
    if (cast === undefined || rpc === undefined || published === undefined || arrived === undefined || !row.started_at) continue;
    const committedEpoch = performance.timeOrigin + cast + rpc;
    const values = [
      rpc,
      published - committedEpoch,
      row.created_at.getTime() - published,
      row.started_at.getTime() - row.created_at.getTime(),
      performance.timeOrigin + arrived - row.started_at.getTime(),
    ];
    values.forEach((v, i) => columns[i]?.push(v));
  }
  return {
    hearts: columns[0]?.length ?? 0,
    stages: STAGES.map((stage, i) => {
      const summary = summarize(columns[i] ?? []);
      return { stage, p50: summary.p50, p95: summary.p95 };
    }),
  };
}

/** One pipeline's measurements. */
interface PipelineResult {
  bus: "memory" | "kafka";
  warmupMs: number;
  idle: { hearts: number; castToCallback: LatencySummary; castRpc: LatencySummary; stages: StageBreakdown };
  underLoad: {
    castConcurrency: number;
    hearts: number;
    castPerSecond: number;
    callbacksPerSecond: number;
    castToCallback: LatencySummary;
    castRpc: LatencySummary;
    stages: StageBreakdown;
    loadAverage1m: number;
  };
  backlog: {
    hearts: number;
    castSeconds: number;
    drainSeconds: number;
    callbacksPerSecond: number;
    /** From relay start to each callback's arrival. */
    timeToCallback: LatencySummary;
    cpuMsPerCallback: { node: number; postgres: number; kafka: number | null };
    /** Cores' worth of CPU used by processes outside this benchmark during the drain (contention). */
    otherProcessesCores: number;
    db: { statementsPerCallback: number; execMsPerCallback: number; top: StatementStat[] };
    loadAverage1m: number;
  };
  /** CPU profile of this process while a second, smaller backlog drained. */
  drainProfile?: ProfileSummary;
  checks: { received: number; badSignature: number; duplicates: number; expected: number };
}

async function runPipeline(
  busKind: "memory" | "kafka",
  opts: { pgb: BenchPostgres; brokers: string | undefined; kafkaPid: number | undefined; receiver: Receiver; arrivals: Arrivals; profile: boolean },
): Promise<PipelineResult> {
  const { pgb, brokers, kafkaPid, receiver, arrivals } = opts;
  const steps = createCleanup(progress);
  try {
    const database = `bench_cb_${busKind}`;
    const url = await pgb.createDatabase(database);
    steps.add(() => pgb.dropDatabase(database));
    // One Prisma client per process of the production layout, with that process's pool size.
    const servicePrisma = createPrisma(url, { maxConnections: 20 });
    const relayPrisma = createPrisma(url, { maxConnections: 4 });
    const deliveryPrisma = createPrisma(url, { maxConnections: 10 });
    steps.add(() => Promise.all([servicePrisma.$disconnect(), relayPrisma.$disconnect(), deliveryPrisma.$disconnect()]).then(() => undefined));
    const secretBox = createSecretBox(randomBytes(32));
    const now = () => new Date();
    const benchToken = generateServiceToken();
    await ensureServiceToken(servicePrisma, now(), { name: "bench", token: benchToken, scopes: ["admin"] });
    const rpc = createReferralServiceServer({
      prisma: servicePrisma,
      secretBox,
      log: createBenchLogger("referral-service"),
      metrics: createMetrics("referral-service"),
      now,
      allowInsecureCallbacks: true,
      callbackTimeoutMs: DISPATCH.callbackTimeoutMs,
      publicBaseUrl: "http://127.0.0.1:9",
    });
    const rpcPort = await rpc.listen(0, "127.0.0.1");
    steps.add(() => rpc.close());
    const transport = createServiceTransport(`http://127.0.0.1:${rpcPort}`, benchToken);
    const { hearts, admin } = createRpcClients(transport);

    const serverIds: string[] = [];
    const secrets = new Map<string, string>();
    for (let i = 0; i < SERVERS; i++) {
      const { server } = await admin.createServer({ name: `bench server ${i}`, registrationUrl: "https://example.com/register" });
      const serverId = server?.id ?? "";
      await admin.setCallbackSettings({ serverId, callbackUrl: receiver.url, standardWebhooks: false });
      secrets.set(serverId, (await admin.revealCallbackSecret({ serverId })).secret);
      serverIds.push(serverId);
    }

    let bus: EventBus;
    if (busKind === "kafka") {
      if (!brokers) throw new Error("no Kafka broker");
      await ensureTopics([brokers], [...ALL_TOPICS]);
      bus = createKafkaBus({ brokers: [brokers], clientId: "bench", log: createBenchLogger("kafka") });
    } else {
      bus = createMemoryBus();
    }
    steps.add(() => bus.close());
    const relay = createRelay({
      prisma: relayPrisma,
      bus,
      log: createBenchLogger("relay"),
      batchSize: RELAY_DEFAULTS.batchSize,
      pollIntervalMs: RELAY_POLL_MS,
    });
    const dispatcher = createDispatcher({
      prisma: deliveryPrisma,
      secretBox,
      log: createBenchLogger("delivery"),
      now,
      schedule: DISPATCH.schedule,
      timeoutMs: DISPATCH.callbackTimeoutMs,
      allowInsecure: true,
      concurrency: DISPATCH.concurrency,
      perServerConcurrency: DISPATCH.perServerConcurrency,
      pollIntervalMs: DISPATCH.pollIntervalMs,
    });
    const consumer = createDeliveryConsumer({
      bus,
      prisma: deliveryPrisma,
      log: createBenchLogger("delivery"),
      groupId: `bench-delivery-${randomBytes(4).toString("hex")}`,
      dispatcher,
    });
    relay.start();
    steps.add(() => relay.stop());
    await consumer.start();
    steps.add(() => consumer.stop());
    dispatcher.start();
    steps.add(() => dispatcher.stop());

    let voter = 0;
    const castStarts = new Map<string, number>();
    const rpcById = new Map<string, number>();
    const rpcTimes: number[] = [];
    const cast = async (): Promise<string> => {
      const n = voter++;
      const started = performance.now();
      const res = await hearts.castHeart({
        serverId: serverIds[n % SERVERS] ?? "",
        username: `player_${n}`,
        voterIdentity: `voter-${busKind}-${n}`,
        // A distinct address per heart, and consecutive hearts in different /24s, so fraud scoring lets them count.
        ip: `10.${n & 255}.${(n >> 8) & 255}.${((n >> 16) & 255) + 1}`,
        userAgent: USER_AGENT,
      });
      const rpcMs = performance.now() - started;
      rpcTimes.push(rpcMs);
      if (!res.counted) throw new Error(`heart not counted: ${res.reason}`);
      castStarts.set(res.heartId, started);
      rpcById.set(res.heartId, rpcMs);
      return res.heartId;
    };
    const latencies = (ids: string[], from: (id: string) => number) => summarize(ids.map((id) => (arrivals.at.get(id) ?? Number.NaN) - from(id)));
    const castLoop = async (concurrency: number, stop: { untilMs?: number; count?: number }) => {
      const ids: string[] = [];
      let issued = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          for (;;) {
            if (stop.untilMs !== undefined && performance.now() >= stop.untilMs) return;
            if (stop.count !== undefined && issued >= stop.count) return;
            issued++;
            ids.push(await cast());
          }
        }),
      );
      return ids;
    };

    // Warm-up: the first callbacks also wait for the consumer to join its group.
    arrivals.reset();
    const warmStarted = performance.now();
    for (let i = 0; i < 3; i++) await arrivals.wait(await cast(), ARRIVAL_TIMEOUT_MS);
    const warmupMs = Math.round(performance.now() - warmStarted);
    progress(`${busKind}: pipeline live after ${warmupMs} ms (warm-up hearts delivered)`);

    // Idle latency: one heart at a time, random gaps so casts do not phase-lock with the relay poll.
    rpcTimes.length = 0;
    const idleIds: string[] = [];
    for (let i = 0; i < IDLE_HEARTS; i++) {
      await new Promise((r) => setTimeout(r, Math.random() * RELAY_POLL_MS));
      const id = await cast();
      await arrivals.wait(id, ARRIVAL_TIMEOUT_MS);
      idleIds.push(id);
    }
    const idle = {
      hearts: idleIds.length,
      castToCallback: latencies(idleIds, (id) => castStarts.get(id) ?? Number.NaN),
      castRpc: summarize(rpcTimes),
      stages: await breakDownStages(deliveryPrisma, idleIds, castStarts, rpcById, arrivals),
    };
    progress(
      `${busKind}: idle cast->callback p50 ${fmt(idle.castToCallback.p50, 1)} ms p95 ${fmt(idle.castToCallback.p95, 1)} ms (cast RPC p50 ${fmt(idle.castRpc.p50, 1)} ms)`,
    );

    // Under load: hearts cast continuously by CAST_CONCURRENCY callers for LOAD_MS.
    rpcTimes.length = 0;
    const loadStarted = performance.now();
    const loadIds = await castLoop(CAST_CONCURRENCY, { untilMs: loadStarted + LOAD_MS });
    const castEnded = performance.now();
    await arrivals.waitAll(loadIds, ARRIVAL_TIMEOUT_MS);
    const lastLoadArrival = Math.max(...loadIds.map((id) => arrivals.at.get(id) ?? 0));
    const underLoad = {
      castConcurrency: CAST_CONCURRENCY,
      hearts: loadIds.length,
      castPerSecond: round((loadIds.length / (castEnded - loadStarted)) * 1000, 1),
      callbacksPerSecond: round((loadIds.length / (lastLoadArrival - loadStarted)) * 1000, 1),
      castToCallback: latencies(loadIds, (id) => castStarts.get(id) ?? Number.NaN),
      castRpc: summarize(rpcTimes),
      stages: await breakDownStages(deliveryPrisma, loadIds, castStarts, rpcById, arrivals),
      loadAverage1m: loadNow(),
    };
    progress(
      `${busKind}: under load ${fmt(underLoad.castPerSecond, 0)} casts/s -> ${fmt(underLoad.callbacksPerSecond, 0)} callbacks/s, cast->callback p50 ${fmt(underLoad.castToCallback.p50, 1)} ms p95 ${fmt(underLoad.castToCallback.p95, 1)} ms`,
    );

    // Backlog drain: cast BACKLOG hearts with the relay stopped, then start it and time the drain.
    await relay.stop();
    const backlogCastStarted = performance.now();
    const backlogIds = await castLoop(BACKLOG_CAST_CONCURRENCY, { count: BACKLOG });
    const castSeconds = round((performance.now() - backlogCastStarted) / 1000, 2);
    await pgb.resetStatements();
    const cpuBefore = {
      node: selfCpuMs(),
      postgres: pgb.cpuSnapshot(),
      kafka: kafkaPid === undefined ? undefined : snapshotProcessTree(kafkaPid),
      machine: machineCpuMs().busy,
    };
    const drainStarted = performance.now();
    relay.start();
    await arrivals.waitAll(backlogIds, ARRIVAL_TIMEOUT_MS * 2);
    const lastBacklogArrival = Math.max(...backlogIds.map((id) => arrivals.at.get(id) ?? 0));
    const drainMs = lastBacklogArrival - drainStarted;
    const cpu = {
      node: selfCpuMs() - cpuBefore.node,
      postgres: cpuBetween(cpuBefore.postgres, pgb.cpuSnapshot()),
      kafka: kafkaPid === undefined || !cpuBefore.kafka ? null : cpuBetween(cpuBefore.kafka, snapshotProcessTree(kafkaPid)),
      machine: machineCpuMs().busy - cpuBefore.machine,
    };
    const statements = await pgb.readStatements(database);
    const calls = statements.reduce((sum, s) => sum + s.calls, 0);
    const execMs = statements.reduce((sum, s) => sum + s.totalExecMs, 0);
    const perCallback = (ms: number) => round(ms / backlogIds.length, 3);
    const backlog = {
      hearts: backlogIds.length,
      castSeconds,
      drainSeconds: round(drainMs / 1000, 2),
      callbacksPerSecond: round((backlogIds.length / drainMs) * 1000, 1),
      timeToCallback: latencies(backlogIds, () => drainStarted),
      cpuMsPerCallback: { node: perCallback(cpu.node), postgres: perCallback(cpu.postgres), kafka: cpu.kafka === null ? null : perCallback(cpu.kafka) },
      otherProcessesCores: round(Math.max(0, cpu.machine - cpu.node - cpu.postgres - (cpu.kafka ?? 0)) / drainMs, 2),
      db: {
        statementsPerCallback: round(calls / backlogIds.length, 2),
        execMsPerCallback: round(execMs / backlogIds.length, 3),
        top: statements.slice(0, 16).map((s) => ({ ...s, totalExecMs: round(s.totalExecMs, 1) })),
      },
      loadAverage1m: loadNow(),
    };
    progress(
      `${busKind}: backlog of ${backlog.hearts} drained in ${backlog.drainSeconds} s = ${fmt(backlog.callbacksPerSecond, 0)} callbacks/s (${backlog.db.statementsPerCallback} DB statements per callback)`,
    );

    // Where the node process's CPU goes while draining: a second, smaller backlog under the profiler.
    let drainProfile: ProfileSummary | undefined;
    if (opts.profile && PROFILE_BACKLOG > 0) {
      await relay.stop();
      const ids = await castLoop(BACKLOG_CAST_CONCURRENCY, { count: PROFILE_BACKLOG });
      const profiled = await profileWhile(async () => {
        relay.start();
        await arrivals.waitAll(ids, ARRIVAL_TIMEOUT_MS * 2);
      });
      drainProfile = profiled.summary;
      progress(
        `${busKind}: drain profile: ${drainProfile.components
          .slice(0, 5)
          .map((c) => `${c.component} ${c.percent}%`)
          .join("; ")}`,
      );
    }

    // Let stragglers (retries, duplicates) land before counting.
    await new Promise((r) => setTimeout(r, 300));
    const checks = { ...checkCallbacks(receiver.requests, secrets), expected: castStarts.size };
    arrivals.reset();
    return { bus: busKind, warmupMs, idle, underLoad, backlog, ...(drainProfile ? { drainProfile } : {}), checks };
  } finally {
    await steps.run();
  }
}

async function main(): Promise<void> {
  const machineAtStart = machineInfo();
  progress(`nproc=${machineAtStart.nproc} load=${machineAtStart.loadAverage.join(" ")} node=${machineAtStart.node}`);
  const needKafka = BUSES.includes("kafka");
  const kafkaStarted = Date.now();
  const [pgb, kafka] = await Promise.all([startBenchPostgres(progress), needKafka ? startKafka() : Promise.resolve(undefined)]);
  cleanup.add(() => pgb.stop());
  if (kafka) {
    cleanup.add(() => kafka.stop());
    progress(`kafka broker ${kafka.brokers} ready (${Date.now() - kafkaStarted} ms after start)`);
  }
  const kafkaPid = kafka ? findPidByCommandLine(dirname(kafka.logFile)) : undefined;
  const receiver = await startReceiver({ path: "/hook" });
  cleanup.add(() => receiver.close());
  const arrivals = trackArrivals(receiver);

  const pipelines: PipelineResult[] = [];
  for (const [i, bus] of BUSES.entries()) {
    pipelines.push(await runPipeline(bus, { pgb, brokers: kafka?.brokers, kafkaPid, receiver, arrivals, profile: i === BUSES.length - 1 }));
  }
  // The floor runs last, on the same receiver, with the broker idle but still up.
  progress(`floor: direct signed POSTs to the receiver (${FLOOR_SEQUENTIAL} sequential, then ${DISPATCH.concurrency} concurrent for ${FLOOR_MS} ms)`);
  const floor = await runFloor(receiver, arrivals);
  progress(
    `floor: sequential p50 ${fmt(floor.sequentialProductSender.p50, 2)} ms; sustained ${fmt(floor.sustainedProductSender.callbacksPerSecond, 0)}/s (connection per callback), ${fmt(floor.sustainedKeepAlive.callbacksPerSecond, 0)}/s (keep-alive)`,
  );

  const results = {
    benchmark: NAME,
    machine: { atStart: machineAtStart, loadAverageAtEnd: machineInfo().loadAverage, postgres: pgb.serverVersion },
    settings: {
      servers: SERVERS,
      idleHearts: IDLE_HEARTS,
      loadMs: LOAD_MS,
      castConcurrency: CAST_CONCURRENCY,
      backlog: BACKLOG,
      relay: { pollIntervalMs: RELAY_POLL_MS, batchSize: RELAY_DEFAULTS.batchSize, defaultPollIntervalMs: RELAY_DEFAULTS.pollIntervalMs },
      dispatcher: {
        concurrency: DISPATCH.concurrency,
        perServerConcurrency: DISPATCH.perServerConcurrency,
        pollIntervalMs: DISPATCH.pollIntervalMs,
        timeoutMs: DISPATCH.callbackTimeoutMs,
      },
      topology:
        "referral service, relay, delivery consumer + dispatcher and the receiver in this process (one Prisma client per production process, with its pool size); PostgreSQL (fsync off) and Kafka (single KRaft node) local",
      logLevel: process.env.BENCH_LOG_LEVEL ?? "info",
    },
    floor,
    pipelines,
  };
  const ok = pipelines.every((p) => p.checks.badSignature === 0 && p.checks.received >= p.checks.expected) && floor.signatures.badSignature === 0;
  const { jsonPath, mdPath } = writeResults(NAME, results, renderMarkdown(results));
  progress(`wrote ${jsonPath} and ${mdPath}${ok ? "" : " (CHECKS FAILED: see the JSON)"}`);
  if (!ok) process.exitCode = 1;
}

type Results = {
  machine: { atStart: ReturnType<typeof machineInfo>; loadAverageAtEnd: number[]; postgres: string };
  settings: {
    servers: number;
    backlog: number;
    castConcurrency: number;
    relay: { pollIntervalMs: number; batchSize: number; defaultPollIntervalMs: number };
    dispatcher: { concurrency: number; perServerConcurrency: number; pollIntervalMs: number; timeoutMs: number };
    topology: string;
    logLevel: string;
  };
  floor: Awaited<ReturnType<typeof runFloor>>;
  pipelines: PipelineResult[];
};

function renderMarkdown(r: Results): string {
  const m = r.machine.atStart;
  const s = r.settings;
  const f = r.floor;
  const out: string[] = [];
  out.push(`# Callback benchmark results`, "");
  out.push(
    `Run ${m.at} on ${m.nproc} cores (${m.cpuModel}), ${m.memoryGiB} GiB, Node ${m.node}, PostgreSQL ${r.machine.postgres}. ` +
      `Load average at start ${m.loadAverage.join(" / ")}, at end ${r.machine.loadAverageAtEnd.join(" / ")} (1/5/15 min; above ${m.nproc} means other work competed for the CPU).`,
    "",
    `Settings: ${s.servers} servers with the local receiver as callback URL; relay poll ${s.relay.pollIntervalMs} ms (default ${s.relay.defaultPollIntervalMs}), batch ${s.relay.batchSize}; ` +
      `dispatcher concurrency ${s.dispatcher.concurrency}, ${s.dispatcher.perServerConcurrency} per server, poll ${s.dispatcher.pollIntervalMs} ms (woken on each stored delivery); ${s.topology}; log level ${s.logLevel} (to /dev/null).`,
    "",
  );
  const mem = r.pipelines.find((p) => p.bus === "memory");
  out.push(`## Heart cast -> callback received (each pipeline beside the HTTP floor and the in-process bus)`, "");
  const rows: string[][] = [
    [
      "floor: direct signed POST (product signer + sender, connection per callback)",
      `${fmt(f.sequentialProductSender.p50, 2)} / ${fmt(f.sequentialProductSender.p95, 2)}`,
      "—",
      `${fmt(f.sustainedProductSender.callbacksPerSecond, 0)} (c=${f.concurrency})`,
      "—",
    ],
    [
      "floor, keep-alive agent (reference)",
      `${fmt(f.sequentialKeepAlive.p50, 2)} / ${fmt(f.sequentialKeepAlive.p95, 2)}`,
      "—",
      `${fmt(f.sustainedKeepAlive.callbacksPerSecond, 0)} (c=${f.concurrency})`,
      "—",
    ],
  ];
  for (const p of r.pipelines) {
    rows.push([
      p.bus === "kafka" ? "relay + **Kafka** + delivery" : "relay + in-process bus (memory-bus.ts) + delivery",
      `${fmt(p.idle.castToCallback.p50, 1)} / ${fmt(p.idle.castToCallback.p95, 1)}`,
      `${fmt(p.underLoad.castToCallback.p50, 1)} / ${fmt(p.underLoad.castToCallback.p95, 1)} at ${fmt(p.underLoad.castPerSecond, 0)} casts/s`,
      `${fmt(p.backlog.callbacksPerSecond, 0)} (${p.backlog.hearts} backlog)` +
        (p.bus === "kafka" && mem ? `, ${ratio(p.backlog.callbacksPerSecond, mem.backlog.callbacksPerSecond)} of memory bus` : ""),
      `${fmt(p.underLoad.callbacksPerSecond, 0)}`,
    ]);
  }
  out.push(
    markdownTable(["path", "idle latency p50 / p95 ms", "latency under load p50 / p95 ms", "capacity callbacks/s (drain)", "callbacks/s while casting"], rows),
    "",
    `Floor: latency is sign + POST + response for one callback at a time; capacity is ${f.concurrency} concurrent senders (the dispatcher's default concurrency). ` +
      `Pipelines: idle latency is from the CastHeart call to the callback's arrival, hearts cast one at a time with random gaps; "under load" casts with ${s.castConcurrency} concurrent callers; ` +
      `capacity is a backlog cast with the relay stopped, then drained (relay start -> last callback).`,
    "",
  );
  out.push(`## Per pipeline detail`, "");
  out.push(
    markdownTable(
      ["", ...r.pipelines.map((p) => p.bus)],
      [
        ["warm-up until the first callbacks (ms; Kafka includes the consumer group join)", ...r.pipelines.map((p) => fmt(p.warmupMs, 0))],
        ["idle: CastHeart RPC p50 ms", ...r.pipelines.map((p) => fmt(p.idle.castRpc.p50, 2))],
        [
          "idle: cast -> callback p50 / p95 / max ms",
          ...r.pipelines.map((p) => `${fmt(p.idle.castToCallback.p50, 1)} / ${fmt(p.idle.castToCallback.p95, 1)} / ${fmt(p.idle.castToCallback.max, 1)}`),
        ],
        [
          "under load: hearts / casts per s / callbacks per s",
          ...r.pipelines.map((p) => `${p.underLoad.hearts} / ${fmt(p.underLoad.castPerSecond, 0)} / ${fmt(p.underLoad.callbacksPerSecond, 0)}`),
        ],
        ["under load: CastHeart RPC p50 / p95 ms", ...r.pipelines.map((p) => `${fmt(p.underLoad.castRpc.p50, 1)} / ${fmt(p.underLoad.castRpc.p95, 1)}`)],
        [
          "under load: cast -> callback p50 / p95 / p99 ms",
          ...r.pipelines.map(
            (p) => `${fmt(p.underLoad.castToCallback.p50, 1)} / ${fmt(p.underLoad.castToCallback.p95, 1)} / ${fmt(p.underLoad.castToCallback.p99, 1)}`,
          ),
        ],
        ["backlog: cast time s (relay stopped)", ...r.pipelines.map((p) => fmt(p.backlog.castSeconds, 2))],
        ["backlog: drain s / callbacks per s", ...r.pipelines.map((p) => `${fmt(p.backlog.drainSeconds, 2)} / ${fmt(p.backlog.callbacksPerSecond, 0)}`)],
        [
          "backlog: relay start -> callback p50 / p95 ms",
          ...r.pipelines.map((p) => `${fmt(p.backlog.timeToCallback.p50, 0)} / ${fmt(p.backlog.timeToCallback.p95, 0)}`),
        ],
        [
          "backlog: CPU ms per callback (node / PostgreSQL / Kafka)",
          ...r.pipelines.map(
            (p) =>
              `${fmt(p.backlog.cpuMsPerCallback.node, 2)} / ${fmt(p.backlog.cpuMsPerCallback.postgres, 2)} / ${p.backlog.cpuMsPerCallback.kafka === null ? "—" : fmt(p.backlog.cpuMsPerCallback.kafka, 2)}`,
          ),
        ],
        ["backlog: CPU used by other processes on the machine (cores)", ...r.pipelines.map((p) => fmt(p.backlog.otherProcessesCores, 2))],
        [
          "backlog: DB statements / exec ms per callback",
          ...r.pipelines.map((p) => `${fmt(p.backlog.db.statementsPerCallback, 1)} / ${fmt(p.backlog.db.execMsPerCallback, 3)}`),
        ],
        [
          "checks: received / expected / bad signatures / duplicates",
          ...r.pipelines.map((p) => `${p.checks.received} / ${p.checks.expected} / ${p.checks.badSignature} / ${p.checks.duplicates}`),
        ],
      ],
    ),
    "",
  );
  out.push(`## Where a callback's time goes, stage by stage (p50 / p95 ms)`, "");
  out.push(
    markdownTable(
      ["stage", ...r.pipelines.flatMap((p) => [`${p.bus} idle`, `${p.bus} under load`])],
      STAGES.map((stage, i) => [
        stage,
        ...r.pipelines.flatMap((p) => [p.idle.stages, p.underLoad.stages].map((b) => `${fmt(b.stages[i]?.p50, 1)} / ${fmt(b.stages[i]?.p95, 1)}`)),
      ]),
    ),
    "",
    "Stages come from the rows the pipeline writes (outbox.published_at = the relay transaction's start, deliveries.created_at, the first attempt's started_at) and the receiver's arrival clock; database times have 1 ms precision, so sub-millisecond stages read as 0 or 1.",
    "",
  );
  for (const p of r.pipelines) {
    if (!p.drainProfile) continue;
    out.push(`## Where this process's CPU goes while draining a backlog (${p.bus}; sampling profile, % of busy samples)`, "");
    out.push(
      markdownTable(
        ["component (self time)", "%"],
        p.drainProfile.components.slice(0, 14).map((c) => [c.component, fmt(c.percent, 1)]),
      ),
      "",
    );
    out.push(
      markdownTable(
        ["hottest functions (self time)", "component", "%"],
        p.drainProfile.functions.slice(0, 10).map((fn) => [`\`${fn.fn}\``, fn.component, fmt(fn.percent, 1)]),
      ),
      "",
    );
  }
  const k = r.pipelines.find((p) => p.bus === "kafka") ?? r.pipelines[0];
  if (k) {
    out.push(`## Statements per callback while draining the backlog (${k.bus}; relay + consumer + dispatcher, pg_stat_statements)`, "");
    out.push(
      markdownTable(
        ["statement (normalised, truncated)", "calls per callback", "exec ms per call"],
        k.backlog.db.top.map((st) => [
          `\`${st.query.slice(0, 110).replace(/\|/g, "\\|")}\``,
          fmt(st.calls / Math.max(1, k.backlog.hearts), 2),
          fmt(st.totalExecMs / Math.max(1, st.calls), 3),
        ]),
      ),
      "",
    );
  }
  out.push(`## Checks`, "", `- Floor: ${f.signatures.received} callbacks, ${f.signatures.badSignature} bad signatures.`);
  for (const p of r.pipelines) {
    out.push(
      `- ${p.bus}: ${p.checks.received} callbacks received for ${p.checks.expected} counted hearts, ${p.checks.badSignature} bad signatures (verified independently with node:crypto), ${p.checks.duplicates} duplicates.`,
    );
  }
  out.push("");
  return out.join("\n");
}

await runBench(main, cleanup, progress);
