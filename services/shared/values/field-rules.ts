import { DomainError } from "./domain-error.js";

/**
 * THE table of bounds on every text field that comes from outside, on every path: the
 * gateway's checks (ingest body, referral link query, headers) and every RPC handler that
 * stores or looks up a string import it from here, so a limit or its error text has one home.
 *
 * Lengths count UTF-16 code units (JavaScript's `length`), so one unit is at most 3 bytes of
 * UTF-8; each limit is chosen so that the longest value fits where it goes:
 * - identities and idempotency keys stay under PostgreSQL's btree index row limit (~2.7 KB),
 *   including the composite `(token, type, server_event_id)` unique index (256 + 512 units);
 * - a username fits the reward callback body and a Votifier frame (1024 bytes) with room to spare.
 *
 * Ids (`server_id`, `delivery_id`, ...) and enums (`event`, `period`) are not in the table: their
 * shape checks (uuid, `YYYY-MM`, one of a list) bound them and run before any database access.
 *
 * Every field refuses the NUL character (U+0000): PostgreSQL `text` cannot store it, so it would
 * otherwise surface as an internal error.
 */
export interface FieldRule {
  /** Longest accepted value, in UTF-16 code units. */
  maxChars: number;
  /**
   * `refuse` (default): a longer value is the caller's error (400 / invalid_argument).
   * `truncate`: a longer value is cut to `maxChars` (request signals such as a user agent).
   */
  overflow?: "refuse" | "truncate";
}

/** Field name (as the caller spells it on the wire) -> its bound. */
export const FIELD_RULES = {
  // Ingest (POST /api/referral/events) and ReferralService.ApplyEvent.
  token: { maxChars: 256 },
  server_event_id: { maxChars: 512 },
  referee_identity: { maxChars: 512 },
  kid: { maxChars: 64 },
  // The optional `reason` of `reversed` (ingest and ApplyEvent): never refused (the contract accepts unknown
  // extra fields); a text that is not a known reason is kept as `other` with the text cut here (`cutField`).
  reason: { maxChars: 200, overflow: "truncate" },
  // Referral links (GET /r/<server_id>?referrer=...) and ReferralService.RecordClick.
  referrer: { maxChars: 512 },
  referrer_identity: { maxChars: 512 },
  // HeartService.CastHeart, DeliveryService.SendTestCallback.
  username: { maxChars: 64 },
  voter_identity: { maxChars: 512 },
  ip: { maxChars: 64 },
  user_agent: { maxChars: 1024, overflow: "truncate" },
  // CastHeart's opaque game account id (the other platform ids have exact formats: services/shared/values/player-ids.ts).
  account_id: { maxChars: 128 },
  // ServerAdminService.
  name: { maxChars: 200 },
  // HeartService.ListHearts (the dashboard's Hearts search: a part of a username or a voter identity).
  query: { maxChars: 200 },
  // AccessService.CreateOwner.
  display_name: { maxChars: 200 },
  registration_url: { maxChars: 2048 },
  callback_url: { maxChars: 2048 },
  // ServerAdminService.SetVotifierSettings (services/servers/domain/votifier-settings.ts has the texts).
  votifier_host: { maxChars: 253 },
  votifier_service_name: { maxChars: 64 },
  votifier_token: { maxChars: 256 },
} as const satisfies Record<string, FieldRule>;

/** A field the table bounds. */
export type FieldName = keyof typeof FIELD_RULES;

/** Longest accepted value of a field. */
export function maxCharsOf(field: FieldName): number {
  return FIELD_RULES[field].maxChars;
}

/** The text of a value longer than `maxChars` (any field; `tooLongText` for a field of the table). */
export function atMostCharsText(field: string, maxChars: number): string {
  return `${field} must be at most ${maxChars} characters`;
}

/** The 400 / invalid_argument text for a value over the field's limit. */
export function tooLongText(field: FieldName): string {
  return atMostCharsText(field, FIELD_RULES[field].maxChars);
}

/** The 400 / invalid_argument text for a value holding a NUL character. */
export function nulText(field: FieldName): string {
  return `${field} must not contain NUL characters`;
}

/**
 * What is wrong with `value` for `field`, or null when it is within bounds: the text names
 * the field. A `truncate` field is only refused for a NUL (its length is cut by `boundField`).
 */
export function fieldProblem(field: FieldName, value: string): string | null {
  if (value.includes("\u0000")) return nulText(field);
  const rule: FieldRule = FIELD_RULES[field];
  if (rule.overflow !== "truncate" && value.length > rule.maxChars) return tooLongText(field);
  return null;
}

/**
 * For RPC handlers: returns `value` within its bound (cut for a `truncate` field), or throws
 * DomainError invalid_argument naming the field.
 */
export function boundField(field: FieldName, value: string): string {
  const problem = fieldProblem(field, value);
  if (problem !== null) throw new DomainError("invalid_argument", problem);
  const rule: FieldRule = FIELD_RULES[field];
  return value.length > rule.maxChars ? value.slice(0, rule.maxChars) : value;
}

/**
 * For values that are never refused (the ingest's optional `reason`): NUL characters removed and the
 * value cut to the field's bound. Use `boundField` where the caller's error is an answer.
 */
export function cutField(field: FieldName, value: string): string {
  const clean = value.includes("\u0000") ? value.replaceAll("\u0000", "") : value;
  const max = FIELD_RULES[field].maxChars;
  if (clean.length <= max) return clean;
  // Never end on half of a surrogate pair: a lone surrogate is not valid UTF-8 text.
  const cut = clean.slice(0, max);
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

/** Largest request message the referral service reads (Connect, gRPC and gRPC-Web alike). */
export const MAX_RPC_MESSAGE_BYTES = 64 * 1024;
