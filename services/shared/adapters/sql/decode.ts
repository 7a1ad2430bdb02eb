import pg from "pg";

/**
 * The one decoding of a raw statement's columns, passed with every statement the executor runs
 * (executor.ts), so no row anywhere meets two decoders. A column's TypeScript type follows from its
 * SQL type alone:
 *
 * | SQL type                                   | TypeScript          | note                                              |
 * |--------------------------------------------|---------------------|---------------------------------------------------|
 * | `bigint` (int8), `count(*)`, `bigint[]`     | `bigint`, `bigint[]` | exact; `Number()` where a count is small         |
 * | `integer`, `smallint`, `real`, `float8`     | `number`            | a `::int` or `::float8` cast asks for a number   |
 * | `numeric` (`sum(bigint)`, `avg`)           | `string`            | exact; cast in SQL (`::int8`, `::float8`) instead |
 * | `timestamptz`, `timestamp`                 | `Date`              | `timestamp` read as UTC, never the machine's zone |
 * | `date`                                     | `Date`              | midnight UTC of that day                          |
 * | `json`, `jsonb`                            | parsed value        | values inside keep JSON's types: a timestamp there is a string, so decode it at the one place that reads it |
 * | `bytea`                                    | `Buffer`            | a `Uint8Array`                                    |
 * | `uuid`, `text`, `boolean`                  | `string`, `boolean` |                                                   |
 *
 * Prisma's model API decodes its own results; this table is for raw SQL only.
 */
export const SQL_TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") => {
    if (format !== "binary") {
      const parser = TEXT_PARSERS.get(oid);
      if (parser) return parser;
    }
    return pg.types.getTypeParser(oid, format ?? "text");
  }) as pg.CustomTypesConfig["getTypeParser"],
};

/** PostgreSQL type OIDs (pg_type.oid) whose text form is decoded here rather than by node-postgres's defaults. */
export const SQL_TYPE_OIDS = { INT8: 20, INT8_ARRAY: 1016, TIMESTAMP: 1114, DATE: 1082 } as const;

const parseInt8Array = (text: string): bigint[] => {
  const inner = text.slice(1, -1);
  return inner === "" ? [] : inner.split(",").map((item) => BigInt(item));
};

const TEXT_PARSERS = new Map<number, (text: string) => unknown>([
  [SQL_TYPE_OIDS.INT8, (text) => BigInt(text)],
  [SQL_TYPE_OIDS.INT8_ARRAY, parseInt8Array],
  // `timestamp` carries no zone: read as UTC (node-postgres's default reads it in the machine's zone).
  [SQL_TYPE_OIDS.TIMESTAMP, (text) => new Date(`${text.replace(" ", "T")}Z`)],
  [SQL_TYPE_OIDS.DATE, (text) => new Date(`${text}T00:00:00Z`)],
]);
