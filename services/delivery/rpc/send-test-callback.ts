import { periodOf } from "../../shared/values/period.js";
import type { CoreDeps } from "../../shared/adapters/deps.js";
import { DomainError } from "../../shared/rpc/errors.js";
import type { AttemptExchange } from "../pipeline/attempt-exchange.js";
import { createCallbackTransport } from "../pipeline/callback-transport.js";
import { LEASE_MARGIN_MS } from "../pipeline/lease.js";
import { performAttempt } from "../pipeline/perform-attempt.js";
import type { RetrySchedule } from "../pipeline/retry-schedule.js";
import { loadCallbackSecrets } from "../../servers/active-secrets.js";
import { insertTestDelivery } from "../pipeline/insert-deliveries.js";
import { WITH_ENDPOINT_URL, type DeliveryWithEndpoint } from "./read-deliveries.js";
import { findEndpoint } from "../../servers/endpoint-store.js";
import { HEART_COOLDOWN_MS } from "../../hearts/domain/streak.js";
import type { PlatformIds } from "../../shared/values/player-ids.js";
import type { RewardCountsPayload } from "../pipeline/delivery-types.js";

/** Username of a test callback (and test vote) when the owner gives none. */
export const TEST_CALLBACK_USERNAME = "TestPlayer";

/**
 * The sample platform ids a test callback carries (a version-2 endpoint's body shows them; a
 * version-1 body has no such fields): well-formed public example ids, never a real voter's.
 */
export const TEST_CALLBACK_PLATFORM_IDS: Readonly<PlatformIds> = Object.freeze({
  steamId: "76561197960287930",
  discordId: "80351110224678912",
  minecraftUuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5",
  accountId: "test-account",
});

/** The sample reward counts a test callback carries (a version-3 endpoint's body shows them). */
export const TEST_CALLBACK_REWARD_COUNTS: Readonly<RewardCountsPayload> = Object.freeze({ weight: 1, month_total: 3, total: 12, reward_streak: 2 });

/** What a test callback needs beyond the core deps. */
export interface SendTestCallbackDeps extends CoreDeps {
  /** The development flag: http callback URLs and private addresses allowed. */
  allowInsecureCallbacks: boolean;
  /** Timeout of a test callback (the same as real callbacks: CALLBACK_TIMEOUT_MS). */
  callbackTimeoutMs: number;
  /** Retry schedule of test callbacks (DELIVERY_RETRY_SCHEDULE). */
  retrySchedule: RetrySchedule;
}

/**
 * Sends a `heart.test` callback to the callback URL of the server's default endpoint (or of the
 * endpoint `endpointId`) as a delivery like any other: stored, first attempt here and now, retried
 * by the dispatcher. `serverId` is an existing server; `username` is bounded (TEST_CALLBACK_USERNAME
 * when blank). Returns the attempt's exchange and the stored delivery.
 */
export async function sendTestCallback(
  deps: SendTestCallbackDeps,
  serverId: string,
  username: string,
  endpointId = "",
): Promise<{ exchange: AttemptExchange; delivery: DeliveryWithEndpoint }> {
  const endpoint = await findEndpoint(deps.prisma, serverId, endpointId);
  if (!endpoint.url) throw new DomainError("failed_precondition", "no callback URL configured: set one in the integration tab first");
  const now = deps.now();
  const secrets = await loadCallbackSecrets(deps.prisma, deps.secretBox, endpoint.id, now);
  if (secrets.length === 0) throw new DomainError("failed_precondition", "no active callback secret: rotate the callback secret to create one");
  // A delivery like any other: stored, first attempt here and now (leased to this call), retried by the dispatcher.
  const delivery = await insertTestDelivery(deps.prisma, {
    serverId,
    endpointId: endpoint.id,
    username: username.trim() === "" ? TEST_CALLBACK_USERNAME : username,
    period: periodOf(now),
    now,
    leaseUntil: new Date(now.getTime() + deps.callbackTimeoutMs + LEASE_MARGIN_MS),
    callbackUrl: endpoint.url,
    standardWebhooks: endpoint.standardWebhooks,
    publicKeySignatures: endpoint.publicKeySignatures,
    payloadVersion: endpoint.payloadVersion,
    platformIds: TEST_CALLBACK_PLATFORM_IDS,
    nextEligibleAt: new Date(now.getTime() + HEART_COOLDOWN_MS),
    rewardCounts: TEST_CALLBACK_REWARD_COUNTS,
  });
  const attemptDeps = { ...deps, schedule: deps.retrySchedule, timeoutMs: deps.callbackTimeoutMs, allowInsecure: deps.allowInsecureCallbacks };
  const report = await performAttempt(attemptDeps, createCallbackTransport(attemptDeps), delivery);
  // Failure policy: the secret was revoked between the check and the attempt; the delivery stays pending, held like any other.
  if (report.kind === "released") throw new DomainError("failed_precondition", "no active callback secret: rotate the callback secret to create one");
  const stored = await deps.prisma.delivery.findUniqueOrThrow({ where: { id: delivery.id }, include: WITH_ENDPOINT_URL });
  return { exchange: report.outcome.exchange, delivery: stored };
}
