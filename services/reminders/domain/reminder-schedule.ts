import { createHash } from "node:crypto";

/**
 * When a vote reminder goes out (docs/reminders.md): pure, the clock passed in. A voter may vote again at their last
 * counted heart + the cooldown; the reminder leaves then plus a jitter in [0, jitter window) derived from the
 * subscription and the heart, so the same heart always gets the same send time and a wave of hearts cast in the same
 * minute (a month start) comes back spread over the window instead of as one spike.
 */

/** The default jitter window (REMINDER_JITTER_SECONDS). */
export const DEFAULT_REMINDER_JITTER_SECONDS = 900;
/** Temporary SMTP failures tried for one heart before its reminder is given up. */
export const MAX_REMINDER_ATTEMPTS = 5;
/** The wait after a temporary failure, times the attempt number. */
export const REMINDER_RETRY_STEP_MS = 5 * 60_000;
/** The longest one message may take: the mailer's connection, greeting and socket timeouts (10 s each) in a row. */
export const MAIL_SEND_MAX_MS = 30_000;

/**
 * How long a claimed batch is left alone by other senders: a minute plus the longest the batch's messages can take one
 * after another, so a slow SMTP server never lets a second sender take (and mail) a row still being sent. A crashed
 * sender's rows come back after it.
 */
export function reminderLeaseMs(batchRows: number): number {
  return 60_000 + batchRows * MAIL_SEND_MAX_MS;
}

/** The jitter of one (subscription, heart): a stable value in [0, windowSeconds * 1000) ms; 0 when the window is 0. */
export function reminderJitterMs(subscriptionId: string, heartAt: Date, windowSeconds: number): number {
  const windowMs = windowSeconds * 1000;
  if (windowMs <= 0) return 0;
  const digest = createHash("sha256").update(`${subscriptionId}|${heartAt.toISOString()}`).digest();
  // 48 bits of the digest: uniform enough for any window under a few years.
  return digest.readUIntBE(0, 6) % windowMs;
}

/** What the sender knows of an active subscription when it looks at it. */
export interface ReminderFacts {
  id: string;
  /** The voter's last counted heart on the server (voter_states.last_counted_at); null when none is kept. */
  lastCountedAt: Date | null;
  /** The heart the last reminder was sent (or given up) for. */
  remindedHeartAt: Date | null;
  attempts: number;
}

/** What to do with a subscription now: send for a heart, or look again at `at`. */
export type ReminderDecision = { kind: "send"; heartAt: Date } | { kind: "wait"; at: Date };

/**
 * Decides one active subscription at `now`. A heart not reminded yet is due at heart + cooldown + jitter: sent when that
 * is past, otherwise looked at again then. With no new heart, none can become due before `now + cooldown` (a heart
 * cast after now is eligible a cooldown later), so that is when it is looked at again: each subscription is read about
 * twice per cooldown at most, whatever the voter does.
 */
export function decideReminder(f: ReminderFacts, now: Date, cooldownMs: number, jitterSeconds: number): ReminderDecision {
  const fresh = f.lastCountedAt !== null && (f.remindedHeartAt === null || f.lastCountedAt.getTime() > f.remindedHeartAt.getTime());
  if (!fresh || f.lastCountedAt === null) return { kind: "wait", at: new Date(now.getTime() + cooldownMs) };
  const due = f.lastCountedAt.getTime() + cooldownMs + reminderJitterMs(f.id, f.lastCountedAt, jitterSeconds);
  return due <= now.getTime() ? { kind: "send", heartAt: f.lastCountedAt } : { kind: "wait", at: new Date(due) };
}

/** After a temporary failure: try again later, or give this heart up after MAX_REMINDER_ATTEMPTS. */
export function retryAfterFailure(attempts: number, now: Date): { kind: "retry"; at: Date } | { kind: "give_up" } {
  if (attempts + 1 >= MAX_REMINDER_ATTEMPTS) return { kind: "give_up" };
  return { kind: "retry", at: new Date(now.getTime() + REMINDER_RETRY_STEP_MS * (attempts + 1)) };
}

/** The longest e-mail address accepted (RFC 5321's path limit). */
export const MAX_EMAIL_CHARS = 254;
// One @, a local part and a dotted domain, no spaces, no angle brackets or commas (one address, no header tricks).
const EMAIL_PATTERN = /^[^\s@<>,;:"()[\]\\]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$/;

/** The address to store (trimmed, domain lower-cased), or undefined when it is not one plain e-mail address. */
export function normalizeEmail(input: string): string | undefined {
  const trimmed = input.trim();
  if (trimmed.length === 0 || trimmed.length > MAX_EMAIL_CHARS || !EMAIL_PATTERN.test(trimmed)) return undefined;
  const at = trimmed.lastIndexOf("@");
  return `${trimmed.slice(0, at)}@${trimmed.slice(at + 1).toLowerCase()}`;
}
