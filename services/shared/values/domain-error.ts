/**
 * The domain error type: domain and store code throws it; services/shared/rpc/errors.ts maps it to
 * Connect codes (`toConnectError`) and holds its named kinds (IllegalTransition, Overloaded).
 * Import-free, so the field rules (field-rules.ts) can throw it without importing the contract's
 * error table back (no cycle contract -> field-rules -> errors -> contract).
 */

/** What went wrong, as the error table and the gateway read it. */
export type DomainErrorKind =
  | "invalid_argument"
  | "unknown_server"
  | "referrals_disabled"
  | "unknown_token"
  | "not_found"
  | "illegal_transition"
  | "failed_precondition"
  | "conflict"
  /** Beyond capacity: nothing was done; retry after the hint (`retry-after` metadata). */
  | "overloaded"
  /** A dependency (the database) is down or restarting: nothing was done; retry after the hint (`retry-after` metadata). */
  | "unavailable";

/** A typed domain failure with a message safe to show callers. */
export class DomainError extends Error {
  constructor(
    readonly kind: DomainErrorKind,
    message: string,
  ) {
    super(message);
    this.name = "DomainError";
  }
}
