/**
 * CPU per event of the gateway's own work on a `registered` event, without the database:
 * the real gateway (gateway/server.ts with the clients gateway/main.ts builds) in a process
 * of its own, forwarding over the product's transport to a stub referral service (Connect
 * over HTTP/2, the same adapter options and server interceptor, handlers that answer at
 * once), driven by the ingest load generator (signed POSTs, keep-alive HTTP/1.1, closed
 * loop). Reports CPU ms per event of the gateway and of the stub, from /proc, per round.
 * The machine is shared: CPU per event, not req/s, is the figure to compare.
 *
 *   npx tsx bench/gateway-hop.ts                   # 3 rounds of 5 s at c=32
 *   HOP_ROUNDS=5 HOP_MEASURE_MS=8000 BENCH_CONCURRENCY=8 npx tsx bench/gateway-hop.ts
 *   HOP_RATE=300 npx tsx bench/gateway-hop.ts     # open loop at 300 req/s (same work per second for every variant)
 *   HOP_CPU_PROF=/tmp/prof npx tsx bench/gateway-hop.ts   # --cpu-prof for every child
 *   HOP_VARIANTS=connect,product npx tsx bench/gateway-hop.ts  # A/B: one gateway per variant, rounds interleaved
 *                                  # (connect: the gateway's clients over Connect's own transport)
 *   HOP_VARIANTS=before=/tmp/main-checkout,product npx tsx bench/gateway-hop.ts
 *                                  # A/B against another checkout's gateway (it needs this file and node_modules)
 *
 * Prints one JSON line per round and a summary (medians) to stdout; progress to stderr.
 */
import { fork, type ChildProcess } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { ReferralService, ReferralState, ApplyEventResponseSchema } from "../gen/proto/referral/v1/referral_pb.js";
import { ServerAdminService, SigningKeyStatus, ResolveSigningKeysResponseSchema } from "../gen/proto/servers/v1/servers_pb.js";
import { createReferralServiceClients } from "../gateway/clients.js";
import { createGatewayServer } from "../gateway/server.js";
import { MAX_RPC_MESSAGE_BYTES } from "../services/shared/values/field-rules.js";
import { createServerInterceptor } from "../services/shared/rpc/interceptors.js";
import { createRpcClients } from "../services/shared/rpc/service-clients.js";
import { createServiceTransport } from "../services/shared/rpc/service-transport.js";
import { createLogger } from "../services/shared/runtime/log.js";
import { createMetrics } from "../services/shared/runtime/metrics.js";
import { cpuBetween, envInt, loadNow, snapshotProcessTree } from "./lib/infra.js";
import { startLoadGenerator } from "./lib/loadgen.js";
import { round } from "./lib/stats.js";

const ROLE = process.argv[2] ?? "parent";
const SECRET = "hop-bench-secret-0123456789abcdef";
const KID = "k_hop";

/** A log destination that serialises every line (as production does) and drops it. */
function devNullLogger(name: string) {
  return createLogger(name, process.env.LOG_LEVEL ?? "info", createWriteStream("/dev/null"));
}

function listening(port: number): void {
  process.send?.({ port });
}

async function runStub(): Promise<void> {
  const log = devNullLogger("referral-service");
  const metrics = createMetrics("referral-service");
  const routes = (router: ConnectRouter) => {
    router.service(ReferralService, {
      applyEvent: () =>
        create(ApplyEventResponseSchema, {
          outcome: { case: "applied", value: { referralId: randomUUID(), state: ReferralState.REGISTERED, advanced: true } },
        }),
    } as never);
    router.service(ServerAdminService, {
      resolveSigningKeys: () =>
        create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.OK, keys: [{ kid: KID, secret: new TextEncoder().encode(SECRET) }] }),
    } as never);
  };
  const handler = connectNodeAdapter({ routes, interceptors: [createServerInterceptor(log, metrics)], readMaxBytes: MAX_RPC_MESSAGE_BYTES });
  const server = http2.createServer(handler);
  server.listen(0, "127.0.0.1", () => listening((server.address() as AddressInfo).port));
}

/** The gateway's clients as gateway/clients.ts builds them, or (variant `connect`) over Connect's own transport, for A/B rounds. */
function gatewayClients(stubUrl: string, variant: string) {
  const token = randomBytes(32).toString("base64url");
  if (variant === "connect") {
    const { referral, admin, delivery, claims, hearts, rewardQueue } = createRpcClients(createServiceTransport(stubUrl, token));
    return { referral, admin, delivery, claims, hearts, rewardQueue };
  }
  return createReferralServiceClients(stubUrl, token);
}

async function runGateway(stubUrl: string, variant: string): Promise<void> {
  const server = createGatewayServer({
    ...gatewayClients(stubUrl, variant),
    log: devNullLogger("gateway"),
    metrics: createMetrics("gateway"),
    now: () => new Date(),
  });
  server.listen(0, "127.0.0.1", () => listening((server.address() as AddressInfo).port));
}

function startChild(args: string[], script = fileURLToPath(import.meta.url)): Promise<{ child: ChildProcess; port: number }> {
  const profDir = process.env.HOP_CPU_PROF;
  const execArgv = ["--import", "tsx", ...(profDir ? ["--cpu-prof", `--cpu-prof-dir=${profDir}`] : [])];
  const child = fork(script, args, { execArgv, stdio: ["ignore", "inherit", "inherit", "ipc"] });
  return new Promise((resolve, reject) => {
    child.once("message", (m: { port: number }) => resolve({ child, port: m.port }));
    child.once("exit", (code) => reject(new Error(`${args[0]} exited (${code})`)));
  });
}

async function runParent(): Promise<void> {
  const rounds = envInt("HOP_ROUNDS", 3);
  const measureMs = envInt("HOP_MEASURE_MS", 5_000);
  const warmupMs = envInt("HOP_WARMUP_MS", 2_000);
  const concurrency = envInt("BENCH_CONCURRENCY", 32);
  // Open loop at this rate instead (every variant serves the same load, so batching per event-loop turn is alike).
  const rate = envInt("HOP_RATE", 0);
  const variants = (process.env.HOP_VARIANTS ?? "product").split(",");
  const stub = await startChild(["stub"]);
  const gateways = new Map<string, { child: ChildProcess; port: number }>();
  for (const v of variants) {
    // `name=/other/checkout`: that checkout's gateway (its own copy of this file), e.g. the code before a change.
    const [name, dir] = v.split("=") as [string, string | undefined];
    const script = dir === undefined ? undefined : join(dir, "bench", "gateway-hop.ts");
    gateways.set(name, await startChild(["gateway", `http://127.0.0.1:${stub.port}`, dir === undefined ? v : "product"], script));
  }
  const loadgen = await startLoadGenerator();
  const serverId = randomUUID();
  const job = (gateway: { port: number }, durationMs: number) => ({
    label: "hop",
    url: `http://127.0.0.1:${gateway.port}/api/referral/events`,
    concurrency: rate > 0 ? 256 : concurrency,
    ...(rate > 0 ? { ratePerSecond: rate } : {}),
    durationMs,
    body: { serverId, secret: SECRET, tokenPrefix: "hop_", start: 0, end: 1_000_000_000, cycle: true, test: false },
    expectStatus: 200,
    expectContains: '"state":"registered"',
  });
  const results: Array<Record<string, number | string>> = [];
  try {
    for (const gateway of gateways.values()) await loadgen.run(job(gateway, warmupMs));
    for (let r = 1; r <= rounds; r++) {
      for (const [variant, gateway] of gateways) {
        const pids = { gateway: gateway.child.pid ?? -1, stub: stub.child.pid ?? -1, loadgen: loadgen.pid };
        const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, snapshotProcessTree(pid)]));
        const loadBefore = loadNow();
        const load = await loadgen.run(job(gateway, measureMs));
        const row: Record<string, number | string> = {
          variant,
          round: r,
          concurrency,
          ok: load.ok,
          bad: load.unexpected + load.errors,
          rps: round(load.requestsPerSecond, 0),
          p50: load.latency.p50,
          p99: load.latency.p99,
          load1Before: loadBefore,
          load1After: loadNow(),
        };
        for (const [k, pid] of Object.entries(pids)) {
          row[`${k}CpuMsPerEvent`] = round(cpuBetween(before[k] ?? new Map(), snapshotProcessTree(pid)) / Math.max(1, load.ok), 3);
        }
        results.push(row);
        process.stdout.write(`${JSON.stringify(row)}\n`);
      }
    }
  } finally {
    await loadgen.close();
    for (const c of [...[...gateways.values()].map((g) => g.child), stub.child]) {
      const exited = new Promise((r) => c.once("exit", r));
      c.kill("SIGINT");
      await exited;
    }
  }
  for (const variant of gateways.keys()) {
    const median = (key: string) => {
      const v = results
        .filter((r) => r.variant === variant)
        .map((r) => Number(r[key]))
        .sort((a, b) => a - b);
      return v[Math.floor(v.length / 2)];
    };
    const summary = {
      summary: "median",
      variant,
      gatewayCpuMsPerEvent: median("gatewayCpuMsPerEvent"),
      stubCpuMsPerEvent: median("stubCpuMsPerEvent"),
      rps: median("rps"),
    };
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  }
}

if (ROLE === "stub") await runStub();
else if (ROLE === "gateway") await runGateway(process.argv[3] ?? "", process.argv[4] ?? "product");
else await runParent();
if (ROLE !== "parent") process.once("SIGINT", () => process.exit(0));
