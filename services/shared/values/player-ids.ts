import { DomainError } from "./domain-error.js";
import { FIELD_RULES } from "./field-rules.js";

/**
 * THE format rules of a voter's platform ids (CastHeart's steam_id, discord_id, minecraft_uuid,
 * account_id; ClaimService's player id). One home: CastHeart stores what `normalizePlatformId`
 * returns, and the claim ledger looks ids up in the same normal form, so a check matches a vote
 * however the plugin spelled the id.
 */

/** A platform id field, as the wire spells it. */
export type PlatformIdField = "steam_id" | "discord_id" | "minecraft_uuid" | "account_id";

/** The platform ids of one voter, each in its normal form; null when not given. */
export interface PlatformIds {
  steamId: string | null;
  discordId: string | null;
  minecraftUuid: string | null;
  accountId: string | null;
}

/** A voter who gave no platform id. */
export const NO_PLATFORM_IDS: Readonly<PlatformIds> = Object.freeze({ steamId: null, discordId: null, minecraftUuid: null, accountId: null });

/** The smallest and largest SteamID64 of an individual account (universe 1, type 1, instance 1). */
export const STEAM_ID64_MIN = 76561197960265728n;
export const STEAM_ID64_MAX = 76561202255233023n;

/** The invalid_argument text of each platform id field (it names the field). */
export const PLATFORM_ID_TEXT: Readonly<Record<PlatformIdField, string>> = {
  steam_id: `steam_id must be a SteamID64: 17 decimal digits from ${STEAM_ID64_MIN} to ${STEAM_ID64_MAX}`,
  discord_id: "discord_id must be a Discord user id: 17 to 20 decimal digits",
  minecraft_uuid: "minecraft_uuid must be a UUID: 32 hex digits, with or without dashes",
  account_id: `account_id must be 1 to ${FIELD_RULES.account_id.maxChars} printable characters`,
};

const DASHED_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const PLAIN_UUID = /^[0-9a-f]{32}$/;
// C0 and C1 controls and DEL (NUL included): never printable.
const CONTROL = /\p{Cc}/u;

/**
 * The normal form of a platform id, or null when `raw` is not one: SteamID64 and Discord ids as
 * their digits, a Minecraft UUID lower-case with dashes, an account id as given. Surrounding
 * whitespace is dropped from the numeric and UUID forms only (an account id is opaque).
 */
export function normalizePlatformId(field: PlatformIdField, raw: string): string | null {
  if (field === "account_id") {
    const ok = raw.length >= 1 && raw.length <= FIELD_RULES.account_id.maxChars && !CONTROL.test(raw) && raw.trim() !== "";
    return ok ? raw : null;
  }
  const value = raw.trim();
  if (field === "steam_id") {
    if (!/^\d{17}$/.test(value)) return null;
    const id = BigInt(value);
    return id >= STEAM_ID64_MIN && id <= STEAM_ID64_MAX ? value : null;
  }
  if (field === "discord_id") return /^\d{17,20}$/.test(value) ? value : null;
  const lower = value.toLowerCase();
  if (DASHED_UUID.test(lower)) return lower;
  if (!PLAIN_UUID.test(lower)) return null;
  return `${lower.slice(0, 8)}-${lower.slice(8, 12)}-${lower.slice(12, 16)}-${lower.slice(16, 20)}-${lower.slice(20)}`;
}

/** For RPC handlers: the normal form of a given platform id, or DomainError invalid_argument naming the field. */
export function requirePlatformId(field: PlatformIdField, raw: string): string {
  const value = normalizePlatformId(field, raw);
  if (value === null) throw new DomainError("invalid_argument", PLATFORM_ID_TEXT[field]);
  return value;
}

/** CastHeart's optional platform ids: empty means not given (null); anything else must be valid. */
export function toPlatformIds(req: { steamId: string; discordId: string; minecraftUuid: string; accountId: string }): PlatformIds {
  const optional = (field: PlatformIdField, raw: string) => (raw === "" ? null : requirePlatformId(field, raw));
  return {
    steamId: optional("steam_id", req.steamId),
    discordId: optional("discord_id", req.discordId),
    minecraftUuid: optional("minecraft_uuid", req.minecraftUuid),
    accountId: optional("account_id", req.accountId),
  };
}
