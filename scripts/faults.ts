/**
 * The fault campaign: `npm run faults`.
 *
 * Starts its own PostgreSQL cluster and Kafka broker (scripts/infra), migrates a
 * database, and runs the four production processes as separate OS processes
 * (referral service, gateway, relay, delivery; as test/e2e does). Then, phase by
 * phase, it casts hearts (HeartService.CastHeart) and sends signed referral events
 * (click -> registered -> qualified through the gateway's public endpoint) at a
 * bounded rate, and injects one fault per phase: none, relay SIGKILL, delivery
 * SIGKILL, broker restart, PostgreSQL restart, a receiver failing 15 % at random,
 * and a poison outbox row. The receiver verifies every callback's signature with
 * node:crypto and pays each heart_id once, as the contract asks receivers to.
 *
 * At the end it waits for the pipeline to drain, compares the database (the truth
 * of what counted and what applied) with what the receiver got, and writes
 * RELIABILITY.md at the repository root: hearts cast, counted, delivered, lost and
 * duplicated per fault; referral events sent and applied, with consistency checks;
 * and how each process recovered (time to ready). Exit status 1 when anything was
 * lost, half-applied or failed verification.
 *
 * Then the pay-once phase (scripts/lib/run-pay-once-phase.ts): servers in pay-once mode, a
 * receiver answering 200, 500 or never, a client following EasyVoteExtended 3.2.9's retry
 * rule, and the gateway, referral service and delivery killed and restarted; its section of
 * RELIABILITY.md counts each heart paid once, paid twice or unpaid, and exit status is 1 when a
 * heart was paid twice. FAULTS_PHASES picks the groups: `pipeline` (the seven phases above),
 * `pay-once`, or both (the default); a run of pay-once alone replaces only its own section.
 *
 * Bounded: about 8 minutes, 3 for pay-once alone (FAULTS_TIME_LIMIT_S, default 900, kills it), a fixed
 * number of hearts and events per phase, and only 127.0.0.1.
 * Settings (env): FAULTS_PHASES (pipeline,pay-once), FAULTS_PHASE_S (20), FAULTS_HEARTS_PER_S (8),
 * FAULTS_REFERRALS_PER_S (2), FAULTS_SERVERS (4), FAULTS_DRAIN_S (180), FAULTS_PAY_ONCE_HEARTS (300),
 * FAULTS_PAY_ONCE_S (60), FAULTS_PAY_ONCE_DRAIN_S (120), FAULTS_TIME_LIMIT_S (900), FAULTS_OUTPUT (RELIABILITY.md).
 */
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { withKeptSections, withSection } from "./lib/kept-sections.js";
import { PAY_ONCE_HEADING, payOnceSection, runPayOncePhase, type PayOnceResult } from "./lib/run-pay-once-phase.js";
import { createLimiter, sleep, withRetries } from "./lib/campaign-clients.js";
import { DEFAULT_KAFKA_SESSION_TIMEOUT_MS } from "../services/delivery/pipeline/consumer.js";
import { resolve } from "node:path";
import pg from "pg";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createCleanup, createProgress, envInt, installTimeLimit, machineInfo, markdownTable, runBench, withDatabase } from "../bench/lib/infra.js";
import { HeartCountedSchema } from "../gen/proto/events/v1/events_pb.js";
import { HEARTS_TOPIC } from "../services/shared/adapters/bus.js";
import { toOutboxRow } from "../services/shared/adapters/outbox.js";
import { applyMigrations } from "./db/schema-engine.js";
import { startKafka, type KafkaBroker } from "./infra/kafka.js";
import { startPostgres, type PostgresInstance } from "./infra/postgres.js";
import {
  checkServerCallback,
  E2E_CALLBACK_TIMEOUT_MS,
  newSecretsKey,
  precreateTopics,
  signIngest,
  startDeliveryProcess,
  startGatewayProcess,
  startReferralServiceProcess,
  startRelayProcess,
  unixNow,
  type ServiceProcess,
  type SystemSettings,
} from "./harness/e2e-support.js";
import { createProcessGroup, freeRestartablePort, REPO_ROOT, type ProcessGroup } from "./harness/processes.js";
import { startReceiver, type Receiver } from "./harness/receiver.js";
import { createServiceClients, type ServiceClients } from "./harness/stack.js";

const PHASE_MS = envInt("FAULTS_PHASE_S", 20) * 1000;
const HEARTS_PER_SECOND = envInt("FAULTS_HEARTS_PER_S", 8);
const REFERRALS_PER_SECOND = envInt("FAULTS_REFERRALS_PER_S", 2);
const SERVER_COUNT = envInt("FAULTS_SERVERS", 4);
const DRAIN_MS = envInt("FAULTS_DRAIN_S", 180) * 1000;
const OUTPUT = resolve(REPO_ROOT, process.env.FAULTS_OUTPUT ?? "RELIABILITY.md");
/** The report's title (a run of one phase writes it when there is no file yet). */
const TITLE = "# Reliability";
/** The phase groups a run can pick with FAULTS_PHASES. */
const PHASE_GROUPS = ["pipeline", "pay-once"] as const;
type PhaseGroup = (typeof PHASE_GROUPS)[number];
const PHASES = loadPhases(process.env.FAULTS_PHASES);
const PAY_ONCE_HEARTS = envInt("FAULTS_PAY_ONCE_HEARTS", 300);
const PAY_ONCE_MS = envInt("FAULTS_PAY_ONCE_S", 60) * 1000;
const PAY_ONCE_DRAIN_MS = envInt("FAULTS_PAY_ONCE_DRAIN_S", 120) * 1000;
/** The pay-once plugin's timers (10-300 s) run ten times as fast, so its retries fall inside the phase. */
const PLUGIN_TIME_SCALE = 0.1;
/** The flaky receiver's failure rate. */
const FLAKY_FAILURE_RATE = 0.15;
/** When in a phase the fault is injected. */
const FAULT_AT_FRACTION = 0.3;
/** Requests in flight at most (the campaign's own bound on load). */
const MAX_IN_FLIGHT = 16;
/** How often readiness is polled while a process recovers. */
const READY_POLL_MS = 100;
const READY_TIMEOUT_MS = 120_000;

const progress = createProgress("faults");
const cleanup = createCleanup(progress);
installTimeLimit(envInt("FAULTS_TIME_LIMIT_S", 900), cleanup, progress);

/** FAULTS_PHASES: comma-separated PHASE_GROUPS; absent or empty means all of them. */
function loadPhases(value: string | undefined): Set<PhaseGroup> {
  const names = (value ?? "")
    .split(",")
    .map((n) => n.trim())
    .filter((n) => n !== "");
  const unknown = names.filter((n) => !(PHASE_GROUPS as readonly string[]).includes(n));
  if (unknown.length > 0) throw new Error(`FAULTS_PHASES: unknown ${unknown.join(", ")} (known: ${PHASE_GROUPS.join(", ")})`);
  return new Set(names.length === 0 ? PHASE_GROUPS : (names as PhaseGroup[]));
}

/** The system under test. */
interface System {
  pgInstance: PostgresInstance;
  broker: KafkaBroker;
  databaseUrl: string;
  settings: SystemSettings;
  group: ProcessGroup;
  clients: ServiceClients;
  gatewayUrl: string;
  /** The referral service's address: fixed, so a restarted one is where the gateway and the clients look. */
  referralServiceUrl: string;
  /** The current process of each role (replaced after a kill or a crash). */
  live: Record<Role, ServiceProcess>;
  /** Crashes seen (a process that exited without being killed by the campaign). */
  crashes: { role: Role; phase: string; exit: string }[];
}

type Role = "referral-service" | "gateway" | "relay" | "delivery";

/** One game server of the campaign. */
interface CampaignServer {
  id: string;
  referralSecret: string;
}

/** How one process came back after a fault. */
interface Recovery {
  phase: string;
  process: string;
  how: string;
  /** From the fault's start until the process answered /readyz 200 again. */
  secondsToReady: number;
  /** Whether /readyz was seen failing meanwhile. */
  sawNotReady: boolean;
}

/** Counters of one phase (client side). */
interface PhaseLoad {
  name: string;
  fault: string;
  heartsCast: number;
  heartRpcRetries: number;
  heartsGivenUp: number;
  eventsSent: number;
  eventsAnswered200: number;
  eventRetries: number;
  eventsGivenUp: number;
  eventsRejected: number;
  /** server_event_ids answered 200, to check against the database. */
  okEventIds: string[];
  /** referral tokens whose registered and qualified events were both answered 200. */
  qualifiedTokens: string[];
}

/** What the receiver saw. */
interface ReceiverLedger {
  /** heart_id -> verified heart.counted callbacks answered 200. */
  paid: Map<string, number>;
  invalidSignatures: number;
  randomFailures: number;
  requests: number;
  flaky: boolean;
}

/** Starts one role's process (the production main.ts) and waits until it is ready. */
async function startRole(sys: Pick<System, "group" | "settings" | "gatewayUrl" | "referralServiceUrl">, role: Role, name: string): Promise<ServiceProcess> {
  switch (role) {
    case "referral-service":
      return startReferralServiceProcess(sys.group, sys.settings, { publicBaseUrl: sys.gatewayUrl, env: { PORT: new URL(sys.referralServiceUrl).port } });
    case "gateway": {
      const port = Number(new URL(sys.gatewayUrl).port);
      return startGatewayProcess(sys.group, { port, referralServiceUrl: sys.referralServiceUrl });
    }
    case "relay":
      return startRelayProcess(sys.group, sys.settings, name);
    case "delivery":
      return startDeliveryProcess(sys.group, sys.settings, name);
  }
}

/** Polls /readyz until 200; returns whether it was seen failing first. */
async function waitReady(opsUrl: string, timeoutMs = READY_TIMEOUT_MS): Promise<{ sawNotReady: boolean }> {
  const deadline = Date.now() + timeoutMs;
  let sawNotReady = false;
  for (;;) {
    try {
      const response = await fetch(`${opsUrl}/readyz`, { signal: AbortSignal.timeout(3_000) });
      await response.arrayBuffer();
      if (response.status === 200) return { sawNotReady };
      sawNotReady = true;
    } catch {
      // Failure policy: not answering counts as not ready; keep polling until the deadline.
      sawNotReady = true;
    }
    if (Date.now() > deadline) throw new Error(`${opsUrl}/readyz not 200 within ${timeoutMs} ms`);
    await sleep(READY_POLL_MS);
  }
}

/** Casts one heart, retrying RPC errors (the cooldown makes a retry of a committed heart harmless). */
async function castHeart(sys: System, load: PhaseLoad, server: CampaignServer, voter: string, n: number): Promise<void> {
  load.heartsCast++;
  const { retries, error } = await withRetries(() =>
    sys.clients.hearts.castHeart({
      serverId: server.id,
      username: `Player${n}`,
      voterIdentity: voter,
      // One /24 per heart, so the fraud rules stay quiet.
      ip: `100.${64 + Math.floor(n / 256)}.${n % 256}.9`,
      userAgent: "Mozilla/5.0 (X11; Linux x86_64) fault-campaign",
    }),
  );
  load.heartRpcRetries += retries;
  if (error) load.heartsGivenUp++;
}

/** POSTs one signed event, re-signing each retry with a fresh `t`; retries 5xx and network errors. */
async function sendEvent(sys: System, load: PhaseLoad, server: CampaignServer, body: Record<string, unknown>): Promise<boolean> {
  load.eventsSent++;
  const raw = JSON.stringify(body);
  const { result, retries, error } = await withRetries(
    async () => {
      const response = await fetch(`${sys.gatewayUrl}/api/referral/events`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-service-signature": signIngest(server.referralSecret, unixNow(), raw) },
        body: raw,
        signal: AbortSignal.timeout(10_000),
      });
      await response.arrayBuffer();
      return response.status;
    },
    (status) => status >= 500,
  );
  load.eventRetries += retries;
  if (error || result === undefined) {
    load.eventsGivenUp++;
    return false;
  }
  if (result !== 200) {
    load.eventsRejected++;
    return false;
  }
  load.eventsAnswered200++;
  load.okEventIds.push(String(body.server_event_id));
  return true;
}

/** One referral: a click (RPC), then signed registered and qualified events through the gateway. */
async function runReferral(sys: System, load: PhaseLoad, server: CampaignServer, tag: string): Promise<void> {
  const click = await withRetries(() =>
    sys.clients.referral.recordClick({ serverId: server.id, referrerIdentity: `referrer-${tag}`, ip: "198.51.100.7", userAgent: "Mozilla/5.0 fault-campaign" }),
  );
  if (!click.result) {
    load.eventsGivenUp += 2;
    return;
  }
  const token = click.result.token;
  const base = { token, server_id: server.id };
  const registered = await sendEvent(sys, load, server, {
    event: "registered",
    ...base,
    referee_identity: `player-${tag}`,
    server_event_id: `reg-${tag}`,
    ts: unixNow(),
  });
  if (!registered) return;
  const qualified = await sendEvent(sys, load, server, { event: "qualified", ...base, server_event_id: `qual-${tag}`, ts: unixNow() });
  if (qualified) load.qualifiedTokens.push(token);
}

/** Counters shared by every phase: a global heart number (one address per heart). */
const state = { heartNumber: 0, referralNumber: 0 };

/** Casts hearts and runs referrals at the configured rates for `durationMs`. */
async function generateLoad(sys: System, servers: CampaignServer[], load: PhaseLoad, phaseIndex: number, durationMs: number): Promise<void> {
  const limiter = createLimiter(MAX_IN_FLIGHT);
  const started = Date.now();
  const heartsDue = () => Math.floor(((Date.now() - started) / 1000) * HEARTS_PER_SECOND);
  const referralsDue = () => Math.floor(((Date.now() - started) / 1000) * REFERRALS_PER_SECOND);
  let hearts = 0;
  let referrals = 0;
  while (Date.now() - started < durationMs) {
    while (hearts < heartsDue()) {
      const n = state.heartNumber++;
      const server = servers[n % servers.length]!;
      limiter.run(() => castHeart(sys, load, server, `f${phaseIndex}-${n}`, n));
      hearts++;
    }
    while (referrals < referralsDue()) {
      const n = state.referralNumber++;
      const server = servers[n % servers.length]!;
      limiter.run(() => runReferral(sys, load, server, `f${phaseIndex}-${n}`));
      referrals++;
    }
    await sleep(20);
  }
  await limiter.idle();
}

/** Replaces the process of `role` with a fresh one and waits until it is ready. */
async function restartRole(sys: System, role: Role, name: string): Promise<void> {
  const next = await startRole(sys, role, name);
  sys.live[role] = next;
  watchCrash(sys, role);
}

/** The phase now running (for crash attribution). */
let currentPhase = "setup";
/** Processes killed on purpose (their exit is not a crash). */
const killedOnPurpose = new Set<number>();
let shuttingDown = false;

/** Restarts a process that exits by itself, as a supervisor would, and records the crash. */
function watchCrash(sys: System, role: Role): void {
  const proc = sys.live[role].proc;
  void proc.exited.then((exit) => {
    if (shuttingDown || killedOnPurpose.has(proc.pid)) return;
    const how = `code ${exit.code}, signal ${exit.signal}`;
    sys.crashes.push({ role, phase: currentPhase, exit: how });
    progress(`!! ${role} (pid ${proc.pid}) exited by itself (${how}) during "${currentPhase}"; restarting it`);
    void restartRole(sys, role, `${role}#crash${sys.crashes.length}`).catch((error: unknown) =>
      progress(`restarting ${role} failed: ${(error as Error).message}`),
    );
  });
}

/** A fault: injects itself and reports how the processes recovered. */
interface Fault {
  name: string;
  description: string;
  /** Runs at FAULT_AT_FRACTION of the phase; resolves once every affected process is ready again. */
  inject?: (sys: System, ledger: ReceiverLedger) => Promise<Omit<Recovery, "phase">[]>;
  /** The receiver fails at random during the whole phase. */
  flaky?: boolean;
}

/** What "ready" waits for after a restart, per role, beyond /readyz. */
const READY_NOTES: Partial<Record<Role, string>> = {
  delivery: `; ready once its consumer has joined the group again, which waits for the killed member's ${DEFAULT_KAFKA_SESSION_TIMEOUT_MS / 1000} s Kafka session to expire (its dispatcher sends stored deliveries meanwhile)`,
};

/** SIGKILLs a process and starts a new one at once (a supervisor's restart). */
function killAndRestart(role: Role): (sys: System) => Promise<Omit<Recovery, "phase">[]> {
  return async (sys) => {
    const victim = sys.live[role].proc;
    const started = Date.now();
    killedOnPurpose.add(victim.pid);
    await victim.kill();
    progress(`${role} (pid ${victim.pid}) SIGKILLed`);
    await restartRole(sys, role, `${role}#${victim.pid}`);
    const seconds = (Date.now() - started) / 1000;
    progress(`${role} restarted and ready after ${seconds.toFixed(1)} s`);
    return [
      {
        process: role,
        how: `SIGKILL; a new process started at once (a supervisor's restart), no draining${READY_NOTES[role] ?? ""}`,
        secondsToReady: seconds,
        sawNotReady: true,
      },
    ];
  };
}

/** Runs `restart` and measures when each affected process answers /readyz 200 again (they reconnect by themselves). */
async function restartDependency(sys: System, roles: Role[], label: string, restart: () => Promise<void>): Promise<Omit<Recovery, "phase">[]> {
  const started = Date.now();
  const notReadySeen = new Map<Role, boolean>(roles.map((r) => [r, false]));
  let restarted = false;
  // Watch readiness during the outage too, to record whether each process noticed it.
  const watchers = roles.map(async (role) => {
    while (!restarted) {
      try {
        const response = await fetch(`${sys.live[role].opsUrl}/readyz`, { signal: AbortSignal.timeout(2_000) });
        await response.arrayBuffer();
        if (response.status !== 200) notReadySeen.set(role, true);
      } catch {
        // Failure policy: an unanswered probe during the outage counts as "noticed".
        notReadySeen.set(role, true);
      }
      await sleep(READY_POLL_MS);
    }
  });
  await restart();
  restarted = true;
  await Promise.all(watchers);
  const restartSeconds = (Date.now() - started) / 1000;
  progress(`${label} back after ${restartSeconds.toFixed(1)} s; waiting for the processes`);
  return Promise.all(
    roles.map(async (role) => {
      const { sawNotReady } = await waitReady(sys.live[role].opsUrl);
      const seconds = (Date.now() - started) / 1000;
      progress(`${role} ready ${seconds.toFixed(1)} s after the ${label} restart began`);
      return {
        process: role,
        how: `reconnected by itself (${label} down for ${restartSeconds.toFixed(1)} s)`,
        secondsToReady: seconds,
        sawNotReady: sawNotReady || notReadySeen.get(role) === true,
      };
    }),
  );
}

/** Writes a 2 MB heart outbox row by hand (the edge would refuse it) and waits until the relay set it aside. */
async function injectPoisonRow(sys: System): Promise<Omit<Recovery, "phase">[]> {
  const client = new pg.Client({ connectionString: sys.databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string }>("SELECT id::text FROM servers ORDER BY created_at LIMIT 1");
    const serverId = rows[0]!.id;
    const row = toOutboxRow({
      topic: HEARTS_TOPIC,
      type: "heart.counted",
      serverId,
      occurredAt: new Date(),
      payload: {
        case: "heartCounted",
        value: create(HeartCountedSchema, {
          heartId: "00000000-0000-4000-8000-00000000dead",
          serverId,
          username: "x".repeat(2 * 1024 * 1024),
          voterIdentity: "poison",
          period: "2026-01",
          countedAt: timestampFromDate(new Date()),
          streakDay: 1,
        }),
      },
    });
    const started = Date.now();
    const inserted = await client.query<{ id: string }>(
      "INSERT INTO outbox (topic, key, type, payload, shard) VALUES ($1, $2, $3, $4, $5) RETURNING id::text",
      [row.topic, row.key, row.type, row.payload, row.shard],
    );
    const outboxId = inserted.rows[0]!.id;
    progress(`poison outbox row ${outboxId} (${row.payload.length} bytes) written for server ${serverId}`);
    for (;;) {
      const dead = await client.query("SELECT code FROM dead_letters WHERE outbox_id = $1", [outboxId]);
      if (dead.rowCount) {
        const seconds = (Date.now() - started) / 1000;
        progress(`poison row moved to dead_letters (${String(dead.rows[0].code)}) after ${seconds.toFixed(1)} s`);
        const { sawNotReady } = await waitReady(sys.live.relay.opsUrl);
        return [
          {
            process: "relay",
            how: `moved the row to dead_letters (${String(dead.rows[0].code)}); the rest of its batch published in the same pass`,
            secondsToReady: seconds,
            sawNotReady,
          },
        ];
      }
      if (Date.now() - started > READY_TIMEOUT_MS) throw new Error("the poison row was not dead-lettered in time");
      await sleep(200);
    }
  } finally {
    await client.end();
  }
}

const FAULTS: Fault[] = [
  { name: "none", description: "baseline: no fault" },
  {
    name: "relay SIGKILL",
    description: "the relay is SIGKILLed mid-stream (possibly between publishing and marking rows) and started again",
    inject: killAndRestart("relay"),
  },
  {
    name: "delivery SIGKILL",
    description: "the delivery service is SIGKILLed mid-stream (callbacks in flight, offsets uncommitted) and started again",
    inject: killAndRestart("delivery"),
  },
  {
    name: "Kafka broker restart",
    description: "the broker is stopped and started again on the same ports and data",
    inject: (sys) => restartDependency(sys, ["relay", "delivery"], "broker", () => sys.broker.restart()),
  },
  {
    name: "PostgreSQL restart",
    description: "PostgreSQL restarts (`pg_ctl restart -m fast`: every connection is cut)",
    inject: (sys) => restartDependency(sys, ["referral-service", "relay", "delivery"], "PostgreSQL", () => sys.pgInstance.restart()),
  },
  {
    name: "receiver fails 15 %",
    description: "the receiver answers 500 to 15 % of the callbacks at random (after verifying them), for the whole phase",
    flaky: true,
  },
  {
    name: "poison outbox row",
    description: "a 2 MB heart outbox row is written by hand (Kafka refuses it: MESSAGE_TOO_LARGE)",
    inject: (sys) => injectPoisonRow(sys),
  },
];

/** The receiver: verifies each callback with node:crypto, pays each heart_id once, fails at random when flaky. */
async function startCampaignReceiver(secrets: Map<string, string>): Promise<{ receiver: Receiver; ledger: ReceiverLedger }> {
  const ledger: ReceiverLedger = { paid: new Map(), invalidSignatures: 0, randomFailures: 0, requests: 0, flaky: false };
  const receiver = await startReceiver({
    fallback: (request) => {
      ledger.requests++;
      const check = checkServerCallback(request, secrets);
      if (!check.ok) {
        ledger.invalidSignatures++;
        return { status: 401, body: check.reason };
      }
      if (ledger.flaky && Math.random() < FLAKY_FAILURE_RATE) {
        ledger.randomFailures++;
        return { status: 500, body: "random failure" };
      }
      if (check.body.event === "heart.counted") {
        const heartId = String(check.body.heart_id);
        ledger.paid.set(heartId, (ledger.paid.get(heartId) ?? 0) + 1);
      }
      return { status: 200, body: "ok" };
    },
  });
  return { receiver, ledger };
}

async function main(): Promise<void> {
  const startedAt = Date.now();
  const machine = machineInfo();
  progress(
    `starting PostgreSQL and Kafka (phase ${PHASE_MS / 1000} s, ${HEARTS_PER_SECOND} hearts/s, ${REFERRALS_PER_SECOND} referrals/s, ${SERVER_COUNT} servers)`,
  );
  const [pgInstance, broker] = await Promise.all([startPostgres(), startKafka()]);
  cleanup.add(() => pgInstance.stop());
  cleanup.add(() => broker.stop());
  const admin = new pg.Client({ connectionString: pgInstance.url });
  await admin.connect();
  await admin.query("CREATE DATABASE faults");
  await admin.end();
  const databaseUrl = withDatabase(pgInstance.url, "faults");
  const { applied } = await applyMigrations(databaseUrl);
  progress(`PostgreSQL on ${new URL(pgInstance.url).port}, Kafka on ${broker.brokers}, ${applied.length} migrations applied`);
  await precreateTopics(broker.brokers);

  const group = createProcessGroup();
  cleanup.add(async () => {
    shuttingDown = true;
    await Promise.all(group.processes.map((p) => p.stop(10_000)));
  });
  const settings: SystemSettings = {
    databaseUrl,
    kafkaBrokers: broker.brokers,
    secretsKey: newSecretsKey(),
    groupId: `faults-${randomBytes(4).toString("hex")}`,
  };
  // Both fixed and outside the ephemeral range: the pay-once phase restarts these processes on their ports.
  const gatewayUrl = `http://127.0.0.1:${await freeRestartablePort()}`;
  const referralServiceUrl = `http://127.0.0.1:${await freeRestartablePort()}`;
  const base = { group, settings, gatewayUrl, referralServiceUrl };
  const referralService = await startRole(base, "referral-service", "referral-service");
  const [gateway, relay, delivery] = await Promise.all([
    startRole(base, "gateway", "gateway"),
    startRole(base, "relay", "relay"),
    startRole(base, "delivery", "delivery"),
  ]);
  const sys: System = {
    pgInstance,
    broker,
    databaseUrl,
    settings,
    group,
    clients: createServiceClients(referralServiceUrl),
    gatewayUrl,
    referralServiceUrl,
    live: { "referral-service": referralService, gateway, relay, delivery },
    crashes: [],
  };
  for (const role of Object.keys(sys.live) as Role[]) watchCrash(sys, role);
  progress(`processes ready (gateway ${gatewayUrl}, referral service ${referralServiceUrl}); phases: ${[...PHASES].join(", ")}`);
  const pipeline = PHASES.has("pipeline") ? await runPipeline(sys) : undefined;
  const payOnce = PHASES.has("pay-once") ? await runPayOnce(sys) : undefined;
  if (pipeline !== undefined) await reportAndWrite(sys, await connectDatabase(sys), pipeline, payOnce, { startedAt, machine });
  else if (payOnce !== undefined) {
    writeFileSync(OUTPUT, withSection(OUTPUT, TITLE, payOnceSection(payOnce)));
    progress(`wrote the pay-once section of ${OUTPUT}`);
  }
  if (payOnce !== undefined) {
    progress(`pay-once: ${payOnce.counted} counted hearts, ${payOnce.paidOnce} paid once, ${payOnce.paidTwice} paid twice, ${payOnce.unpaid} unpaid`);
    if (payOnce.paidTwice > 0) process.exitCode = 1;
  }
}

/** What the pipeline phases measured, for the report. */
interface PipelineRun {
  loads: PhaseLoad[];
  recoveries: Recovery[];
  ledger: ReceiverLedger;
  drainSeconds: number;
  /** The pipeline's servers (the report counts their hearts and deliveries only). */
  serverIds: string[];
}

/** A client of the campaign's database, ended at cleanup (opened after the phases: the PostgreSQL restart would cut it). */
async function connectDatabase(sys: System): Promise<pg.Client> {
  const db = new pg.Client({ connectionString: sys.databaseUrl });
  await db.connect();
  cleanup.add(() => db.end());
  return db;
}

/** The seven pipeline phases, one fault each, then the drain. */
async function runPipeline(sys: System): Promise<PipelineRun> {
  const callbackSecrets = new Map<string, string>();
  const { receiver, ledger } = await startCampaignReceiver(callbackSecrets);
  cleanup.add(() => receiver.close());
  const servers: CampaignServer[] = [];
  for (let i = 0; i < SERVER_COUNT; i++) {
    const { server } = await sys.clients.admin.createServer({ name: `Fault campaign ${i + 1}`, registrationUrl: "https://game.example/register" });
    const id = server!.id;
    await sys.clients.admin.setReferralsEnabled({ serverId: id, enabled: true });
    const { secret: referralSecret } = await sys.clients.admin.createReferralSecret({ serverId: id });
    await sys.clients.admin.setCallbackSettings({ serverId: id, callbackUrl: receiver.url, standardWebhooks: false });
    callbackSecrets.set(id, (await sys.clients.admin.revealCallbackSecret({ serverId: id })).secret);
    servers.push({ id, referralSecret });
  }
  const serverIds = servers.map((s) => s.id);

  const loads: PhaseLoad[] = [];
  const recoveries: Recovery[] = [];
  for (const [index, fault] of FAULTS.entries()) {
    currentPhase = fault.name;
    const load: PhaseLoad = {
      name: fault.name,
      fault: fault.description,
      heartsCast: 0,
      heartRpcRetries: 0,
      heartsGivenUp: 0,
      eventsSent: 0,
      eventsAnswered200: 0,
      eventRetries: 0,
      eventsGivenUp: 0,
      eventsRejected: 0,
      okEventIds: [],
      qualifiedTokens: [],
    };
    loads.push(load);
    progress(`phase ${index + 1}/${FAULTS.length}: ${fault.name}`);
    ledger.flaky = fault.flaky === true;
    const traffic = generateLoad(sys, servers, load, index, PHASE_MS);
    let injected: Promise<void> = Promise.resolve();
    if (fault.inject) {
      const inject = fault.inject;
      injected = sleep(PHASE_MS * FAULT_AT_FRACTION).then(async () => {
        for (const r of await inject(sys, ledger)) recoveries.push({ phase: fault.name, ...r });
      });
    }
    await Promise.all([traffic, injected]);
    ledger.flaky = false;
    progress(
      `phase "${fault.name}" done: ${load.heartsCast} hearts cast (${load.heartRpcRetries} RPC retries), ${load.eventsSent} events sent (${load.eventsAnswered200} answered 200, ${load.eventRetries} retries); receiver paid ${ledger.paid.size} hearts so far`,
    );
  }
  currentPhase = "drain";

  // Drain: every counted heart paid, every delivery delivered.
  const db = await connectDatabase(sys);
  const drainStarted = Date.now();
  let lastLine = 0;
  for (;;) {
    const counted = await db.query<{ id: string }>("SELECT id::text FROM hearts WHERE counted AND server_id = ANY($1::uuid[])", [serverIds]);
    const missing = counted.rows.filter((r) => !ledger.paid.has(r.id)).length;
    const open = await db.query<{ n: string }>("SELECT count(*)::text AS n FROM deliveries WHERE status <> 'delivered' AND server_id = ANY($1::uuid[])", [
      serverIds,
    ]);
    if (missing === 0 && open.rows[0]!.n === "0") break;
    if (Date.now() - lastLine > 5_000) {
      lastLine = Date.now();
      progress(`draining: ${missing} counted hearts not paid yet, ${open.rows[0]!.n} deliveries not delivered`);
    }
    if (Date.now() - drainStarted > DRAIN_MS) {
      progress(`drain timeout after ${DRAIN_MS / 1000} s; reporting what is missing`);
      break;
    }
    await sleep(500);
  }
  return { loads, recoveries, ledger, drainSeconds: (Date.now() - drainStarted) / 1000, serverIds };
}

/** The pay-once phase on the running system (its kills go through killAndRestart, like the pipeline's). */
async function runPayOnce(sys: System): Promise<PayOnceResult> {
  currentPhase = "pay-once";
  progress(`pay-once phase: ${PAY_ONCE_HEARTS} hearts over ${PAY_ONCE_MS / 1000} s on ${SERVER_COUNT} servers`);
  return runPayOncePhase({
    clients: sys.clients,
    gatewayUrl: sys.gatewayUrl,
    databaseUrl: sys.databaseUrl,
    progress,
    killAndRestart: async (role) => {
      const [recovery] = await killAndRestart(role)(sys);
      return recovery?.secondsToReady ?? 0;
    },
    nextHeartNumber: () => state.heartNumber++,
    settings: {
      hearts: PAY_ONCE_HEARTS,
      durationMs: PAY_ONCE_MS,
      drainMs: PAY_ONCE_DRAIN_MS,
      servers: SERVER_COUNT,
      callbackTimeoutMs: E2E_CALLBACK_TIMEOUT_MS,
      pluginTimeScale: PLUGIN_TIME_SCALE,
    },
  });
}

/** Per-phase results from the database (the truth) and the receiver. */
async function reportAndWrite(
  sys: System,
  db: pg.Client,
  pipeline: PipelineRun,
  payOnce: PayOnceResult | undefined,
  run: { startedAt: number; machine: ReturnType<typeof machineInfo> },
): Promise<void> {
  const { loads, recoveries, ledger, serverIds } = pipeline;
  const hearts = await db.query<{ id: string; voter_identity: string; counted: boolean }>(
    "SELECT id::text, voter_identity, counted FROM hearts WHERE server_id = ANY($1::uuid[])",
    [serverIds],
  );
  const deliveries = await db.query<{ heart_id: string; status: string; attempts: number }>(
    "SELECT heart_id::text, status::text, attempts FROM deliveries WHERE server_id = ANY($1::uuid[])",
    [serverIds],
  );
  const attempts = await db.query<{ n: string }>(
    "SELECT count(*)::text AS n FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.server_id = ANY($1::uuid[])",
    [serverIds],
  );
  const deadLetters = await db.query<{ source: string; code: string; n: string }>(
    "SELECT source, code, count(*)::text AS n FROM dead_letters GROUP BY 1, 2 ORDER BY 1, 2",
  );
  const unpublished = await db.query<{ n: string }>("SELECT count(*)::text AS n FROM outbox WHERE published_at IS NULL");
  const deliveryByHeart = new Map(deliveries.rows.map((d) => [d.heart_id, d]));
  const phaseOf = (voter: string) => Number(/^f(\d+)-/.exec(voter)?.[1] ?? -1);

  const heartRows: string[][] = [];
  const totals = { cast: 0, counted: 0, delivered: 0, lost: 0, duplicated: 0, notCounted: 0 };
  for (const [index, load] of loads.entries()) {
    const mine = hearts.rows.filter((h) => phaseOf(h.voter_identity) === index);
    const counted = mine.filter((h) => h.counted);
    const delivered = counted.filter((h) => ledger.paid.has(h.id));
    const lost = counted.length - delivered.length;
    const duplicated = counted.reduce((sum, h) => sum + Math.max(0, (ledger.paid.get(h.id) ?? 0) - 1), 0);
    const failedDeliveries = counted.filter((h) => deliveryByHeart.get(h.id)?.status === "failed").length;
    totals.cast += load.heartsCast;
    totals.counted += counted.length;
    totals.delivered += delivered.length;
    totals.lost += lost;
    totals.duplicated += duplicated;
    totals.notCounted += mine.length - counted.length;
    heartRows.push([
      load.name,
      String(load.heartsCast),
      String(counted.length),
      String(mine.length - counted.length),
      String(delivered.length),
      `**${lost}**`,
      String(duplicated),
      String(failedDeliveries),
      String(load.heartRpcRetries),
    ]);
  }
  heartRows.push([
    "**all**",
    String(totals.cast),
    String(totals.counted),
    String(totals.notCounted),
    String(totals.delivered),
    `**${totals.lost}**`,
    String(totals.duplicated),
    "",
    "",
  ]);

  // Referral events: every event answered 200 has its dedup row; every referral whose qualified was answered 200 is qualified with a credit.
  const eventRows: string[][] = [];
  const eventTotals = { sent: 0, ok: 0, applied: 0, missing: 0, halfApplied: 0 };
  for (const load of loads) {
    const applied = await db.query<{ n: string }>(
      "SELECT count(*)::text AS n FROM referral_events WHERE server_event_id = ANY($1::text[]) AND outcome = 'advanced'",
      [load.okEventIds],
    );
    const recorded = await db.query<{ n: string }>(
      "SELECT count(DISTINCT server_event_id)::text AS n FROM referral_events WHERE server_event_id = ANY($1::text[])",
      [load.okEventIds],
    );
    const half = await db.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM referral_clicks c LEFT JOIN referrals r ON r.id = c.referral_id
       LEFT JOIN referral_credits k ON k.referral_id = r.id
       WHERE c.token = ANY($1::text[]) AND (r.id IS NULL OR r.state::text <> 'qualified' OR k.referral_id IS NULL)`,
      [load.qualifiedTokens],
    );
    const missing = load.okEventIds.length - Number(recorded.rows[0]!.n);
    eventTotals.sent += load.eventsSent;
    eventTotals.ok += load.eventsAnswered200;
    eventTotals.applied += Number(applied.rows[0]!.n);
    eventTotals.missing += missing;
    eventTotals.halfApplied += Number(half.rows[0]!.n);
    eventRows.push([
      load.name,
      String(load.eventsSent),
      String(load.eventsAnswered200),
      String(applied.rows[0]!.n),
      `**${missing}**`,
      `**${half.rows[0]!.n}**`,
      String(load.eventRetries),
      String(load.eventsRejected),
      String(load.eventsGivenUp),
    ]);
  }
  // Each applied transition wrote exactly one outbox row in its transaction.
  const transitions = await db.query<{ n: string }>("SELECT count(*)::text AS n FROM referral_events WHERE outcome = 'advanced'");
  const referralOutbox = await db.query<{ n: string }>("SELECT count(*)::text AS n FROM outbox WHERE type LIKE 'referral.%'");
  eventRows.push([
    "**all**",
    String(eventTotals.sent),
    String(eventTotals.ok),
    String(eventTotals.applied),
    `**${eventTotals.missing}**`,
    `**${eventTotals.halfApplied}**`,
    "",
    "",
    "",
  ]);

  const recoveryRows = recoveries.map((r) => [r.phase, r.process, r.how, r.sawNotReady ? "yes" : "no", r.secondsToReady.toFixed(1)]);
  const crashRows = sys.crashes.map((c) => [c.phase, c.role, c.exit]);
  const ok =
    totals.lost === 0 &&
    eventTotals.missing === 0 &&
    eventTotals.halfApplied === 0 &&
    ledger.invalidSignatures === 0 &&
    transitions.rows[0]!.n === referralOutbox.rows[0]!.n &&
    (payOnce === undefined || payOnce.paidTwice === 0);
  const minutes = ((Date.now() - run.startedAt) / 60_000).toFixed(1);

  const md = `# Reliability

Written by \`npm run faults\` (scripts/faults.ts) on ${run.machine.at.slice(0, 10)}; do not edit by hand, run it again.

**Result: ${totals.lost} of ${totals.counted} counted hearts lost, ${totals.duplicated} duplicated callbacks (a receiver keyed on \`heart_id\` pays once), ${eventTotals.missing} referral events answered 200 but not recorded, ${eventTotals.halfApplied} half-applied referrals, ${ledger.invalidSignatures} callbacks failing signature verification${payOnce === undefined ? "" : `; pay-once: ${payOnce.paidTwice} of ${payOnce.counted} hearts paid twice, ${payOnce.unpaid} unpaid`}.** ${ok ? "Nothing lost, nothing half-applied, nothing paid twice." : "SOMETHING WAS LOST, HALF-APPLIED OR PAID TWICE: see the tables."}

## What ran

The four production processes as separate OS processes (\`services/referral-service/main.ts\`,
\`gateway/main.ts\`, \`services/relay/main.ts\`, \`services/delivery/main.ts\`) on the campaign's own
PostgreSQL cluster (\`scripts/infra/postgres.ts\`) and single-node Kafka broker (\`scripts/infra/kafka.ts\`),
all on 127.0.0.1. ${SERVER_COUNT} game servers, one receiver for their callbacks. Seven phases of ${PHASE_MS / 1000} s, one
fault each, injected ${Math.round(FAULT_AT_FRACTION * 100)} % into the phase while traffic keeps coming:

- hearts: ${HEARTS_PER_SECOND} per second through \`HeartService.CastHeart\` (each from a voter and a /24 of its own); an RPC
  error is retried with the same voter (the 24-hour cooldown makes a retry of a committed heart harmless);
- referrals: ${REFERRALS_PER_SECOND} per second, each a click (\`RecordClick\`) and two signed events (\`registered\`, then \`qualified\`)
  posted to the gateway's public endpoint, retried on 5xx and network errors with the same \`server_event_id\`
  and a fresh signature, as the integration guide tells game-server backends;
- the receiver verifies every callback (\`X-Service-Signature\`, HMAC-SHA256 with node:crypto over the raw
  body, \`t\` equal to the body's \`timestamp\`) and pays each \`heart_id\` once.

Delivery settings: retry schedule \`200ms,500ms,1s,2s,3s,5s\`, callback timeout 2 s (a SIGKILLed delivery
process's leased callbacks are sent again when the lease expires, 32 s later).

| phase | fault |
|---|---|
${loads.map((l) => `| ${l.name} | ${l.fault} |`).join("\n")}

"Counted" and "applied" come from the database (the truth of what the system accepted); "delivered" and
"duplicated" from the receiver. A heart is **lost** when it counted but the receiver never got a verified
callback for it. **Duplicated** counts extra verified callbacks for a \`heart_id\` already paid (at least
once delivery; the contract tells receivers to key on \`heart_id\`).

## Hearts per fault

${markdownTable(["phase", "cast", "counted", "not counted", "delivered", "lost", "duplicated", "deliveries failed", "client RPC retries"], heartRows)}

## Referral events per fault

${markdownTable(["phase", "events sent", "answered 200", "applied (advanced)", "answered 200 but not recorded", "half-applied referrals", "client retries", "answered 4xx", "given up"], eventRows)}

Half-applied: a referral whose \`qualified\` event was answered 200 but that is not \`qualified\` or has no
credit row. Every applied transition wrote its outbox row in the same transaction: ${transitions.rows[0]!.n} transitions,
${referralOutbox.rows[0]!.n} referral outbox rows.

## How each process recovered

${recoveryRows.length > 0 ? markdownTable(["phase", "process", "how", "/readyz seen failing", "seconds to ready"], recoveryRows) : "No fault needed a recovery."}

Seconds to ready: from the start of the fault (the kill, or the restart of the broker or PostgreSQL) until
the process answered \`/readyz\` 200 again, polled every ${READY_POLL_MS} ms.

Processes that exited by themselves (restarted by the campaign, as a supervisor would): ${crashRows.length === 0 ? "none." : `\n\n${markdownTable(["phase", "process", "exit"], crashRows)}`}

## Other figures

- Callbacks received by the receiver: ${ledger.requests}; answered 500 at random in the flaky phase: ${ledger.randomFailures};
  failing verification: ${ledger.invalidSignatures}.
- Delivery attempts recorded: ${attempts.rows[0]!.n}; deliveries not delivered at the end: ${deliveries.rows.filter((d) => d.status !== "delivered").length}.
- Dead letters: ${deadLetters.rows.length === 0 ? "none" : deadLetters.rows.map((d) => `${d.n} from the ${d.source} (${d.code})`).join(", ")}; outbox rows unpublished at the end: ${unpublished.rows[0]!.n}.
- Drain after the last phase: ${pipeline.drainSeconds.toFixed(1)} s. Whole run: ${minutes} min.
- Machine: ${run.machine.nproc} cores (${run.machine.cpuModel}), ${run.machine.memoryGiB} GiB, Node ${run.machine.node}, load average at start ${run.machine.loadAverage.join(" / ")} (shared with other work).

${payOnce === undefined ? "" : `${payOnceSection(payOnce)}\n`}## Running it

\`\`\`sh
npm run faults
FAULTS_PHASES=pay-once npm run faults   # the pay-once phase alone: a few minutes, rewrites its own section only
\`\`\`

Needs what \`npm test\` needs (PostgreSQL server binaries, a JDK for Kafka). It takes about eight minutes,
prints a progress line per step, and exits with status 1 when a heart was lost, an event was half-applied,
a callback failed verification or a pay-once heart was paid twice. Settings (environment): \`FAULTS_PHASES\`
(\`pipeline,pay-once\`), \`FAULTS_PHASE_S\` (20), \`FAULTS_HEARTS_PER_S\` (8), \`FAULTS_REFERRALS_PER_S\` (2),
\`FAULTS_SERVERS\` (4), \`FAULTS_DRAIN_S\` (180), \`FAULTS_PAY_ONCE_HEARTS\` (300), \`FAULTS_PAY_ONCE_S\` (60),
\`FAULTS_PAY_ONCE_DRAIN_S\` (120), \`FAULTS_TIME_LIMIT_S\` (900), \`FAULTS_OUTPUT\` (\`RELIABILITY.md\`).
`;
  // A run without the pay-once phase keeps the previous file's pay-once section.
  writeFileSync(OUTPUT, withKeptSections(md, OUTPUT, payOnce === undefined ? [PAY_ONCE_HEADING] : []));
  progress(
    `wrote ${OUTPUT}: ${totals.counted} counted, ${totals.delivered} delivered, ${totals.lost} lost, ${totals.duplicated} duplicated; events ${eventTotals.ok} answered 200, ${eventTotals.missing} missing, ${eventTotals.halfApplied} half-applied`,
  );
  if (!ok) process.exitCode = 1;
}

await runBench(main, cleanup, progress);
