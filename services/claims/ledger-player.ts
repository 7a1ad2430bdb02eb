import { Prisma } from "../../gen/prisma/client.js";
import { PlayerIdKind, type PlayerId } from "../../gen/proto/claims/v1/claims_pb.js";
import { requiredText } from "../shared/values/contract.js";
import { DomainError } from "../shared/rpc/errors.js";
import { boundField } from "../shared/values/field-rules.js";
import { requirePlatformId } from "../shared/values/player-ids.js";

/** One player id as the ledger looks it up: an SQL predicate over the vote_claims row `c`. */
export interface LedgerPlayer {
  /** `c.<column> = <value>` (the username lower-cased on both sides, by PostgreSQL's lower()). */
  match: Prisma.Sql;
}

const KIND_COLUMN = {
  [PlayerIdKind.STEAM_ID]: { field: "steam_id", column: "steam_id" },
  [PlayerIdKind.DISCORD_ID]: { field: "discord_id", column: "discord_id" },
  [PlayerIdKind.MINECRAFT_UUID]: { field: "minecraft_uuid", column: "minecraft_uuid" },
  [PlayerIdKind.ACCOUNT_ID]: { field: "account_id", column: "account_id" },
} as const;

/**
 * The ledger's view of a plugin's player id, validated by the same rules CastHeart applies
 * (services/shared/values/player-ids.ts), so a check matches a vote however the id was spelled.
 * invalid_argument names `player.kind` or the id's own field; checked before the key is looked at.
 */
export function toLedgerPlayer(player: PlayerId | undefined): LedgerPlayer {
  const kind = player?.kind ?? PlayerIdKind.UNSPECIFIED;
  const value = player?.value ?? "";
  if (kind === PlayerIdKind.USERNAME) {
    if (value.trim() === "") throw new DomainError("invalid_argument", requiredText("username"));
    return { match: Prisma.sql`c.username_lower = lower(${boundField("username", value)})` };
  }
  if (kind === PlayerIdKind.UNSPECIFIED || !(kind in KIND_COLUMN)) {
    throw new DomainError("invalid_argument", "player.kind must be steam_id, username, discord_id, minecraft_uuid or account_id");
  }
  const { field, column } = KIND_COLUMN[kind as keyof typeof KIND_COLUMN];
  return { match: Prisma.sql`${Prisma.raw(`c.${column}`)} = ${requirePlatformId(field, value)}` };
}
