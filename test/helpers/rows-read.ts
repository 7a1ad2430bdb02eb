import type pg from "pg";
import type { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../../services/shared/adapters/db.js";
import { PLANNED_EACH_RUN, registerSqlPool, runSql, runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";

/** A node of PostgreSQL's EXPLAIN (FORMAT JSON) plan, as far as rowsReadByTable reads it. */
interface PlanNode {
  "Relation Name"?: string;
  "Node Type"?: string;
  "Index Name"?: string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  "Rows Removed by Filter"?: number;
  "Rows Removed by Index Recheck"?: number;
  Plans?: PlanNode[];
}

/**
 * The rows a statement read from each table: every scan node of its EXPLAIN (ANALYZE) plan (not a ModifyTable's: the
 * rows it writes were read by the scan below it) counts the rows it
 * returned plus those its filter or recheck removed, times its loops; a bitmap plan counts the index entries its bitmap
 * index scans read (which name their index, not its table: a bitmap plan may read a long run of entries to return a
 * few heap rows) plus the rows a lossy page's recheck removed, not its heap rows again. Runs the statement inside a transaction that is rolled back, so a statement that writes (a dedup
 * INSERT) leaves nothing behind.
 */
export async function rowsReadByTable(
  client: object,
  sql: Prisma.Sql,
  around: { setup?: readonly string[]; teardown?: readonly string[] } = {},
): Promise<Record<string, number>> {
  const explained = { text: `EXPLAIN (ANALYZE, FORMAT JSON) ${sql.text}`, values: sql.values } as unknown as Prisma.Sql;
  const rolledBack = new Error("rolled back on purpose");
  let plan: PlanNode | undefined;
  const tableOfIndex = new Map<string, string>();
  try {
    await runSqlTransaction(
      client,
      async (tx) => {
        for (const text of around.setup ?? []) await tx.query({ text, values: [] } as unknown as Prisma.Sql);
        const [row] = await tx.query<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>(explained);
        // A prepared statement outlives the rollback (it belongs to the connection): the teardown drops it.
        for (const text of around.teardown ?? []) await tx.query({ text, values: [] } as unknown as Prisma.Sql);
        plan = row?.["QUERY PLAN"][0]?.Plan;
        const indexes = await tx.query<{ indexname: string; tablename: string }>({
          text: "SELECT indexname, tablename FROM pg_indexes WHERE schemaname = current_schema()",
          values: [],
        } as unknown as Prisma.Sql);
        for (const i of indexes) tableOfIndex.set(i.indexname, i.tablename);
        throw rolledBack;
      },
      { timeoutMs: 60_000 },
    );
  } catch (error) {
    // Failure policy: the rollback is the point (the statement may write); any other error is the caller's.
    if (error !== rolledBack) throw error;
  }
  if (!plan) throw new Error("EXPLAIN returned no plan");
  const read: Record<string, number> = {};
  const walk = (node: PlanNode) => {
    // A ModifyTable node names its table too, but its rows are the ones it wrote, which the scan below it read.
    const table =
      node["Node Type"] === "ModifyTable"
        ? undefined
        : (node["Relation Name"] ?? (node["Node Type"] === "Bitmap Index Scan" ? tableOfIndex.get(node["Index Name"] ?? "") : undefined));
    if (table !== undefined) {
      // A bitmap heap scan's rows (returned or filtered) are the entries its bitmap index scans below it found, which
      // count already: counting both read a bitmap plan's rows twice. What it reads beyond them is a lossy page's
      // rows, removed by the recheck.
      const rows =
        node["Node Type"] === "Bitmap Heap Scan"
          ? (node["Rows Removed by Index Recheck"] ?? 0)
          : (node["Actual Rows"] ?? 0) + (node["Rows Removed by Filter"] ?? 0) + (node["Rows Removed by Index Recheck"] ?? 0);
      read[table] = (read[table] ?? 0) + rows * (node["Actual Loops"] ?? 1);
    }
    for (const child of node.Plans ?? []) walk(child);
  };
  walk(plan);
  return read;
}

/** An element of an array literal: NULL bare, anything else quoted. */
function arrayElementOf(value: unknown): string {
  if (value === null || value === undefined) return "NULL";
  if (value instanceof Date) return `"${value.toISOString()}"`;
  return `"${String(value).replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

/** A SQL literal of a statement's parameter value (the kinds the services' statements bind). */
function literalOf(value: unknown): string {
  if (value === null || value === undefined) return "NULL";
  if (typeof value === "boolean" || typeof value === "number" || typeof value === "bigint") return String(value);
  if (value instanceof Date) return `'${value.toISOString()}'`;
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return `'\\x${Buffer.from(value).toString("hex")}'`;
  const text = Array.isArray(value) ? `{${value.map(arrayElementOf).join(",")}}` : typeof value === "object" ? JSON.stringify(value) : String(value);
  return `'${text.replaceAll("'", "''")}'`;
}

/** Each generic measurement prepares its statement under a name of its own: a prepared statement outlives a failed transaction. */
let preparedCount = 0;

/**
 * The rows a statement reads per table under the plan PostgreSQL caches for it after a few runs: a generic plan, made
 * without the parameters' values (the executor names its statements, so each is prepared once per connection and,
 * after five executions, may run on a generic plan). Prepared and run with plan_cache_mode = force_generic_plan, in a
 * transaction that is rolled back. A statement whose bound holds only for the values it is planned with (a
 * "$n OR ..." condition, an order its index cannot give) reads its whole range here.
 */
export async function rowsReadByTableGeneric(client: object, sql: Prisma.Sql): Promise<Record<string, number>> {
  // A statement planned each run (planEachRun) is never prepared, so it never runs on a generic plan: measured as it runs.
  if (sql.text.startsWith(PLANNED_EACH_RUN)) return rowsReadByTable(client, sql);
  const values = sql.values as unknown[];
  preparedCount += 1;
  const name = `generic_rows_read_${preparedCount}`;
  const execute = `EXECUTE ${name}${values.length === 0 ? "" : `(${values.map(literalOf).join(", ")})`}`;
  return rowsReadByTable(client, { text: execute, values: [] } as unknown as Prisma.Sql, {
    setup: ["SET LOCAL plan_cache_mode = force_generic_plan", `PREPARE ${name} AS ${sql.text}`],
    teardown: [`DEALLOCATE ${name}`],
  });
}

/** The rows a list of statements read per table, summed (each re-run under EXPLAIN ANALYZE and rolled back). */
export async function rowsReadByStatements(
  client: object,
  statements: readonly Prisma.Sql[],
  around: { setup?: readonly string[] } = {},
): Promise<Record<string, number>> {
  const total: Record<string, number> = {};
  // A planner fence (services/shared/adapters/sql/planner-fence.ts) changes how the statements after it in its
  // transaction are planned, so it is replayed (after `around.setup`) before each of them: each is measured on the
  // plan it ran with.
  const setup = [...(around.setup ?? [])];
  for (const statement of statements) {
    if (statement.text.includes("/* planner-fence */")) {
      setup.push(statement.text);
      continue;
    }
    for (const [table, rows] of Object.entries(await rowsReadByTable(client, statement, { setup }))) total[table] = (total[table] ?? 0) + rows;
  }
  return total;
}

/**
 * A client whose raw SQL runs on `pool` and records every statement (text and values) it is sent; `statements()`
 * returns them without the transaction's BEGIN, COMMIT and ROLLBACK.
 */
export function recordingClient(pool: pg.Pool): { client: PrismaClient; statements: () => Prisma.Sql[] } {
  const recorded: Prisma.Sql[] = [];
  const record = (config: unknown) => {
    const c = config as { text?: string; values?: unknown[] };
    if (typeof config === "string") recorded.push({ text: config, values: [] } as unknown as Prisma.Sql);
    else if (c.text !== undefined) recorded.push({ text: c.text, values: c.values ?? [] } as unknown as Prisma.Sql);
  };
  const recording = {
    connect: async () => {
      const connection = await pool.connect();
      const query = connection.query.bind(connection) as (...args: unknown[]) => unknown;
      (connection as unknown as { query: (...args: unknown[]) => unknown }).query = (config: unknown, ...rest: unknown[]) => {
        record(config);
        return query(config, ...rest);
      };
      return connection;
    },
    query: (config: unknown) => {
      record(config);
      return pool.query(config as pg.QueryConfig);
    },
  };
  const client = {} as PrismaClient;
  registerSqlPool(client, { pool: recording as unknown as pg.Pool, nameOf: undefined });
  return { client, statements: () => recorded.filter((s) => !/^(COMMIT|ROLLBACK|BEGIN)$/.test(s.text)) };
}

/** A client that records the statements it is sent and answers each with no rows (so nothing runs): a retention rule's statements, to measure. */
export function recordingOnlyClient(): { client: PrismaClient; statements: Prisma.Sql[] } {
  const statements: Prisma.Sql[] = [];
  const pool = {
    query: async (config: { text: string; values?: unknown[] }) => {
      statements.push({ text: config.text, values: config.values ?? [] } as unknown as Prisma.Sql);
      return { rows: [], rowCount: 0 };
    },
  };
  const client = {} as PrismaClient;
  registerSqlPool(client, { pool: pool as unknown as pg.Pool, nameOf: undefined });
  return { client, statements };
}

/** A scan of a statement's plan: its node type, the table it reads and the index it reads through (none for a sequential scan). */
export interface PlanScan {
  nodeType: string;
  table: string | undefined;
  index: string | undefined;
}

/**
 * The scans of the plan PostgreSQL chooses for a statement with its parameters (EXPLAIN (FORMAT JSON), not run, so a
 * statement that writes writes nothing): every node that names a table or an index, outermost first.
 */
export async function planScansOf(client: object, sql: Prisma.Sql): Promise<PlanScan[]> {
  const explained = { text: `EXPLAIN (FORMAT JSON) ${sql.text}`, values: sql.values } as unknown as Prisma.Sql;
  const [row] = await runSql<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>(client, explained);
  const plan = row?.["QUERY PLAN"][0]?.Plan;
  if (!plan) throw new Error("EXPLAIN returned no plan");
  const scans: PlanScan[] = [];
  const walk = (node: PlanNode) => {
    if (node["Relation Name"] !== undefined || node["Index Name"] !== undefined)
      scans.push({ nodeType: node["Node Type"] ?? "", table: node["Relation Name"], index: node["Index Name"] });
    for (const child of node.Plans ?? []) walk(child);
  };
  walk(plan);
  return scans;
}

/**
 * The rows a list of statements read per table on their generic plans (rowsReadByTableGeneric), summed; a planner
 * fence's statement is skipped (it names no table), and the statements after it are measured without it, as a generic
 * plan cached on a connection may have been planned outside a fence.
 */
export async function rowsReadByStatementsGeneric(client: object, statements: readonly Prisma.Sql[]): Promise<Record<string, number>> {
  const total: Record<string, number> = {};
  for (const statement of statements.filter((x) => !x.text.includes("/* planner-fence */"))) {
    for (const [table, rows] of Object.entries(await rowsReadByTableGeneric(client, statement))) total[table] = (total[table] ?? 0) + rows;
  }
  return total;
}
