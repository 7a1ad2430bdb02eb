/**
 * Issue 18's floods measured again at the issue's scale, in the production topology (gateway,
 * referral service, relay and delivery each as its own process, from BENCH_TARGET, default this
 * checkout), on PostgreSQL with its default durability and one Kafka broker.
 *
 *   npx tsx bench/flood.ts                         # both phases
 *   npx tsx bench/flood.ts --phases=forgeries      # or hotip
 *   BENCH_KAFKA_BROKERS=host:port npx tsx bench/flood.ts      # a running broker instead of an own one
 *   BENCH_DATABASE_URL=postgres://... npx tsx bench/flood.ts  # a running PostgreSQL: a fresh database
 *                                                             # on it, migrated by the target
 *
 * Phases:
 * - forgeries: the gateway with TRUST_PROXY, so X-Forwarded-For gives each sender its own address.
 *   An honest sender signs `test: true` ingest events for server A (and a signed pull list every
 *   10th request) at FLOOD_HONEST_RATE/s for FLOOD_HONEST_MS, while forgers fire (a) 6,000 forged
 *   requests for random server ids as fast as they can from FLOOD_FORGER_SOURCES addresses, then (b)
 *   700 forgeries with server A's own id (ingest and pull). Key lookups are the referral service's
 *   own `requests_total` for ResolveSigningKeys and ResolvePullKeys (its ops port /metrics).
 * - hotip: 1,000 CastHeart/s offered open loop from ONE ip for 20 s (fresh voters) while 801 ordinary
 *   voters, each from its own address, cast once each, spread over the window.
 *
 * Writes bench/results/<BENCH_NAME, default flood>.json and .md. Progress goes to stderr.
 */
import { fork } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import pg from "pg";
import { HeartService } from "../gen/proto/hearts/v1/hearts_pb.js";
import { ServerAdminService } from "../gen/proto/servers/v1/servers_pb.js";
import { startKafka } from "../scripts/infra/kafka.js";
import { createServiceTransport } from "../services/shared/rpc/service-transport.js";
import {
  cpuBetween,
  createCleanup,
  envInt,
  installTimeLimit,
  machineCpuMs,
  machineInfo,
  markdownTable,
  runBench,
  startBenchPostgres,
  withDatabase,
  writeResults,
} from "./lib/infra.js";
import { signIngestBody } from "./lib/loadgen.js";
import { fmt, round, summarize, type LatencySummary } from "./lib/stats.js";
import { freePort, resolveTarget, startSutProcess, type ProcessKind, type SutProcess, type Target } from "./lib/topology.js";

// ---------------------------------------------------------------- settings
const ARGS = process.argv.slice(2);
const PHASES = new Set((ARGS.find((a) => a.startsWith("--phases="))?.slice("--phases=".length) ?? "forgeries,hotip").split(","));
const HONEST_RATE = envInt("FLOOD_HONEST_RATE", 50);
const HONEST_MS = envInt("FLOOD_HONEST_MS", 60_000);
const RANDOM_FORGERIES = envInt("FLOOD_RANDOM_FORGERIES", 6_000);
const OWN_ID_FORGERIES = envInt("FLOOD_OWN_ID_FORGERIES", 700);
const FORGER_SOURCES = envInt("FLOOD_FORGER_SOURCES", 12);
const FORGER_CONCURRENCY = envInt("FLOOD_FORGER_CONCURRENCY", 64);
const FORGERS_START_MS = envInt("FLOOD_FORGERS_START_MS", 3_000);
const HOT_RATE = envInt("FLOOD_HOT_RATE", 1_000);
const HOT_MS = envInt("FLOOD_HOT_MS", 20_000);
const ORDINARY_VOTERS = envInt("FLOOD_ORDINARY_VOTERS", 801);
const HEART_SERVERS = envInt("FLOOD_HEART_SERVERS", 20);
const CAST_TIMEOUT_MS = 15_000;
const NAME = process.env.BENCH_NAME ?? "flood";
const HONEST_SOURCE = "198.51.100.10";
const HOT_IP = "198.51.100.77";
const USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36";

const started = Date.now();
const progress = (line: string) => process.stderr.write(`[flood +${((Date.now() - started) / 1000).toFixed(1)}s] ${line}\n`);
const cleanup = createCleanup(progress);
installTimeLimit(envInt("BENCH_TIME_LIMIT_S", 900), cleanup, progress);

// ---------------------------------------------------------------- load and machine
interface Load {
  /** CPU ms per process of the system under test and of this harness over the window. */
  cpuMs: Record<string, number>;
  loadavgBefore: number[];
  loadavgAfter: number[];
  machineBusyPercent: number;
  ms: number;
}

function openLoad(ctx: Ctx): () => Load {
  const procs = Object.values(ctx.running).filter((p): p is SutProcess => p !== undefined);
  const self = () => (process.cpuUsage().user + process.cpuUsage().system) / 1000;
  const cpuBefore = procs.map((p) => p.cpu());
  const selfBefore = self();
  const loadavgBefore = machineInfo().loadAverage;
  const cpu = machineCpuMs();
  const t0 = performance.now();
  return () => {
    const after = machineCpuMs();
    const cpuMs: Record<string, number> = Object.fromEntries(procs.map((p, i) => [p.kind, round(cpuBetween(cpuBefore[i] ?? new Map(), p.cpu()), 0)]));
    cpuMs.harness = round(self() - selfBefore, 0);
    return {
      cpuMs,
      loadavgBefore,
      loadavgAfter: machineInfo().loadAverage,
      machineBusyPercent: round(((after.busy - cpu.busy) / Math.max(1, after.total - cpu.total)) * 100, 0),
      ms: round(performance.now() - t0, 0),
    };
  };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const bump = (m: Record<string, number>, k: string) => {
  m[k] = (m[k] ?? 0) + 1;
};

// ---------------------------------------------------------------- setup
interface Ctx {
  target: Target;
  databaseUrl: string;
  brokers: string;
  logDir: string;
  tokens: { secretsKey: string; adminToken: string; gatewayToken: string };
  running: Partial<Record<ProcessKind, SutProcess>>;
  postgres: { version: string; settings: Record<string, string>; shared: boolean };
}

async function migrateWithTarget(target: Target, url: string): Promise<void> {
  const child = fork(join(target.dir, "scripts/db/migrate.ts"), ["deploy"], {
    cwd: target.dir,
    execArgv: ["--import", "tsx"],
    env: { PATH: process.env.PATH ?? "", DATABASE_URL: url },
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
  if (code !== 0) throw new Error(`the target's migrations failed (exit ${code})`);
}

async function startDatabase(target: Target): Promise<{ url: string; shared: boolean }> {
  const shared = process.env.BENCH_DATABASE_URL;
  if (shared) {
    const name = `flood_${randomBytes(4).toString("hex")}`;
    const admin = new pg.Client({ connectionString: shared });
    await admin.connect();
    await admin.query(`CREATE DATABASE "${name}"`);
    cleanup.add(async () => {
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.end();
    });
    const url = withDatabase(shared, name);
    await migrateWithTarget(target, url);
    progress(`database ${name} on the running PostgreSQL (BENCH_DATABASE_URL), migrated`);
    return { url, shared: true };
  }
  const pgb = await startBenchPostgres(progress, {
    durability: "default",
    migrate: async (url) => {
      await migrateWithTarget(target, url);
      return Number.NaN; // the target's migrate.ts reports its own count
    },
  });
  cleanup.add(() => pgb.stop());
  return { url: await pgb.createDatabase("flood"), shared: false };
}

function envFor(ctx: Ctx, kind: ProcessKind, ports: { port: number; opsPort: number }): Record<string, string> {
  const base = { HOST: "127.0.0.1", OPS_PORT: String(ports.opsPort) };
  switch (kind) {
    case "referral-service":
      return {
        ...base,
        PORT: String(ports.port),
        DATABASE_URL: ctx.databaseUrl,
        SECRETS_KEY: ctx.tokens.secretsKey,
        ADMIN_SERVICE_TOKEN: ctx.tokens.adminToken,
        GATEWAY_SERVICE_TOKEN: ctx.tokens.gatewayToken,
        GATEWAY_SERVICE_TOKEN_SCOPES: "ingest,pull,clicks:record,dashboard",
        ALLOW_INSECURE_CALLBACKS: "true",
        PUBLIC_BASE_URL: "http://127.0.0.1:8080",
      };
    case "gateway":
      return {
        ...base,
        PORT: String(ports.port),
        REFERRAL_SERVICE_URL: `http://127.0.0.1:${ctx.running["referral-service"]?.port ?? 0}`,
        REFERRAL_SERVICE_TOKEN: ctx.tokens.gatewayToken,
        PUBLIC_BASE_URL: "http://127.0.0.1:8080",
        TRUST_PROXY: "true",
      };
    case "relay":
      return { ...base, DATABASE_URL: ctx.databaseUrl, KAFKA_BROKERS: ctx.brokers };
    case "delivery":
      return {
        ...base,
        DATABASE_URL: ctx.databaseUrl,
        KAFKA_BROKERS: ctx.brokers,
        SECRETS_KEY: ctx.tokens.secretsKey,
        ALLOW_INSECURE_CALLBACKS: "true",
        KAFKA_GROUP_ID: `flood-${randomBytes(4).toString("hex")}`,
      };
  }
}

async function start(ctx: Ctx, kind: ProcessKind): Promise<SutProcess> {
  const ports = { port: kind === "gateway" || kind === "referral-service" ? await freePort() : 0, opsPort: await freePort() };
  const p = await startSutProcess(ctx.target, kind, `${kind}-1`, envFor(ctx, kind, ports), { logDir: ctx.logDir, ...ports });
  ctx.running[kind] = p;
  cleanup.add(() => p.stop());
  progress(`${kind} ready in ${p.readyAfterMs} ms`);
  return p;
}

// ---------------------------------------------------------------- forgeries
/** The referral service's handled calls of the two key lookups, from its own metrics. */
async function keyLookups(ctx: Ctx): Promise<{ signing: number; pull: number }> {
  const text = await (await fetch(`http://127.0.0.1:${ctx.running["referral-service"]?.opsPort}/metrics`)).text();
  const sum = (method: string) =>
    text
      .split("\n")
      .filter((l) => l.startsWith("requests_total{") && l.includes(`/${method}"`))
      .reduce((s, l) => s + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
  return { signing: sum("ResolveSigningKeys"), pull: sum("ResolvePullKeys") };
}

/** The referral service's own CastHeart figures: calls by code and handling time buckets (its ops port /metrics). */
async function castHeartMetrics(ctx: Ctx): Promise<{ byCode: Record<string, number>; seconds: Record<string, number> }> {
  const text = await (await fetch(`http://127.0.0.1:${ctx.running["referral-service"]?.opsPort}/metrics`)).text();
  const byCode: Record<string, number> = {};
  const seconds: Record<string, number> = {};
  for (const line of text.split("\n")) {
    if (!line.includes('/CastHeart"')) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    const code = /code="([^"]+)"/.exec(line)?.[1];
    const le = /le="([^"]+)"/.exec(line)?.[1];
    if (line.startsWith("requests_total{") && code) byCode[code] = value;
    if (line.startsWith("request_duration_seconds_bucket{") && le) seconds[`<=${le}s`] = value;
  }
  return { byCode, seconds };
}

async function post(url: string, secret: string, body: unknown, source: string): Promise<number> {
  const raw = JSON.stringify(body);
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-service-signature": signIngestBody(secret, Math.floor(Date.now() / 1000), raw),
        "x-forwarded-for": source,
      },
      body: raw,
      signal: AbortSignal.timeout(30_000),
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    // Failure policy: a transport error is a result here (status 0), counted with the others.
    return 0;
  }
}

interface ForgeryResult {
  honest: { sent: number; ingest: Record<string, number>; pull: Record<string, number>; latency: LatencySummary; refusedAtMs: number[] };
  randomIds: { sent: number; statuses: Record<string, number>; ms: number; startedAtMs: number };
  ownId: { sent: number; statuses: Record<string, number>; ms: number; startedAtMs: number };
  keyLookups: { signing: number; pull: number };
  load: Load;
}

async function phaseForgeries(ctx: Ctx, server: { id: string; secret: string; pullSecret: string }): Promise<ForgeryResult> {
  const base = `http://127.0.0.1:${ctx.running.gateway?.port}`;
  const ingestUrl = `${base}/api/referral/events`;
  const pullUrl = `${base}/api/pull/hearts`;
  // Warm the honest sender's keys the way a running sender has them: its first requests, before the flood.
  const warm = [
    await post(ingestUrl, server.secret, honestEvent(server.id, -1), HONEST_SOURCE),
    await post(pullUrl, server.pullSecret, { server_id: server.id, limit: 1 }, HONEST_SOURCE),
  ];
  progress(`forgeries: warm-up answers ${warm.join(", ")}`);
  const lookupsBefore = await keyLookups(ctx);
  const finish = openLoad(ctx);
  const t0 = performance.now();
  const honest: ForgeryResult["honest"] = { sent: 0, ingest: {}, pull: {}, latency: summarize([]), refusedAtMs: [] };
  const honestLatencies: number[] = [];
  const inFlight: Array<Promise<void>> = [];
  const honestLoop = (async () => {
    const interval = 1000 / HONEST_RATE;
    for (let n = 0; ; n++) {
      const at = n * interval;
      if (at >= HONEST_MS) break;
      const wait = at - (performance.now() - t0);
      if (wait > 0) await sleep(wait);
      honest.sent++;
      const isPull = n % 10 === 9;
      const s = performance.now();
      inFlight.push(
        (isPull
          ? post(pullUrl, server.pullSecret, { server_id: server.id, limit: 1 }, HONEST_SOURCE)
          : post(ingestUrl, server.secret, honestEvent(server.id, n), HONEST_SOURCE)
        ).then((status) => {
          honestLatencies.push(performance.now() - s);
          bump(isPull ? honest.pull : honest.ingest, String(status));
          if (status !== 200) honest.refusedAtMs.push(round(s - t0, 0));
        }),
      );
    }
  })();
  const forge = async (count: number, body: (n: number) => { url: string; body: unknown }) => {
    const statuses: Record<string, number> = {};
    const startedAtMs = round(performance.now() - t0, 0);
    const s = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: FORGER_CONCURRENCY }, async () => {
        for (;;) {
          const n = next++;
          if (n >= count) return;
          const b = body(n);
          bump(statuses, String(await post(b.url, `rsec_forged_${n % 7}`, b.body, `203.0.113.${(n % FORGER_SOURCES) + 1}`)));
        }
      }),
    );
    return { sent: count, statuses, ms: round(performance.now() - s, 0), startedAtMs };
  };
  await sleep(FORGERS_START_MS);
  progress(`forgeries: (a) ${RANDOM_FORGERIES} forged requests for random server ids from ${FORGER_SOURCES} addresses`);
  const randomIds = await forge(RANDOM_FORGERIES, (n) => ({ url: ingestUrl, body: honestEvent(randomUUID(), n) }));
  progress(`forgeries: (a) took ${randomIds.ms} ms: ${JSON.stringify(randomIds.statuses)}; (b) ${OWN_ID_FORGERIES} with server A's own id`);
  const ownId = await forge(OWN_ID_FORGERIES, (n) =>
    n % 4 === 3 ? { url: pullUrl, body: { server_id: server.id, limit: 1 } } : { url: ingestUrl, body: honestEvent(server.id, 100_000 + n) },
  );
  progress(`forgeries: (b) took ${ownId.ms} ms: ${JSON.stringify(ownId.statuses)}; the honest sender goes on to ${HONEST_MS / 1000} s`);
  await honestLoop;
  await Promise.all(inFlight);
  honest.latency = summarize(honestLatencies);
  const load = finish();
  const after = await keyLookups(ctx);
  return {
    honest,
    randomIds,
    ownId,
    keyLookups: { signing: after.signing - lookupsBefore.signing, pull: after.pull - lookupsBefore.pull },
    load,
  };
}

function honestEvent(serverId: string, n: number) {
  return { event: "registered", token: `t${n}`, server_id: serverId, referee_identity: `p${n}`, server_event_id: `e-${n}`, test: true };
}

// ---------------------------------------------------------------- hot ip
interface CastSide {
  offered: number;
  counted: number;
  notCounted: Record<string, number>;
  errors: Record<string, number>;
  /** The first message of each Connect code. */
  samples: Record<string, string>;
  wait: LatencySummary;
}

interface HotIpResult {
  busy: CastSide & { achievedOfferRate: number };
  ordinary: CastSide;
  /** The referral service's own count of CastHeart calls by code and handling time (cumulative buckets), since it started. */
  service: { byCode: Record<string, number>; seconds: Record<string, number> };
  separateSessions: boolean;
  load: Load;
}

async function phaseHotIp(ctx: Ctx, serverIds: string[]): Promise<HotIpResult> {
  const transport = createServiceTransport(`http://127.0.0.1:${ctx.running["referral-service"]?.port}`, ctx.tokens.adminToken);
  const hearts = createClient(HeartService, transport);
  // FLOOD_SEPARATE_SESSIONS=1: the ordinary voters' casts on an HTTP/2 session of their own (default: one caller, like a vote site, sends all).
  const separateSessions = process.env.FLOOD_SEPARATE_SESSIONS === "1";
  const ordinaryHearts = separateSessions
    ? createClient(HeartService, createServiceTransport(`http://127.0.0.1:${ctx.running["referral-service"]?.port}`, ctx.tokens.adminToken))
    : hearts;
  const run = () => ({
    offered: 0,
    counted: 0,
    notCounted: {} as Record<string, number>,
    errors: {} as Record<string, number>,
    samples: {} as Record<string, string>,
    waits: [] as number[],
  });
  const busy = run();
  const ordinary = run();
  const pending: Array<Promise<void>> = [];
  const tag = randomBytes(3).toString("hex");
  const cast = (side: ReturnType<typeof run>, intendedAt: number, req: { serverId: string; voter: string; ip: string; n: number }) => {
    side.offered++;
    pending.push(
      (side === busy ? hearts : ordinaryHearts)
        .castHeart(
          { serverId: req.serverId, username: `player_${req.n % 100_000}`, voterIdentity: req.voter, ip: req.ip, userAgent: USER_AGENT },
          { timeoutMs: CAST_TIMEOUT_MS },
        )
        .then(
          (res) => {
            if (res.counted) side.counted++;
            else bump(side.notCounted, `verdict ${res.verdict}: ${res.reason}`.slice(0, 80));
          },
          (error) => {
            // Failure policy: a refused cast is the figure measured here; count it by its Connect code.
            const e = ConnectError.from(error);
            const code = Code[e.code] ?? "unknown";
            bump(side.errors, code);
            side.samples[code] ??= e.message.slice(0, 200);
          },
        )
        .finally(() => side.waits.push(performance.now() - intendedAt)),
    );
  };
  const finish = openLoad(ctx);
  const t0 = performance.now();
  const busyLoop = (async () => {
    const perTick = Math.max(1, Math.round(HOT_RATE / 100));
    const ticks = Math.floor((HOT_MS / 1000) * (HOT_RATE / perTick));
    const tickMs = 1000 / (HOT_RATE / perTick);
    let n = 0;
    for (let tick = 0; tick < ticks; tick++) {
      const at = t0 + tick * tickMs;
      const wait = at - performance.now();
      if (wait > 0) await sleep(wait);
      for (let j = 0; j < perTick; j++, n++) cast(busy, at, { serverId: serverIds[n % serverIds.length] ?? "", voter: `busy-${tag}-${n}`, ip: HOT_IP, n });
    }
  })();
  const ordinaryLoop = (async () => {
    for (let i = 0; i < ORDINARY_VOTERS; i++) {
      const at = t0 + (i * HOT_MS) / ORDINARY_VOTERS;
      const wait = at - performance.now();
      if (wait > 0) await sleep(wait);
      const v = i + 1;
      cast(ordinary, at, {
        serverId: serverIds[i % serverIds.length] ?? "",
        voter: `voter-${tag}-${i}`,
        ip: `10.${v & 255}.${(v >> 8) & 255}.${(i % 200) + 2}`,
        n: i,
      });
    }
  })();
  await Promise.all([busyLoop, ordinaryLoop]);
  const offerMs = performance.now() - t0;
  await Promise.all(pending);
  const load = finish();
  const side = (s: ReturnType<typeof run>): CastSide => ({
    offered: s.offered,
    counted: s.counted,
    notCounted: s.notCounted,
    errors: s.errors,
    samples: s.samples,
    wait: summarize(s.waits),
  });
  return {
    busy: { ...side(busy), achievedOfferRate: round((busy.offered / offerMs) * 1000, 0) },
    ordinary: side(ordinary),
    service: await castHeartMetrics(ctx),
    separateSessions,
    load,
  };
}

// ---------------------------------------------------------------- main
async function main(): Promise<void> {
  const machineAtStart = machineInfo();
  progress(`nproc=${machineAtStart.nproc} load=${machineAtStart.loadAverage.join(" ")} phases=${[...PHASES].join(",")}`);
  const target = resolveTarget();
  progress(`target ${target.dir} @ ${target.commit.slice(0, 12)}${target.dirty ? " (with uncommitted changes)" : ""}`);
  const logDir = mkdtempSync(join(tmpdir(), "flood-logs-"));
  const brokersFromEnv = process.env.BENCH_KAFKA_BROKERS;
  const [db, kafka] = await Promise.all([startDatabase(target), brokersFromEnv ? Promise.resolve(undefined) : startKafka()]);
  if (kafka) cleanup.add(() => kafka.stop());
  const sql = new pg.Client({ connectionString: db.url });
  await sql.connect();
  cleanup.add(() => sql.end());
  const settings = (
    await sql.query<{ name: string; setting: string }>(
      "SELECT name, setting FROM pg_settings WHERE name IN ('fsync','synchronous_commit','full_page_writes','max_connections') ORDER BY name",
    )
  ).rows;
  const version = (await sql.query<{ server_version: string }>("SHOW server_version")).rows[0]?.server_version ?? "unknown";
  const ctx: Ctx = {
    target,
    databaseUrl: db.url,
    brokers: brokersFromEnv ?? kafka?.brokers ?? "",
    logDir,
    tokens: {
      secretsKey: randomBytes(32).toString("base64"),
      adminToken: randomBytes(32).toString("base64url"),
      gatewayToken: randomBytes(32).toString("base64url"),
    },
    running: {},
    postgres: { version, settings: Object.fromEntries(settings.map((s) => [s.name, s.setting])), shared: db.shared },
  };
  await start(ctx, "referral-service");
  await Promise.all([start(ctx, "gateway"), start(ctx, "relay"), start(ctx, "delivery")]);
  const admin = createClient(ServerAdminService, createServiceTransport(`http://127.0.0.1:${ctx.running["referral-service"]?.port}`, ctx.tokens.adminToken));

  const results: Record<string, unknown> = {};
  if (PHASES.has("forgeries")) {
    const { server } = await admin.createServer({ name: "flood server A", registrationUrl: "https://example.com/register" });
    const id = server?.id ?? "";
    await admin.setReferralsEnabled({ serverId: id, enabled: true });
    const { secret } = await admin.createReferralSecret({ serverId: id });
    await admin.setPullEnabled({ serverId: id, enabled: true });
    const { secret: pullSecret } = await admin.revealPullSecret({ serverId: id });
    progress(`--- forgeries (load ${machineInfo().loadAverage.join(" ")})`);
    const r = await phaseForgeries(ctx, { id, secret, pullSecret });
    progress(`forgeries: honest ${JSON.stringify(r.honest.ingest)} ingest, ${JSON.stringify(r.honest.pull)} pull; lookups ${JSON.stringify(r.keyLookups)}`);
    results.forgeries = r;
  }
  if (PHASES.has("hotip")) {
    const serverIds: string[] = [];
    for (let i = 0; i < HEART_SERVERS; i++) {
      const { server } = await admin.createServer({ name: `flood hearts ${i}`, registrationUrl: "https://example.com/register" });
      serverIds.push(server?.id ?? "");
    }
    progress(`--- hot ip (load ${machineInfo().loadAverage.join(" ")})`);
    const r = await phaseHotIp(ctx, serverIds);
    progress(`hot ip: busy ${JSON.stringify({ ...r.busy })}; ordinary ${JSON.stringify(r.ordinary)}`);
    results.hotip = r;
  }
  const out = {
    benchmark: "issue-18 floods at the issue's scale",
    durationSeconds: Math.round((Date.now() - started) / 1000),
    target: { dir: target.dir, commit: target.commit, dirty: target.dirty, runtime: target.runtime },
    harnessCommit: gitCommit(),
    machine: { atStart: machineAtStart, loadAverageAtEnd: machineInfo().loadAverage },
    postgres: ctx.postgres,
    kafka: { brokers: ctx.brokers, own: kafka !== undefined },
    settings: {
      honestRatePerSecond: HONEST_RATE,
      honestMs: HONEST_MS,
      randomForgeries: RANDOM_FORGERIES,
      ownIdForgeries: OWN_ID_FORGERIES,
      forgerSources: FORGER_SOURCES,
      forgerConcurrency: FORGER_CONCURRENCY,
      forgersStartMs: FORGERS_START_MS,
      hotRatePerSecond: HOT_RATE,
      hotMs: HOT_MS,
      separateSessions: process.env.FLOOD_SEPARATE_SESSIONS === "1",
      ordinaryVoters: ORDINARY_VOTERS,
      heartServers: HEART_SERVERS,
      gatewayEnv: "TRUST_PROXY=true, every other setting its default",
    },
    results,
  };
  const { jsonPath, mdPath } = writeResults(NAME, out, renderMarkdown(out));
  progress(`wrote ${jsonPath} and ${mdPath}`);
  if (process.env.BENCH_KEEP_LOGS === "1") progress(`process logs kept in ${logDir}`);
  else rmSync(logDir, { recursive: true, force: true });
}

function gitCommit(): string {
  try {
    return execFileSync("git", ["-C", fileURLToPath(new URL("..", import.meta.url)), "rev-parse", "HEAD"], { encoding: "utf8" }).trim();
  } catch {
    // Failure policy: the harness commit is informative only.
    return "unknown";
  }
}

// ---------------------------------------------------------------- report
function renderMarkdown(r: {
  target: { dir: string; commit: string; dirty: boolean };
  machine: { atStart: ReturnType<typeof machineInfo>; loadAverageAtEnd: number[] };
  postgres: Ctx["postgres"];
  kafka: { brokers: string; own: boolean };
  settings: Record<string, unknown>;
  durationSeconds: number;
  results: Record<string, unknown>;
}): string {
  const mc = r.machine.atStart;
  const st = (m: Record<string, number>) =>
    Object.entries(m)
      .map(([k, v]) => `${k}: ${v}`)
      .join(", ") || "none";
  const wait = (l: LatencySummary) => `p50 ${fmt(l.p50, 0)} / p99 ${fmt(l.p99, 0)} / max ${fmt(l.max, 0)} ms`;
  const loadRow = (phase: string, l: Load) => [
    phase,
    fmt(l.ms / 1000, 1),
    `${l.loadavgBefore.join(" / ")} -> ${l.loadavgAfter.join(" / ")}`,
    fmt(l.machineBusyPercent, 0),
    st(l.cpuMs),
  ];
  const out: string[] = [
    "# Issue 18 floods at the issue's scale",
    "",
    `Target \`${r.target.dir}\` at \`${r.target.commit}\`${r.target.dirty ? " **with uncommitted changes**" : ""}. ${mc.nproc} cores (${mc.cpuModel}), Node ${mc.node}; ` +
      `load average ${mc.loadAverage.join(" / ")} at start, ${r.machine.loadAverageAtEnd.join(" / ")} at end (the machine is shared: other work ran beside this). ` +
      `PostgreSQL ${r.postgres.version} (${r.postgres.shared ? "a running server, fresh database" : "own cluster"}): ${Object.entries(r.postgres.settings)
        .map(([k, v]) => `${k}=${v}`)
        .join(", ")}. Kafka: ${r.kafka.own ? "own single-node broker" : `running broker ${r.kafka.brokers}`}. ` +
      `Gateway, referral service, relay and delivery each their own process. Run took ${r.durationSeconds} s.`,
    "",
    `Settings: \`${JSON.stringify(r.settings)}\``,
    "",
  ];
  const loads: string[][] = [];
  const f = r.results.forgeries as ForgeryResult | undefined;
  if (f) {
    const honestOk = (f.honest.ingest["200"] ?? 0) + (f.honest.pull["200"] ?? 0);
    out.push(
      "## Forgeries",
      "",
      `An honest sender (its own address) signs \`test: true\` ingest events for server A, every 10th request a signed pull list, at ${r.settings.honestRatePerSecond}/s for ${Number(r.settings.honestMs) / 1000} s; ` +
        `from ${r.settings.forgersStartMs} ms, forgers (${r.settings.forgerSources} addresses, ${r.settings.forgerConcurrency} at once) send (a) forged requests for random server ids as fast as they can, then (b) forgeries with server A's own id (3 of 4 ingest, 1 of 4 pull). ` +
        "Key lookups: the referral service's own `requests_total` for ResolveSigningKeys and ResolvePullKeys over the phase.",
      "",
      markdownTable(
        ["who", "sent", "answers", "time"],
        [
          [
            "honest sender, ingest + pull",
            String(f.honest.sent),
            `ingest ${st(f.honest.ingest)}; pull ${st(f.honest.pull)} (**${f.honest.sent - honestOk} not 200**)`,
            `wait ${wait(f.honest.latency)}`,
          ],
          [
            "(a) forgeries, random server ids",
            String(f.randomIds.sent),
            st(f.randomIds.statuses),
            `${fmt(f.randomIds.ms / 1000, 1)} s, from ${fmt(f.randomIds.startedAtMs / 1000, 1)} s`,
          ],
          [
            "(b) forgeries, server A's own id",
            String(f.ownId.sent),
            st(f.ownId.statuses),
            `${fmt(f.ownId.ms / 1000, 1)} s, from ${fmt(f.ownId.startedAtMs / 1000, 1)} s`,
          ],
          ["key lookups (referral service)", "", `ResolveSigningKeys ${f.keyLookups.signing}, ResolvePullKeys ${f.keyLookups.pull}`, ""],
        ],
      ),
      "",
    );
    if (f.honest.refusedAtMs.length > 0)
      out.push(`Honest requests not answered 200, at ms into the phase: ${f.honest.refusedAtMs.slice(0, 50).join(", ")}`, "");
    loads.push(loadRow("forgeries", f.load));
  }
  const h = r.results.hotip as HotIpResult | undefined;
  if (h) {
    const refused = (s: CastSide) => Object.values(s.errors).reduce((a, b) => a + b, 0);
    out.push(
      "## Hot IP",
      "",
      `${r.settings.hotRatePerSecond} CastHeart/s offered open loop from ONE ip (fresh voters) for ${Number(r.settings.hotMs) / 1000} s, straight to the referral service over Connect with the service token, while ${r.settings.ordinaryVoters} ordinary voters, each from its own address, cast once each, spread over the window. Wait = from the intended send time to the answer.`,
      "",
      markdownTable(
        ["who", "offered", "counted", "not counted (verdict)", "refused (Connect code)", "wait"],
        [
          [
            `busy ip (achieved offer ${fmt(h.busy.achievedOfferRate, 0)}/s)`,
            String(h.busy.offered),
            String(h.busy.counted),
            st(h.busy.notCounted),
            st(h.busy.errors),
            wait(h.busy.wait),
          ],
          [
            "ordinary voters",
            String(h.ordinary.offered),
            String(h.ordinary.counted),
            st(h.ordinary.notCounted),
            `${st(h.ordinary.errors)} (**${refused(h.ordinary)} refused**)`,
            wait(h.ordinary.wait),
          ],
        ],
      ),
      "",
      `Busy and ordinary casts ${h.separateSessions ? "on two HTTP/2 sessions (FLOOD_SEPARATE_SESSIONS=1)" : "on ONE HTTP/2 session, as one vote site sends them all"}. First message per refusal code: ${Object.entries(
        { ...h.ordinary.samples, ...h.busy.samples },
      )
        .map(([k, v]) => `${k} \`${v}\``)
        .join("; ")}.`,
      "",
      `The referral service's own count of CastHeart calls it handled, by code: ${st(h.service.byCode)}; its handling time (cumulative buckets): ${st(h.service.seconds)}.`,
      "",
    );
    loads.push(loadRow("hot ip", h.load));
  }
  out.push(
    "## Machine load per phase",
    "",
    markdownTable(["phase", "window s", "loadavg 1/5/15 before -> after", "machine busy %", "CPU ms per process"], loads),
    "",
  );
  return out.join("\n");
}

await runBench(main, cleanup, progress);
