import { DomainError } from "../../shared/errors.js";
import { boundField, type FieldName } from "../../shared/field-rules.js";
import { isUuid } from "../../shared/ids.js";
import { isReferralEventName, type ReferralEventName } from "./transitions.js";

/** The contract's text for an event outside the enum. */
export const EVENT_ENUM_ERROR = "event must be one of registered|qualified|reversed";
/** The contract's text for `registered` without `referee_identity`. */
export const REFEREE_REQUIRED_ERROR = "referee_identity is required for a registered event";

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
}

/**
 * Validates an ApplyEvent request defensively (the gateway checked it already).
 * Throws DomainError invalid_argument naming the field, or unknown_server when
 * `server_id` cannot be a server id.
 */
export function toApplyEventCommand(input: ApplyEventInput): ApplyEventCommand {
  const event = input.event;
  if (event === null || !isReferralEventName(event)) throw new DomainError("invalid_argument", EVENT_ENUM_ERROR);
  const serverId = requireField("server_id", input.serverId);
  const token = requireField("token", input.token);
  const serverEventId = requireField("server_event_id", input.serverEventId);
  let refereeIdentity: string | null = null;
  if (event === "registered") {
    refereeIdentity = input.refereeIdentity.trim();
    if (refereeIdentity === "") throw new DomainError("invalid_argument", REFEREE_REQUIRED_ERROR);
    boundField("referee_identity", refereeIdentity);
  }
  if (!isUuid(serverId)) throw new DomainError("unknown_server", "unknown server");
  const kid = boundField("kid", input.kid.trim());
  return {
    serverId,
    event,
    token,
    refereeIdentity,
    serverEventId,
    callerTs: input.ts === 0n ? null : input.ts,
    kid: kid === "" ? null : kid,
  };
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
 * every string within services/shared/field-rules.ts (the user agent is cut, not refused).
 */
export function toRecordClickCommand(input: { serverId: string; referrerIdentity: string; ip: string; userAgent: string }): RecordClickCommand {
  const serverId = requireField("server_id", input.serverId);
  const referrerIdentity = requireField("referrer_identity", input.referrerIdentity);
  if (!isUuid(serverId)) throw new DomainError("unknown_server", "unknown server");
  const ip = boundField("ip", input.ip.trim());
  const userAgent = boundField("user_agent", input.userAgent.trim());
  return { serverId, referrerIdentity, ip: ip === "" ? null : ip, userAgent: userAgent === "" ? null : userAgent };
}

/** Trimmed and non-empty; bounded by the field table except `server_id` (: the uuid check bounds it; not a uuid -> unknown server). */
function requireField(name: FieldName | "server_id", value: string): string {
  const trimmed = value.trim();
  if (trimmed === "") throw new DomainError("invalid_argument", `${name} is required`);
  return name === "server_id" ? trimmed : boundField(name, trimmed);
}
