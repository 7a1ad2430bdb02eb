import { createHash } from "node:crypto";
import { DomainError } from "../shared/values/domain-error.js";
import { boundField } from "../shared/values/field-rules.js";
import { requirePlatformId } from "../shared/values/player-ids.js";
import { isVoterKeyKind, VOTER_KEY_KINDS, type VoterKeyKind } from "../shared/values/voter-key-kinds.js";

/** A voter's key in its normal form (a platform id as services/shared/values/player-ids.ts writes it). */
export interface VoterKey {
  kind: VoterKeyKind;
  value: string;
}

/** The voter's key from a request: format-checked and in normal form, or DomainError invalid_argument. */
export function toVoterKey(kind: string, raw: string): VoterKey {
  if (!isVoterKeyKind(kind)) throw new DomainError("invalid_argument", `key_kind must be one of ${VOTER_KEY_KINDS.join(", ")}`);
  if (kind === "username") {
    if (raw.trim() === "") throw new DomainError("invalid_argument", "key is required");
    return { kind, value: boundField("username", raw) };
  }
  return { kind, value: requirePlatformId(kind, raw) };
}

/**
 * The audit's form of a key: hex SHA-256 of `<kind>:<value>`, a username lower-cased (as the hearts rules compare
 * it), so the same voter always hashes the same and the audit never holds the key in clear.
 */
export function hashVoterKey(key: VoterKey): string {
  const value = key.kind === "username" ? key.value.toLowerCase() : key.value;
  return createHash("sha256").update(`${key.kind}:${value}`).digest("hex");
}
