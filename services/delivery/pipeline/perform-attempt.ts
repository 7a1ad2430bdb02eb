import type { PrismaClient } from "../../shared/adapters/db.js";
import type { Logger } from "../../shared/runtime/log.js";
import type { SecretBox } from "../../shared/runtime/secrets.js";
import { decideRetry, type RetrySchedule } from "./retry-schedule.js";
import { recordAttempt, type AttemptRecord, type AttemptResult } from "./attempt-log.js";
import { releaseLease, type ClaimedDelivery } from "./claim-deliveries.js";
import { executeSql } from "../../shared/adapters/sql/executor.js";
import { deferDeliverySql } from "./write-deliveries.js";
import type { AttemptOutcome, SentTransport, Transport } from "./transport.js";
import { isPayOnce, reservePayout, settlePayout } from "./pay-once.js";

/** What one attempt needs: the dispatcher's settings, also used by the test callback's first attempt. */
export interface AttemptDeps {
  prisma: PrismaClient;
  secretBox: SecretBox;
  log: Logger;
  now: () => Date;
  schedule: RetrySchedule;
  /** Timeout of one HTTP callback attempt (Votifier attempts use VOTIFIER_TIMEOUT_MS per connect and read). */
  timeoutMs: number;
  allowInsecure: boolean;
  /** Jitter source; tests may pin it. */
  random?: () => number;
  /** Overrides AUTO_DISABLE_AFTER_MS. */
  autoDisableAfterMs?: number;
}

/** An outcome of a sent attempt (not held). */
export type SentOutcome = Exclude<AttemptOutcome, { kind: "held" } | { kind: "deferred" }>;

/** How an attempt of a claimed delivery went. */
export type AttemptReport =
  /** Nothing was sent (for example no active callback secret any more): the lease was given back. */
  | { kind: "released"; reason: string }
  | {
      kind: "attempted";
      outcome: SentOutcome;
      result: AttemptResult;
      /** False when the lease was lost before the result was recorded (the attempt is logged only). */
      owned: boolean;
    };

/** How performAttempt records, and what it tells its caller on the way. */
export interface AttemptHooks {
  /** Records the attempt (default: recordAttempt, one transaction); resolves with whether the lease was still held. */
  record?: (attempt: AttemptRecord) => Promise<boolean>;
  /**
   * Called once the receiver has answered (or the send failed), before the attempt is recorded,
   * with the outcome (undefined when the transport threw).
   */
  onSent?: (outcome: AttemptOutcome | undefined) => void;
}

/**
 * Makes one attempt of a claimed delivery over its transport (signed afresh for a callback),
 * decides what comes next (delivered, retry per the schedule, failed, or held after a 410) and
 * records the attempt with its exact exchange. The dispatcher (recording in groups) and the test
 * callback share it.
 */
export async function performAttempt(deps: AttemptDeps, transport: Transport, delivery: ClaimedDelivery, hooks: AttemptHooks = {}): Promise<AttemptReport> {
  const startedAt = deps.now();
  // Pay-once servers only (the claim read s.pay_once): reserve the heart's payout before sending (pay-once.ts).
  const payOnce = isPayOnce(delivery);
  if (payOnce) {
    const reservation = await reservePayout(deps.prisma, delivery, startedAt);
    if (reservation.kind !== "reserved") {
      hooks.onSent?.(undefined);
      return { kind: "released", reason: reservation.reason };
    }
  }
  let outcome: AttemptOutcome | undefined;
  try {
    outcome = await transport.send(delivery);
  } finally {
    hooks.onSent?.(outcome);
  }
  if (payOnce) await settlePayout(deps.prisma, delivery, outcome, deps.now());
  if (outcome.kind === "held") {
    await releaseLease(deps.prisma, delivery);
    return { kind: "released", reason: outcome.reason };
  }
  if (outcome.kind === "deferred") {
    await executeSql(deps.prisma, deferDeliverySql(delivery, outcome.retryAt));
    return { kind: "released", reason: outcome.reason };
  }
  const finishedAt = deps.now();
  const result = decideResult(deps, delivery, outcome, finishedAt);
  const record = hooks.record ?? ((attempt: AttemptRecord) => recordAttempt(deps.prisma, attempt));
  const owned = await record({
    delivery,
    startedAt,
    finishedAt,
    exchange: outcome.exchange,
    result,
    ...(deps.autoDisableAfterMs === undefined ? {} : { autoDisableAfterMs: deps.autoDisableAfterMs }),
  });
  return { kind: "attempted", outcome, result, owned };
}

function decideResult(deps: AttemptDeps, delivery: ClaimedDelivery, outcome: SentOutcome, at: Date): AttemptResult {
  if (outcome.kind === "delivered") return { kind: "delivered" };
  if (outcome.kind === "gone")
    return {
      kind: "held_gone",
      reason: outcome.statusCode === 410 ? `receiver answered 410 Gone at ${at.toISOString()}` : `${outcome.error} at ${at.toISOString()}`,
    };
  // A vote the transport can never deliver is not retried: failed for good, its reason in the attempt.
  if (outcome.final) return { kind: "failed" };
  const decision = decideRetry(deps.schedule, delivery.attempts + 1, {
    random: deps.random ?? Math.random,
    ...(outcome.retryAfterMs === undefined ? {} : { retryAfterMs: outcome.retryAfterMs }),
  });
  return decision.kind === "give_up" ? { kind: "failed" } : { kind: "retry", nextAttemptAt: new Date(at.getTime() + decision.delayMs) };
}

export type { SentTransport };
