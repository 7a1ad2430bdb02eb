/**
 * Test harness for the referral and server-admin RPCs (on startStack, the tests' one
 * stack builder): a fresh database cloned from the migrated template, the production
 * referral service server (createReferralServiceServer) on a free port, real Connect clients, and a clock
 * the test moves by hand.
 */
import { type Code, ConnectError, type Client } from "@connectrpc/connect";
import { ReferralEventType, type ReferralService } from "../../gen/proto/referral/v1/referral_pb.js";
import type { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";
import type { ApplyEventBatchOptions } from "../../services/referral/apply-event.js";
import type { ServerAdminDeps } from "../../services/servers/routes.js";
import { unparkDeliveries } from "../../services/delivery/pipeline/write-deliveries.js";
import { ERROR_KIND_HEADER, illegalTransitionOf } from "../../services/shared/rpc/errors.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import type { TestDatabase } from "./db.js";
import { startStack } from "./stack.js";

/** A clock the test sets and advances. */
export interface TestClock {
  now(): Date;
  set(at: Date | string): void;
  advanceSeconds(seconds: number): void;
}

/** Creates a clock starting at `start`. */
export function createTestClock(start: Date | string = "2024-05-15T12:00:00.000Z"): TestClock {
  let current = new Date(start);
  return {
    now: () => new Date(current),
    set: (at) => void (current = new Date(at)),
    advanceSeconds: (seconds) => void (current = new Date(current.getTime() + seconds * 1000)),
  };
}

/** A running harness. */
export interface Harness {
  db: TestDatabase;
  deps: ServerAdminDeps;
  clock: TestClock;
  referral: Client<typeof ReferralService>;
  admin: Client<typeof ServerAdminService>;
  close(): Promise<void>;
}

/** Starts the harness; `close()` stops the server and drops the database. */
export async function startHarness(
  opts: { allowInsecureCallbacks?: boolean; maxConnections?: number; applyEventBatch?: ApplyEventBatchOptions } = {},
): Promise<Harness> {
  const clock = createTestClock();
  const log = createLogger("test", process.env.LOG_LEVEL ?? "silent");
  const now = () => clock.now();
  // The production wiring: every route, the interceptor and the HTTP/2 server of the referral service.
  const stack = await startStack({
    gateway: false,
    log,
    now,
    maxConnections: opts.maxConnections ?? 20,
    allowInsecureCallbacks: opts.allowInsecureCallbacks ?? false,
    callbackTimeoutMs: 2_000,
    publicBaseUrl: "http://127.0.0.1:9",
    ...(opts.applyEventBatch ? { applyEventBatch: opts.applyEventBatch } : {}),
  });
  const deps: ServerAdminDeps = {
    prisma: stack.prisma,
    secretBox: stack.secretBox,
    log,
    now,
    releaseHeld: unparkDeliveries,
    ...(opts.allowInsecureCallbacks !== undefined ? { allowInsecureCallbacks: opts.allowInsecureCallbacks } : {}),
  };
  return {
    db: stack.db,
    deps,
    clock,
    referral: stack.clients.referral,
    admin: stack.clients.admin,
    close: () => stack.close(),
  };
}

/** Creates a server with referrals enabled and one referral secret. */
export async function createReferralServer(
  h: Harness,
  name = "Test Server",
  registrationUrl = "https://game.example/register",
): Promise<{ serverId: string; secret: string; kid: string }> {
  const { server } = await h.admin.createServer({ name, registrationUrl });
  if (!server) throw new Error("no server returned");
  await h.admin.setReferralsEnabled({ serverId: server.id, enabled: true });
  const created = await h.admin.createReferralSecret({ serverId: server.id });
  return { serverId: server.id, secret: created.secret, kid: created.info?.kid ?? "" };
}

/** Records a click and returns its token. */
export async function clickToken(h: Harness, serverId: string, referrerIdentity: string): Promise<string> {
  const res = await h.referral.recordClick({ serverId, referrerIdentity, ip: "203.0.113.7", userAgent: "test" });
  return res.token;
}

const EVENT_TYPES = {
  registered: ReferralEventType.REGISTERED,
  qualified: ReferralEventType.QUALIFIED,
  reversed: ReferralEventType.REVERSED,
} as const;

/** Calls ApplyEvent with an event name. */
export function applyEvent(
  h: Harness,
  e: { serverId: string; event: keyof typeof EVENT_TYPES; token: string; serverEventId: string; refereeIdentity?: string },
) {
  return h.referral.applyEvent({
    serverId: e.serverId,
    event: EVENT_TYPES[e.event],
    token: e.token,
    serverEventId: e.serverEventId,
    refereeIdentity: e.refereeIdentity ?? "",
  });
}

/** Awaits a rejected RPC and returns its ConnectError. */
export async function rpcError(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (error) {
    return ConnectError.from(error);
  }
  throw new Error("expected the RPC to fail");
}

/** The details the gateway reads from an error: code, message, kind and the transition detail. */
export function errorDetails(error: ConnectError): { code: Code; message: string; kind: string | null; from: string | null; event: string | null } {
  const transition = illegalTransitionOf(error);
  return {
    code: error.code,
    message: error.rawMessage,
    kind: error.metadata.get(ERROR_KIND_HEADER),
    from: transition?.from ?? null,
    event: transition?.event ?? null,
  };
}
