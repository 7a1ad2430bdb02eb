import { fieldProblem, type FieldName } from "./field-rules.js";

/**
 * THE contract module (docs/contract.md): every error the HTTP edge answers with its status and
 * exact text, the referral lifecycle's events and states, and the field rules the gateway and the
 * referral service both apply. Services build their domain errors' messages from it, the gateway
 * its replies (gateway/http-errors.ts) and gateway/openapi.ts its enums and error examples, so a
 * status, a text or an event name has this one home. Pure: no I/O.
 */

/** One error with a fixed text: the HTTP status and the exact `error` text. */
export interface FixedError {
  status: number;
  text: string;
}

/** The public contract's errors (the integration guide lists every text): kind -> status and exact text. */
export const CONTRACT_ERRORS = {
  bodyTooLarge: { status: 413, text: "body too large" },
  badSignatureHeader: { status: 400, text: "missing or malformed X-Service-Signature header" },
  invalidJson: { status: 400, text: "body is not valid JSON" },
  badEvent: { status: 400, text: "event must be one of registered|qualified|reversed" },
  refereeRequired: { status: 400, text: "referee_identity is required for a registered event" },
  badSignature: { status: 401, text: "signature rejected: bad_signature" },
  stale: { status: 401, text: "signature rejected: stale" },
  unknownServer: { status: 404, text: "unknown server" },
  referralsDisabled: { status: 404, text: "referrals not enabled for this server" },
  pullDisabled: { status: 404, text: "pull API not enabled for this server" },
  unknownToken: { status: 404, text: "unknown referral token for this server" },
  invalidTransition: { status: 422, text: "invalid state transition" },
  internal: { status: 500, text: "internal error" },
  methodNotAllowed: { status: 405, text: "method not allowed" },
  notFound: { status: 404, text: "not found" },
  tooManyFailedSignatures: { status: 429, text: "too many failed signature checks; retry after the Retry-After delay" },
  overloaded: { status: 503, text: "service overloaded; retry after the Retry-After delay" },
  /** A dependency (the referral service, the database) is down or restarting, on every public path but ingest (whose 503 is `overloaded`). */
  unavailable: { status: 503, text: "service temporarily unavailable; retry after the Retry-After delay" },
} as const satisfies Record<string, FixedError>;

/** The dashboard API's own fixed texts (not in the public contract). */
export const DASHBOARD_ERRORS = {
  bodyNotObject: { status: 400, text: "body must be a JSON object" },
  dashboardTokenInvalid: { status: 401, text: "missing or invalid dashboard token" },
  serviceUnavailable: { status: 503, text: "the referral service is unavailable; try again shortly" },
  serviceTimeout: { status: 504, text: "the referral service did not answer in time; try again" },
} as const satisfies Record<string, FixedError>;

/**
 * Errors whose text is written by the check that failed (it names the field or the resource:
 * `token is required`, `unknown delivery`, ...): kind -> status only.
 */
export const CHECK_ERRORS = {
  invalidField: { status: 400 },
  sessionExpired: { status: 401 },
  forbidden: { status: 403 },
  unknownResource: { status: 404 },
  conflict: { status: 409 },
  /** A referral link (`/r/`) from an address past its click limit (gateway/handle-referral-link.ts writes the text). */
  tooManyClicks: { status: 429 },
  /** The reward queue API from an address past the wrong-key limit (gateway/handle-reward-queue.ts writes the text). */
  tooManyKeyGuesses: { status: 429 },
} as const satisfies Record<string, { status: number }>;

/** A public contract error kind. */
export type ContractErrorKind = keyof typeof CONTRACT_ERRORS;
/** An error kind with a fixed text. */
export type FixedErrorKind = ContractErrorKind | keyof typeof DASHBOARD_ERRORS;
/** An error kind whose text the failing check writes. */
export type CheckErrorKind = keyof typeof CHECK_ERRORS;

const FIXED_ERRORS: Record<FixedErrorKind, FixedError> = { ...CONTRACT_ERRORS, ...DASHBOARD_ERRORS };

/** The status and exact text of a fixed-text error. */
export function fixedError(kind: FixedErrorKind): FixedError {
  return FIXED_ERRORS[kind];
}

/** The HTTP status of any error kind. */
export function statusOf(kind: FixedErrorKind | CheckErrorKind): number {
  return kind in CHECK_ERRORS ? CHECK_ERRORS[kind as CheckErrorKind].status : FIXED_ERRORS[kind as FixedErrorKind].status;
}

/** Contract kind -> exact text. */
export const ERROR_TEXT = Object.fromEntries(Object.entries(CONTRACT_ERRORS).map(([kind, e]) => [kind, e.text])) as {
  readonly [K in ContractErrorKind]: (typeof CONTRACT_ERRORS)[K]["text"];
};

// ---- The referral lifecycle -------------------------------------------------------------------

/** The public path signed referral lifecycle events are POSTed to. */
export const INGEST_PATH = "/api/referral/events";

/** The lifecycle events a game server reports. */
export const REFERRAL_EVENTS = ["registered", "qualified", "reversed"] as const;
/** A lifecycle event name. */
export type ReferralEventName = (typeof REFERRAL_EVENTS)[number];
/** The states of a minted anchor (stored in the database): each is the event that reached it. */
export const ANCHOR_STATES = REFERRAL_EVENTS;
/** The state of a minted anchor. */
export type AnchorState = (typeof ANCHOR_STATES)[number];
/** Every state a referral can be reported in; `clicked` means no anchor exists yet. */
export const REFERRAL_STATES = ["clicked", ...ANCHOR_STATES] as const;
/** A referral state, including `clicked` (no anchor). */
export type ReferralStateName = (typeof REFERRAL_STATES)[number];

/** True when `value` names a lifecycle event. */
export function isReferralEventName(value: string): value is ReferralEventName {
  return (REFERRAL_EVENTS as readonly string[]).includes(value);
}

/** True when `value` names an anchor state. */
export function isAnchorState(value: string): value is AnchorState {
  return (ANCHOR_STATES as readonly string[]).includes(value);
}

// ---- Field rules (each written once: the gateway's checks and the referral service's commands) ----

// Every text below names the field as the caller spells it; each kind of rule has its one builder here,
// used by the check that applies it (gateway, dashboard API or an RPC handler) and by gateway/openapi.ts.
// The texts of a bounded field's limits (length, NUL) are built beside their table in field-rules.ts.
export { atMostCharsText, nulText, tooLongText } from "./field-rules.js";

/** The 400 / invalid_argument text of a missing (absent, null or empty after trimming) field. */
export function requiredText(field: string): string {
  return `${field} is required`;
}

/** The 400 text of a field of another JSON type than string. */
export function notStringText(field: string): string {
  return `${field} must be a string`;
}

/** The 400 text of a field of another JSON type than boolean. */
export function notBooleanText(field: string): string {
  return `${field} must be a boolean`;
}

/**
 * The reasons a `reversed` event may carry (optional `reason`). Not a contract field: any other value
 * is kept as `other` with its text, never refused.
 */
export const REVERSAL_REASONS = ["refund", "chargeback", "fraud", "abuse", "test", "other"] as const;
/** One of REVERSAL_REASONS. */
export type ReversalReason = (typeof REVERSAL_REASONS)[number];

/** The 400 text of a timestamp that is not an integer number of unix seconds (in int64 range). */
export function unixSecondsText(field: string): string {
  return `${field} must be an integer (unix seconds)`;
}

/** The invalid_argument text of a negative count (a page size or limit: 0 means the default). */
export function notNegativeText(field: string): string {
  return `${field} must not be negative`;
}

/** The text of a count that is not a whole number of zero or more. */
export function nonNegativeIntegerText(field: string): string {
  return `${field} must be a non-negative integer`;
}

/** The text of a number outside [min, max]. */
export function betweenText(field: string, min: number, max: number): string {
  return `${field} must be between ${min} and ${max}`;
}

/** The text of a JSON value that is not an integer within [min, max]. */
export function integerBetweenText(field: string, min: number, max: number): string {
  return `${field} must be an integer between ${min} and ${max}`;
}

/** The text of a value outside a list, as the HTTP edge writes it: `event must be one of a|b|c`. */
export function oneOfText(field: string, values: readonly string[]): string {
  return `${field} must be one of ${values.join("|")}`;
}

/** The invalid_argument text of an RPC enum outside its list, in words: `verdict must be a, b or c`. */
export function choiceText(field: string, values: readonly string[]): string {
  return `${field} must be ${values.slice(0, -1).join(", ")} or ${values.at(-1)}`;
}

/** The text of a period that is neither a calendar month `YYYY-MM` nor an ISO week `YYYY-Www`. */
export function monthOrWeekText(field: string): string {
  return `${field} must be YYYY-MM or YYYY-Www`;
}

/** The text of a calendar month that is not `YYYY-MM`. */
export function monthText(field: string): string {
  return `${field} must be YYYY-MM`;
}

/** The text of a URL that does not parse (the URL itself is never echoed). */
export function invalidUrlText(field: string): string {
  return `${field} is not a valid URL`;
}

/** The text of a URL whose port is 0: no listener can be reached there (the scheme's default port is written as none). */
export function urlPortZeroText(field: string): string {
  return `${field} must not use port 0`;
}

/** The text of a URL that carries a user name or password. */
export function urlCredentialsText(field: string): string {
  return `${field} must not contain credentials`;
}

/** A required string's check: trimmed, non-empty and (for a bounded field) within its bound. */
export type TextCheck = { kind: "ok"; value: string } | { kind: "invalid"; error: string };

/**
 * A required text field: empty after trimming is "is required"; a `bounded` field holding a NUL or
 * over its length is refused (services/shared/values/field-rules.ts). Returns the trimmed value.
 */
export function checkRequiredText(field: string, value: string, bounded?: FieldName): TextCheck {
  const trimmed = value.trim();
  if (trimmed === "") return { kind: "invalid", error: requiredText(field) };
  const problem = bounded === undefined ? null : fieldProblem(bounded, trimmed);
  return problem === null ? { kind: "ok", value: trimmed } : { kind: "invalid", error: problem };
}

/** `event`: one of the lifecycle events, else the contract's enum text. */
export function checkEvent(value: unknown): { kind: "ok"; value: ReferralEventName } | { kind: "invalid"; error: string } {
  return typeof value === "string" && isReferralEventName(value) ? { kind: "ok", value } : { kind: "invalid", error: ERROR_TEXT.badEvent };
}

/**
 * `referee_identity` (already trimmed): required, and within its bounds, for `registered` only (later
 * events ignore it, so it is passed through unchecked).
 */
export function checkRefereeIdentity(event: ReferralEventName, trimmed: string): TextCheck {
  if (event !== "registered") return { kind: "ok", value: trimmed };
  if (trimmed === "") return { kind: "invalid", error: ERROR_TEXT.refereeRequired };
  const problem = fieldProblem("referee_identity", trimmed);
  return problem === null ? { kind: "ok", value: trimmed } : { kind: "invalid", error: problem };
}
