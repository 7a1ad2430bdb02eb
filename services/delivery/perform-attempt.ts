import type { PrismaClient } from "../shared/db.js";
import type { Logger } from "../shared/log.js";
import type { SecretBox } from "../shared/secrets.js";
import type { AttemptExchange } from "./attempt-exchange.js";
import { decideRetry, type RetrySchedule } from "./retry-schedule.js";
import { sendCallback, signCallback, toHttpExchange, type DispatchOutcome, type HeartEventType, type SignedCallback } from "./send-callback.js";
import { loadCallbackSecrets, readStreakAtDelivery, recordAttempt, releaseLease, type AttemptResult, type ClaimedDelivery } from "./store.js";

/** What one attempt needs: the dispatcher's settings, also used by the test callback's first attempt. */
export interface AttemptDeps {
  prisma: PrismaClient;
  secretBox: SecretBox;
  log: Logger;
  now: () => Date;
  schedule: RetrySchedule;
  timeoutMs: number;
  allowInsecure: boolean;
  /** Jitter source; tests may pin it. */
  random?: () => number;
  /** Overrides AUTO_DISABLE_AFTER_MS. */
  autoDisableAfterMs?: number;
}

/** How an attempt of a claimed delivery went. */
export type AttemptReport =
  /** No active callback secret any more: the lease was given back, nothing was sent. */
  | { kind: "released" }
  | {
      kind: "attempted";
      signed: SignedCallback;
      outcome: DispatchOutcome;
      exchange: AttemptExchange;
      result: AttemptResult;
      /** False when the lease was lost before the result was recorded (the attempt is logged only). */
      owned: boolean;
    };

/**
 * Makes one attempt of a claimed delivery: signs it afresh (t = now, one v1 per active
 * secret), sends it, decides what comes next (delivered, retry per the schedule, failed,
 * or held after a 410) and records the attempt with its exact exchange.
 */
export async function performAttempt(deps: AttemptDeps, delivery: ClaimedDelivery): Promise<AttemptReport> {
  const secrets = await loadCallbackSecrets(deps.prisma, deps.secretBox, delivery.serverId, deps.now());
  if (secrets.length === 0) {
    // The secret was revoked after the claim: hold the delivery like any server without an active secret.
    await releaseLease(deps.prisma, delivery);
    return { kind: "released" };
  }
  const startedAt = deps.now();
  const streakDay = delivery.eventType === "heart.counted" ? await readStreak(deps, delivery, startedAt) : undefined;
  const signed = signCallback({
    url: delivery.callbackUrl,
    fields: {
      event: delivery.eventType as HeartEventType,
      serverId: delivery.serverId,
      username: delivery.username,
      heartId: delivery.heartId,
      period: delivery.period,
      ...(streakDay === undefined ? {} : { streakDay }),
    },
    secretsNewestFirst: secrets,
    standardWebhooks: delivery.standardWebhooks,
    t: Math.floor(startedAt.getTime() / 1000),
  });
  const outcome = await sendCallback(signed, { timeoutMs: deps.timeoutMs, allowInsecure: deps.allowInsecure, now: deps.now });
  const finishedAt = deps.now();
  const result = decideResult(deps, delivery, outcome, finishedAt);
  const exchange = toHttpExchange(signed, outcome);
  const owned = await recordAttempt(deps.prisma, {
    delivery,
    startedAt,
    finishedAt,
    exchange,
    result,
    ...(deps.autoDisableAfterMs === undefined ? {} : { autoDisableAfterMs: deps.autoDisableAfterMs }),
  });
  return { kind: "attempted", signed, outcome, exchange, result, owned };
}

async function readStreak(deps: AttemptDeps, delivery: ClaimedDelivery, at: Date): Promise<number | undefined> {
  try {
    return await readStreakAtDelivery(deps.prisma, delivery.serverId, delivery.voterIdentity, at);
  } catch (error) {
    // Failure policy: streak_day is optional; when it cannot be read the field is omitted rather than the callback delayed.
    deps.log.warn({ err: error, deliveryId: delivery.id }, "streak unavailable; omitting streak_day");
    return undefined;
  }
}

function decideResult(deps: AttemptDeps, delivery: ClaimedDelivery, outcome: DispatchOutcome, at: Date): AttemptResult {
  if (outcome.kind === "delivered") return { kind: "delivered" };
  if (outcome.kind === "gone") return { kind: "held_gone", reason: `receiver answered 410 Gone at ${at.toISOString()}` };
  const decision = decideRetry(deps.schedule, delivery.attempts + 1, {
    random: deps.random ?? Math.random,
    ...(outcome.retryAfterMs === undefined ? {} : { retryAfterMs: outcome.retryAfterMs }),
  });
  return decision.kind === "give_up" ? { kind: "failed" } : { kind: "retry", nextAttemptAt: new Date(at.getTime() + decision.delayMs) };
}
