/**
 * Shared pieces of the end-to-end tests: start each production process on its own
 * (ports from their "listening" log lines), sign ingest requests and verify reward
 * callbacks independently with node:crypto, and read Prometheus counters.
 */
import { createHmac, randomBytes } from "node:crypto";
import type { ExecutionContext } from "ava";
import { expectedCallbackMac, hexEquals, parseCallbackSignature } from "./delivery-harness.js";
import { headerOf, type RecordedRequest } from "./receiver.js";
import { jsonLines, type ManagedProcess, type ProcessGroup } from "./processes.js";
import { TEST_SERVICE_TOKEN } from "./service-token.js";
import { HEARTS_TOPIC, REFERRALS_TOPIC } from "../../services/shared/adapters/bus.js";
import { ensureTopics } from "../../services/shared/adapters/kafka-bus.js";

/** A fresh SECRETS_KEY (32 random bytes, base64), shared by the processes that open sealed secrets. */
export function newSecretsKey(): string {
  return randomBytes(32).toString("base64");
}

/**
 * Creates the system's topics before the processes start, retrying transient broker
 * errors. The relay and the delivery service each create them at boot, and on a fresh
 * (or loaded) broker two concurrent creations can fail one process's start with
 * "This server does not host this topic-partition" (reported to the lead); the e2e
 * tests are about what happens after boot, so they take that race out.
 */
export async function precreateTopics(brokers: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await ensureTopics(brokers.split(","), [HEARTS_TOPIC, REFERRALS_TOPIC]);
      return;
    } catch (error) {
      // Failure policy: a just-started broker may not serve metadata yet; retry a few times, then fail the setup.
      if (attempt >= 10) throw error;
      await new Promise((resolve) => setTimeout(resolve, 300 * attempt));
    }
  }
}

/** Waits for the first pino line whose msg starts with `msgPrefix` and returns it parsed. */
export async function waitForLogLine(proc: ManagedProcess, msgPrefix: string, timeoutMs = 30_000): Promise<Record<string, unknown>> {
  const escaped = msgPrefix.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  // Up to the newline, so a line still arriving in pieces is never parsed half-written.
  const [, line] = await proc.waitForOutput(new RegExp(`^(\\{.*"msg":"${escaped}.*)\n`, "m"), timeoutMs);
  return JSON.parse(line!) as Record<string, unknown>;
}

/** A started service process and its addresses. */
export interface ServiceProcess {
  proc: ManagedProcess;
  /** Base URL of the ops endpoints (/healthz, /readyz, /metrics). */
  opsUrl: string;
}

/** Settings every back-end process of one system shares. */
export interface SystemSettings {
  databaseUrl: string;
  kafkaBrokers: string;
  secretsKey: string;
  /** Unique per test file, so files never share (and steal from) a consumer group. */
  groupId: string;
  logLevel?: string;
}

/** Starts the referral service on OPS_PORT=0/PORT=0 and waits until /readyz is 200. */
export async function startReferralServiceProcess(
  group: ProcessGroup,
  s: SystemSettings,
  opts: { publicBaseUrl?: string; env?: Record<string, string> } = {},
): Promise<ServiceProcess & { rpcUrl: string }> {
  const proc = group.spawn({
    name: "referral-service",
    file: "services/referral-service/main.ts",
    env: {
      DATABASE_URL: s.databaseUrl,
      SECRETS_KEY: s.secretsKey,
      PORT: "0",
      OPS_PORT: "0",
      PUBLIC_BASE_URL: opts.publicBaseUrl ?? "http://127.0.0.1:8080",
      ALLOW_INSECURE_CALLBACKS: "true",
      // The shared test token as the bootstrap admin token, so a database not made by createTestDatabase
      // (for example the fault campaign's) is callable too; on test databases it is already there.
      ADMIN_SERVICE_TOKEN: TEST_SERVICE_TOKEN,
      LOG_LEVEL: s.logLevel ?? "info",
      ...opts.env,
    },
  });
  const listening = await waitForLogLine(proc, "referral service listening");
  const opsUrl = `http://127.0.0.1:${String(listening.opsPort)}`;
  await proc.waitReady(`${opsUrl}/readyz`);
  return { proc, opsUrl, rpcUrl: `http://127.0.0.1:${String(listening.port)}` };
}

/** Starts the public gateway on `port` in front of `referralServiceUrl` and waits until /readyz is 200. */
export async function startGatewayProcess(
  group: ProcessGroup,
  opts: { port: number; referralServiceUrl: string; logLevel?: string; env?: Record<string, string> },
): Promise<ServiceProcess & { url: string }> {
  const proc = group.spawn({
    name: "gateway",
    file: "gateway/main.ts",
    // The shared test token (seeded into every test database; scripts/harness/service-token.ts) unless `env` says otherwise.
    env: {
      PORT: String(opts.port),
      OPS_PORT: "0",
      HOST: "127.0.0.1",
      REFERRAL_SERVICE_URL: opts.referralServiceUrl,
      REFERRAL_SERVICE_TOKEN: TEST_SERVICE_TOKEN,
      LOG_LEVEL: opts.logLevel ?? "info",
      ...opts.env,
    },
  });
  const url = `http://127.0.0.1:${opts.port}`;
  const listening = await waitForLogLine(proc, "gateway listening");
  await proc.waitReady(`${url}/readyz`);
  return { proc, opsUrl: `http://127.0.0.1:${String(listening.opsPort)}`, url };
}

/** Starts the outbox relay and waits until /readyz is 200. */
export async function startRelayProcess(group: ProcessGroup, s: SystemSettings, name = "relay"): Promise<ServiceProcess> {
  const proc = group.spawn({
    name,
    file: "services/relay/main.ts",
    env: { DATABASE_URL: s.databaseUrl, KAFKA_BROKERS: s.kafkaBrokers, OPS_PORT: "0", RELAY_POLL_INTERVAL_MS: "20", LOG_LEVEL: s.logLevel ?? "info" },
  });
  const listening = await waitForLogLine(proc, "relay publishing");
  const opsUrl = `http://127.0.0.1:${String(listening.opsPort)}`;
  await proc.waitReady(`${opsUrl}/readyz`);
  return { proc, opsUrl };
}

/** The compressed retry schedule of the e2e tests (about 12 s in all instead of two days). */
export const E2E_RETRY_SCHEDULE = "200ms,500ms,1s,2s,3s,5s";
/** The callback timeout of the delivery processes the e2e tests (and the fault campaign) start. */
export const E2E_CALLBACK_TIMEOUT_MS = 2_000;

/** Starts the delivery service (consumer + dispatcher) and waits until /readyz is 200; `env` overrides or adds settings. */
export async function startDeliveryProcess(
  group: ProcessGroup,
  s: SystemSettings,
  name = "delivery",
  env: Record<string, string> = {},
): Promise<ServiceProcess> {
  const proc = group.spawn({
    name,
    file: "services/delivery/main.ts",
    env: {
      DATABASE_URL: s.databaseUrl,
      KAFKA_BROKERS: s.kafkaBrokers,
      SECRETS_KEY: s.secretsKey,
      OPS_PORT: "0",
      KAFKA_GROUP_ID: s.groupId,
      DELIVERY_RETRY_SCHEDULE: E2E_RETRY_SCHEDULE,
      DELIVERY_POLL_INTERVAL_MS: "50",
      CALLBACK_TIMEOUT_MS: String(E2E_CALLBACK_TIMEOUT_MS),
      ALLOW_INSECURE_CALLBACKS: "true",
      LOG_LEVEL: s.logLevel ?? "info",
      ...env,
    },
  });
  // Logged after the consumer subscribed and the dispatcher started.
  const listening = await waitForLogLine(proc, "delivery consuming and dispatching", 60_000);
  const opsUrl = `http://127.0.0.1:${String(listening.opsPort)}`;
  await proc.waitReady(`${opsUrl}/readyz`);
  return { proc, opsUrl };
}

/** Unix seconds now. */
export const unixNow = (): number => Math.floor(Date.now() / 1000);

/**
 * The contract's ingest header, computed here with node:crypto (not the project's signer):
 * `t=<unix>,v1=sha256=<hex of HMAC_SHA256(secret, "<t>.<rawBody>")>`.
 */
export function signIngest(secret: string, t: number, rawBody: string): string {
  const hex = createHmac("sha256", secret).update(`${t}.${rawBody}`).digest("hex");
  return `t=${t},v1=sha256=${hex}`;
}

/** POSTs a signed event to the gateway; returns status and parsed JSON body. */
export async function postSignedEvent(
  gatewayUrl: string,
  secret: string,
  body: Record<string, unknown>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const raw = JSON.stringify(body);
  const response = await fetch(`${gatewayUrl}/api/referral/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-signature": signIngest(secret, unixNow(), raw) },
    body: raw,
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** What checking a callback request found. */
export type CallbackCheck = { ok: true; body: Record<string, unknown> } | { ok: false; reason: string };

/**
 * Verifies a reward callback as a receiver would, independently of the project's code:
 * `X-Service-Signature: t=<unix>,v1=<bare hex>`, the MAC is HMAC_SHA256(secret, "<t>.<raw body>")
 * over the exact bytes received (constant-time compare), and `t` equals the body's `timestamp`.
 */
export function checkCallback(request: RecordedRequest, secret: string): CallbackCheck {
  const header = headerOf(request, "x-service-signature");
  const parsed = parseCallbackSignature(header);
  if (!parsed) return { ok: false, reason: `malformed signature header ${header}` };
  const expected = expectedCallbackMac(secret, parsed.t, request.body);
  if (!parsed.v1.some((mac) => hexEquals(mac, expected))) return { ok: false, reason: "no v1 matches HMAC_SHA256(secret, t.body)" };
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(request.text) as Record<string, unknown>;
  } catch {
    // Failure policy: an unparseable body is a failed check, reported with its reason.
    return { ok: false, reason: "body is not JSON" };
  }
  if (body.timestamp !== parsed.t) return { ok: false, reason: `t=${parsed.t} differs from body.timestamp=${String(body.timestamp)}` };
  return { ok: true, body };
}

/**
 * checkCallback for a receiver shared by several servers: the body's `server_id` picks the secret
 * (an unknown or unreadable one checks against no secret, so it fails).
 */
export function checkServerCallback(request: Omit<RecordedRequest, "response">, secrets: ReadonlyMap<string, string>): CallbackCheck {
  let serverId = "";
  try {
    serverId = String((JSON.parse(request.text) as { server_id?: unknown }).server_id);
  } catch {
    // Failure policy: an unparseable body cannot name its server; checkCallback below rejects it.
  }
  return checkCallback({ ...request, response: {} }, secrets.get(serverId) ?? "");
}

/**
 * A receiver's reward logic, keyed on heart_id as the contract asks: it verifies each
 * callback, pays a heart_id once, and counts duplicates and rejects.
 */
export interface PaymentLedger {
  /** heart_id -> number of verified heart.counted callbacks received for it. */
  received: Map<string, number>;
  /** heart_ids paid (each once). */
  paid: Set<string>;
  /** Callbacks that failed verification (answered 401). */
  rejected: string[];
  /** Requests received but not answered yet (answers are delayed by `answerDelayMs`). */
  readonly unanswered: number;
  /** The receiver's responder: verify, pay once, answer 200 (after `answerDelayMs`). */
  respond(request: Omit<RecordedRequest, "response">): { status: number; body: string; delayMs?: number };
}

/**
 * A ledger for one server's callback secret (read lazily, so it can be set after the
 * receiver starts). With `answerDelayMs`, the receiver pays on arrival and answers later,
 * so a sender that dies in between leaves a paid heart it will send again.
 */
export function createPaymentLedger(secretOf: () => string, opts: { answerDelayMs?: number } = {}): PaymentLedger {
  const delayMs = opts.answerDelayMs ?? 0;
  let unanswered = 0;
  const ledger: PaymentLedger = {
    received: new Map(),
    paid: new Set(),
    rejected: [],
    get unanswered() {
      return unanswered;
    },
    respond(request) {
      if (delayMs > 0) {
        unanswered++;
        setTimeout(() => unanswered--, delayMs);
      }
      const check = checkCallback({ ...request, response: {} }, secretOf());
      if (!check.ok) {
        ledger.rejected.push(check.reason);
        return { status: 401, body: check.reason, ...(delayMs > 0 ? { delayMs } : {}) };
      }
      const heartId = String(check.body.heart_id);
      if (check.body.event === "heart.counted") {
        ledger.received.set(heartId, (ledger.received.get(heartId) ?? 0) + 1);
        ledger.paid.add(heartId);
      }
      return { status: 200, body: "ok", ...(delayMs > 0 ? { delayMs } : {}) };
    },
  };
  return ledger;
}

/** Sums the samples of a Prometheus counter whose labels include every pair in `labels`. */
export function counterValue(metricsText: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of metricsText.split("\n")) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ([0-9.eE+-]+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found: Record<string, string> = {};
    for (const pair of (match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) found[pair[1]!] = pair[2]!;
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) sum += Number(match[3]);
  }
  return sum;
}

/** GETs a /metrics page. */
export async function fetchMetrics(opsUrl: string): Promise<string> {
  const response = await fetch(`${opsUrl}/metrics`);
  if (response.status !== 200) throw new Error(`${opsUrl}/metrics answered ${response.status}`);
  return response.text();
}

/** The `problems` of the fatal config line a process printed on stdout (undefined when none). */
export function configProblems(stdout: string): string[] | undefined {
  const line = jsonLines(stdout).find((l) => Array.isArray(l.problems));
  return line ? (line.problems as string[]) : undefined;
}

/** Fails the test with every process's output when `t` failed (for hooks-owned processes). */
export function dumpOnFailure<Context>(t: ExecutionContext<Context>, group: ProcessGroup | undefined): void {
  if (!t.passed && group) group.dump(`test failed: ${t.title}`);
}
