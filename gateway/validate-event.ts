import { cutField, type FieldName } from "../services/shared/values/field-rules.js";
import {
  checkEvent,
  checkRefereeIdentity,
  checkRequiredText,
  notStringText,
  requiredText,
  type ReferralEventName,
  notBooleanText,
  unixSecondsText,
} from "../services/shared/values/contract.js";

export type { ReferralEventName } from "../services/shared/values/contract.js";

/** A JSON object body: the only shape the ingest endpoint accepts. */
export type JsonObject = Record<string, unknown>;

/** A field check's outcome: the value, or the 400 text naming the field. */
export type FieldResult<T> = { kind: "ok"; value: T } | { kind: "invalid"; error: string };

/** A ReferralEvent that passed validation; strings are trimmed. */
export interface ValidEvent {
  event: ReferralEventName;
  token: string;
  serverId: string;
  serverEventId: string;
  /** Trimmed; empty when absent (it is only required, and only used, for `registered`). */
  refereeIdentity: string;
  /** The caller's own event time (unix seconds), when sent. */
  ts?: bigint;
  test: boolean;
  /** `reversed` only: the optional `reason` as sent (bounded; a non-string as its JSON text); unset when absent. */
  reason?: string;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Step 3: the raw bytes as a JSON object, or null (-> 400 `body is not valid JSON`)
 * when they are not valid UTF-8, not JSON, or JSON that is not an object (array,
 * null, string, number, boolean). A leading byte-order mark is not JSON either.
 */
export function parseJsonObject(rawBody: Buffer): JsonObject | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8.decode(rawBody));
  } catch {
    // Failure policy: fail closed - bytes that do not decode and parse are the contract's invalid-JSON 400.
    return null;
  }
  return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as JsonObject) : null;
}

/** `null` is treated like an absent field, as many JSON encoders write absent optionals as null. */
function isAbsent(value: unknown): boolean {
  return value === undefined || value === null;
}

/**
 * A required string: absent and null are "is required"; other types "must be a string"; then the
 * contract's text rule (services/shared/values/contract.ts: empty after trimming, NUL, length).
 */
function requiredString(body: JsonObject, field: string, bounded?: FieldName): FieldResult<string> {
  const value = body[field];
  if (isAbsent(value)) return { kind: "invalid", error: requiredText(field) };
  if (typeof value !== "string") return { kind: "invalid", error: notStringText(field) };
  return checkRequiredText(field, value, bounded);
}

/**
 * The optional `reason` of `reversed`, never a 400 (it is not a contract field and the contract accepts
 * unknown extra fields): a string as sent, any other JSON value (number, object, ...) as its JSON text, so the
 * referral service keeps it as `other` with that text; absent or null -> empty. Cut to its bound
 * (services/shared/values/field-rules.ts) before it is forwarded.
 */
function readReason(body: JsonObject): string {
  const value = body.reason;
  if (isAbsent(value)) return "";
  return cutField("reason", typeof value === "string" ? value : JSON.stringify(value));
}

/**
 * Step 4: `server_id`, the only field read before the MAC is verified (it selects
 * the secret). Missing, empty after trimming, or not a string -> 400 naming `server_id`.
 */
export function readServerId(body: JsonObject): FieldResult<string> {
  return requiredString(body, "server_id");
}

/**
 * Step 8: every other field, checked in this order, first failure wins:
 * `event` (one of registered|qualified|reversed, else the contract's text), `token`,
 * `server_event_id` (non-empty strings after trim, within services/shared/values/field-rules.ts:
 * no NUL, at most their length), `referee_identity` (a string when
 * present; required non-empty and within its bounds for `registered`, with the contract's text), `ts`
 * (an integer in int64 range when present), `test` (a boolean when present).
 * Empty strings count as missing, `null` as absent, unknown extra fields are accepted.
 */
export function validateEvent(body: JsonObject): FieldResult<ValidEvent> {
  const checkedEvent = checkEvent(body.event);
  if (checkedEvent.kind === "invalid") return checkedEvent;
  const event = checkedEvent.value;
  const serverId = readServerId(body);
  if (serverId.kind === "invalid") return serverId;
  const token = requiredString(body, "token", "token");
  if (token.kind === "invalid") return token;
  const serverEventId = requiredString(body, "server_event_id", "server_event_id");
  if (serverEventId.kind === "invalid") return serverEventId;

  const referee = body.referee_identity;
  if (!isAbsent(referee) && typeof referee !== "string") return { kind: "invalid", error: notStringText("referee_identity") };
  const refereeIdentity = checkRefereeIdentity(event, typeof referee === "string" ? referee.trim() : "");
  if (refereeIdentity.kind === "invalid") return refereeIdentity;

  let ts: bigint | undefined;
  if (!isAbsent(body.ts)) {
    const value = body.ts;
    if (typeof value !== "number" || !Number.isInteger(value) || BigInt(value) < INT64_MIN || BigInt(value) > INT64_MAX) {
      return { kind: "invalid", error: unixSecondsText("ts") };
    }
    ts = BigInt(value);
  }

  const test = body.test;
  if (!isAbsent(test) && typeof test !== "boolean") return { kind: "invalid", error: notBooleanText("test") };

  const valid: ValidEvent = {
    event,
    token: token.value,
    serverId: serverId.value,
    serverEventId: serverEventId.value,
    refereeIdentity: refereeIdentity.value,
    test: test === true,
  };
  if (ts !== undefined) valid.ts = ts;
  const reason = event === "reversed" ? readReason(body) : "";
  if (reason !== "") valid.reason = reason;
  return { kind: "ok", value: valid };
}
