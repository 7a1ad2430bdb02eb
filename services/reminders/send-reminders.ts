import type { Logger } from "../shared/runtime/log.js";
import { createPassLoop, type PassLoop } from "../shared/runtime/pass-loop.js";
import type { Mailer } from "../shared/adapters/mailer.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { HEART_COOLDOWN_MS } from "../hearts/domain/streak.js";
import { decideReminder, reminderLeaseMs, retryAfterFailure } from "./domain/reminder-schedule.js";
import { reminderMail, unsubscribeUrlOf } from "./reminder-mail.js";
import { claimDueReminders, endReminder, recordReminderPass, type DueReminder } from "./reminder-store.js";
import type { UnsubscribeTokens } from "./reminder-tokens.js";

/** Subscriptions one pass claims at most (REMINDER_BATCH_ROWS). */
export const DEFAULT_REMINDER_BATCH_ROWS = 100;
/** The wait between passes when the last one found less than a batch (REMINDER_INTERVAL_SECONDS). */
export const DEFAULT_REMINDER_INTERVAL_SECONDS = 15;

/** What a sender pass needs. */
export interface ReminderPassDeps {
  db: PrismaClient;
  mailer: Mailer;
  unsubscribe: UnsubscribeTokens;
  /** PUBLIC_BASE_URL: the unsubscribe links point at the public gateway. */
  publicBaseUrl: string;
  jitterSeconds: number;
  batchRows: number;
  log: Logger;
}

/** What one pass did. */
export interface ReminderPassResult {
  claimed: number;
  sent: number;
  bounced: number;
  retried: number;
}

/**
 * One sender pass at `now`: claims at most `batchRows` due subscriptions (a lease keeps other instances off them), then
 * for each decides (domain/reminder-schedule.ts): a heart not reminded yet and due (+ jitter) is mailed once, and the
 * heart recorded so it is never mailed again; a 5xx refusal ends the subscription as bounced; a temporary failure tries
 * again later, given up after MAX_REMINDER_ATTEMPTS; anything else is looked at again when it can next be due. The
 * address never reaches a log line.
 */
export async function runReminderPass(deps: ReminderPassDeps, now: Date): Promise<ReminderPassResult> {
  const rows = await claimDueReminders(deps.db, { now, leaseUntil: new Date(now.getTime() + reminderLeaseMs(deps.batchRows)), limit: deps.batchRows });
  const result: ReminderPassResult = { claimed: rows.length, sent: 0, bounced: 0, retried: 0 };
  for (const row of rows) {
    const outcome = await passOne(deps, row, now);
    if (outcome !== "waited") result[outcome] += 1;
  }
  return result;
}

async function passOne(deps: ReminderPassDeps, row: DueReminder, now: Date): Promise<"sent" | "bounced" | "retried" | "waited"> {
  const decision = decideReminder(
    { id: row.id, lastCountedAt: row.last_counted_at, remindedHeartAt: row.reminded_heart_at, attempts: row.attempts },
    now,
    HEART_COOLDOWN_MS,
    deps.jitterSeconds,
  );
  if (decision.kind === "wait") {
    await recordReminderPass(deps.db, { id: row.id, nextSendAt: decision.at, attempts: row.attempts, now });
    return "waited";
  }
  const unsubscribeUrl = unsubscribeUrlOf(deps.publicBaseUrl, deps.unsubscribe.mint(row.id, row.unsubscribe_nonce));
  const sent = await deps.mailer.send(reminderMail({ to: row.email, serverName: row.server_name, unsubscribeUrl }));
  const next = new Date(now.getTime() + HEART_COOLDOWN_MS);
  if (sent.ok) {
    await recordReminderPass(deps.db, { id: row.id, nextSendAt: next, remindedHeartAt: decision.heartAt, attempts: 0, now });
    return "sent";
  }
  if (sent.kind === "permanent") {
    await endReminder(deps.db, { id: row.id, state: "bounced", now });
    deps.log.info({ reminder: row.id, reason: sent.reason }, "vote reminder bounced; the subscription is ended");
    return "bounced";
  }
  const retry = retryAfterFailure(row.attempts, now);
  deps.log.warn({ reminder: row.id, reason: sent.reason, attempt: row.attempts + 1 }, "vote reminder not sent; retried later");
  if (retry.kind === "give_up") {
    // Failure policy: give this heart up after MAX_REMINDER_ATTEMPTS temporary failures; the next heart is tried afresh.
    await recordReminderPass(deps.db, { id: row.id, nextSendAt: next, remindedHeartAt: decision.heartAt, attempts: 0, now });
  } else {
    await recordReminderPass(deps.db, { id: row.id, nextSendAt: retry.at, attempts: row.attempts + 1, now });
  }
  return "retried";
}

/** The sender loop of the referral service: start() and stop() (waits for a pass in progress). */
export type ReminderLoop = PassLoop;

/**
 * Runs a sender pass every `intervalSeconds` (timed from the end of the last, so passes never overlap), at once again
 * when a pass claimed a full batch. Several instances at once are safe: rows are claimed with SKIP LOCKED and leased.
 */
export function createReminderLoop(deps: ReminderPassDeps & { intervalSeconds: number; now: () => Date }): ReminderLoop {
  return createPassLoop({
    intervalMs: deps.intervalSeconds * 1000,
    pass: async () => ({ full: (await runReminderPass(deps, deps.now())).claimed >= deps.batchRows }),
    log: deps.log,
    failure: "reminder pass failed; retried at the next interval",
  });
}
