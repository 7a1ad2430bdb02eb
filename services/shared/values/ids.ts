/** Ids shared by every service and the gateway: the uuid shape and the nil uuid. */

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
