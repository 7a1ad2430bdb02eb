import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type ClearVoterRoleSettingsRequest,
  type GetVoterRoleSettingsRequest,
  type SetVoterRoleSettingsRequest,
  type VoterRoleSettings,
  VoterRoleSettingsSchema,
} from "../../gen/proto/servers/v1/voter_roles_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError } from "../shared/rpc/errors.js";
import { normalizePlatformId } from "../shared/values/player-ids.js";
import { requireServerId } from "../servers/server-exists.js";
import { VOTER_ROLE_DURATION_LIMITS_SECONDS } from "./domain/voter-role-step.js";
import { deleteVoterRoleSettings, readVoterRoleSettings, saveVoterRoleSettings, type VoterRoleSettingsRow } from "./voter-role-store.js";

/** The longest bot token accepted (Discord's are about 72 characters). */
export const MAX_BOT_TOKEN_CHARS = 200;
/** The refusal of an empty token when none is stored. */
export const BOT_TOKEN_REQUIRED_TEXT = "bot_token is required: no bot token is stored for this server";

/** The settings as GetVoterRoleSettings answers them: never the token. */
export function toVoterRoleSettings(row: VoterRoleSettingsRow | undefined): VoterRoleSettings {
  if (row === undefined) return create(VoterRoleSettingsSchema, { configured: false });
  return create(VoterRoleSettingsSchema, {
    configured: true,
    guildId: row.guild_id,
    roleId: row.role_id,
    durationSeconds: row.duration_seconds,
    botTokenSet: row.bot_token_sealed !== "",
    lastError: row.last_error ?? "",
    ...(row.last_error_at ? { lastErrorAt: timestampFromDate(row.last_error_at) } : {}),
    ...(row.last_ok_at ? { lastOkAt: timestampFromDate(row.last_ok_at) } : {}),
  });
}

/** A Discord id of the request, or invalid_argument naming the field. */
function snowflakeOf(field: string, raw: string): string {
  const id = normalizePlatformId("discord_id", raw);
  if (id === null) throw new DomainError("invalid_argument", `${field} must be a Discord id: 17 to 20 decimal digits`);
  return id;
}

/**
 * SetVoterRoleSettings: checks the ids, the duration and the token's shape, seals the token with SECRETS_KEY (an empty
 * one keeps the stored token) and saves. The token is never answered back, logged or put in an error.
 */
export async function setVoterRoleSettings(deps: CoreDeps, req: SetVoterRoleSettingsRequest): Promise<VoterRoleSettings> {
  const serverId = await requireServerId(deps, req.serverId);
  const guildId = snowflakeOf("guild_id", req.guildId);
  const roleId = snowflakeOf("role_id", req.roleId);
  const { min, max } = VOTER_ROLE_DURATION_LIMITS_SECONDS;
  if (!Number.isInteger(req.durationSeconds) || req.durationSeconds < min || req.durationSeconds > max) {
    throw new DomainError("invalid_argument", `duration_seconds must be between ${min} and ${max}`);
  }
  const token = req.botToken.trim();
  if (token.length > MAX_BOT_TOKEN_CHARS || /[\s\p{Cc}]/u.test(token)) {
    throw new DomainError("invalid_argument", `bot_token must be a Discord bot token (at most ${MAX_BOT_TOKEN_CHARS} characters, no spaces)`);
  }
  const row = await saveVoterRoleSettings(deps.prisma, {
    serverId,
    botTokenSealed: token === "" ? null : deps.secretBox.seal(token),
    guildId,
    roleId,
    durationSeconds: req.durationSeconds,
    now: deps.now(),
  });
  if (row === undefined) throw new DomainError("invalid_argument", BOT_TOKEN_REQUIRED_TEXT);
  return toVoterRoleSettings(row);
}

/** GetVoterRoleSettings: the server's settings without the token, with the last failure and when. */
export async function getVoterRoleSettings(deps: CoreDeps, req: GetVoterRoleSettingsRequest): Promise<VoterRoleSettings> {
  const serverId = await requireServerId(deps, req.serverId);
  return toVoterRoleSettings(await readVoterRoleSettings(deps.prisma, serverId));
}

/** ClearVoterRoleSettings: voter roles off; the grants lapse now (the role job forgets them: the token is gone). */
export async function clearVoterRoleSettings(deps: CoreDeps, req: ClearVoterRoleSettingsRequest): Promise<void> {
  const serverId = await requireServerId(deps, req.serverId);
  await deleteVoterRoleSettings(deps.prisma, serverId, deps.now());
}
