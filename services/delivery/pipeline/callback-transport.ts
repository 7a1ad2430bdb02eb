import type { PrismaClient } from "../../shared/adapters/db.js";
import type { Logger } from "../../shared/runtime/log.js";
import type { SecretBox } from "../../shared/runtime/secrets.js";
import { streakAtDelivery } from "../../hearts/domain/streak.js";
import { GONE_ERROR, sendCallback, signCallback, toHttpExchange, type CallbackAgents, type HeartEventType } from "./send-callback.js";
import { loadCallbackSecrets } from "../../servers/active-secrets.js";
import { createSigningKeyReader, type CurrentSigningKey } from "../../servers/webhook-signing-keys.js";
import type { ClaimedDelivery } from "./claim-deliveries.js";
import type { Transport } from "./transport.js";

/** Opened callback secrets kept at most by one transport (then the cache starts afresh). */
const MAX_OPENED_SECRETS = 10_000;

/**
 * The signed HTTP reward callback as a transport. A delivery claimed with its server's sealed
 * secrets and its voter's streak (claimDueDeliveries reads both) costs no further reads, and a
 * sealed secret is opened once per transport (keyed by its ciphertext, so a rotated secret, a
 * new ciphertext, is opened and used at the next claim); otherwise both are read here. With
 * `agents` callbacks go over keep-alive pools per destination. A server opted in to public-key
 * signatures gets the `v1a` signature by the list's current key (`signingKey`, by default read
 * through a short cache: createSigningKeyReader).
 */
export function createCallbackTransport(deps: {
  prisma: PrismaClient;
  secretBox: SecretBox;
  log: Logger;
  now: () => Date;
  timeoutMs: number;
  allowInsecure: boolean;
  agents?: CallbackAgents;
  /** The list's current ed25519 signing key; default: read from the database through a short cache. */
  signingKey?: () => Promise<CurrentSigningKey>;
}): Transport {
  const signingKey = deps.signingKey ?? createSigningKeyReader(deps);
  const opened = new Map<string, string>();
  const open = (sealed: string): string => {
    let secret = opened.get(sealed);
    if (secret === undefined) {
      secret = deps.secretBox.open(sealed);
      if (opened.size >= MAX_OPENED_SECRETS) opened.clear();
      opened.set(sealed, secret);
    }
    return secret;
  };
  const secretsOf = (delivery: ClaimedDelivery): Promise<string[]> | string[] =>
    delivery.sealedCallbackSecrets
      ? delivery.sealedCallbackSecrets.map(open)
      : delivery.endpointId === null
        ? []
        : loadCallbackSecrets(deps.prisma, deps.secretBox, delivery.endpointId, deps.now());
  const streakOf = async (delivery: ClaimedDelivery, at: Date): Promise<number | undefined> =>
    delivery.voterStreak !== undefined
      ? streakAtDelivery(delivery.voterStreak, at)
      : readStreakAtDelivery(deps.prisma, delivery.serverId, delivery.voterIdentity, at);
  return {
    async send(delivery) {
      const url = delivery.callbackUrl;
      const secrets = await secretsOf(delivery);
      // The secret was revoked (or the URL removed) after the claim: hold the delivery like any server without them.
      if (url === null || secrets.length === 0) return { kind: "held", reason: "no callback URL or no active callback secret" };
      const startedAt = deps.now();
      let streakDay: number | undefined;
      try {
        // heart.test has no voter: never a streak_day.
        if (delivery.eventType === "heart.counted") streakDay = await streakOf(delivery, startedAt);
      } catch (error) {
        // Failure policy: streak_day is optional; when it cannot be read the field is omitted rather than the callback delayed.
        deps.log.warn({ err: error, deliveryId: delivery.id }, "streak unavailable; omitting streak_day");
      }
      // Failure policy: the key cannot be read (database away): this throws, the lease expires and the delivery is claimed again later.
      const key = delivery.publicKeySignatures ? await signingKey() : undefined;
      const signed = signCallback({
        url,
        fields: delivery.event
          ? { event: delivery.event.event, payload: delivery.event }
          : {
              event: delivery.eventType as HeartEventType,
              serverId: delivery.serverId,
              username: delivery.username,
              heartId: delivery.heartId,
              period: delivery.period,
              ...(streakDay === undefined ? {} : { streakDay }),
              // The endpoint's pinned payload version picks the body; anything but 2 or 3 is the contract's (version 1).
              ...(delivery.payloadVersion === 2 || delivery.payloadVersion === 3
                ? { v2: { castAt: delivery.countedAt, nextEligibleAt: delivery.nextEligibleAt, platformIds: delivery.platformIds } }
                : {}),
              ...(delivery.payloadVersion === 3 ? { v3: { rewardCounts: delivery.rewardCounts } } : {}),
            },
        secretsNewestFirst: secrets,
        standardWebhooks: delivery.standardWebhooks,
        ...(key ? { signingKey: key.privateKey } : {}),
        t: Math.floor(startedAt.getTime() / 1000),
      });
      const outcome = await sendCallback(signed, {
        timeoutMs: deps.timeoutMs,
        allowInsecure: deps.allowInsecure,
        now: deps.now,
        ...(deps.agents ? { agents: deps.agents } : {}),
      });
      const exchange = { ...toHttpExchange(signed, outcome), signedString: signed.canonicalString };
      switch (outcome.kind) {
        case "delivered":
          return { kind: "delivered", target: url, statusCode: outcome.status, latencyMs: outcome.latencyMs, exchange };
        case "gone":
          return { kind: "gone", target: url, statusCode: 410, latencyMs: outcome.latencyMs, error: GONE_ERROR, exchange };
        case "failed":
          return {
            kind: "failed",
            target: url,
            statusCode: outcome.status ?? null,
            error: outcome.error,
            latencyMs: outcome.latencyMs,
            exchange,
            ...(outcome.retryAfterMs === undefined ? {} : { retryAfterMs: outcome.retryAfterMs }),
          };
      }
    },
  };
}

/**
 * The voter's streak at delivery time `at` (see streakAtDelivery), for a delivery not claimed with
 * it: today or yesterday keeps `streak_days`, older is 0, no row is undefined (omitted).
 */
async function readStreakAtDelivery(prisma: PrismaClient, serverId: string, voterIdentity: string, at: Date): Promise<number | undefined> {
  const state = await prisma.voterState.findUnique({
    where: { serverId_voterIdentity: { serverId, voterIdentity } },
    select: { lastDay: true, streakDays: true },
  });
  return streakAtDelivery(state, at);
}
