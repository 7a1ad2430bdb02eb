import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { IllegalTransitionDetailSchema } from "../../../gen/proto/referral/v1/referral_pb.js";
import { ERROR_TEXT } from "../values/contract.js";
import { isDatabaseUnavailable } from "../values/db-errors.js";
import { DomainError, type DomainErrorKind } from "../values/domain-error.js";
import { ERROR_KIND_HEADER, RETRY_AFTER_HEADER } from "../values/wire.js";

/**
 * Domain errors. Domain and store code throws these; `toConnectError` is the one
 * table that maps them to Connect codes, and the gateway maps Connect codes to
 * the contract's HTTP statuses and exact error texts. DomainError itself lives in
 * domain-error.ts (import-free); it is re-exported here for its callers.
 */
export { DomainError, type DomainErrorKind } from "../values/domain-error.js";
/** The metadata keys the gateway reads (services/shared/values/wire.ts is their home). */
export { ERROR_KIND_HEADER, RETRY_AFTER_HEADER } from "../values/wire.js";

/** A state-machine rejection: `from` is the current state, `event` the rejected event. */
export class IllegalTransition extends DomainError {
  constructor(
    readonly from: string,
    readonly event: string,
  ) {
    super("illegal_transition", ERROR_TEXT.invalidTransition);
    this.name = "IllegalTransition";
  }
}

/**
 * Beyond capacity (a bounded queue is full, or an item waited too long): refused before
 * anything was written, so the caller may retry after `retryAfterMs`.
 */
export class Overloaded extends DomainError {
  constructor(readonly retryAfterMs: number) {
    super("overloaded", ERROR_TEXT.overloaded);
    this.name = "Overloaded";
  }
}

/** How long callers are told to wait while the database is unavailable: about one PostgreSQL restart. */
export const DATABASE_DOWN_RETRY_AFTER_MS = 5_000;
/** The RPC message of a request refused because the database is unavailable (caller-safe: no address, no cause). */
export const DATABASE_UNAVAILABLE_TEXT = "the database is temporarily unavailable; retry after the Retry-After delay";

/**
 * A dependency is down or restarting (the database: services/shared/values/db-errors.ts#isDatabaseUnavailable):
 * nothing was done, so the caller may retry after `retryAfterMs`. Unavailable over Connect, never Internal.
 */
export class DependencyUnavailable extends DomainError {
  constructor(
    readonly retryAfterMs: number,
    message: string = DATABASE_UNAVAILABLE_TEXT,
  ) {
    super("unavailable", message);
    this.name = "DependencyUnavailable";
  }
}

/** `unknown_server` with the contract's text (services/shared/values/contract.ts). */
export function unknownServer(): DomainError {
  return new DomainError("unknown_server", ERROR_TEXT.unknownServer);
}

/**
 * The refused transition's `from` and `event` as the Connect error carries them (a typed
 * `referral.v1.IllegalTransitionDetail`), or null when the error has no such detail.
 */
export function illegalTransitionOf(error: ConnectError): { from: string; event: string } | null {
  const [detail] = error.findDetails(IllegalTransitionDetailSchema);
  return detail ? { from: detail.from, event: detail.event } : null;
}

const CONNECT_CODE_BY_KIND: Record<DomainErrorKind, Code> = {
  invalid_argument: Code.InvalidArgument,
  unknown_server: Code.NotFound,
  referrals_disabled: Code.NotFound,
  unknown_token: Code.NotFound,
  not_found: Code.NotFound,
  illegal_transition: Code.FailedPrecondition,
  failed_precondition: Code.FailedPrecondition,
  conflict: Code.AlreadyExists,
  overloaded: Code.ResourceExhausted,
  unavailable: Code.Unavailable,
};

/**
 * Maps any thrown value to a ConnectError: domain errors by the table above, the database being unavailable
 * (classified by code) to Unavailable with a Retry-After hint, anything else to a bare Internal.
 */
export function toConnectError(error: unknown): ConnectError {
  if (error instanceof ConnectError) return error;
  if (!(error instanceof DomainError) && isDatabaseUnavailable(error)) return toConnectError(new DependencyUnavailable(DATABASE_DOWN_RETRY_AFTER_MS));
  if (error instanceof DomainError) {
    const metadata = new Headers({ [ERROR_KIND_HEADER]: error.kind });
    const details =
      error instanceof IllegalTransition
        ? [{ desc: IllegalTransitionDetailSchema, value: create(IllegalTransitionDetailSchema, { from: error.from, event: error.event }) }]
        : [];
    if (error instanceof Overloaded || error instanceof DependencyUnavailable) {
      metadata.set(RETRY_AFTER_HEADER, String(Math.max(1, Math.ceil(error.retryAfterMs / 1000))));
    }
    return new ConnectError(error.message, CONNECT_CODE_BY_KIND[error.kind], metadata, details);
  }
  // Failure policy: never leak internals; the cause is logged by the interceptor with the request id.
  return new ConnectError(ERROR_TEXT.internal, Code.Internal);
}
