import { DomainError, unknownServer } from "../../shared/rpc/errors.js";
import { boundField, type FieldName } from "../../shared/values/field-rules.js";
import { checkEvent, checkRefereeIdentity, checkRequiredText, type ReferralEventName } from "../../shared/values/contract.js";
import { isUuid } from "../../shared/values/ids.js";
import { toStoredReason, type StoredReason } from "./reversal-rules.js";

/** A validated, trimmed lifecycle event. */
export interface ApplyEventCommand {
  serverId: string;
  event: ReferralEventName;
  token: string;
  /** Set for `registered` only; ignored on later events. */
  refereeIdentity: string | null;
  serverEventId: string;
  callerTs: bigint | null;
  kid: string | null;
  /** `reversed` with a reason only: the reason as stored (R1); unset: none. */
  reason?: StoredReason;
}

/** The raw fields of an ApplyEvent request (event already mapped to its name, or null when unspecified). */
export interface ApplyEventInput {
  serverId: string;
  event: string | null;
  token: string;
  refereeIdentity: string;
  serverEventId: string;
  ts: bigint;
  kid: string;
  /** The reason as sent (`reversed` only; absent: empty). */
  reason?: string;
}

/**
 * Validates an ApplyEvent request defensively (the gateway checked it already).
 * Throws DomainError invalid_argument naming the field, or unknown_server when
 * `server_id` cannot be a server id.
 */
export function toApplyEventCommand(input: ApplyEventInput): ApplyEventCommand {
  const event = checkedValue(checkEvent(input.event));
  const serverId = requireField("server_id", input.serverId);
  const token = requireField("token", input.token);
  const serverEventId = requireField("server_event_id", input.serverEventId);
  const referee = checkedValue(checkRefereeIdentity(event, input.refereeIdentity.trim()));
  const refereeIdentity = event === "registered" ? referee : null;
  if (!isUuid(serverId)) throw unknownServer();
  const kid = boundField("kid", input.kid.trim());
  return {
    serverId,
    event,
    token,
    refereeIdentity,
    serverEventId,
    callerTs: input.ts === 0n ? null : input.ts,
    kid: kid === "" ? null : kid,
    ...reasonOf(event, input.reason ?? ""),
  };
}

/** R1: the stored reason of a `reversed` event, as an optional field (none: absent). */
function reasonOf(event: ReferralEventName, sent: string): { reason?: StoredReason } {
  if (event !== "reversed") return {};
  const reason = toStoredReason(sent);
  return reason.reason === null ? {} : { reason };
}

/** A validated click. */
export interface RecordClickCommand {
  serverId: string;
  referrerIdentity: string;
  ip: string | null;
  userAgent: string | null;
}

/**
 * Validates a RecordClick request: referrer_identity non-empty after trimming; server_id a uuid;
 * every string within services/shared/values/field-rules.ts (the user agent is cut, not refused).
 */
export function toRecordClickCommand(input: { serverId: string; referrerIdentity: string; ip: string; userAgent: string }): RecordClickCommand {
  const serverId = requireField("server_id", input.serverId);
  const referrerIdentity = requireField("referrer_identity", input.referrerIdentity);
  if (!isUuid(serverId)) throw unknownServer();
  const ip = boundField("ip", input.ip.trim());
  const userAgent = boundField("user_agent", input.userAgent.trim());
  return { serverId, referrerIdentity, ip: ip === "" ? null : ip, userAgent: userAgent === "" ? null : userAgent };
}

/** Trimmed and non-empty; bounded by the field table except `server_id` (: the uuid check bounds it; not a uuid -> unknown server). */
function requireField(name: FieldName | "server_id", value: string): string {
  return checkedValue(checkRequiredText(name, value, name === "server_id" ? undefined : name));
}

/** A contract check's value, or DomainError invalid_argument with its text. */
function checkedValue<T>(check: { kind: "ok"; value: T } | { kind: "invalid"; error: string }): T {
  if (check.kind === "invalid") throw new DomainError("invalid_argument", check.error);
  return check.value;
}
