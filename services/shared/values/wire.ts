/**
 * Wire constants both sides of an internal call need (the gateway and the referral service's
 * modules): header names, metadata values, paths and request bounds. Import-free on purpose, so
 * the gateway can share them without loading a service's code (ARCHITECTURE.md, "Layers").
 */

/** Header carrying the request id across the gateway and internal RPCs. */
export const REQUEST_ID_HEADER = "x-request-id";

/** Connect metadata key carrying the domain error kind, so the gateway can pick the exact contract text. */
export const ERROR_KIND_HEADER = "x-error-kind";

/** Connect metadata key of an Overloaded error's retry hint, in whole seconds (at least 1), like HTTP Retry-After. */
export const RETRY_AFTER_HEADER = "retry-after";

/**
 * Header with which a caller holding the `dashboard` scope (the gateway) acts for an
 * owner's dashboard session: its value is the session token (the cookie's value).
 */
export const DASHBOARD_SESSION_HEADER = "x-dashboard-session";

/** ERROR_KIND_HEADER value of an `unauthenticated` caused by the dashboard session (not the service token). */
export const SESSION_EXPIRED_KIND = "session_expired";

/** ERROR_KIND_HEADER value of a `permission_denied` caused by the calling service token's scopes (not an owner's rights). */
export const TOKEN_SCOPE_KIND = "token_scope";

/** Path of the login link on the public gateway; the token is the `token` query parameter. */
export const DASHBOARD_LOGIN_PATH = "/dashboard/login";

/** The most hearts one page of the pull API may hold. */
export const MAX_PULL_PAGE = 500;
/** The most heart ids one pull claim may carry. */
export const MAX_PULL_CLAIM = 500;

/** Prefix of a heart's receipt page on the public gateway: `/receipts/<token>` (HTML), `/receipts/<token>.json` (JSON). */
export const RECEIPT_PATH_PREFIX = "/receipts/";
/** Suffix of a receipt path that asks for the receipt as JSON. */
export const RECEIPT_JSON_SUFFIX = ".json";
/** Suffix of a receipt path that takes a vote-reminder opt-in: `POST /receipts/<token>/reminder` (form field `email`). */
export const REMINDER_OPT_IN_SUFFIX = "/reminder";
/** Prefix of a reminder's confirm link: `GET` shows a button, `POST /reminders/confirm/<token>` confirms. */
export const REMINDER_CONFIRM_PREFIX = "/reminders/confirm/";
/** Prefix of a reminder's unsubscribe link: `GET` shows a button, `POST /reminders/unsubscribe/<token>` unsubscribes (RFC 8058 one click). */
export const REMINDER_UNSUBSCRIBE_PREFIX = "/reminders/unsubscribe/";
