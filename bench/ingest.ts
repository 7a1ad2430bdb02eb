/**
 * Ingest benchmark: signed `registered` events through the public gateway
 * (HTTP/1.1 -> HMAC check -> Connect/HTTP-2 -> referral service -> Prisma ->
 * PostgreSQL), at concurrency 1, 8 and 32, each beside baselines measured in the
 * same run and at the same concurrency:
 *
 *  (a) floor:     a bare node:http server answering a constant 200 JSON, same load generator;
 *  (b) verify:    signature verification alone (parse + HMAC + constant-time compare), ops/s;
 *  (c) dry-run:   `test: true` through the gateway (ResolveSigningKeys RPC, no DB write);
 *  (d) replay:    exact replays of already-applied events (the dedup path).
 *
 * Plus a sequential (c=1) breakdown of one request's legs, per-process CPU per
 * request, and pg_stat_statements per request. Real PostgreSQL (startPostgres +
 * migrations); traffic only to 127.0.0.1. Run: `npx tsx bench/ingest.ts`.
 * Settings (env): BENCH_MEASURE_MS (4000), BENCH_WARMUP_MS (1000),
 * BENCH_CONCURRENCY ("1,8,32"), BENCH_TOKENS (40000), BENCH_LOG_LEVEL (info),
 * BENCH_TIME_LIMIT_S (170), BENCH_TAG (suffix of the result files).
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { createReferralServiceClients } from "../gateway/clients.js";
import { createGatewayServer } from "../gateway/server.js";
import { parseJsonObject, validateEvent } from "../gateway/validate-event.js";
import { parseSignatureHeader, verifySignature } from "../gateway/verify-signature.js";
import { ReferralEventType } from "../gen/proto/referral/v1/referral_pb.js";
import { createReferralServiceServer } from "../services/referral-service/server.js";
import { ensureServiceToken } from "../services/access/service-tokens.js";
import { createPrisma } from "../services/shared/adapters/db.js";
import { createMetrics } from "../services/shared/runtime/metrics.js";
import { createSecretBox, generateServiceToken } from "../services/shared/runtime/secrets.js";
import {
  createBenchLogger,
  createCleanup,
  cpuBetween,
  createProgress,
  envInt,
  installTimeLimit,
  loadNow,
  machineCpuMs,
  machineInfo,
  markdownTable,
  microbench,
  selfCpuMs,
  startBenchPostgres,
  writeResults,
  type StatementStat,
  runBench,
} from "./lib/infra.js";
import { buildIngestBody, signIngestBody, startLoadGenerator, type IngestBodySpec, type LoadJob, type LoadResult } from "./lib/loadgen.js";
import { profileWhile, type ProfileSummary } from "./lib/profile.js";
import { fmt, ratio, round, summarize, type LatencySummary } from "./lib/stats.js";

const NAME = "ingest";
const MEASURE_MS = envInt("BENCH_MEASURE_MS", 4_000);
const WARMUP_MS = envInt("BENCH_WARMUP_MS", 1_000);
const CONCURRENCIES = (process.env.BENCH_CONCURRENCY ?? "1,8,32").split(",").map((v) => Number(v.trim()));
const TOKENS = envInt("BENCH_TOKENS", 40_000);
/** Tokens kept apart for the direct ApplyEvent leg of the breakdown. */
const DIRECT_TOKENS = 3_000;
const DB_POOL_SIZE = 20; // services/referral-service/config.ts DB_POOL_SIZE default
const BREAKDOWN_MS = envInt("BENCH_BREAKDOWN_MS", 1_200);
/** Length of each CPU-profiled phase (0 skips profiling). */
const PROFILE_MS = envInt("BENCH_PROFILE_MS", 2_000);
const PROFILE_CONCURRENCY = 8;
const BARE_BODY = JSON.stringify({ ok: true, test: true });

type Mode = "floor" | "dry_run" | "registered" | "replay";
const ALL_MODES: Mode[] = ["floor", "dry_run", "registered", "replay"];
/** BENCH_MODES narrows the phases (for A/B runs of a patch); the published run uses all four. */
const MODES: Mode[] = process.env.BENCH_MODES ? ALL_MODES.filter((m) => process.env.BENCH_MODES?.split(",").includes(m)) : ALL_MODES;
const MODE_LABEL: Record<Mode, string> = {
  floor: "(a) floor: bare node:http, constant 200 JSON",
  dry_run: "(c) dry-run `test: true` (gateway + ResolveSigningKeys)",
  registered: "registered (real transition)",
  replay: "(d) duplicate replay (dedup path)",
};

/** One measured phase with its resource accounting. */
interface Phase {
  mode: Mode;
  concurrency: number;
  load: LoadResult;
  cpuMsPerRequest: { server: number; postgres: number; loadGenerator: number };
  /** Share of the machine's cores that the three were busy, over the phase. */
  machineBusyPercent: number;
  /** Cores' worth of CPU used by processes outside this benchmark during the phase (contention). */
  otherProcessesCores: number;
  db: { statementsPerRequest: number; execMsPerRequest: number; top: StatementStat[] };
  loadAverage1m: number;
}

const progress = createProgress(NAME);
const cleanup = createCleanup(progress);
installTimeLimit(envInt("BENCH_TIME_LIMIT_S", 170), cleanup, progress);

async function main(): Promise<void> {
  const machineAtStart = machineInfo();
  progress(`nproc=${machineAtStart.nproc} load=${machineAtStart.loadAverage.join(" ")} node=${machineAtStart.node}`);

  // --- infrastructure: PostgreSQL, referral service, gateway, bare floor server ---
  const pgb = await startBenchPostgres(progress);
  cleanup.add(() => pgb.stop());
  const database = "bench_ingest";
  const databaseUrl = await pgb.createDatabase(database);
  const prisma = createPrisma(databaseUrl, { maxConnections: DB_POOL_SIZE });
  cleanup.add(() => prisma.$disconnect());
  const secretBox = createSecretBox(randomBytes(32));
  const now = () => new Date();
  // The gateway's own token, as in production (scopes of the ingest path only).
  const benchToken = generateServiceToken();
  await ensureServiceToken(prisma, now(), { name: "gateway", token: benchToken, scopes: ["ingest", "clicks:record", "admin"] });
  const rpc = createReferralServiceServer({
    prisma,
    secretBox,
    log: createBenchLogger("referral-service"),
    metrics: createMetrics("referral-service"),
    now,
    allowInsecureCallbacks: false,
    callbackTimeoutMs: 10_000,
    publicBaseUrl: "http://127.0.0.1:9",
  });
  const rpcPort = await rpc.listen(0, "127.0.0.1");
  cleanup.add(() => rpc.close());
  const clients = createReferralServiceClients(`http://127.0.0.1:${rpcPort}`, benchToken);
  const gateway = createGatewayServer({ ...clients, log: createBenchLogger("gateway"), metrics: createMetrics("gateway"), now });
  const gatewayUrl = `${await listen(gateway)}/api/referral/events`;
  cleanup.add(() => closeServer(gateway));
  const bare = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(BARE_BODY) });
      res.end(BARE_BODY);
    });
  });
  const bareUrl = `${await listen(bare)}/api/referral/events`;
  cleanup.add(() => closeServer(bare));
  const loadgen = await startLoadGenerator();
  cleanup.add(() => loadgen.close());

  // --- fixtures: one server with referrals on and a secret; a pool of click tokens ---
  const { server } = await clients.admin.createServer({ name: "bench server", registrationUrl: "https://example.com/register" });
  const serverId = server?.id ?? "";
  await clients.admin.setReferralsEnabled({ serverId, enabled: true });
  const { secret, info } = await clients.admin.createReferralSecret({ serverId });
  const kid = info?.kid ?? "";
  const tokenPrefix = `tok_${randomBytes(6).toString("base64url")}_`;
  const seeded = Date.now();
  const sql = new pg.Client({ connectionString: databaseUrl });
  await sql.connect();
  cleanup.add(() => sql.end());
  await sql.query(
    `INSERT INTO referral_clicks (id, server_id, referrer_identity, token)
     SELECT gen_random_uuid(), $1::uuid, 'referrer-' || (g % 997), $2 || g FROM generate_series(0, $3::int - 1) g`,
    [serverId, tokenPrefix, TOKENS + DIRECT_TOKENS],
  );
  await sql.query("ANALYZE");
  progress(`server ${serverId} with ${TOKENS + DIRECT_TOKENS} click tokens seeded in ${Date.now() - seeded} ms`);
  const spec = (over: Partial<IngestBodySpec>): IngestBodySpec => ({ serverId, secret, tokenPrefix, start: 0, end: TOKENS, cycle: true, test: false, ...over });

  // --- (b) signature verification alone, and the other per-request CPU steps, single thread ---
  progress("(b) micro-benchmarks: signature verification, JSON parse + validation, secret decryption");
  const sampleBody = Buffer.from(buildIngestBody(spec({}), 0));
  const sampleHeader = signIngestBody(secret, Math.floor(Date.now() / 1000), sampleBody.toString("utf8"));
  const keys = [{ kid, secret: new Uint8Array(Buffer.from(secret, "utf8")) }];
  const sealed = secretBox.seal(secret);
  const microMs = BREAKDOWN_MS === 0 ? 0 : 1_000;
  const micro = {
    verifySignature: microbench(microMs, () => {
      const parsed = parseSignatureHeader(sampleHeader);
      if (!parsed) throw new Error("sample header did not parse");
      const verdict = verifySignature({ signature: parsed, keys, rawBody: sampleBody, nowSeconds: Math.floor(Date.now() / 1000) });
      if (verdict.kind !== "verified") throw new Error(`sample signature ${verdict.kind}`);
    }),
    parseAndValidateBody: microbench(microMs * 0.6, () => {
      const body = parseJsonObject(sampleBody);
      if (!body || validateEvent(body).kind !== "ok") throw new Error("sample body invalid");
    }),
    openSealedSecret: microbench(microMs * 0.6, () => void secretBox.open(sealed)),
  };
  progress(`verify ${fmt(micro.verifySignature.opsPerSecond, 0)} ops/s (${micro.verifySignature.microsPerOp} µs/op)`);

  // --- sequential breakdown of one request's legs (in-process client, c=1) ---
  progress("breakdown: the legs of one request, sequentially");
  let directIndex = TOKENS;
  const breakdown = {
    resolveSigningKeysRpc: await timeSequential(BREAKDOWN_MS, () => clients.admin.resolveSigningKeys({ serverId })),
    applyEventRpc: await timeSequential(BREAKDOWN_MS, async () => {
      if (directIndex >= TOKENS + DIRECT_TOKENS) return;
      const token = `${tokenPrefix}${directIndex++}`;
      const res = await clients.referral.applyEvent({
        serverId,
        event: ReferralEventType.REGISTERED,
        token,
        refereeIdentity: `referee-${token}`,
        serverEventId: `reg-${token}`,
        kid,
      });
      if (res.outcome.case !== "applied") throw new Error(`direct ApplyEvent gave ${res.outcome.case}`);
    }),
    // These four time Prisma's own paths ($queryRaw, interactive transactions), not the product's statements (which run on
    // services/shared/adapters/sql/executor.ts): they stay on Prisma on purpose, as the measure of what Prisma costs per call.
    prismaSelect1: await timeSequential(BREAKDOWN_MS, () => prisma.$queryRaw`SELECT 1`),
    prismaEmptyTransaction: await timeSequential(BREAKDOWN_MS, () => prisma.$transaction(async (tx) => tx.$queryRaw`SELECT 1`)),
    // The registered transaction's shape (BEGIN + 7 statements + COMMIT) against a 3-statement one: the slope is the cost of a round trip.
    prismaTransaction7Statements: await timeSequential(BREAKDOWN_MS, () =>
      prisma.$transaction(async (tx) => {
        for (let i = 0; i < 7; i++) await tx.$queryRaw`SELECT 1`;
      }),
    ),
    prismaTransaction3Statements: await timeSequential(BREAKDOWN_MS, () =>
      prisma.$transaction(async (tx) => {
        for (let i = 0; i < 3; i++) await tx.$queryRaw`SELECT 1`;
      }),
    ),
  };
  const directApplied = directIndex - TOKENS;

  // --- the load phases: at each concurrency, floor, dry-run, registered, replay back to back ---
  let nextToken = 0;
  let registeredOk = 0;
  const phases: Phase[] = [];
  for (const concurrency of CONCURRENCIES) {
    for (const mode of MODES) {
      if (mode === "replay" && nextToken === 0) {
        progress("replay skipped: no registered events to replay yet");
        continue;
      }
      const job = (durationMs: number, label: string): LoadJob => {
        switch (mode) {
          case "floor":
            return { label, url: bareUrl, concurrency, durationMs, body: spec({ test: true }), expectStatus: 200, expectContains: '"ok":true' };
          case "dry_run":
            return { label, url: gatewayUrl, concurrency, durationMs, body: spec({ test: true }), expectStatus: 200, expectContains: '"test":true' };
          case "registered":
            return {
              label,
              url: gatewayUrl,
              concurrency,
              durationMs,
              body: spec({ start: nextToken, end: TOKENS, cycle: false }),
              expectStatus: 200,
              expectContains: '"state":"registered"',
            };
          case "replay":
            return {
              label,
              url: gatewayUrl,
              concurrency,
              durationMs,
              body: spec({ start: 0, end: nextToken }),
              expectStatus: 200,
              expectContains: '"duplicate":true',
            };
        }
      };
      const warm = await loadgen.run(job(WARMUP_MS, `${mode} c=${concurrency} warm-up`));
      if (mode === "registered") {
        nextToken = warm.nextIndex;
        registeredOk += warm.ok;
      }
      await pgb.resetStatements();
      const cpuBefore = { server: selfCpuMs(), postgres: pgb.cpuSnapshot(), machine: machineCpuMs().busy };
      const load = await loadgen.run(job(MEASURE_MS, `${mode} c=${concurrency}`));
      const cpu = {
        server: selfCpuMs() - cpuBefore.server,
        postgres: cpuBetween(cpuBefore.postgres, pgb.cpuSnapshot()),
        machine: machineCpuMs().busy - cpuBefore.machine,
      };
      const statements = await pgb.readStatements(database);
      if (mode === "registered") {
        nextToken = load.nextIndex;
        registeredOk += load.ok;
      }
      const perRequest = (ms: number) => (load.requests === 0 ? Number.NaN : round((ms * 1000) / load.requests, 0));
      const calls = statements.reduce((sum, s) => sum + s.calls, 0);
      const execMs = statements.reduce((sum, s) => sum + s.totalExecMs, 0);
      const phase: Phase = {
        mode,
        concurrency,
        load,
        cpuMsPerRequest: { server: perRequest(cpu.server), postgres: perRequest(cpu.postgres), loadGenerator: perRequest(load.clientCpuMs) },
        machineBusyPercent: round(((cpu.server + cpu.postgres + load.clientCpuMs) / (load.elapsedMs * machineAtStart.nproc)) * 100, 0),
        otherProcessesCores: round(Math.max(0, cpu.machine - cpu.server - cpu.postgres - load.clientCpuMs) / load.elapsedMs, 2),
        db: {
          statementsPerRequest: load.requests === 0 ? Number.NaN : round(calls / load.requests, 2),
          execMsPerRequest: load.requests === 0 ? Number.NaN : round(execMs / load.requests, 3),
          top: statements.slice(0, 14).map((s) => ({ ...s, totalExecMs: round(s.totalExecMs, 1) })),
        },
        loadAverage1m: loadNow(),
      };
      phases.push(phase);
      const problems = load.unexpected + load.errors > 0 ? ` UNEXPECTED=${load.unexpected} errors=${load.errors} (${load.sampleUnexpected ?? ""})` : "";
      progress(
        `${mode.padEnd(10)} c=${String(concurrency).padEnd(2)} ${fmt(load.requestsPerSecond, 0).padStart(6)} req/s  p50 ${fmt(load.latency.p50, 2)} p95 ${fmt(load.latency.p95, 2)} p99 ${fmt(load.latency.p99, 2)} ms  ` +
          `cpu/req: server ${phase.cpuMsPerRequest.server} µs, pg ${phase.cpuMsPerRequest.postgres} µs  db ${phase.db.statementsPerRequest} stmts/req  other procs ${phase.otherProcessesCores} cores${load.exhausted ? " (tokens exhausted)" : ""}${problems}`,
      );
    }
  }

  // --- where the server process's CPU goes: sampled profiles of a registered and a dry-run phase ---
  const profiles: Record<string, ProfileSummary> = {};
  if (PROFILE_MS > 0) {
    for (const mode of ["registered", "dry_run"] as const) {
      progress(`profiling the server process during ${mode} at c=${PROFILE_CONCURRENCY} for ${PROFILE_MS} ms`);
      const { result, summary } = await profileWhile(() =>
        loadgen.run({
          label: `${mode} profiled`,
          url: gatewayUrl,
          concurrency: PROFILE_CONCURRENCY,
          durationMs: PROFILE_MS,
          body: mode === "registered" ? spec({ start: nextToken, end: TOKENS, cycle: false }) : spec({ test: true }),
          expectStatus: 200,
          expectContains: mode === "registered" ? '"state":"registered"' : '"test":true',
        }),
      );
      if (mode === "registered") {
        nextToken = result.nextIndex;
        registeredOk += result.ok;
      }
      profiles[mode] = summary;
      progress(
        `  ${summary.components
          .slice(0, 6)
          .map((c) => `${c.component} ${c.percent}%`)
          .join("; ")}`,
      );
    }
  }

  // --- checks: every registered OK minted exactly one referral and one outbox row ---
  const count = async (table: string) => Number((await sql.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]?.n ?? 0);
  const checks = {
    registeredOkResponses: registeredOk,
    directApplyEventCalls: directApplied,
    referralsMinted: await count("referrals"),
    outboxRows: await count("outbox"),
    eventRows: await count("referral_events"),
  };
  const consistent = checks.referralsMinted === registeredOk + directApplied && checks.outboxRows === checks.referralsMinted;
  progress(`checks: ${JSON.stringify(checks)} -> ${consistent ? "every registered 200 was a real transition" : "MISMATCH"}`);

  const machineAtEnd = machineInfo();
  const results = {
    benchmark: NAME,
    machine: { atStart: machineAtStart, loadAverageAtEnd: machineAtEnd.loadAverage, postgres: pgb.serverVersion },
    settings: {
      measureMs: MEASURE_MS,
      warmupMs: WARMUP_MS,
      concurrencies: CONCURRENCIES,
      dbPoolSize: DB_POOL_SIZE,
      logLevel: process.env.BENCH_LOG_LEVEL ?? "info",
      topology: "gateway + referral service in this process; load generator in a child process; PostgreSQL local (fsync off)",
    },
    signatureVerification: micro,
    breakdownC1: breakdown,
    phases,
    cpuProfiles: profiles,
    checks: { ...checks, consistent },
  };
  const { jsonPath, mdPath } = writeResults(NAME, results, renderMarkdown(results));
  progress(`wrote ${jsonPath} and ${mdPath}`);
  if (!consistent) process.exitCode = 1;
}

/** Sequential latencies plus this process's CPU per call (client and server sides when both live here). */
type SequentialTiming = LatencySummary & { cpuMicrosPerCall: number };

/** Runs `fn` back to back for about `durationMs` and summarises the latencies and CPU per call. */
async function timeSequential(durationMs: number, fn: () => Promise<unknown>): Promise<SequentialTiming> {
  if (durationMs === 0) return { ...summarize([]), cpuMicrosPerCall: Number.NaN };
  for (let i = 0; i < 20; i++) await fn(); // warm
  const samples: number[] = [];
  const cpuBefore = selfCpuMs();
  const deadline = performance.now() + durationMs;
  while (performance.now() < deadline) {
    const started = performance.now();
    await fn();
    samples.push(performance.now() - started);
  }
  return { ...summarize(samples), cpuMicrosPerCall: round(((selfCpuMs() - cpuBefore) * 1000) / samples.length, 0) };
}

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

type Results = {
  machine: { atStart: ReturnType<typeof machineInfo>; loadAverageAtEnd: number[]; postgres: string };
  settings: { measureMs: number; warmupMs: number; concurrencies: number[]; dbPoolSize: number; logLevel: string; topology: string };
  signatureVerification: Record<string, { opsPerSecond: number; microsPerOp: number }>;
  breakdownC1: Record<string, SequentialTiming>;
  phases: Phase[];
  cpuProfiles: Record<string, ProfileSummary>;
  checks: Record<string, number | boolean>;
};

function renderMarkdown(r: Results): string {
  const m = r.machine.atStart;
  const out: string[] = [];
  out.push(`# Ingest benchmark results`, "");
  out.push(
    `Run ${m.at} on ${m.nproc} cores (${m.cpuModel}), ${m.memoryGiB} GiB, ${m.platform} ${m.kernel}, Node ${m.node}, PostgreSQL ${r.machine.postgres}. ` +
      `Load average at start ${m.loadAverage.join(" / ")}, at end ${r.machine.loadAverageAtEnd.join(" / ")} (1/5/15 min; anything above ${m.nproc} means other work competed for the CPU).`,
    "",
  );
  out.push(
    `Settings: ${r.settings.warmupMs} ms warm-up + ${r.settings.measureMs} ms measured per phase; closed loop over keep-alive HTTP/1.1; ` +
      `${r.settings.topology}; referral-service DB pool ${r.settings.dbPoolSize}; log level ${r.settings.logLevel} (to /dev/null).`,
    "",
  );
  out.push(`## Throughput and latency (each row beside the floor measured at the same concurrency)`, "");
  for (const c of r.settings.concurrencies) {
    const rows = r.phases.filter((p) => p.concurrency === c);
    const floor = rows.find((p) => p.mode === "floor");
    out.push(`### Concurrency ${c}`, "");
    out.push(
      markdownTable(
        [
          "path",
          "req/s",
          "of floor",
          "p50 ms",
          "p95 ms",
          "p99 ms",
          "ok / bad / err",
          "server CPU µs/req",
          "PG CPU µs/req",
          "DB stmts/req",
          "DB exec ms/req",
          "bench busy % of cores",
          "other processes (cores)",
        ],
        rows.map((p) => [
          MODE_LABEL[p.mode],
          fmt(p.load.requestsPerSecond, 0),
          floor ? ratio(p.load.requestsPerSecond, floor.load.requestsPerSecond) : "n/a",
          fmt(p.load.latency.p50, 2),
          fmt(p.load.latency.p95, 2),
          fmt(p.load.latency.p99, 2),
          `${p.load.ok} / ${p.load.unexpected} / ${p.load.errors}`,
          fmt(p.cpuMsPerRequest.server, 0),
          fmt(p.cpuMsPerRequest.postgres, 0),
          fmt(p.db.statementsPerRequest, 1),
          fmt(p.db.execMsPerRequest, 3),
          fmt(p.machineBusyPercent, 0),
          fmt(p.otherProcessesCores, 2),
        ]),
      ),
      "",
    );
  }
  out.push(`## (b) Per-request CPU steps in isolation (single thread, no load running)`, "");
  out.push(
    markdownTable(
      ["step", "ops/s", "µs/op"],
      [
        [
          "(b) signature verification: parse header + HMAC-SHA256 + constant-time compare + clock check",
          fmt(r.signatureVerification.verifySignature?.opsPerSecond, 0),
          fmt(r.signatureVerification.verifySignature?.microsPerOp, 2),
        ],
        [
          "JSON parse (fatal UTF-8 decode) + field validation",
          fmt(r.signatureVerification.parseAndValidateBody?.opsPerSecond, 0),
          fmt(r.signatureVerification.parseAndValidateBody?.microsPerOp, 2),
        ],
        [
          "AES-256-GCM open of one sealed secret (ResolveSigningKeys does this per request)",
          fmt(r.signatureVerification.openSealedSecret?.opsPerSecond, 0),
          fmt(r.signatureVerification.openSealedSecret?.microsPerOp, 2),
        ],
      ],
    ),
    "",
  );
  const floor1 = r.phases.find((p) => p.mode === "floor" && p.concurrency === 1);
  const reg1 = r.phases.find((p) => p.mode === "registered" && p.concurrency === 1);
  const dry1 = r.phases.find((p) => p.mode === "dry_run" && p.concurrency === 1);
  const b = r.breakdownC1;
  out.push(`## Where one request's time goes (c=1, sequential; RPC legs called in-process through the gateway's own Connect client)`, "");
  out.push(
    markdownTable(
      ["leg", "p50 ms", "p95 ms", "mean ms", "CPU µs/call (this process)"],
      [
        [
          "full registered request through the gateway (load phase c=1)",
          fmt(reg1?.load.latency.p50, 2),
          fmt(reg1?.load.latency.p95, 2),
          fmt(reg1?.load.latency.mean, 2),
          fmt(reg1?.cpuMsPerRequest.server, 0),
        ],
        [
          "full dry-run request through the gateway (load phase c=1)",
          fmt(dry1?.load.latency.p50, 2),
          fmt(dry1?.load.latency.p95, 2),
          fmt(dry1?.load.latency.mean, 2),
          fmt(dry1?.cpuMsPerRequest.server, 0),
        ],
        [
          "HTTP floor (load phase c=1)",
          fmt(floor1?.load.latency.p50, 2),
          fmt(floor1?.load.latency.p95, 2),
          fmt(floor1?.load.latency.mean, 2),
          fmt(floor1?.cpuMsPerRequest.server, 0),
        ],
        ...(
          [
            ["ResolveSigningKeys RPC alone (client + server side)", b.resolveSigningKeysRpc],
            ["ApplyEvent RPC alone, registered with a new token (client + server side)", b.applyEventRpc],
            ["Prisma `SELECT 1` (one DB round trip)", b.prismaSelect1],
            ["Prisma interactive transaction: BEGIN + 1 `SELECT 1` + COMMIT (3 round trips)", b.prismaEmptyTransaction],
            ["Prisma interactive transaction: BEGIN + 3 statements + COMMIT (5 round trips)", b.prismaTransaction3Statements],
            ["Prisma interactive transaction: BEGIN + 7 statements + COMMIT (9 round trips, the registered shape)", b.prismaTransaction7Statements],
          ] as Array<[string, SequentialTiming | undefined]>
        ).map(([leg, t]) => [leg, fmt(t?.p50, 2), fmt(t?.p95, 2), fmt(t?.mean, 2), fmt(t?.cpuMicrosPerCall, 0)]),
      ],
    ),
    "",
  );
  const regPhases = r.phases.filter((p) => p.mode === "registered");
  const reg = regPhases[regPhases.length - 1];
  if (reg) {
    out.push(`## Statements behind one registered event (pg_stat_statements, registered phase at c=${reg.concurrency})`, "");
    out.push(
      markdownTable(
        ["statement (normalised, truncated)", "calls per request", "exec ms per call"],
        reg.db.top.map((s) => [
          `\`${s.query.slice(0, 110).replace(/\|/g, "\\|")}\``,
          fmt(s.calls / Math.max(1, reg.load.requests), 2),
          fmt(s.totalExecMs / Math.max(1, s.calls), 3),
        ]),
      ),
      "",
    );
  }
  for (const [mode, profile] of Object.entries(r.cpuProfiles)) {
    out.push(`## Where the server process's CPU goes: ${mode} at c=${PROFILE_CONCURRENCY} (sampling profile, % of busy samples)`, "");
    out.push(
      markdownTable(
        ["component (self time)", "%"],
        profile.components.slice(0, 14).map((c) => [c.component, fmt(c.percent, 1)]),
      ),
      "",
    );
    out.push(
      markdownTable(
        ["hottest functions (self time)", "component", "%"],
        profile.functions.slice(0, 10).map((f) => [`\`${f.fn}\``, f.component, fmt(f.percent, 1)]),
      ),
      "",
    );
  }
  out.push(`## Checks`, "");
  out.push(
    `- registered 200s: ${r.checks.registeredOkResponses} via the gateway + ${r.checks.directApplyEventCalls} direct ApplyEvent calls; referrals minted: ${r.checks.referralsMinted}; outbox rows: ${r.checks.outboxRows}; event rows: ${r.checks.eventRows}.`,
    `- ${r.checks.consistent ? "Every registered 200 was a real transition (one referral and one outbox row each)." : "MISMATCH between responses and rows: see the JSON."}`,
    "",
  );
  return out.join("\n");
}

await runBench(main, cleanup, progress);
