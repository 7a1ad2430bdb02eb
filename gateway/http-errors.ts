import { Code, ConnectError } from "@connectrpc/connect";
import { ERROR_KIND_HEADER, RETRY_AFTER_HEADER, TRANSITION_EVENT_HEADER, TRANSITION_FROM_HEADER, type DomainErrorKind } from "../services/shared/errors.js";

/** The contract's exact error texts (docs/contract.md, "Errors"). */
export const ERROR_TEXT = {
  bodyTooLarge: "body too large",
  badSignatureHeader: "missing or malformed X-Service-Signature header",
  invalidJson: "body is not valid JSON",
  badEvent: "event must be one of registered|qualified|reversed",
  refereeRequired: "referee_identity is required for a registered event",
  badSignature: "signature rejected: bad_signature",
  stale: "signature rejected: stale",
  unknownServer: "unknown server",
  referralsDisabled: "referrals not enabled for this server",
  pullDisabled: "pull API not enabled for this server",
  unknownToken: "unknown referral token for this server",
  invalidTransition: "invalid state transition",
  internal: "internal error",
  methodNotAllowed: "method not allowed",
  notFound: "not found",
  tooManyFailedSignatures: "too many failed signature checks; retry after the Retry-After delay",
  overloaded: "service overloaded; retry after the Retry-After delay",
} as const;

/** A complete HTTP answer the gateway sends as JSON. */
export interface HttpReply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** Builds an `{error}` reply. */
export function errorReply(status: number, error: string, headers?: Record<string, string>): HttpReply {
  return headers ? { status, body: { error }, headers } : { status, body: { error } };
}

/** An RPC failure mapped to HTTP; `cause` is set when the failure is unexpected and must be logged. */
export interface MappedRpcError {
  reply: HttpReply;
  /** Set for 500s: the original error, logged with the request id, never sent. */
  cause?: unknown;
}

/** One row of the table: a Connect code plus (optionally) the domain error kind. */
interface ErrorRow {
  code: Code;
  kind?: DomainErrorKind;
  toReply(error: ConnectError): HttpReply | undefined;
}

/**
 * THE table: Connect code and domain error kind (from the `x-error-kind` metadata
 * set by services/shared/errors.ts) -> the contract's HTTP status and exact text.
 * A row without a reply (422 missing its details) falls through to 500.
 */
const RPC_ERROR_TABLE: readonly ErrorRow[] = [
  { code: Code.NotFound, kind: "unknown_token", toReply: () => errorReply(404, ERROR_TEXT.unknownToken) },
  { code: Code.NotFound, kind: "unknown_server", toReply: () => errorReply(404, ERROR_TEXT.unknownServer) },
  { code: Code.NotFound, kind: "referrals_disabled", toReply: () => errorReply(404, ERROR_TEXT.referralsDisabled) },
  {
    code: Code.FailedPrecondition,
    kind: "illegal_transition",
    toReply(error) {
      const from = error.metadata.get(TRANSITION_FROM_HEADER);
      const event = error.metadata.get(TRANSITION_EVENT_HEADER);
      if (!from || !event) return undefined;
      return { status: 422, body: { error: ERROR_TEXT.invalidTransition, from, event } };
    },
  },
  {
    // Beyond the service's capacity nothing was written: retryable, after the service's hint (whole seconds).
    code: Code.ResourceExhausted,
    kind: "overloaded",
    toReply(error) {
      const hint = Number(error.metadata.get(RETRY_AFTER_HEADER));
      const seconds = Number.isInteger(hint) && hint >= 1 && hint <= 60 ? hint : 1;
      return errorReply(503, ERROR_TEXT.overloaded, { "retry-after": String(seconds) });
    },
  },
  // DomainError messages are written to be shown to callers (services/shared/errors.ts).
  { code: Code.InvalidArgument, kind: "invalid_argument", toReply: (error) => errorReply(400, error.rawMessage) },
];

/**
 * Maps an error thrown by a referral-service RPC to the contract's HTTP answer.
 * Anything the table does not name - including the service being down, a
 * deadline, or an unknown kind - is 500 `internal error` with the cause kept for the log.
 */
export function fromRpcError(error: unknown): MappedRpcError {
  if (error instanceof ConnectError) {
    const kind = error.metadata.get(ERROR_KIND_HEADER) ?? undefined;
    const row = RPC_ERROR_TABLE.find((r) => r.code === error.code && r.kind === kind);
    const reply = row?.toReply(error);
    if (reply) return { reply };
  }
  // Failure policy: fail closed - an unrecognised failure is a retryable 500; the cause is logged, never sent.
  return { reply: errorReply(500, ERROR_TEXT.internal), cause: error };
}
