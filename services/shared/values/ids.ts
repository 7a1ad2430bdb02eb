/** Ids shared by every service and the gateway: the uuid shape, the nil uuid and time-ordered ids. */
import { createHash, randomBytes } from "node:crypto";

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The nil uuid: `heart.test` callbacks carry it as `heart_id`; probes use it as an id no row has. */
export const NIL_UUID = "00000000-0000-0000-0000-000000000000";

/**
 * True when `value` is a uuid. Ids that are not uuids cannot name a row, so
 * callers answer "unknown ..." without asking the database (whose uuid cast
 * would otherwise fail with an internal error).
 */
export function isUuid(value: string): boolean {
  return UUID_PATTERN.test(value);
}

/**
 * A new time-ordered id: a uuid of version 7 (RFC 9562), the Unix milliseconds `at` in its first 48 bits, then 74
 * random bits. For the rows of the big tables the application names (hearts, referrals, test deliveries): a random
 * key would land each insert on a random leaf of the primary-key index, which after years no longer fits the cache;
 * a time-ordered one appends at its right edge. The database makes the same ids for the rows it names (`uuid_v7()`,
 * migration 20261130152000_uuid_v7). Ids made in the same millisecond are not ordered among themselves.
 */
export function timeOrderedId(at: number = Date.now()): string {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(Math.floor(at), 0, 6);
  bytes[6] = (bytes[6]! & 0x0f) | 0x70;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  return uuidOfBytes(bytes);
}

/**
 * The id named by `name`, always the same for the same name: a uuid of version 8 (RFC 9562, custom) made of the first
 * 122 bits of SHA-256(`name`). For events made again by a replay (a progression event of a counted vote: the replay
 * makes the same name, so the same id, and its delivery is stored once).
 */
export function nameBasedId(name: string): string {
  const bytes = createHash("sha256").update(name, "utf8").digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  return uuidOfBytes(bytes);
}

/** The canonical text form of a uuid's 16 bytes (lower-case hex, dashed 8-4-4-4-12). */
export function uuidOfBytes(bytes: Buffer): string {
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A uuid's 16 bytes. */
export function bytesOfUuid(id: string): Buffer {
  return Buffer.from(id.replaceAll("-", ""), "hex");
}
