import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { createRpcClients, type RpcClients } from "../../services/shared/service-clients.js";
import { createServiceTransport } from "../../services/shared/service-transport.js";
import { TEST_SERVICE_TOKEN } from "./service-token.js";
import { createReferralServiceServer } from "../../services/referral-service/server.js";
import { createGatewayServer } from "../../gateway/server.js";
import { createReferralServiceClients } from "../../gateway/clients.js";
import { createLogger } from "../../services/shared/log.js";
import { createMetrics } from "../../services/shared/metrics.js";
import { createSecretBox, type SecretBox } from "../../services/shared/secrets.js";
import type { PrismaClient } from "../../services/shared/db.js";
import { createTestDatabase, type TestDatabase } from "./db.js";

/** Connect clients of every internal service. */
export type ServiceClients = RpcClients;

/** A running referral service (and optionally gateway) on a database of its own. */
export interface TestStack {
  db: TestDatabase;
  prisma: PrismaClient;
  secretBox: SecretBox;
  /** Base URL of the referral service (HTTP/2 cleartext). */
  rpcUrl: string;
  clients: ServiceClients;
  /** Base URL of the public gateway, when started. */
  gatewayUrl: string;
  /** Overridable clock of the whole stack. */
  clock: { now: () => Date };
  close(): Promise<void>;
}

/** Creates Connect clients for a referral service base URL, authenticated with `token` (default: the test admin token). */
export function createServiceClients(baseUrl: string, token: string = TEST_SERVICE_TOKEN): ServiceClients {
  return createRpcClients(createServiceTransport(baseUrl, token, { useBinaryFormat: false }));
}

/**
 * Starts the production wiring in-process on free ports: the referral service
 * (createReferralServiceServer) on a fresh database, and the gateway in front
 * of it unless `gateway: false`.
 */
export async function startStack(opts: { gateway?: boolean; allowInsecureCallbacks?: boolean; callbackTimeoutMs?: number; publicBaseUrl?: string } = {}): Promise<TestStack> {
  const db = await createTestDatabase({ maxConnections: 30 });
  const secretBox = createSecretBox(randomBytes(32));
  const log = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");
  const clock = { now: () => new Date() };
  const now = () => clock.now();
  let gatewayUrl = "";
  const rpc = createReferralServiceServer({
    prisma: db.prisma,
    secretBox,
    log,
    metrics: createMetrics("referral-service"),
    now,
    allowInsecureCallbacks: opts.allowInsecureCallbacks ?? true,
    callbackTimeoutMs: opts.callbackTimeoutMs ?? 10_000,
    get publicBaseUrl() {
      return opts.publicBaseUrl ?? gatewayUrl;
    },
  });
  const rpcPort = await rpc.listen(0);
  const rpcUrl = `http://127.0.0.1:${rpcPort}`;
  let gateway: http.Server | undefined;
  if (opts.gateway !== false) {
    gateway = createGatewayServer({ ...createReferralServiceClients(rpcUrl, TEST_SERVICE_TOKEN), log, metrics: createMetrics("gateway"), now });
    await new Promise<void>((resolve) => gateway!.listen(0, "127.0.0.1", resolve));
    gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
  }
  return {
    db,
    prisma: db.prisma,
    secretBox,
    rpcUrl,
    clients: createServiceClients(rpcUrl),
    gatewayUrl,
    clock,
    async close() {
      if (gateway) {
        gateway.closeAllConnections();
        await new Promise<void>((resolve) => gateway!.close(() => resolve()));
      }
      await rpc.close();
      await db.drop();
    },
  };
}
