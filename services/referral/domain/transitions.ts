import { IllegalTransition } from "../../shared/errors.js";

/**
 * The referral state machine: ONE table of every (state, event) pair. Pure: no
 * I/O, no clock. The store re-asserts the precondition with a conditional write.
 */

/** Every state a referral can be reported in; `clicked` means no anchor exists yet. */
export const REFERRAL_STATES = ["clicked", "registered", "qualified", "reversed"] as const;
/** A referral state, including `clicked` (no anchor). */
export type ReferralStateName = (typeof REFERRAL_STATES)[number];
/** The state of a minted anchor (stored in the database). */
export type AnchorState = Exclude<ReferralStateName, "clicked">;

/** The lifecycle events a game server reports. */
export const REFERRAL_EVENTS = ["registered", "qualified", "reversed"] as const;
/** A lifecycle event name. */
export type ReferralEventName = (typeof REFERRAL_EVENTS)[number];

/** What one row of the table says to do. */
export type TransitionRule = { kind: "advance"; to: AnchorState } | { kind: "idempotent" } | { kind: "reject" };

const advance = (to: AnchorState): TransitionRule => ({ kind: "advance", to });
const idempotent: TransitionRule = { kind: "idempotent" };
const reject: TransitionRule = { kind: "reject" };

/**
 * The transition table (docs/contract.md, "Referral states and transitions",
 * `reversed` included). `clicked --registered--> registered` is the mint of the anchor; the
 * first-touch rule around it lives in first-touch.ts.
 */
export const TRANSITIONS: Readonly<Record<ReferralStateName, Readonly<Record<ReferralEventName, TransitionRule>>>> = {
  clicked: { registered: advance("registered"), qualified: reject, reversed: reject },
  registered: { registered: idempotent, qualified: advance("qualified"), reversed: advance("reversed") },
  qualified: { registered: idempotent, qualified: idempotent, reversed: advance("reversed") },
  reversed: { registered: reject, qualified: reject, reversed: idempotent },
};

/** The outcome of applying an event to a state. */
export type TransitionDecision =
  | { kind: "advanced"; from: ReferralStateName; to: AnchorState }
  | { kind: "idempotent"; state: AnchorState };

/**
 * Decides what `event` does to a referral in `state`: advance it, or leave it
 * (already in the requested state). Throws `IllegalTransition{from, event}` for a
 * rejected pair (the gateway answers 422 with `from` and `event`).
 */
export function decide(state: ReferralStateName, event: ReferralEventName): TransitionDecision {
  const rule = TRANSITIONS[state][event];
  switch (rule.kind) {
    case "advance":
      return { kind: "advanced", from: state, to: rule.to };
    case "idempotent":
      // `clicked` has no idempotent row, so the state here is always an anchor state.
      return { kind: "idempotent", state: state as AnchorState };
    case "reject":
      throw new IllegalTransition(state, event);
  }
}

/** True when `value` names a lifecycle event. */
export function isReferralEventName(value: string): value is ReferralEventName {
  return (REFERRAL_EVENTS as readonly string[]).includes(value);
}

/** True when `value` names an anchor state. */
export function isAnchorState(value: string): value is AnchorState {
  return value === "registered" || value === "qualified" || value === "reversed";
}
