/**
 * A real stack for the gateway's integration tests (startStack, the tests' one stack builder):
 * a database of its own (cloned from the migrated template), the referral service on a free
 * port, and the gateway on another, talking Connect over HTTP/2 exactly as in production,
 * with captured logs and helpers to create servers and send (signed) requests. Nothing is mocked.
 */
import { randomBytes } from "node:crypto";
import { createReferralServiceClients, type ReferralServiceClients } from "../../gateway/clients.js";
import type { ApplyEventBatchOptions } from "../../services/referral/apply-event.js";
import { createMetrics, type Metrics } from "../../services/shared/runtime/metrics.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import type { TestDatabase } from "../../scripts/harness/db.js";
import type { GatewayDeps } from "../../gateway/server.js";
import { startStack } from "../../scripts/harness/stack.js";
import { captureLog, type CapturedLog } from "../helpers/capture-log.js";

/** The captured logger lives in test/helpers/capture-log.ts; re-exported for the gateway tests. */
export { captureLog, type CapturedLog };

/** A server created through the admin RPCs, with referrals enabled and one referral secret. */
export interface TestServer {
  serverId: string;
  secret: string;
  kid: string;
}

/** A raw HTTP answer. */
export interface RawResponse {
  status: number;
  text: string;
  headers: Headers;
}

/** The running stack plus helpers to create servers, record clicks and send (signed) requests. */
export interface GatewayStack {
  db: TestDatabase;
  clients: ReferralServiceClients;
  /** The referral service's own URL (Connect, gRPC, gRPC-Web over HTTP/2). */
  serviceUrl: string;
  baseUrl: string;
  gatewayLog: CapturedLog;
  serviceLog: CapturedLog;
  gatewayMetrics: Metrics;
  /** Creates a server; `referrals: false` leaves referrals disabled, `secret: false` creates no secret. */
  createServer(opts?: { registrationUrl?: string; referrals?: boolean; secret?: boolean }): Promise<TestServer>;
  /** Records a click through the RPC and returns its token. */
  click(serverId: string, referrer?: string): Promise<string>;
  /** POSTs raw bytes to the ingest endpoint with the given headers. */
  postRaw(body: string | Buffer, headers?: Record<string, string>): Promise<RawResponse>;
  /** Signs `body` (a JSON object or exact text) with the server's secret and POSTs it. */
  postSigned(server: Pick<TestServer, "secret">, body: unknown, opts?: { t?: number; kid?: string; headers?: Record<string, string> }): Promise<RawResponse>;
  close(): Promise<void>;
}

/** Unix seconds now. */
export const nowSeconds = (): number => Math.floor(Date.now() / 1000);

/**
 * Starts database + referral service + gateway. `gatewayOverrides` replaces parts of
 * the gateway's deps (for example a `referral` client pointing at a dead port).
 */
export async function startGatewayStack(
  opts: {
    gatewayOverrides?: (ctx: { clients: ReferralServiceClients; metrics: Metrics }) => Partial<GatewayDeps>;
    /** ApplyEvent's group-commit bounds in the referral service (tests of overload shrink them). */
    applyEventBatch?: ApplyEventBatchOptions;
  } = {},
): Promise<GatewayStack> {
  const serviceLog = captureLog("debug");
  const gatewayLog = captureLog("debug");
  const stack = await startStack({
    gateway: false,
    log: serviceLog.log,
    maxConnections: 10,
    callbackTimeoutMs: 2_000,
    publicBaseUrl: "http://127.0.0.1:9",
    ...(opts.applyEventBatch ? { applyEventBatch: opts.applyEventBatch } : {}),
  });
  const clients = createReferralServiceClients(stack.rpcUrl, TEST_SERVICE_TOKEN);
  const gatewayMetrics = createMetrics("gateway-test");
  const { url: baseUrl } = await stack.startGateway({
    log: gatewayLog.log,
    metrics: gatewayMetrics,
    // The ingest tests check every request's own key lookup; the cache has tests of its own.
    overrides: (ctx) => ({ signingKeyCacheMs: 0, ...opts.gatewayOverrides?.(ctx) }),
  });

  const postRaw = async (body: string | Buffer, headers: Record<string, string> = {}): Promise<RawResponse> => {
    const res = await fetch(`${baseUrl}/api/referral/events`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : new Uint8Array(body),
    });
    return { status: res.status, text: await res.text(), headers: res.headers };
  };

  return {
    db: stack.db,
    clients,
    serviceUrl: stack.rpcUrl,
    baseUrl,
    gatewayLog,
    serviceLog,
    gatewayMetrics,
    async createServer(o = {}) {
      const created = await clients.admin.createServer({ name: `server-${randomBytes(3).toString("hex")}`, registrationUrl: o.registrationUrl ?? "" });
      const serverId = created.server?.id ?? "";
      if (o.referrals !== false) await clients.admin.setReferralsEnabled({ serverId, enabled: true });
      if (o.secret === false) return { serverId, secret: "", kid: "" };
      const secret = await clients.admin.createReferralSecret({ serverId });
      return { serverId, secret: secret.secret, kid: secret.info?.kid ?? "" };
    },
    async click(serverId, referrer = "referrer-1") {
      return (await clients.referral.recordClick({ serverId, referrerIdentity: referrer })).token;
    },
    postRaw,
    async postSigned(server, body, o = {}) {
      const raw = typeof body === "string" ? body : JSON.stringify(body);
      const header = formatIngestSignature(server.secret, o.t ?? nowSeconds(), raw, o.kid);
      return postRaw(raw, { "x-service-signature": header, ...o.headers });
    },
    close: () => stack.close(),
  };
}
