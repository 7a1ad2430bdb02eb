import type { AttemptExchange } from "./attempt-exchange.js";
import type { ClaimedDelivery, SentTransport } from "./claim-deliveries.js";

/**
 * A delivery transport: how one claimed delivery reaches the owner. The pipeline
 * (consumer -> deliveries table -> dispatcher claim -> send -> recorded attempt ->
 * retry schedule) is the same for every transport; only `send` differs.
 */
export interface Transport {
  /** Makes one attempt. Never throws for I/O outcomes. */
  send(delivery: ClaimedDelivery): Promise<AttemptOutcome>;
}

/** The transports the dispatcher sends over (declared with the claim, claim-deliveries.ts, which has no transport import). */
export type { SentTransport };

/**
 * How one attempt ended. `target` names where it went (the callback URL, or votifier://host:port);
 * `exchange` is exactly what was sent and what came back, for the attempt log.
 */
export type AttemptOutcome =
  | { kind: "delivered"; target: string; statusCode: number | null; latencyMs: number; exchange: AttemptExchange }
  /**
   * The destination is gone for good: HTTP 410 from a callback receiver, or Discord's 10015 Unknown Webhook (a 404).
   * The endpoint is disabled and its deliveries held.
   */
  | { kind: "gone"; target: string; statusCode: number; latencyMs: number; error: string; exchange: AttemptExchange }
  /** `final`: the transport can never deliver it (for example services/shared/values/votifier-limits.ts): failed for good at once, no retry. */
  | {
      kind: "failed";
      target: string;
      statusCode: number | null;
      error: string;
      latencyMs: number;
      retryAfterMs?: number;
      final?: true;
      exchange: AttemptExchange;
    }
  /** Nothing was sent (for example the callback secret was revoked after the claim): the lease is given back. */
  | { kind: "held"; reason: string }
  /**
   * Nothing was sent because the destination's rate limit holds it (Discord): the lease is given back and the delivery
   * is due again at `retryAt`, with no attempt counted (a rate limit is not a failure toward the disable).
   */
  | { kind: "deferred"; reason: string; retryAt: Date };
