import { Code, ConnectError } from "@connectrpc/connect";
import { illegalTransitionOf, type DomainErrorKind } from "../services/shared/rpc/errors.js";
import { ERROR_KIND_HEADER, RETRY_AFTER_HEADER, SESSION_EXPIRED_KIND, TOKEN_SCOPE_KIND } from "../services/shared/values/wire.js";
import { CHECK_ERRORS, fixedError, type CheckErrorKind, type FixedErrorKind } from "../services/shared/values/contract.js";

/** The contract's exact error texts (services/shared/values/contract.ts is their home). */
export { ERROR_TEXT } from "../services/shared/values/contract.js";

/** A raw (non-JSON) answer: status, headers and body bytes. */
export interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: string | Buffer;
}

/** A complete HTTP answer the gateway sends as JSON. */
export interface HttpReply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** What an error reply carries besides its status and text. */
export interface ErrorReplyOptions {
  /** Response headers (`allow`, `retry-after`, `connection`, ...). */
  headers?: Record<string, string>;
  /** Body fields after `error` (the 422's `from` and `event`). */
  fields?: Record<string, string>;
}

/**
 * THE one builder of the gateway's error replies: `{error, ...fields}` with the kind's status
 * (services/shared/values/contract.ts). A fixed-text kind takes its text from the contract; a
 * check-written kind (`invalidField`, ...) takes the failing check's text.
 */
export function errorReply(kind: FixedErrorKind, options?: ErrorReplyOptions): HttpReply;
export function errorReply(kind: CheckErrorKind, text: string, options?: ErrorReplyOptions): HttpReply;
export function errorReply(kind: FixedErrorKind | CheckErrorKind, textOrOptions?: string | ErrorReplyOptions, maybeOptions?: ErrorReplyOptions): HttpReply {
  const checkWritten = kind in CHECK_ERRORS;
  const status = checkWritten ? CHECK_ERRORS[kind as CheckErrorKind].status : fixedError(kind as FixedErrorKind).status;
  const text = checkWritten ? (textOrOptions as string) : fixedError(kind as FixedErrorKind).text;
  const options = (checkWritten ? maybeOptions : (textOrOptions as ErrorReplyOptions | undefined)) ?? {};
  const body = { error: text, ...options.fields };
  return options.headers ? { status, body, headers: options.headers } : { status, body };
}

/** An RPC failure mapped to HTTP; `cause` is set when the failure is the service's and must be logged. */
export interface MappedRpcError {
  reply: HttpReply;
  /** Set for 500s and 503s of a dependency that is down (and the dashboard's 504): the original error, logged with the request id, never sent. */
  cause?: unknown;
  /** With `cause`: the request log's outcome (`service_unavailable` for a 503, else `internal_error`). */
  failure?: "internal_error" | "service_unavailable";
}

/**
 * Which HTTP surface maps the failure: the ingest endpoint (the contract, docs/contract.md, binds its texts),
 * the other public endpoints (pull API, check/claim API, referral links, receipts), or the dashboard API.
 */
export type ErrorSurface = "ingest" | "public" | "dashboard";

/** One row of the table: a Connect code, optionally the domain error kind, the surfaces it serves. */
interface ErrorRow {
  code: Code;
  /** The `x-error-kind` the row needs; absent = any kind. */
  kind?: DomainErrorKind | typeof SESSION_EXPIRED_KIND | typeof TOKEN_SCOPE_KIND;
  on: readonly ErrorSurface[];
  toReply(error: ConnectError): HttpReply | undefined;
  /** The failure is the service's, not the caller's: its cause is logged. */
  log?: true;
}

const PUBLIC: readonly ErrorSurface[] = ["ingest", "public"];
const INGEST: readonly ErrorSurface[] = ["ingest"];
const OTHER_PUBLIC: readonly ErrorSurface[] = ["public"];

/** Retry-After (seconds) of the public 503 while the referral service is unreachable: about one process restart. */
export const SERVICE_DOWN_RETRY_AFTER_S = 5;
/** Retry-After (seconds) of the 503 while the referral service refuses the gateway's own token (an operator must act). */
export const GATEWAY_TOKEN_REFUSED_RETRY_AFTER_S = 30;
const DASHBOARD: readonly ErrorSurface[] = ["dashboard"];

/** The service's Retry-After hint (whole seconds, 1-60) from the error's metadata, else `fallback`. */
function retryAfterOf(error: ConnectError, fallback: number): string {
  const hint = Number(error.metadata.get(RETRY_AFTER_HEADER));
  return String(Number.isInteger(hint) && hint >= 1 && hint <= 60 ? hint : fallback);
}

/**
 * The public rows of a failure that is the service's and not the caller's (a dependency down, the gateway's own token
 * refused): a retryable 503 with Retry-After, never a 500, the cause logged. On ingest the contract's one 503 text
 * (docs/contract.md); on the other public paths a text that names the cause, not "overloaded".
 */
function dependencyDownRows(code: Code, retryAfter: (error: ConnectError) => string): ErrorRow[] {
  return [
    { code, on: INGEST, toReply: (error) => errorReply("overloaded", { headers: { "retry-after": retryAfter(error) } }), log: true },
    { code, on: OTHER_PUBLIC, toReply: (error) => errorReply("unavailable", { headers: { "retry-after": retryAfter(error) } }), log: true },
  ];
}

/**
 * THE table: Connect code and domain error kind (from the `x-error-kind` metadata set by
 * services/shared/rpc/errors.ts) -> the HTTP status and text (services/shared/values/contract.ts), per surface;
 * the first matching row wins. The public API answers the contract's exact texts; the dashboard shows
 * the service's caller-safe message. A row without a reply (422 missing its detail) falls through to 500.
 */
const RPC_ERROR_TABLE: readonly ErrorRow[] = [
  { code: Code.NotFound, kind: "unknown_token", on: PUBLIC, toReply: () => errorReply("unknownToken") },
  { code: Code.NotFound, kind: "unknown_server", on: PUBLIC, toReply: () => errorReply("unknownServer") },
  { code: Code.NotFound, kind: "referrals_disabled", on: PUBLIC, toReply: () => errorReply("referralsDisabled") },
  {
    code: Code.FailedPrecondition,
    kind: "illegal_transition",
    on: PUBLIC,
    toReply(error) {
      const transition = illegalTransitionOf(error);
      return transition ? errorReply("invalidTransition", { fields: { from: transition.from, event: transition.event } }) : undefined;
    },
  },
  {
    // Beyond the service's capacity nothing was written: retryable, after the service's hint (whole seconds).
    code: Code.ResourceExhausted,
    kind: "overloaded",
    on: PUBLIC,
    toReply: (error) => errorReply("overloaded", { headers: { "retry-after": retryAfterOf(error, 1) } }),
  },
  // A dependency is down (the referral service unreachable, restarting, connection refused or reset; or the service's
  // database, kind `unavailable`): nothing was applied, so a retryable 503 with the service's Retry-After hint.
  ...dependencyDownRows(Code.Unavailable, (error) => retryAfterOf(error, SERVICE_DOWN_RETRY_AFTER_S)),
  // The referral service refuses the gateway's own token (revoked, or lacking a scope a route needs: the token changed
  // after the start-up check, gateway/check-service-token.ts): the gateway cannot serve the route until an operator
  // fixes the token, which is not the caller's fault. The same 503, with a longer Retry-After.
  ...dependencyDownRows(Code.PermissionDenied, () => String(GATEWAY_TOKEN_REFUSED_RETRY_AFTER_S)),
  ...dependencyDownRows(Code.Unauthenticated, () => String(GATEWAY_TOKEN_REFUSED_RETRY_AFTER_S)),
  // DomainError messages are written to be shown to callers (services/shared/rpc/errors.ts).
  { code: Code.InvalidArgument, kind: "invalid_argument", on: PUBLIC, toReply: (error) => errorReply("invalidField", error.rawMessage) },
  { code: Code.InvalidArgument, on: DASHBOARD, toReply: (error) => errorReply("invalidField", error.rawMessage) },
  { code: Code.NotFound, on: DASHBOARD, toReply: (error) => errorReply("unknownResource", error.rawMessage) },
  // The gateway's own token lacks a scope (never shown to owners: its text is for operators): 503, logged.
  { code: Code.PermissionDenied, kind: TOKEN_SCOPE_KIND, on: DASHBOARD, toReply: () => errorReply("serviceUnavailable"), log: true },
  { code: Code.PermissionDenied, on: DASHBOARD, toReply: (error) => errorReply("forbidden", error.rawMessage) },
  // The owner's session ended between the gateway's check and the call: 401. Any other Unauthenticated is the
  // gateway's own service token refused, a misconfiguration an operator must fix: 503, logged, its text not shown.
  { code: Code.Unauthenticated, kind: SESSION_EXPIRED_KIND, on: DASHBOARD, toReply: (error) => errorReply("sessionExpired", error.rawMessage) },
  { code: Code.Unauthenticated, on: DASHBOARD, toReply: () => errorReply("serviceUnavailable"), log: true },
  { code: Code.FailedPrecondition, on: DASHBOARD, toReply: (error) => errorReply("conflict", error.rawMessage) },
  { code: Code.AlreadyExists, on: DASHBOARD, toReply: (error) => errorReply("conflict", error.rawMessage) },
  { code: Code.DeadlineExceeded, on: DASHBOARD, toReply: () => errorReply("serviceTimeout"), log: true },
  // The referral service answered, but its database is down: the public text that names the cause, with Retry-After.
  {
    code: Code.Unavailable,
    kind: "unavailable",
    on: DASHBOARD,
    toReply: (error) => errorReply("unavailable", { headers: { "retry-after": retryAfterOf(error, SERVICE_DOWN_RETRY_AFTER_S) } }),
    log: true,
  },
  { code: Code.Unavailable, on: DASHBOARD, toReply: () => errorReply("serviceUnavailable"), log: true },
];

/**
 * Maps an error thrown by a referral-service RPC to the HTTP answer of `surface` (default: the
 * public endpoints other than ingest). Anything the table does not name - on the public API including
 * a deadline or an unknown kind - is 500 `internal error` with the cause kept for the log; the service
 * or its database being unreachable is the retryable 503 with Retry-After.
 */
export function fromRpcError(error: unknown, surface: ErrorSurface = "public"): MappedRpcError {
  if (error instanceof ConnectError) {
    const kind = error.metadata.get(ERROR_KIND_HEADER) ?? undefined;
    for (const row of RPC_ERROR_TABLE) {
      if (row.code !== error.code || !row.on.includes(surface) || (row.kind !== undefined && row.kind !== kind)) continue;
      const reply = row.toReply(error);
      if (!reply) continue;
      if (!row.log) return { reply };
      return { reply, cause: error, failure: reply.status === 503 ? "service_unavailable" : "internal_error" };
    }
  }
  // Failure policy: fail closed - an unrecognised failure is a retryable 500; the cause is logged, never sent.
  return { reply: errorReply("internal"), cause: error, failure: "internal_error" };
}
