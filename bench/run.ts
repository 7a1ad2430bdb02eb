/**
 * The issue #8 benchmark: every target in the production topology (gateway,
 * referral service, relay and delivery each as its own process, started from
 * BENCH_TARGET, default this checkout), on PostgreSQL with its default durability
 * (fsync, synchronous_commit, full_page_writes on) and pg_stat_statements, one
 * Kafka broker, each figure beside its baseline measured in the same run, every
 * phase repeated (3 rounds: median and min-max), machine load recorded per phase.
 *
 *   npx tsx bench/run.ts                       # everything (npm run bench)
 *   npx tsx bench/run.ts --quick               # smoke run: 1 round, short phases
 *   npx tsx bench/run.ts --phases=ingest,relay # subset of ingest,hearts,callbacks,latency,relay,scaleout
 *   BENCH_TARGET=/other/checkout npx tsx bench/run.ts   # the system under test from another checkout
 *
 * Writes bench/results/<BENCH_NAME>.json and .md (default `run`; with --quick `smoke/run`).
 * Progress goes to stderr. Settings and how to read the results: bench/README.md.
 */
import { randomBytes } from "node:crypto";
import { execFileSync, fork } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import pg from "pg";
import { ReferralTransitionedSchema } from "../gen/proto/events/v1/events_pb.js";
import { HeartService } from "../gen/proto/hearts/v1/hearts_pb.js";
import { ServerAdminService } from "../gen/proto/servers/v1/servers_pb.js";
import { startKafka } from "../scripts/infra/kafka.js";
import { REFERRALS_TOPIC } from "../services/shared/bus.js";
import { toOutboxRow } from "../services/shared/outbox.js";
import { createServiceTransport } from "../services/shared/service-transport.js";
import {
  createCleanup,
  cpuBetween,
  envInt,
  findPidByCommandLine,
  installTimeLimit,
  machineCpuMs,
  machineInfo,
  markdownTable,
  runBench,
  snapshotProcessTree,
  startBenchPostgres,
  writeResults,
  type BenchPostgres,
  type CpuSnapshot,
} from "./lib/infra.js";
import { startLoadGenerator, type IngestBodySpec, type LoadGenerator, type LoadJob, type LoadResult } from "./lib/loadgen.js";
import { startBenchReceiver, type BenchReceiver } from "./lib/receiver.js";
import { fmt, round, summarize } from "./lib/stats.js";
import { freePort, resolveTarget, startSutProcess, unknownEnvNames, type ProcessKind, type SutProcess, type Target } from "./lib/topology.js";

// ---------------------------------------------------------------- settings
const ARGS = process.argv.slice(2);
const QUICK = ARGS.includes("--quick");
const ALL_PHASES = ["ingest", "hearts", "callbacks", "latency", "relay", "scaleout"] as const;
type PhaseName = (typeof ALL_PHASES)[number];
const PHASES = new Set<PhaseName>(
  (
    ARGS.find((a) => a.startsWith("--phases="))
      ?.slice("--phases=".length)
      .split(",") ?? [...ALL_PHASES]
  ).map((p) => {
    if (!(ALL_PHASES as readonly string[]).includes(p)) throw new Error(`unknown phase ${p}; phases: ${ALL_PHASES.join(",")}`);
    return p as PhaseName;
  }),
);
const ROUNDS = envInt("BENCH_ROUNDS", QUICK ? 1 : 3);
const MEASURE_MS = envInt("BENCH_MEASURE_MS", QUICK ? 2_000 : 5_000);
const WARMUP_MS = envInt("BENCH_WARMUP_MS", QUICK ? 500 : 1_000);
const OPEN_LOOP_MS = envInt("BENCH_OPEN_LOOP_MS", QUICK ? 2_000 : 4_000);
const CONCURRENCY = envInt("BENCH_CONCURRENCY", 32);
const INGEST_RATE = envInt("BENCH_INGEST_RATE", 1_000);
const HEART_RATE = envInt("BENCH_HEART_RATE", 1_000);
const BACKLOG = envInt("BENCH_BACKLOG", QUICK ? 500 : 3_000);
const RELAY_ROWS = envInt("BENCH_RELAY_ROWS", QUICK ? 20_000 : 100_000);
const IDLE_HEARTS = envInt("BENCH_IDLE_HEARTS", QUICK ? 10 : 30);
const HEART_SERVERS = envInt("BENCH_HEART_SERVERS", 50);
const TOKENS = envInt("BENCH_TOKENS", QUICK ? 40_000 : 300_000);
const BASELINE_TOKENS = envInt("BENCH_BASELINE_TOKENS", QUICK ? 20_000 : 120_000);
const NAME = process.env.BENCH_NAME ?? (QUICK ? "smoke/run" : "run");
const WAIT_MS = 180_000;

const started = Date.now();
const progress = (line: string) => process.stderr.write(`[bench +${((Date.now() - started) / 1000).toFixed(1)}s] ${line}\n`);
const cleanup = createCleanup(progress);
installTimeLimit(envInt("BENCH_TIME_LIMIT_S", QUICK ? 900 : 2_400), cleanup, progress);

// ---------------------------------------------------------------- measurement plumbing
/** Machine load and CPU per process over one measured window. */
interface Window {
  ms: number;
  nproc: number;
  loadavgBefore: number[];
  loadavgAfter: number[];
  /** /proc/stat busy share of all cores over the window. */
  machineBusyPercent: number;
  /** CPU ms per process (gateway-1, referral-service-1, postgres, kafka, loadgen, baseline...). */
  cpuMs: Record<string, number>;
  /** CPU of everything not listed above, in cores. */
  otherCores: number;
}

type Tracked = { name: string; snapshot: () => CpuSnapshot };

/** Opens a window; `finish(late)` closes it, `late` adding processes started inside it (all their CPU since spawn). */
function openWindow(tracked: Tracked[]): (late?: SutProcess[]) => Window {
  const before = tracked.map((t) => ({ name: t.name, snap: t.snapshot() }));
  const machineBefore = machineCpuMs();
  const loadavgBefore = machineInfo().loadAverage;
  const t0 = performance.now();
  return (late = []) => {
    const ms = performance.now() - t0;
    const cpuMs: Record<string, number> = {};
    let ours = 0;
    tracked.forEach((t, i) => {
      const used = cpuBetween(before[i]?.snap ?? new Map(), t.snapshot());
      cpuMs[t.name] = (cpuMs[t.name] ?? 0) + round(used, 0);
      ours += used;
    });
    for (const p of late) {
      const used = cpuBetween(new Map(), p.cpu());
      cpuMs[p.kind] = (cpuMs[p.kind] ?? 0) + round(used, 0);
      ours += used;
    }
    const machineAfter = machineCpuMs();
    const busy = machineAfter.busy - machineBefore.busy;
    const total = machineAfter.total - machineBefore.total;
    return {
      ms: round(ms, 0),
      nproc: machineInfo().nproc,
      loadavgBefore,
      loadavgAfter: machineInfo().loadAverage,
      machineBusyPercent: round((busy / Math.max(1, total)) * 100, 0),
      cpuMs,
      otherCores: round(Math.max(0, busy - ours) / Math.max(1, ms), 2),
    };
  };
}

/** One figure's rounds, summarised. */
interface Spread {
  median: number;
  min: number;
  max: number;
  values: number[];
}

function spread(values: number[]): Spread {
  const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (finite.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN, values };
  const mid = Math.floor(finite.length / 2);
  const median = finite.length % 2 === 1 ? (finite[mid] as number) : ((finite[mid - 1] as number) + (finite[mid] as number)) / 2;
  return { median: round(median, 2), min: round(finite[0] as number, 2), max: round(finite[finite.length - 1] as number, 2), values };
}

// ---------------------------------------------------------------- the run
interface Ctx {
  target: Target;
  pgb: BenchPostgres;
  database: string;
  databaseUrl: string;
  sql: pg.Client;
  brokers: string;
  kafkaPid: number | undefined;
  receiver: BenchReceiver;
  loadgen: LoadGenerator;
  logDir: string;
  env: { secretsKey: string; adminToken: string; gatewayToken: string; deliveryGroup: string };
  running: Record<ProcessKind, SutProcess[]>;
  baseline?: { url: string; pid: number; stop(): Promise<void> };
  fixtures: Fixtures;
  /** Next fresh click token index (gateway / baseline). */
  nextToken: number;
  nextBaselineToken: number;
  nextVoter: number;
  /** Hearts answered counted so far (each owes one callback). */
  counted: number;
  envWarnings: Set<string>;
}

interface Fixtures {
  ingestServerId: string;
  ingestSecret: string;
  ingestKid: string;
  tokenPrefix: string;
  baselineTokenPrefix: string;
  heartServerIds: string[];
  hotServerId: string;
  callbackSecrets: Map<string, string>;
}

/** Settings of one process, in the target's names (extra names are harmless: every config reads only its own). */
function envFor(ctx: Ctx, kind: ProcessKind, index: number, ports: { port: number; opsPort: number }): Record<string, string> {
  const base: Record<string, string> = { HOST: "127.0.0.1", OPS_PORT: String(ports.opsPort) };
  const rsUrl = (i: number) => `http://127.0.0.1:${ctx.running["referral-service"][i % ctx.running["referral-service"].length]?.port ?? 0}`;
  let env: Record<string, string>;
  switch (kind) {
    case "referral-service":
      env = {
        ...base,
        PORT: String(ports.port),
        DATABASE_URL: ctx.databaseUrl,
        SECRETS_KEY: ctx.env.secretsKey,
        ADMIN_SERVICE_TOKEN: ctx.env.adminToken,
        GATEWAY_SERVICE_TOKEN: ctx.env.gatewayToken,
        GATEWAY_SERVICE_TOKEN_SCOPES: "ingest,pull,clicks:record,dashboard,admin",
        ALLOW_INSECURE_CALLBACKS: "true",
        PUBLIC_BASE_URL: "http://127.0.0.1:8080",
      };
      break;
    case "gateway":
      env = {
        ...base,
        PORT: String(ports.port),
        REFERRAL_SERVICE_URL: rsUrl(index),
        REFERRAL_SERVICE_TOKEN: ctx.env.gatewayToken,
        PUBLIC_BASE_URL: "http://127.0.0.1:8080",
      };
      break;
    case "relay":
      env = { ...base, DATABASE_URL: ctx.databaseUrl, KAFKA_BROKERS: ctx.brokers };
      break;
    case "delivery":
      env = {
        ...base,
        DATABASE_URL: ctx.databaseUrl,
        KAFKA_BROKERS: ctx.brokers,
        SECRETS_KEY: ctx.env.secretsKey,
        ALLOW_INSECURE_CALLBACKS: "true",
        KAFKA_GROUP_ID: ctx.env.deliveryGroup,
      };
      break;
  }
  // BENCH_SUT_ENV="NAME=value,NAME=value": extra settings for every process (what-if runs).
  for (const pair of (process.env.BENCH_SUT_ENV ?? "").split(",").filter(Boolean)) {
    const at = pair.indexOf("=");
    if (at > 0) env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  for (const name of unknownEnvNames(ctx.target, env)) ctx.envWarnings.add(`${kind}: ${name}`);
  return env;
}

/** Starts or stops processes of one kind until `count` run. */
async function ensure(ctx: Ctx, kind: ProcessKind, count: number): Promise<void> {
  const list = ctx.running[kind];
  while (list.length > count) await list.pop()?.stop();
  const starting: Array<Promise<SutProcess>> = [];
  for (let i = list.length; i < count; i++) {
    const ports = { port: kind === "gateway" || kind === "referral-service" ? await freePort() : 0, opsPort: await freePort() };
    starting.push(startSutProcess(ctx.target, kind, `${kind}-${i + 1}`, envFor(ctx, kind, i, ports), { logDir: ctx.logDir, ...ports }));
  }
  const startedProcs = await Promise.all(starting);
  list.push(...startedProcs);
  if (startedProcs.length > 0) progress(`${kind}: ${startedProcs.map((p) => `${p.name} ready in ${p.readyAfterMs} ms`).join(", ")}`);
}

async function stopAll(ctx: Ctx): Promise<void> {
  for (const kind of ["gateway", "delivery", "relay", "referral-service"] as const) await ensure(ctx, kind, 0);
}

function tracked(ctx: Ctx, extra: Tracked[] = []): Tracked[] {
  const list: Tracked[] = [];
  for (const kind of ["gateway", "referral-service", "relay", "delivery"] as const) {
    for (const p of ctx.running[kind]) list.push({ name: kind, snapshot: () => p.cpu() });
  }
  list.push({ name: "postgres", snapshot: () => ctx.pgb.cpuSnapshot() });
  if (ctx.kafkaPid !== undefined) {
    const pid = ctx.kafkaPid;
    list.push({ name: "kafka", snapshot: () => snapshotProcessTree(pid) });
  }
  list.push({ name: "load generator", snapshot: () => snapshotProcessTree(ctx.loadgen.pid) });
  list.push({ name: "harness (receiver)", snapshot: () => new Map([[process.pid, (process.cpuUsage().user + process.cpuUsage().system) / 1000]]) });
  return [...list, ...extra];
}

/**
 * Statements since the last reset: `calls` counts what the clients sent (top-level statements,
 * BEGIN and COMMIT included); `allCalls` adds what PostgreSQL runs inside them (foreign-key checks,
 * pg_stat_statements.track = all).
 */
async function statementsSince(ctx: Ctx): Promise<{ calls: number; allCalls: number; top: Array<{ query: string; calls: number; meanMs: number }> }> {
  const stats = await ctx.pgb.readStatements(ctx.database);
  const relevant = stats.filter((s) => !/pg_stat_statements|^SHOW |^SET /.test(s.query));
  let calls = Number.NaN;
  try {
    const { rows } = await ctx.statsSql.query<{ calls: string }>(
      `SELECT coalesce(sum(s.calls), 0)::text AS calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
       WHERE d.datname = $1 AND s.toplevel AND s.query NOT LIKE '%pg_stat_statements%'`,
      [ctx.database],
    );
    calls = Number(rows[0]?.calls ?? 0);
  } catch (error) {
    // Failure policy: PostgreSQL before 14 has no `toplevel`; the figure is then reported as not measured, the run goes on.
    progress(`top-level statement count unavailable: ${(error as Error).message}`);
  }
  return {
    calls,
    allCalls: relevant.reduce((sum, s) => sum + s.calls, 0),
    top: relevant.slice(0, 8).map((s) => ({ query: s.query.slice(0, 140), calls: s.calls, meanMs: round(s.totalExecMs / Math.max(1, s.calls), 3) })),
  };
}

function ingestSpec(ctx: Ctx, baseline: boolean): IngestBodySpec {
  const f = ctx.fixtures;
  return baseline
    ? {
        serverId: f.ingestServerId,
        secret: f.ingestSecret,
        tokenPrefix: f.baselineTokenPrefix,
        start: ctx.nextBaselineToken,
        end: BASELINE_TOKENS,
        cycle: false,
        test: false,
      }
    : { serverId: f.ingestServerId, secret: f.ingestSecret, tokenPrefix: f.tokenPrefix, start: ctx.nextToken, end: TOKENS, cycle: false, test: false };
}

/** Runs one ingest load job and advances the token cursor it used. */
async function runIngest(ctx: Ctx, baseline: boolean, urls: string[], over: Partial<LoadJob>): Promise<LoadResult> {
  const result = await ctx.loadgen.run({
    label: baseline ? "baseline" : "gateway",
    url: urls[0] ?? "",
    urls,
    concurrency: CONCURRENCY,
    durationMs: MEASURE_MS,
    body: ingestSpec(ctx, baseline),
    expectStatus: 200,
    expectContains: '"state":"registered"',
    ...over,
  });
  if (baseline) ctx.nextBaselineToken = result.nextIndex;
  else ctx.nextToken = result.nextIndex;
  if (result.exhausted) progress(`WARNING: ${baseline ? "baseline" : "gateway"} click tokens exhausted; raise BENCH_TOKENS / BENCH_BASELINE_TOKENS`);
  return result;
}

/** Runs one CastHeart load job with fresh voters. */
async function runCast(ctx: Ctx, serverIds: string[], over: Partial<LoadJob> & { recordHearts?: boolean }): Promise<LoadResult> {
  const urls = ctx.running["referral-service"].map((p) => `http://127.0.0.1:${p.port}`);
  const result = await ctx.loadgen.run({
    label: "cast",
    kind: "cast",
    url: urls[0] ?? "",
    urls,
    concurrency: CONCURRENCY,
    durationMs: MEASURE_MS,
    body: ingestSpec(ctx, false),
    cast: {
      token: ctx.env.adminToken,
      serverIds,
      voterPrefix: `voter-${ctx.env.deliveryGroup}-`,
      start: ctx.nextVoter,
      recordHearts: over.recordHearts ?? false,
      timeoutMs: 15_000,
    },
    expectStatus: 200,
    expectContains: "",
    ...over,
  });
  ctx.nextVoter = result.nextIndex;
  ctx.counted += result.ok;
  return result;
}

type Figures = Record<string, number>;
interface Detail {
  phase: string;
  round: number;
  instances: number;
  what: string;
  window?: Window;
  load?: Omit<LoadResult, "hearts">;
  extra?: Record<string, unknown>;
}

// ---------------------------------------------------------------- phases
async function phaseIngest(ctx: Ctx, roundNo: number, instances: number, figures: Figures, details: Detail[]): Promise<void> {
  const gatewayUrls = ctx.running.gateway.map((p) => `http://127.0.0.1:${p.port}/api/referral/events`);
  const measure = async (what: string, baseline: boolean, urls: string[], over: Partial<LoadJob>, extra: Tracked[] = []) => {
    await runIngest(ctx, baseline, urls, { durationMs: WARMUP_MS });
    await ctx.pgb.resetStatements();
    const finish = openWindow(tracked(ctx, extra));
    const load = await runIngest(ctx, baseline, urls, over);
    const window = finish();
    const statements = await statementsSince(ctx);
    details.push({
      phase: "ingest",
      round: roundNo,
      instances,
      what,
      window,
      load,
      extra: { statementsPerEvent: round2(statements.calls / Math.max(1, load.ok)), top: statements.top },
    });
    const perEvent = Object.fromEntries(Object.entries(window.cpuMs).map(([k, v]) => [k, round2(v / Math.max(1, load.ok))]));
    progress(
      `ingest ${what} (x${instances}): ${fmt(load.requestsPerSecond, 0)} req/s p50 ${fmt(load.latency.p50, 1)} p99 ${fmt(load.latency.p99, 1)} ms, ok ${load.ok} bad ${load.unexpected} err ${load.errors}` +
        `${load.sampleUnexpected ? ` (${load.sampleUnexpected.slice(0, 120)})` : ""}; CPU ms/event ${JSON.stringify(perEvent)}; ${round2(statements.calls / Math.max(1, load.ok))} stmts/event`,
    );
    return { load, window, statements, perEvent };
  };
  const gw = await measure(`gateway closed loop c=${CONCURRENCY}`, false, gatewayUrls, {});
  figures["ingest.gateway.rps"] = gw.load.requestsPerSecond;
  figures["ingest.gateway.p50"] = gw.load.latency.p50;
  figures["ingest.gateway.p99"] = gw.load.latency.p99;
  figures["ingest.gateway.failed"] = gw.load.unexpected + gw.load.errors;
  figures["ingest.gateway.stmtsPerEvent"] = round2(gw.statements.calls / Math.max(1, gw.load.ok));
  figures["ingest.gateway.stmtsPerEventInclNested"] = round2(gw.statements.allCalls / Math.max(1, gw.load.ok));
  for (const [k, v] of Object.entries(gw.perEvent)) figures[`ingest.gateway.cpuMsPerEvent.${k}`] = v;
  if (instances === 1 && ctx.baseline) {
    const baselinePid = ctx.baseline.pid;
    const base = await measure(`raw baseline (node:http + pg, one CTE statement) c=${CONCURRENCY}`, true, [ctx.baseline.url], {}, [
      { name: "baseline", snapshot: () => snapshotProcessTree(baselinePid) },
    ]);
    figures["ingest.baseline.rps"] = base.load.requestsPerSecond;
    figures["ingest.baseline.p99"] = base.load.latency.p99;
    figures["ingest.baseline.stmtsPerEvent"] = round2(base.statements.calls / Math.max(1, base.load.ok));
    figures["ingest.ratio"] = round2(gw.load.requestsPerSecond / Math.max(1, base.load.requestsPerSecond));
    const open = await measure(`gateway open loop ${INGEST_RATE} req/s offered`, false, gatewayUrls, {
      ratePerSecond: INGEST_RATE,
      durationMs: OPEN_LOOP_MS,
      concurrency: 1_000,
    });
    figures["ingest.open.p50"] = open.load.latency.p50;
    figures["ingest.open.p99"] = open.load.latency.p99;
    figures["ingest.open.achievedRps"] = open.load.requestsPerSecond;
    figures["ingest.open.failed"] = open.load.unexpected + open.load.errors + (open.load.notSent ?? 0);
  }
}

async function phaseHearts(ctx: Ctx, roundNo: number, instances: number, figures: Figures, details: Detail[]): Promise<void> {
  await ensure(ctx, "delivery", 0); // CastHeart alone; the hearts wait in Kafka for the callbacks phase.
  for (const [key, what, servers] of [
    ["hearts.many", `fresh voters over ${ctx.fixtures.heartServerIds.length} servers`, ctx.fixtures.heartServerIds],
    ["hearts.one", "fresh voters, every heart to ONE server", [ctx.fixtures.hotServerId]],
  ] as const) {
    await runCast(ctx, [...servers], { durationMs: WARMUP_MS });
    await ctx.pgb.resetStatements();
    const finish = openWindow(tracked(ctx));
    const load = await runCast(ctx, [...servers], {});
    const window = finish();
    const statements = await statementsSince(ctx);
    const { hearts: _h, ...loadNoHearts } = load;
    details.push({
      phase: "hearts",
      round: roundNo,
      instances,
      what,
      window,
      load: loadNoHearts,
      extra: { statementsPerHeart: round2(statements.calls / Math.max(1, load.ok)), top: statements.top },
    });
    figures[`${key}.rps`] = load.requestsPerSecond;
    figures[`${key}.p99`] = load.latency.p99;
    figures[`${key}.failed`] = load.unexpected + load.errors;
    figures[`${key}.stmtsPerHeart`] = round2(statements.calls / Math.max(1, load.ok));
    figures[`${key}.stmtsPerHeartInclNested`] = round2(statements.allCalls / Math.max(1, load.ok));
    progress(
      `hearts ${what} (x${instances}): ${fmt(load.requestsPerSecond, 0)} counted/s p50 ${fmt(load.latency.p50, 1)} p99 ${fmt(load.latency.p99, 1)} ms, not counted ${load.unexpected}, failed ${load.errors}` +
        `${load.errorCodes ? ` ${JSON.stringify(load.errorCodes)}` : ""}`,
    );
  }
}

async function unpublishedOutbox(ctx: Ctx, afterId = 0n): Promise<number> {
  const { rows } = await ctx.sql.query<{ n: string }>(
    ctx.outboxHasPublishedAt ? "SELECT count(*) AS n FROM outbox WHERE published_at IS NULL AND id > $1" : "SELECT count(*) AS n FROM outbox WHERE id > $1",
    [afterId.toString()],
  );
  return Number(rows[0]?.n ?? 0);
}

async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = WAIT_MS): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) {
      progress(`WARNING: ${what} not reached within ${timeoutMs} ms`);
      return false;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}

async function phaseCallbacks(ctx: Ctx, roundNo: number, instances: number, figures: Figures, details: Detail[]): Promise<void> {
  // Settle: every heart counted so far gets its callback first, so the drain below is of its own backlog only.
  await ensure(ctx, "relay", instances);
  await ensure(ctx, "delivery", instances);
  await ctx.receiver.waitForCount(ctx.counted, WAIT_MS);
  await ensure(ctx, "delivery", 0);
  // The backlog: hearts over many servers, cast while no delivery runs; the relay publishes them to Kafka.
  const cast = await runCast(ctx, ctx.fixtures.heartServerIds, { durationMs: 120_000, maxRequests: BACKLOG, recordHearts: true });
  const ids = (cast.hearts ?? []).map(([id]) => id);
  await waitUntil("backlog published by the relay", async () => (await unpublishedOutbox(ctx)) === 0);
  await ensure(ctx, "relay", 0);
  await ctx.pgb.resetStatements();
  const spawnAt = Date.now();
  const finish = openWindow(tracked(ctx));
  // The delivery processes start inside the window: all of their CPU since spawn belongs to the drain.
  await ensure(ctx, "delivery", instances);
  await waitUntil(`all ${ids.length} backlog callbacks received`, async () => ids.every((id) => ctx.receiver.arrivals.has(id)), WAIT_MS * 2);
  const window = finish(ctx.running.delivery);
  const statements = await statementsSince(ctx);
  const times = ids
    .map((id) => ctx.receiver.arrivals.get(id) ?? Number.NaN)
    .filter(Number.isFinite)
    .sort((a, b) => a - b);
  const first = times[0] ?? Number.NaN;
  const last = times[times.length - 1] ?? Number.NaN;
  const readyAt = Math.min(...ctx.running.delivery.map((p) => p.readyAt));
  const steady = times.length > 1 ? ((times.length - 1) / Math.max(1, last - first)) * 1000 : Number.NaN;
  figures["callbacks.drain.rps"] = round(steady, 0);
  figures["callbacks.drain.rpsFromSpawn"] = round((times.length / Math.max(1, last - spawnAt)) * 1000, 0);
  figures["callbacks.drain.stmtsPerCallback"] = round2(statements.calls / Math.max(1, times.length));
  figures["callbacks.drain.stmtsPerCallbackInclNested"] = round2(statements.allCalls / Math.max(1, times.length));
  figures["callbacks.drain.delivered"] = times.length;
  figures["callbacks.drain.backlog"] = ids.length;
  for (const [k, v] of Object.entries(window.cpuMs)) figures[`callbacks.cpuMsPerCallback.${k}`] = round2(v / Math.max(1, times.length));
  details.push({
    phase: "callbacks",
    round: roundNo,
    instances,
    what: `drain of ${ids.length} stored hearts (Kafka) by ${instances} delivery process(es)`,
    window,
    extra: { firstArrivalAfterReadyMs: first - readyAt, deliveryStartMs: readyAt - spawnAt, top: statements.top, backlogCastRps: cast.requestsPerSecond },
  });
  progress(
    `callbacks (x${instances}): ${times.length}/${ids.length} drained at ${fmt(steady, 0)}/s (first to last arrival), ${figures["callbacks.drain.stmtsPerCallback"]} stmts/callback`,
  );
  if (instances === 1) {
    const raw = await ctx.loadgen.run({
      label: "raw callbacks",
      kind: "callback",
      url: ctx.receiver.url,
      concurrency: CONCURRENCY,
      durationMs: MEASURE_MS,
      body: ingestSpec(ctx, false),
      callback: { secret: `whsec_${randomBytes(24).toString("base64")}`, serverId: ctx.fixtures.heartServerIds[0] ?? "" },
      expectStatus: 200,
      expectContains: "",
    });
    figures["callbacks.baseline.rps"] = raw.requestsPerSecond;
    figures["callbacks.ratio"] = round2(steady / Math.max(1, raw.requestsPerSecond));
    details.push({ phase: "callbacks", round: roundNo, instances, what: `raw signed-POST loop c=${CONCURRENCY} (${raw.client ?? "?"})`, load: raw });
    progress(`callbacks raw baseline: ${fmt(raw.requestsPerSecond, 0)}/s via ${raw.client}`);
  }
  await ensure(ctx, "relay", instances);
}

async function phaseLatency(ctx: Ctx, roundNo: number, figures: Figures, details: Detail[], hearts: Client<typeof HeartService>): Promise<void> {
  await ensure(ctx, "relay", 1);
  await ensure(ctx, "delivery", 1);
  await ctx.receiver.waitForCount(ctx.counted, WAIT_MS);
  const servers = ctx.fixtures.heartServerIds;
  const idle: number[] = [];
  let idleMissing = 0;
  for (let i = 0; i < IDLE_HEARTS; i++) {
    await new Promise((r) => setTimeout(r, 40 + Math.random() * 120)); // random gaps: no phase lock with any poll
    const n = ctx.nextVoter++;
    const t0 = Date.now();
    const res = await hearts.castHeart({
      serverId: servers[n % servers.length] ?? "",
      username: `idle_${n % 1000}`,
      voterIdentity: `idle-${ctx.env.deliveryGroup}-${n}`,
      ip: `10.${n & 255}.${(n >> 8) & 255}.${((n >> 16) & 255) + 1}`,
      userAgent: "Mozilla/5.0 bench",
    });
    if (!res.counted) continue;
    ctx.counted++;
    await waitUntil("idle callback", async () => ctx.receiver.arrivals.has(res.heartId), 30_000);
    const arrived = ctx.receiver.arrivals.get(res.heartId);
    if (arrived === undefined) idleMissing++;
    else idle.push(arrived - t0);
  }
  const idleSummary = summarize(idle);
  figures["latency.idle.p50"] = idleSummary.p50;
  figures["latency.idle.p99"] = idleSummary.p99;
  figures["latency.idle.missing"] = idleMissing;
  const finish = openWindow(tracked(ctx));
  const load = await runCast(ctx, servers, { ratePerSecond: HEART_RATE, durationMs: OPEN_LOOP_MS, concurrency: 2_000, recordHearts: true });
  const list = load.hearts ?? [];
  await waitUntil(`callbacks of ${list.length} hearts cast under load`, async () => list.every(([id]) => ctx.receiver.arrivals.has(id)), 120_000);
  const window = finish();
  const lat = list.map(([id, at]) => (ctx.receiver.arrivals.get(id) ?? Number.NaN) - at);
  const delivered = lat.filter(Number.isFinite);
  const s = summarize(delivered);
  const offered = Math.floor((OPEN_LOOP_MS / 1000) * HEART_RATE);
  figures["latency.load.p50"] = s.p50;
  figures["latency.load.p99"] = s.p99;
  figures["latency.load.counted"] = load.ok;
  figures["latency.load.failedCasts"] = offered - load.ok;
  figures["latency.load.undelivered"] = list.length - delivered.length;
  const { hearts: _h, ...loadNoHearts } = load;
  details.push({
    phase: "latency",
    round: roundNo,
    instances: 1,
    what: `vote -> callback: idle (${idle.length} hearts) and ${HEART_RATE} hearts/s offered open loop`,
    window,
    load: loadNoHearts,
    extra: { idle: idleSummary, underLoad: s },
  });
  progress(
    `latency: idle p50 ${fmt(idleSummary.p50, 1)} p99 ${fmt(idleSummary.p99, 1)} ms; at ${HEART_RATE}/s offered: ${load.ok}/${offered} counted, callback p50 ${fmt(s.p50, 1)} p99 ${fmt(s.p99, 1)} ms` +
      `${load.errorCodes ? `; failed ${JSON.stringify(load.errorCodes)}` : ""}`,
  );
}

async function phaseRelay(ctx: Ctx, roundNo: number, figures: Figures, details: Detail[]): Promise<void> {
  await ensure(ctx, "delivery", 0);
  await ensure(ctx, "relay", 0);
  const { rows } = await ctx.sql.query<{ max: string | null }>("SELECT max(id)::text AS max FROM outbox");
  const afterId = BigInt(rows[0]?.max ?? "0");
  // 100 000 rows straight into the outbox (a topic nobody in the bench consumes), keys over 64 servers.
  const keys = Array.from({ length: 64 }, () => crypto.randomUUID());
  const sample = keys.map((key) =>
    toOutboxRow({
      topic: REFERRALS_TOPIC,
      type: "referral.registered",
      serverId: key,
      occurredAt: new Date(),
      payload: {
        case: "referralTransitioned",
        value: create(ReferralTransitionedSchema, {
          referralId: crypto.randomUUID(),
          serverId: key,
          referrerIdentity: "referrer-1",
          refereeIdentity: "referee-1",
          state: "registered",
          previousState: "clicked",
          serverEventId: "reg-1",
        }),
      },
    }),
  );
  const insertStarted = Date.now();
  await ctx.sql.query(
    `INSERT INTO outbox (topic, key, type, payload, shard, created_at)
     SELECT $1, k.key, 'referral.registered', k.payload, k.shard, now()
     FROM generate_series(0, $2::int - 1) g
     JOIN unnest($3::text[], $4::bytea[], $5::int[]) WITH ORDINALITY AS k(key, payload, shard, n) ON k.n = (g % 64) + 1`,
    [REFERRALS_TOPIC, RELAY_ROWS, sample.map((s) => s.key), sample.map((s) => s.payload), sample.map((s) => s.shard)],
  );
  progress(`relay: ${RELAY_ROWS} outbox rows inserted in ${Date.now() - insertStarted} ms; starting the relay alone`);
  await ctx.pgb.resetStatements();
  const finish = openWindow(tracked(ctx));
  const spawnAt = Date.now();
  await ensure(ctx, "relay", 1);
  const relayProc = ctx.running.relay[0];
  await waitUntil(`${RELAY_ROWS} outbox rows published`, async () => (await unpublishedOutbox(ctx, afterId)) === 0, WAIT_MS * 2);
  const doneAt = Date.now();
  // The relay started inside the window: all of its CPU since spawn belongs to the drain.
  const window = finish(ctx.running.relay);
  let rate = Number.NaN;
  if (ctx.outboxHasPublishedAt) {
    const span = await ctx.sql.query<{ first: Date; last: Date; n: string }>(
      "SELECT min(published_at) AS first, max(published_at) AS last, count(*) AS n FROM outbox WHERE id > $1",
      [afterId.toString()],
    );
    const r = span.rows[0];
    if (r) rate = (Number(r.n) / Math.max(1, r.last.getTime() - r.first.getTime() + 1)) * 1000;
  }
  const readyAt = relayProc?.readyAt ?? spawnAt;
  const wallRate = (RELAY_ROWS / Math.max(1, doneAt - readyAt)) * 1000;
  const statements = await statementsSince(ctx);
  figures["relay.rowsPerSecond"] = round(Number.isFinite(rate) ? rate : wallRate, 0);
  figures["relay.rowsPerSecondFromReady"] = round(wallRate, 0);
  figures["relay.stmtsPerRow"] = round2(statements.calls / RELAY_ROWS);
  details.push({
    phase: "relay",
    round: roundNo,
    instances: 1,
    what: `${RELAY_ROWS}-row outbox backlog, relay alone`,
    window,
    extra: { top: statements.top, relayReadyMs: readyAt - spawnAt },
  });
  progress(`relay: ${fmt(figures["relay.rowsPerSecond"], 0)} rows/s (first to last published_at), ${fmt(wallRate, 0)} rows/s from ready to done`);
}

function round2(v: number): number {
  return round(v, 2);
}

// ---------------------------------------------------------------- setup
interface Ctx {
  outboxHasPublishedAt: boolean;
  /** Connected to the `postgres` database, where the pg_stat_statements view lives. */
  statsSql: pg.Client;
}

async function setup(): Promise<{ ctx: Ctx; admin: Client<typeof ServerAdminService>; hearts: Client<typeof HeartService> }> {
  const target = resolveTarget();
  progress(`target ${target.dir} @ ${target.commit.slice(0, 12)}${target.dirty ? " (with uncommitted changes)" : ""}, runtime ${target.runtime}`);
  const logDir = mkdtempSync(join(tmpdir(), "bench-logs-"));
  progress(`process logs in ${logDir}`);
  // The target's own migrations, run as the target runs them.
  const migrate = async (url: string) => {
    const child = fork(join(target.dir, "scripts/db/migrate.ts"), ["deploy"], {
      cwd: target.dir,
      execArgv: ["--import", "tsx"],
      env: { PATH: process.env.PATH ?? "", DATABASE_URL: url },
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    });
    const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
    if (code !== 0) throw new Error(`the target's migrations failed (exit ${code})`);
    return Number.NaN; // the target's migrate.ts reports its own count
  };
  const brokersFromEnv = process.env.BENCH_KAFKA_BROKERS;
  const [pgb, kafka] = await Promise.all([
    startBenchPostgres(progress, { durability: process.env.BENCH_PG_DURABILITY === "off" ? "off" : "default", migrate }),
    brokersFromEnv ? Promise.resolve(undefined) : startKafka(),
  ]);
  cleanup.add(() => pgb.stop());
  if (kafka) cleanup.add(() => kafka.stop());
  const brokers = brokersFromEnv ?? kafka?.brokers ?? "";
  const kafkaPid = kafka ? findPidByCommandLine(dirname(kafka.logFile)) : undefined;
  progress(`kafka ${brokers}${brokersFromEnv ? " (BENCH_KAFKA_BROKERS, shared: its CPU is not counted)" : ""}`);
  const database = "bench";
  const databaseUrl = await pgb.createDatabase(database);
  const sql = new pg.Client({ connectionString: databaseUrl });
  await sql.connect();
  cleanup.add(() => sql.end());
  const receiver = await startBenchReceiver();
  cleanup.add(() => receiver.close());
  const loadgen = await startLoadGenerator();
  cleanup.add(() => loadgen.close());
  const statsSql = new pg.Client({ connectionString: pgb.adminUrl });
  await statsSql.connect();
  cleanup.add(() => statsSql.end());
  const outboxHasPublishedAt =
    (await sql.query("SELECT 1 FROM information_schema.columns WHERE table_name = 'outbox' AND column_name = 'published_at'")).rowCount === 1;
  const ctx: Ctx = {
    target,
    pgb,
    database,
    databaseUrl,
    sql,
    brokers,
    kafkaPid,
    receiver,
    loadgen,
    logDir,
    env: {
      secretsKey: randomBytes(32).toString("base64"),
      adminToken: randomBytes(32).toString("base64url"),
      gatewayToken: randomBytes(32).toString("base64url"),
      deliveryGroup: `bench-${randomBytes(4).toString("hex")}`,
    },
    running: { gateway: [], "referral-service": [], relay: [], delivery: [] },
    fixtures: undefined as unknown as Fixtures,
    nextToken: 0,
    nextBaselineToken: 0,
    nextVoter: 0,
    counted: 0,
    envWarnings: new Set(),
    outboxHasPublishedAt,
    statsSql,
  };
  cleanup.add(() => stopAll(ctx));
  await ensure(ctx, "referral-service", 1);
  const transport = createServiceTransport(`http://127.0.0.1:${ctx.running["referral-service"][0]?.port}`, ctx.env.adminToken);
  const admin = createClient(ServerAdminService, transport);
  const hearts = createClient(HeartService, transport);

  // Fixtures: the ingest server (referrals on, one secret) with its click tokens; the heart servers.
  const { server } = await admin.createServer({ name: "bench ingest", registrationUrl: "https://example.com/register" });
  const ingestServerId = server?.id ?? "";
  await admin.setReferralsEnabled({ serverId: ingestServerId, enabled: true });
  const { secret, info } = await admin.createReferralSecret({ serverId: ingestServerId });
  const tokenPrefix = `tok_${randomBytes(4).toString("hex")}_`;
  const baselineTokenPrefix = `raw_${randomBytes(4).toString("hex")}_`;
  const seeded = Date.now();
  for (const [prefix, count] of PHASES.has("ingest")
    ? ([
        [tokenPrefix, TOKENS],
        [baselineTokenPrefix, BASELINE_TOKENS],
      ] as const)
    : []) {
    await sql.query(
      `INSERT INTO referral_clicks (id, server_id, referrer_identity, token)
       SELECT gen_random_uuid(), $1::uuid, 'referrer-' || (g % 997), $2 || g FROM generate_series(0, $3::int - 1) g`,
      [ingestServerId, prefix, count],
    );
  }
  await sql.query("ANALYZE");
  if (PHASES.has("ingest")) progress(`${TOKENS + BASELINE_TOKENS} click tokens seeded in ${Date.now() - seeded} ms`);
  const callbackSecrets = new Map<string, string>();
  const heartServerIds: string[] = [];
  for (let i = 0; i <= HEART_SERVERS; i++) {
    const { server: s } = await admin.createServer({ name: `bench hearts ${i}`, registrationUrl: "https://example.com/register" });
    const id = s?.id ?? "";
    await admin.setCallbackSettings({ serverId: id, callbackUrl: receiver.url, standardWebhooks: false });
    callbackSecrets.set(id, (await admin.revealCallbackSecret({ serverId: id })).secret);
    heartServerIds.push(id);
  }
  const hotServerId = heartServerIds.pop() ?? "";
  ctx.fixtures = {
    ingestServerId,
    ingestSecret: secret,
    ingestKid: info?.kid ?? "",
    tokenPrefix,
    baselineTokenPrefix,
    heartServerIds,
    hotServerId,
    callbackSecrets,
  };
  return { ctx, admin, hearts };
}

async function startBaseline(ctx: Ctx): Promise<void> {
  const child = fork(fileURLToPath(new URL("./lib/raw-ingest-server.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx"],
    env: {
      PATH: process.env.PATH ?? "",
      DATABASE_URL: ctx.databaseUrl,
      BASELINE_SERVER_ID: ctx.fixtures.ingestServerId,
      BASELINE_KID: ctx.fixtures.ingestKid,
      BASELINE_SECRET: ctx.fixtures.ingestSecret,
    },
    stdio: ["ignore", "pipe", "inherit", "ipc"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout?.on("data", (chunk: Buffer) => {
      const m = /listening (\d+)/.exec(chunk.toString());
      if (m) resolve(Number(m[1]));
    });
    child.once("exit", (code) => reject(new Error(`raw baseline exited (${code})`)));
  });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  ctx.baseline = {
    url: `http://127.0.0.1:${port}/api/referral/events`,
    pid: child.pid ?? -1,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
  cleanup.add(() => ctx.baseline?.stop());
}

// ---------------------------------------------------------------- main
async function main(): Promise<void> {
  const machineAtStart = machineInfo();
  progress(
    `nproc=${machineAtStart.nproc} load=${machineAtStart.loadAverage.join(" ")} phases=${[...PHASES].join(",")} rounds=${ROUNDS}${QUICK ? " (quick)" : ""}`,
  );
  const { ctx, hearts } = await setup();
  const durability = (
    await ctx.sql.query<{ name: string; setting: string }>(
      "SELECT name, setting FROM pg_settings WHERE name IN ('fsync','synchronous_commit','full_page_writes','wal_sync_method','shared_buffers','max_connections') ORDER BY name",
    )
  ).rows;
  const pgVersion = ctx.pgb.serverVersion;
  if (PHASES.has("ingest")) await startBaseline(ctx);

  const rounds: Record<string, Figures[]> = { "1": [], "2": [] };
  const details: Detail[] = [];
  const phaseTimes: Record<string, number> = {};
  const timed = async (name: string, fn: () => Promise<void>) => {
    const t = Date.now();
    await fn();
    phaseTimes[name] = (phaseTimes[name] ?? 0) + (Date.now() - t);
  };
  if (PHASES.has("ingest")) await ensure(ctx, "gateway", 1);
  await ensure(ctx, "relay", 1);
  for (let r = 1; r <= ROUNDS; r++) {
    progress(`--- round ${r}/${ROUNDS}, one instance of each process`);
    const figures: Figures = {};
    if (PHASES.has("ingest")) await timed("ingest", () => phaseIngest(ctx, r, 1, figures, details));
    if (PHASES.has("hearts")) await timed("hearts", () => phaseHearts(ctx, r, 1, figures, details));
    if (PHASES.has("callbacks")) await timed("callbacks", () => phaseCallbacks(ctx, r, 1, figures, details));
    if (PHASES.has("latency")) await timed("latency", () => phaseLatency(ctx, r, figures, details, hearts));
    if (PHASES.has("relay")) await timed("relay", () => phaseRelay(ctx, r, figures, details));
    rounds["1"]?.push(figures);
  }
  if (PHASES.has("scaleout")) {
    progress("--- scale-out: two instances of each process");
    await ensure(ctx, "delivery", 0);
    await ensure(ctx, "gateway", 0);
    await ensure(ctx, "referral-service", 2);
    if (PHASES.has("ingest")) await ensure(ctx, "gateway", 2);
    await ensure(ctx, "relay", 2);
    for (let r = 1; r <= ROUNDS; r++) {
      progress(`--- scale-out round ${r}/${ROUNDS}`);
      const figures: Figures = {};
      await timed("scaleout", async () => {
        if (PHASES.has("ingest")) await phaseIngest(ctx, r, 2, figures, details);
        await phaseHearts(ctx, r, 2, figures, details);
        await phaseCallbacks(ctx, r, 2, figures, details);
      });
      rounds["2"]?.push(figures);
    }
  }
  // Every counted heart's callback, once: wait for the stragglers, then check.
  await ensure(ctx, "relay", 1);
  await ensure(ctx, "delivery", 1);
  const allDelivered = await ctx.receiver.waitForCount(ctx.counted, WAIT_MS);
  const signatures = ctx.receiver.checkSignatures(ctx.fixtures.callbackSecrets);
  const checks = {
    countedHearts: ctx.counted,
    callbacksReceived: ctx.receiver.arrivals.size,
    duplicates: ctx.receiver.duplicates,
    allDelivered,
    signaturesChecked: signatures.checked,
    badSignatures: signatures.bad,
  };
  progress(`checks: ${JSON.stringify(checks)}`);
  await stopAll(ctx);

  const summary: Record<string, Record<string, Spread>> = {};
  for (const [inst, list] of Object.entries(rounds)) {
    if (list.length === 0) continue;
    const keys = new Set(list.flatMap((f) => Object.keys(f)));
    summary[inst] = Object.fromEntries([...keys].sort().map((k) => [k, spread(list.map((f) => f[k] ?? Number.NaN))]));
  }
  const results = {
    benchmark: "issue-8 production topology",
    quick: QUICK,
    durationSeconds: Math.round((Date.now() - started) / 1000),
    phaseSeconds: Object.fromEntries(Object.entries(phaseTimes).map(([k, v]) => [k, Math.round(v / 1000)])),
    target: { dir: ctx.target.dir, commit: ctx.target.commit, dirty: ctx.target.dirty, runtime: ctx.target.runtime },
    harnessCommit: gitCommit(),
    machine: { atStart: machineAtStart, loadAverageAtEnd: machineInfo().loadAverage },
    postgres: { version: pgVersion, settings: Object.fromEntries(durability.map((d) => [d.name, d.setting])) },
    kafka: { brokers: ctx.brokers, own: ctx.kafkaPid !== undefined },
    settings: {
      rounds: ROUNDS,
      measureMs: MEASURE_MS,
      warmupMs: WARMUP_MS,
      openLoopMs: OPEN_LOOP_MS,
      concurrency: CONCURRENCY,
      ingestRate: INGEST_RATE,
      heartRate: HEART_RATE,
      backlog: BACKLOG,
      relayRows: RELAY_ROWS,
      heartServers: HEART_SERVERS,
      logLevel: process.env.BENCH_LOG_LEVEL ?? "info",
      sutEnv: process.env.BENCH_SUT_ENV ?? "",
    },
    envNamesTheTargetDoesNotRead: [...ctx.envWarnings],
    summary,
    rounds,
    checks,
    details,
  };
  mkdirSync(dirname(join(fileURLToPath(new URL("./results/", import.meta.url)), NAME)), { recursive: true });
  const { jsonPath, mdPath } = writeResults(NAME, results, renderMarkdown(results));
  progress(`wrote ${jsonPath} and ${mdPath} (${results.durationSeconds} s in all)`);
  if (process.env.BENCH_KEEP_LOGS === "1") progress(`process logs kept in ${ctx.logDir}`);
  else rmSync(ctx.logDir, { recursive: true, force: true });
}

function gitCommit(): string {
  try {
    return execFileSyncText("git", ["-C", fileURLToPath(new URL("..", import.meta.url)), "rev-parse", "HEAD"]);
  } catch {
    // Failure policy: the harness commit is informative only.
    return "unknown";
  }
}

function execFileSyncText(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: "utf8" }).trim();
}

// ---------------------------------------------------------------- report
type Results = {
  quick: boolean;
  durationSeconds: number;
  phaseSeconds: Record<string, number>;
  target: { dir: string; commit: string; dirty: boolean; runtime: string };
  harnessCommit: string;
  machine: { atStart: ReturnType<typeof machineInfo>; loadAverageAtEnd: number[] };
  postgres: { version: string; settings: Record<string, string> };
  kafka: { brokers: string; own: boolean };
  settings: Record<string, unknown>;
  envNamesTheTargetDoesNotRead: string[];
  summary: Record<string, Record<string, Spread>>;
  checks: Record<string, unknown>;
  details: Detail[];
};

function renderMarkdown(r: Results): string {
  const one = r.summary["1"] ?? {};
  const two = r.summary["2"] ?? {};
  const f = (s: Spread | undefined, digits = 0, unit = "") =>
    s && Number.isFinite(s.median) ? `${fmt(s.median, digits)}${unit} (${fmt(s.min, digits)}-${fmt(s.max, digits)})` : "not measured";
  const m = (s: Spread | undefined) => s?.median ?? Number.NaN;
  const met = (ok: boolean | undefined) => (ok === undefined ? "not measured" : ok ? "**met**" : "**not met**");
  const cmp = (s: Spread | undefined, test: (v: number) => boolean) => (s && Number.isFinite(s.median) ? test(s.median) : undefined);
  const all = (...xs: Array<boolean | undefined>) => (xs.some((x) => x === undefined) ? undefined : xs.every(Boolean));
  const mc = r.machine.atStart;
  const out: string[] = [];
  const fsyncOff = r.postgres.settings.fsync === "off";
  out.push(
    `# Issue #8 benchmark${r.quick ? " (SMOKE RUN: --quick, 1 round, short phases; not figures to quote)" : ""}${fsyncOff ? " (PostgreSQL with fsync OFF: not the targets' durability)" : ""}`,
    "",
  );
  out.push(
    `Target checkout \`${r.target.dir}\` at \`${r.target.commit}\`${r.target.dirty ? " **with uncommitted changes**" : ""} (run with ${r.target.runtime}); harness \`${r.harnessCommit.slice(0, 12)}\`. ` +
      `${mc.nproc} cores (${mc.cpuModel}), Node ${mc.node}; load average ${mc.loadAverage.join(" / ")} at start, ${r.machine.loadAverageAtEnd.join(" / ")} at end. ` +
      `PostgreSQL ${r.postgres.version}: ${Object.entries(r.postgres.settings)
        .map(([k, v]) => `${k}=${v}`)
        .join(", ")}. Kafka: ${r.kafka.own ? "own single-node broker" : `shared broker ${r.kafka.brokers}`}. ` +
      `Run took ${r.durationSeconds} s (${Object.entries(r.phaseSeconds)
        .map(([k, v]) => `${k} ${v} s`)
        .join(", ")}).`,
    "",
    `Figures: median of the rounds (min-max in brackets). Every process of the system under test runs on its own (gateway, referral service, relay, delivery), as in production.`,
    "",
  );
  if (r.envNamesTheTargetDoesNotRead.length > 0)
    out.push(`Settings passed that the target's config files do not name (ignored by it): ${r.envNamesTheTargetDoesNotRead.join(", ")}.`, "");
  out.push(`## Targets`, "");
  const rows: string[][] = [
    [
      "1. Signed `registered` events through the gateway: at least 2,500 req/s at concurrency 32, and at least 0.8x a raw baseline measured in the same run: node:http + pg, the same HMAC check, the same rows written by ONE statement per event (a CTE chain). p99 at most 25 ms under 1,000 req/s offered open-loop.",
      `${f(one["ingest.gateway.rps"])} req/s at c=32 (p99 ${f(one["ingest.gateway.p99"], 1, " ms")}); open loop ${INGEST_RATE}/s: p99 ${f(one["ingest.open.p99"], 1, " ms")}, failed ${f(one["ingest.open.failed"])}`,
      `${f(one["ingest.baseline.rps"])} req/s`,
      f(one["ingest.ratio"], 2, "x"),
      met(
        all(
          cmp(one["ingest.gateway.rps"], (v) => v >= 2500),
          cmp(one["ingest.ratio"], (v) => v >= 0.8),
          cmp(one["ingest.open.p99"], (v) => v <= 25),
        ),
      ),
    ],
    [
      "2. CastHeart (fraud scoring included, fresh voters): at least 2,500 counted hearts/s; and at least 1,500/s when every heart goes to ONE server (the per-server ranking row must not serialise every vote of a popular server behind one row lock).",
      `${f(one["hearts.many.rps"])} counted/s over ${HEART_SERVERS} servers; ${f(one["hearts.one.rps"])} counted/s to ONE server`,
      "—",
      "—",
      met(
        all(
          cmp(one["hearts.many.rps"], (v) => v >= 2500),
          cmp(one["hearts.one.rps"], (v) => v >= 1500),
        ),
      ),
    ],
    [
      "3. Callbacks: a backlog drains at at least 3,000 callbacks/s to a local receiver, at least 0.4x a raw signed-POST loop to the same receiver in the same run; at most 3 DB statements per callback, amortised.",
      `${f(one["callbacks.drain.rps"])} callbacks/s; ${f(one["callbacks.drain.stmtsPerCallback"], 2)} statements/callback`,
      `${f(one["callbacks.baseline.rps"])} /s`,
      f(one["callbacks.ratio"], 2, "x"),
      met(
        all(
          cmp(one["callbacks.drain.rps"], (v) => v >= 3000),
          cmp(one["callbacks.ratio"], (v) => v >= 0.4),
          cmp(one["callbacks.drain.stmtsPerCallback"], (v) => v <= 3),
        ),
      ),
    ],
    [
      "4. Vote -> callback: p50 at most 10 ms idle; p99 at most 50 ms under 1,000 hearts/s offered.",
      `idle p50 ${f(one["latency.idle.p50"], 1, " ms")}; under ${HEART_RATE}/s offered: p99 ${f(one["latency.load.p99"], 1, " ms")} over counted hearts, ${f(one["latency.load.failedCasts"])} casts not counted, ${f(one["latency.load.undelivered"])} not delivered in time`,
      "—",
      "—",
      met(
        all(
          cmp(one["latency.idle.p50"], (v) => v <= 10),
          cmp(one["latency.load.p99"], (v) => v <= 50),
          cmp(one["latency.load.failedCasts"], (v) => v === 0),
        ),
      ),
    ],
    [
      "5. Relay: a 100,000-row outbox backlog drains at at least 20,000 rows/s into Kafka.",
      `${f(one["relay.rowsPerSecond"])} rows/s (${RELAY_ROWS} rows; from ready: ${f(one["relay.rowsPerSecondFromReady"])})`,
      "—",
      "—",
      met(cmp(one["relay.rowsPerSecond"], (v) => v >= 20000)),
    ],
    [
      "6. Overload is handled, not failed: beyond capacity, callers get a clear retryable answer (Connect `resource_exhausted` or `unavailable` with a retry hint; 503 with Retry-After on the public endpoint) before any internal timeout fires, queues are bounded, and nothing that was answered as counted or applied is lost. A test drives the service past capacity and checks it.",
      `not a benchmark figure (a test); the open-loop phases above report failures by code: see the details`,
      "—",
      "—",
      "see tests",
    ],
    [
      "7. Scale-out is shown, not claimed: two instances each of gateway, referral service, relay and delivery against one PostgreSQL and one Kafka deliver every heart exactly once per receiver key (a test), and the benchmark reports the figures for one and for two instances.",
      `2 instances: ingest ${f(two["ingest.gateway.rps"])} req/s, hearts ${f(two["hearts.many.rps"])} /s (one server ${f(two["hearts.one.rps"])}), drain ${f(two["callbacks.drain.rps"])} /s`,
      `1 instance: ${f(one["ingest.gateway.rps"])} / ${f(one["hearts.many.rps"])} (${f(one["hearts.one.rps"])}) / ${f(one["callbacks.drain.rps"])}`,
      Number.isFinite(m(two["ingest.gateway.rps"]))
        ? `${fmt(m(two["ingest.gateway.rps"]) / m(one["ingest.gateway.rps"]), 2)}x / ${fmt(m(two["hearts.many.rps"]) / m(one["hearts.many.rps"]), 2)}x / ${fmt(m(two["callbacks.drain.rps"]) / m(one["callbacks.drain.rps"]), 2)}x`
        : "—",
      Number.isFinite(m(two["callbacks.drain.rps"])) ? "reported" : "not measured",
    ],
  ];
  out.push(markdownTable(["target (issue #8, verbatim)", "measured", "baseline (same run)", "ratio", "status"], rows), "");
  out.push(`## Every figure`, "");
  for (const [inst, figs] of Object.entries(r.summary)) {
    out.push(`### ${inst} instance${inst === "1" ? "" : "s"} of each process`, "");
    out.push(
      markdownTable(
        ["figure", "median", "min", "max", "rounds"],
        Object.entries(figs).map(([k, s]) => [k, fmt(s.median, 2), fmt(s.min, 2), fmt(s.max, 2), s.values.map((v) => fmt(v, 1)).join(" / ")]),
      ),
      "",
    );
  }
  out.push(
    `## Machine load and CPU per phase`,
    "",
    "CPU in ms over the measured window, per process; other = CPU of everything else on the machine, in cores (anything well above 0 means the machine was not quiet).",
    "",
  );
  out.push(
    markdownTable(
      ["phase", "round", "inst.", "what", "window s", "loadavg before -> after", "machine busy %", "CPU ms per process", "other (cores)"],
      r.details
        .filter((d) => d.window)
        .map((d) => [
          d.phase,
          String(d.round),
          String(d.instances),
          d.what,
          fmt((d.window?.ms ?? 0) / 1000, 1),
          `${d.window?.loadavgBefore[0]} -> ${d.window?.loadavgAfter[0]}`,
          fmt(d.window?.machineBusyPercent, 0),
          Object.entries(d.window?.cpuMs ?? {})
            .map(([k, v]) => `${k} ${v}`)
            .join(", "),
          fmt(d.window?.otherCores, 2),
        ]),
    ),
    "",
  );
  const last = (phase: string) => [...r.details].reverse().find((d) => d.phase === phase && d.instances === 1 && Array.isArray(d.extra?.top));
  for (const phase of ["ingest", "hearts", "callbacks", "relay"]) {
    const d = last(phase);
    if (!d) continue;
    out.push(`### Top statements: ${phase} (${d.what}, round ${d.round})`, "");
    out.push(
      markdownTable(
        ["statement (normalised, truncated)", "calls", "mean ms"],
        ((d.extra?.top ?? []) as Array<{ query: string; calls: number; meanMs: number }>).map((s) => [
          `\`${s.query.replace(/\|/g, "\\|")}\``,
          String(s.calls),
          fmt(s.meanMs, 3),
        ]),
      ),
      "",
    );
  }
  out.push(
    `## Checks`,
    "",
    `\`${JSON.stringify(r.checks)}\``,
    "",
    "Statements per event/heart/callback count what the processes sent to PostgreSQL (top-level statements, BEGIN and COMMIT included, from pg_stat_statements); the `InclNested` figures add the statements PostgreSQL runs inside them (foreign-key checks).",
    "",
    "Duplicates are at-least-once redeliveries: the harness stops delivery processes (SIGTERM) and starts them again between phases; receivers dedupe on heart_id.",
    "",
  );
  return out.join("\n");
}

await runBench(main, cleanup, progress);
