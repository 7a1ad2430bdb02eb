import { VoterKeyKind as ProtoKeyKind } from "../../../gen/proto/voters/v1/voters_pb.js";
import type { PlatformIdField } from "./player-ids.js";

/**
 * The kinds of key a voter's export and erasure find a voter by (services/voter-data), in one home for the service,
 * the CLI and the dashboard.
 */

/** What a voter is found by: the username the hearts carry (case-insensitive) or one platform id. */
export type VoterKeyKind = "username" | PlatformIdField;

/** The kinds, as the CLI and the dashboard spell them. */
export const VOTER_KEY_KINDS: readonly VoterKeyKind[] = ["username", "steam_id", "discord_id", "minecraft_uuid", "account_id"];

/** Each kind as VoterDataService's enum spells it (the CLI and the dashboard send it; the service reads it back). */
export const PROTO_KEY_KIND: Readonly<Record<VoterKeyKind, ProtoKeyKind>> = {
  username: ProtoKeyKind.USERNAME,
  steam_id: ProtoKeyKind.STEAM_ID,
  discord_id: ProtoKeyKind.DISCORD_ID,
  minecraft_uuid: ProtoKeyKind.MINECRAFT_UUID,
  account_id: ProtoKeyKind.ACCOUNT_ID,
};

/** The kind an enum value names; "" for UNSPECIFIED or an unknown value (refused by toVoterKey). */
export function fromProtoKeyKind(kind: ProtoKeyKind): VoterKeyKind | "" {
  return VOTER_KEY_KINDS.find((k) => PROTO_KEY_KIND[k] === kind) ?? "";
}

/** True when `value` names a key kind. */
export function isVoterKeyKind(value: string): value is VoterKeyKind {
  return (VOTER_KEY_KINDS as readonly string[]).includes(value);
}
