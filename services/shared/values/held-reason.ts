/**
 * Why a pending delivery is not being sent, in the owner's terms: the dispatcher claims only deliveries it can
 * send (sendableDeliverySql in services/delivery/pipeline/claim-deliveries.ts: a callback to a live endpoint with a URL,
 * not disabled; a Votifier vote of a server with Votifier set up; a Discord message to a live endpoint, not disabled) and leaves the others pending and due, so their
 * next-attempt time is in the past and means nothing. The dashboard shows these as held, with what releases them.
 * Pure; test/integration/delivery-held-reason.test.ts holds it equal to the claim's rule.
 */

/** What holds a pending delivery back. */
export type HeldReason = "no_callback_url" | "endpoint_disabled" | "endpoint_deleted" | "votifier_off";

/** The facts the rule reads: the delivery's status and transport, its endpoint (callback only) and its server's Votifier. */
export interface HoldFacts {
  status: string;
  transport: string;
  endpoint: { url: string | null; disabledAt: Date | null; deletedAt: Date | null } | null;
  votifierSet: boolean;
}

/** Why the delivery is held, or null when it is not (sent as it comes due, not pending, or a pull delivery the owner claims). */
export function heldReasonOf(f: HoldFacts): HeldReason | null {
  if (f.status !== "pending") return null;
  if (f.transport === "callback") {
    if (f.endpoint === null || f.endpoint.deletedAt !== null) return "endpoint_deleted";
    if (f.endpoint.url === null) return "no_callback_url";
    if (f.endpoint.disabledAt !== null) return "endpoint_disabled";
    return null;
  }
  if (f.transport === "votifier") return f.votifierSet ? null : "votifier_off";
  if (f.transport === "discord") {
    if (f.endpoint === null || f.endpoint.deletedAt !== null) return "endpoint_deleted";
    if (f.endpoint.disabledAt !== null) return "endpoint_disabled";
    return null;
  }
  return null;
}
