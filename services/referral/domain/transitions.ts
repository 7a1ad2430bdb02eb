/**
 * The referral state machine: ONE table of every (state, event) pair. Pure: no
 * I/O, no clock. The store re-asserts the precondition with a conditional write.
 */

import { IllegalTransition } from "../../shared/rpc/errors.js";
import type { AnchorState, ReferralEventName, ReferralStateName } from "../../shared/values/contract.js";

export {
  REFERRAL_EVENTS,
  REFERRAL_STATES,
  isAnchorState,
  isReferralEventName,
  type AnchorState,
  type ReferralEventName,
  type ReferralStateName,
} from "../../shared/values/contract.js";

/* The events and states themselves live in services/shared/values/contract.ts (re-exported above). */

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
export type TransitionDecision = { kind: "advanced"; from: ReferralStateName; to: AnchorState } | { kind: "idempotent"; state: AnchorState };

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
