/**
 * Batched deletes or time partitions: the two ways issue 30 names for removing old rows, measured side by side on
 * one durable PostgreSQL cluster, on two copies of the same rows (a table shaped like the big history tables: a
 * uuid id, a heavy-tailed server id with one server holding 40 % of rows, a voter, a ~400-byte body, a creation
 * time): one plain table with the retention runner's age-key index, one partitioned by day (its primary key must
 * include the partition key).
 *
 * For each of the oldest days, in turn: the plain table loses the day by the runner's batched deletes (1,000 rows a
 * statement through the age-key index) and then a VACUUM (what autovacuum does after; its cost is part of the
 * deletes' cost), the partitioned one by DETACH PARTITION CONCURRENTLY + DROP TABLE. Each removal reports wall time,
 * PostgreSQL CPU (every backend), WAL bytes, and what a concurrent hot-path writer (single-row inserts of new rows,
 * closed loop on its own connection) saw meanwhile, beside a quiet window of the same writer. Then the hot paths'
 * cost on each table: a single-row insert, a lookup by id (the pay-once and receipt reads are by id: a partitioned
 * table cannot have a unique index on id alone, so the lookup probes every partition) and the newest page of the hot
 * server (the dashboard's list), as PostgreSQL CPU per statement and shared buffers per statement.
 *
 *   npx tsx bench/retention-partitions.ts [--days=30] [--rows-per-day=100000] [--removals=3] [--lookups=5000] [--name=storage/retention-partitions]
 *
 * Writes bench/results/<name>.md and .json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import pg from "pg";
import { percentile } from "./lib/stats.js";
import {
  cpuBetween,
  createCleanup,
  createProgress,
  machineInfo,
  markdownTable,
  RESULTS_DIR,
  runBench,
  startBenchPostgres,
  type BenchPostgres,
  wholeNumberArg,
} from "./lib/infra.js";

const arg = wholeNumberArg;
const days = arg("days", 30);
const rowsPerDay = arg("rows-per-day", 100_000);
const removals = arg("removals", 3);
const lookups = arg("lookups", 5_000);
const name = process.argv.find((a) => a.startsWith("--name="))?.slice(7) ?? "storage/retention-partitions";
if (removals >= days) {
  process.stderr.write("--removals must be smaller than --days\n");
  process.exit(2);
}

const progress = createProgress("retention-partitions");
const cleanup = createCleanup(progress);

/** The first simulated day (UTC midnight); day d covers [DAY0 + d, DAY0 + d + 1). */
const DAY0 = Date.UTC(2026, 0, 1);
const DAY_MS = 86_400_000;
const HOT_SERVER = "00000000-0000-4000-8000-000000000001";
const BATCH_ROWS = 1_000;

const COLUMNS = "id uuid NOT NULL, server_id uuid NOT NULL, voter text NOT NULL, body text NOT NULL, created_at timestamptz(3) NOT NULL";

/** What one measured piece of work cost. */
interface Cost {
  wallMs: number;
  postgresCpuMs: number;
  walBytes: number;
}

/** What the concurrent writer saw during a window. */
interface WriterWindow {
  inserts: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** One day's removal by one strategy. */
interface Removal {
  day: number;
  strategy: "batched deletes" | "vacuum after the deletes" | "detach + drop partition";
  rows: number;
  statements: number;
  cost: Cost;
  writer: WriterWindow;
}

/** One hot-path statement's cost on one table. */
interface HotPath {
  table: "plain" | "partitioned";
  statement: string;
  calls: number;
  cpuUsPerCall: number;
  buffersPerCall: number;
}

async function walLsn(client: pg.Client): Promise<string> {
  return (await client.query<{ lsn: string }>("SELECT pg_current_wal_lsn()::text AS lsn")).rows[0]?.lsn ?? "0/0";
}

async function walSince(client: pg.Client, from: string): Promise<number> {
  return Number((await client.query<{ bytes: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn) AS bytes", [from])).rows[0]?.bytes ?? 0);
}

/** Runs `work` and reports its wall time, the cluster's CPU and the WAL it wrote. */
async function measured<T>(pgc: BenchPostgres, client: pg.Client, work: () => Promise<T>): Promise<{ cost: Cost; value: T }> {
  const lsn = await walLsn(client);
  const cpu = pgc.cpuSnapshot();
  const started = performance.now();
  const value = await work();
  const wallMs = performance.now() - started;
  const postgresCpuMs = cpuBetween(cpu, pgc.cpuSnapshot());
  return { cost: { wallMs, postgresCpuMs, walBytes: await walSince(client, lsn) }, value };
}

/**
 * A closed-loop writer of new rows (the hot path: one row per statement) into both tables in turn, on its own
 * connection; `window()` returns what it did since the last call.
 */
function startWriter(url: string) {
  const client = new pg.Client({ connectionString: url });
  let latencies: number[] = [];
  let since = performance.now();
  let stopped = false;
  let n = 0;
  const done = (async () => {
    await client.connect();
    while (!stopped) {
      n += 1;
      const table = n % 2 === 0 ? "plain_rows" : "part_rows";
      const started = performance.now();
      await client.query(`INSERT INTO ${table} (id, server_id, voter, body, created_at) VALUES (gen_random_uuid(), $1, $2, repeat(md5($2), 12), $3)`, [
        HOT_SERVER,
        `writer-${n}`,
        new Date(DAY0 + (days - 1) * DAY_MS + (n % DAY_MS)),
      ]);
      latencies.push(performance.now() - started);
    }
    await client.end();
  })();
  return {
    window(): WriterWindow {
      const seconds = (performance.now() - since) / 1000;
      const sorted = latencies.sort((a, b) => a - b);
      const result = {
        inserts: sorted.length,
        perSecond: sorted.length / Math.max(seconds, 0.001),
        p50Ms: percentile(sorted, 0.5),
        p99Ms: percentile(sorted, 0.99),
        maxMs: sorted.at(-1) ?? 0,
      };
      latencies = [];
      since = performance.now();
      return result;
    },
    async stop() {
      stopped = true;
      await done;
    },
  };
}

async function build(client: pg.Client): Promise<void> {
  await client.query(`CREATE TABLE plain_rows (${COLUMNS}, PRIMARY KEY (id))`);
  await client.query(`CREATE TABLE part_rows (${COLUMNS}, PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at)`);
  for (let d = 0; d < days; d++) {
    const from = new Date(DAY0 + d * DAY_MS).toISOString();
    const to = new Date(DAY0 + (d + 1) * DAY_MS).toISOString();
    await client.query(`CREATE TABLE part_rows_d${d} PARTITION OF part_rows FOR VALUES FROM ('${from}') TO ('${to}')`);
  }
  for (let d = 0; d < days; d++) {
    // One day's rows: 40 % on the hot server, the rest over 1,000 servers; 50,000 voters; ~400-byte bodies.
    await client.query(
      `INSERT INTO plain_rows (id, server_id, voter, body, created_at)
       SELECT gen_random_uuid(),
              CASE WHEN i % 5 < 2 THEN $1::uuid ELSE ('00000000-0000-4000-8000-' || lpad((i % 1000 + 2)::text, 12, '0'))::uuid END,
              'voter-' || (i * 7919 % 50000), repeat(md5(i::text), 12),
              to_timestamp($2::double precision / 1000) + (i * interval '1 millisecond' * (86400000 / $3::int))
       FROM generate_series(0, $3::int - 1) AS i`,
      [HOT_SERVER, DAY0 + d * DAY_MS, rowsPerDay],
    );
    if ((d + 1) % 10 === 0 || d === days - 1) progress(`built ${d + 1}/${days} days (${((d + 1) * rowsPerDay).toLocaleString("en-US")} rows)`);
  }
  await client.query("INSERT INTO part_rows SELECT * FROM plain_rows");
  // The indexes the hot paths and retention read: the dashboard's (server_id, created_at) on both; the retention
  // runner's age key on the plain table only (a partition is dropped whole, no index needed to find it).
  await client.query("CREATE INDEX plain_rows_server ON plain_rows (server_id, created_at)");
  await client.query("CREATE INDEX plain_rows_age ON plain_rows ((created_at AT TIME ZONE 'UTC'))");
  await client.query("CREATE INDEX part_rows_server ON part_rows (server_id, created_at)");
  await client.query("VACUUM ANALYZE plain_rows");
  await client.query("VACUUM ANALYZE part_rows");
}

async function tableBytes(client: pg.Client): Promise<{ plain: number; partitioned: number }> {
  const { rows } = await client.query<{ plain: string; part: string }>(
    `SELECT pg_total_relation_size('plain_rows') AS plain,
            (SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'part_rows'::regclass) AS part`,
  );
  return { plain: Number(rows[0]?.plain ?? 0), partitioned: Number(rows[0]?.part ?? 0) };
}

/** The retention runner's shape: one statement removes at most BATCH_ROWS rows older than `cut`, oldest first. */
async function removeDayByBatches(client: pg.Client, day: number): Promise<{ rows: number; statements: number }> {
  const cut = new Date(DAY0 + (day + 1) * DAY_MS).toISOString();
  let rows = 0;
  let statements = 0;
  for (;;) {
    const result = await client.query(
      `DELETE FROM plain_rows WHERE id IN (
         SELECT id FROM plain_rows WHERE (created_at AT TIME ZONE 'UTC') < ($1::timestamptz AT TIME ZONE 'UTC')
         ORDER BY (created_at AT TIME ZONE 'UTC') LIMIT ${BATCH_ROWS})`,
      [cut],
    );
    statements += 1;
    rows += result.rowCount ?? 0;
    if ((result.rowCount ?? 0) < BATCH_ROWS) return { rows, statements };
  }
}

async function hotPaths(pgc: BenchPostgres, client: pg.Client): Promise<HotPath[]> {
  const ids = (await client.query<{ id: string }>(`SELECT id FROM plain_rows TABLESAMPLE SYSTEM (1) LIMIT ${lookups}`)).rows.map((r) => r.id);
  const out: HotPath[] = [];
  const statements: Array<{ label: string; sql: (table: string) => string; params: (i: number) => unknown[] }> = [
    {
      label: "insert one row",
      sql: (t) => `INSERT INTO ${t} (id, server_id, voter, body, created_at) VALUES (gen_random_uuid(), $1, $2, repeat(md5($2), 12), $3)`,
      params: (i) => [HOT_SERVER, `hot-${i}`, new Date(DAY0 + (days - 1) * DAY_MS + i)],
    },
    { label: "lookup by id", sql: (t) => `SELECT voter, created_at FROM ${t} WHERE id = $1`, params: (i) => [ids[i % ids.length]] },
    {
      label: "hot server's newest 50",
      sql: (t) => `SELECT id, voter, created_at FROM ${t} WHERE server_id = $1 ORDER BY created_at DESC LIMIT 50`,
      params: () => [HOT_SERVER],
    },
  ];
  for (const s of statements) {
    for (const [table, relation] of [
      ["plain", "plain_rows"],
      ["partitioned", "part_rows"],
    ] as const) {
      const explain = await client.query<{ "QUERY PLAN": Array<{ Plan: { "Shared Hit Blocks": number; "Shared Read Blocks": number } }> }>(
        `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${s.sql(relation)}`,
        s.params(0),
      );
      const plan = explain.rows[0]?.["QUERY PLAN"][0]?.Plan;
      const buffers = (plan?.["Shared Hit Blocks"] ?? 0) + (plan?.["Shared Read Blocks"] ?? 0);
      const calls = Math.min(lookups, 5_000);
      const { cost } = await measured(pgc, client, async () => {
        for (let i = 1; i <= calls; i++) await client.query(s.sql(relation), s.params(i));
      });
      out.push({ table, statement: s.label, calls, cpuUsPerCall: (cost.postgresCpuMs * 1000) / calls, buffersPerCall: buffers });
    }
  }
  return out;
}

async function main(): Promise<void> {
  const started = Date.now();
  const machineAtStart = machineInfo();
  const pgc = await startBenchPostgres(progress, { durability: "default", migrate: async () => 0 });
  cleanup.add(() => pgc.stop());
  const url = await pgc.createDatabase("partitions");
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  cleanup.add(() => client.end());

  progress(`building ${days} days x ${rowsPerDay.toLocaleString("en-US")} rows in a plain and a day-partitioned table`);
  await build(client);
  const bytesAtStart = await tableBytes(client);

  const writer = startWriter(url);
  cleanup.add(() => writer.stop());
  await new Promise((r) => setTimeout(r, 3_000));
  writer.window();
  const quietStarted = performance.now();
  await new Promise((r) => setTimeout(r, 5_000));
  const quiet = writer.window();
  progress(
    `quiet writer: ${quiet.perSecond.toFixed(0)} inserts/s, p99 ${quiet.p99Ms.toFixed(2)} ms (${((performance.now() - quietStarted) / 1000).toFixed(1)} s)`,
  );

  const removed: Removal[] = [];
  for (let day = 0; day < removals; day++) {
    writer.window();
    const deletes = await measured(pgc, client, () => removeDayByBatches(client, day));
    removed.push({
      day,
      strategy: "batched deletes",
      rows: deletes.value.rows,
      statements: deletes.value.statements,
      cost: deletes.cost,
      writer: writer.window(),
    });
    const vacuum = await measured(pgc, client, () => client.query("VACUUM plain_rows"));
    removed.push({ day, strategy: "vacuum after the deletes", rows: 0, statements: 1, cost: vacuum.cost, writer: writer.window() });
    const rowsInPartition = Number((await client.query<{ n: string }>(`SELECT count(*) AS n FROM part_rows_d${day}`)).rows[0]?.n ?? 0);
    writer.window();
    const drop = await measured(pgc, client, async () => {
      await client.query(`ALTER TABLE part_rows DETACH PARTITION part_rows_d${day} CONCURRENTLY`);
      await client.query(`DROP TABLE part_rows_d${day}`);
    });
    removed.push({ day, strategy: "detach + drop partition", rows: rowsInPartition, statements: 2, cost: drop.cost, writer: writer.window() });
    for (const r of removed.slice(-3)) {
      progress(
        `day ${day}: ${r.strategy}: ${r.rows} rows, ${r.cost.wallMs.toFixed(0)} ms, postgres CPU ${r.cost.postgresCpuMs.toFixed(0)} ms, WAL ${(r.cost.walBytes / 2 ** 20).toFixed(1)} MiB; writer p99 ${r.writer.p99Ms.toFixed(2)} ms`,
      );
    }
  }
  await writer.stop();
  const bytesAfter = await tableBytes(client);

  progress("hot paths on both tables");
  const hot = await hotPaths(pgc, client);
  for (const h of hot) progress(`${h.statement} on ${h.table}: ${h.cpuUsPerCall.toFixed(0)} us CPU, ${h.buffersPerCall} buffers`);

  const machineAtEnd = machineInfo();
  const json = {
    name,
    days,
    rowsPerDay,
    removals,
    lookups,
    batchRows: BATCH_ROWS,
    machineAtStart,
    machineAtEnd,
    seconds: (Date.now() - started) / 1000,
    bytesAtStart,
    bytesAfter,
    quiet,
    removed,
    hot,
  };
  const fmt = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const md = [
    "# Batched deletes or time partitions",
    "",
    `${days} days x ${fmt(rowsPerDay)} rows (40 % on one server, ~400-byte bodies) in a plain table and a day-partitioned copy, one durable PostgreSQL ${pgc.serverVersion} cluster; the oldest ${removals} days removed by each strategy in turn while a closed-loop writer inserts single rows into both tables. Load at start ${machineAtStart.loadAverage.join(" ")}, at end ${machineAtEnd.loadAverage.join(" ")}; ${fmt(json.seconds)} s.`,
    "",
    `Quiet writer (no removal running): ${fmt(quiet.perSecond)} inserts/s, p50 ${fmt(quiet.p50Ms, 2)} ms, p99 ${fmt(quiet.p99Ms, 2)} ms.`,
    "",
    markdownTable(
      [
        "day",
        "strategy",
        "rows",
        "statements",
        "wall ms",
        "PostgreSQL CPU ms",
        "CPU us / row",
        "WAL MiB",
        "writer inserts/s",
        "writer p99 ms",
        "writer max ms",
      ],
      removed.map((r) => [
        String(r.day),
        r.strategy,
        fmt(r.rows),
        fmt(r.statements),
        fmt(r.cost.wallMs),
        fmt(r.cost.postgresCpuMs),
        r.rows > 0 ? fmt((r.cost.postgresCpuMs * 1000) / r.rows, 1) : "",
        fmt(r.cost.walBytes / 2 ** 20, 1),
        fmt(r.writer.perSecond),
        fmt(r.writer.p99Ms, 2),
        fmt(r.writer.maxMs, 1),
      ]),
    ),
    "",
    `Size (table, TOAST and indexes): plain ${fmt(bytesAtStart.plain / 2 ** 20)} -> ${fmt(bytesAfter.plain / 2 ** 20)} MiB (deleted rows' space is reused by later inserts, not returned), partitioned ${fmt(bytesAtStart.partitioned / 2 ** 20)} -> ${fmt(bytesAfter.partitioned / 2 ** 20)} MiB.`,
    "",
    `Hot paths after the removals (${days - removals} days left on each; PostgreSQL CPU per statement over ${fmt(Math.min(lookups, 5_000))} calls, shared buffers of one call):`,
    "",
    markdownTable(
      ["statement", "plain: CPU us", "plain: buffers", "partitioned: CPU us", "partitioned: buffers", "partitioned / plain CPU"],
      [...new Set(hot.map((h) => h.statement))].map((s) => {
        const p = hot.find((h) => h.statement === s && h.table === "plain");
        const q = hot.find((h) => h.statement === s && h.table === "partitioned");
        return [
          s,
          fmt(p?.cpuUsPerCall ?? 0),
          fmt(p?.buffersPerCall ?? 0),
          fmt(q?.cpuUsPerCall ?? 0),
          fmt(q?.buffersPerCall ?? 0),
          fmt((q?.cpuUsPerCall ?? 0) / (p?.cpuUsPerCall || 1), 2),
        ];
      }),
    ),
    "",
  ].join("\n");
  const base = join(RESULTS_DIR, name);
  mkdirSync(dirname(base), { recursive: true });
  writeFileSync(`${base}.json`, `${JSON.stringify(json, null, 2)}\n`);
  writeFileSync(`${base}.md`, md);
  progress(`wrote ${base}.md`);
}

await runBench(main, cleanup, progress);
