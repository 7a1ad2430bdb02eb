/**
 * The per-server referral rules around the transition table (docs/referral-rules.md R1-R3): the
 * reason a reversal carries, the attribution window of a click and the lock period after
 * `qualified` (a server's window and lock are set through services/servers/domain/referral-settings.ts).
 * Pure: the clock is passed in.
 */
import { REVERSAL_REASONS, type ReversalReason } from "../../shared/values/contract.js";
import { cutField } from "../../shared/values/field-rules.js";

/** Milliseconds in one day (the window and the lock count whole 24-hour days from their start). */
const DAY_MS = 86_400_000;

/** A reversal's reason as stored: one of REVERSAL_REASONS (null when none was sent) and the sent text for `other`. */
export interface StoredReason {
  reason: ReversalReason | null;
  /** The text as sent (trimmed, NUL removed, cut to the `reason` bound) when it was not a known reason; else null. */
  text: string | null;
}

/** No reason sent. */
export const NO_REASON: StoredReason = { reason: null, text: null };

/**
 * R1: the stored form of a `reversed` event's optional `reason`, never refused (it is not a contract
 * field, and the contract accepts unknown extra fields). Empty after trimming: no reason. A known
 * reason, compared case-insensitively: that reason. Anything else: `other`, with the text as sent
 * (bounded). The gateway sends a non-string JSON value as its JSON text, so it is kept the same way.
 */
export function toStoredReason(sent: string): StoredReason {
  const trimmed = cutField("reason", sent.trim()).trim();
  if (trimmed === "") return NO_REASON;
  const known = REVERSAL_REASONS.find((r) => r === trimmed.toLowerCase());
  if (known !== undefined) return { reason: known, text: null };
  return { reason: "other", text: trimmed };
}

/**
 * R2: whether a click is past its server's attribution window at `now`: more than `windowDays` whole
 * days after the click. Its token then no longer registers a referee (404 unknown token); a click
 * exactly `windowDays` old still does.
 */
export function isPastAttributionWindow(input: { clickedAt: Date; windowDays: number; now: Date }): boolean {
  return input.now.getTime() - input.clickedAt.getTime() > input.windowDays * DAY_MS;
}

/** What a `reversed` event that advances a referral does to the referrer's credit. */
export type ReversalEffect =
  /** From `registered`: there is no credit. */
  | "no_credit"
  /** Within the lock period (or no lock): the credit is taken off the leaderboard, kept as a reversal record. */
  | "remove_credit"
  /** After the lock period: the credit stays counted (the result is final); the reversal is a clawback record. */
  | "clawback";

/**
 * R3: the effect of a reversal on the credit. From `qualified` with `lockDays` > 0, a reversal at or
 * after `qualifiedAt + lockDays` days is a clawback; before it (or with no lock) it removes the
 * credit. The state moves to `reversed` either way (the transition table is unchanged).
 */
export function decideReversalEffect(input: { from: "registered" | "qualified"; qualifiedAt: Date | null; lockDays: number; now: Date }): ReversalEffect {
  if (input.from === "registered") return "no_credit";
  // A qualified anchor without its time cannot be placed against the lock: the contract's removal applies.
  if (input.lockDays <= 0 || input.qualifiedAt === null) return "remove_credit";
  return input.now.getTime() >= input.qualifiedAt.getTime() + input.lockDays * DAY_MS ? "clawback" : "remove_credit";
}
