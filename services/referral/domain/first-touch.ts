import { IllegalTransition } from "../../shared/rpc/errors.js";
import { decide, type AnchorState } from "./transitions.js";

/** What the first-touch rule needs to know about an existing anchor. */
export interface AnchorView {
  id: string;
  referrerIdentity: string;
  state: AnchorState;
}

/** The facts a `registered` event is decided on, read inside the transaction. */
export interface RegistrationFacts {
  /** The referrer of the click the event's token belongs to. */
  clickReferrer: string;
  /** The anchor for (server_id, referee_identity), if one exists. */
  refereeAnchor: AnchorView | null;
  /** The anchor the token's click is already linked to, if any. */
  linkedAnchor: AnchorView | null;
}

/** What to do with a `registered` event. */
export type RegistrationDecision =
  /** No anchor for the referee: mint one (clicked --registered--> registered). */
  | { kind: "mint" }
  /** Another referrer holds this referee (first touch wins, also when that anchor is reversed). */
  | { kind: "first_touch_conflict"; anchorId: string }
  /** The same referrer already holds this referee: idempotent; link the click when `link`. */
  | { kind: "join"; anchorId: string; state: AnchorState; link: boolean };

/**
 * The first-touch decision for `registered`, in this order:
 * 1. the referee is anchored by a different referrer -> first_touch_conflict;
 * 2. the token's click is already linked to a different anchor (this token
 *    registered another referee) -> IllegalTransition(from = that anchor's state);
 * 3. the referee is anchored by the same referrer (possibly through another of
 *    their tokens) -> the table decides: idempotent from registered/qualified,
 *    IllegalTransition(from reversed) from reversed;
 * 4. otherwise mint.
 */
export function decideRegistration(facts: RegistrationFacts): RegistrationDecision {
  const { refereeAnchor, linkedAnchor, clickReferrer } = facts;
  if (refereeAnchor && refereeAnchor.referrerIdentity !== clickReferrer) {
    return { kind: "first_touch_conflict", anchorId: refereeAnchor.id };
  }
  if (linkedAnchor && linkedAnchor.id !== refereeAnchor?.id) {
    throw new IllegalTransition(linkedAnchor.state, "registered");
  }
  if (refereeAnchor) {
    const decision = decide(refereeAnchor.state, "registered");
    // The table has no advancing `registered` row from an anchor state; guard it anyway.
    if (decision.kind !== "idempotent") throw new IllegalTransition(refereeAnchor.state, "registered");
    return { kind: "join", anchorId: refereeAnchor.id, state: decision.state, link: linkedAnchor === null };
  }
  decide("clicked", "registered");
  return { kind: "mint" };
}
