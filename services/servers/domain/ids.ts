const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * True when `value` is a uuid. Ids that are not uuids cannot name a row, so
 * callers answer "unknown ..." without asking the database (whose uuid cast
 * would otherwise fail with an internal error).
 */
export function isUuid(value: string): boolean {
  return UUID_PATTERN.test(value);
}
