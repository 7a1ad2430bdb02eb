/**
 * Retention's statements on the production-shaped history (bench/lib/history.ts, the template bench/run.ts --history
 * builds and keeps): each rule's batch and oldest-age read, run prepared under a name (as every statement ran before
 * retention's were marked planEachRun: after five runs on a connection PostgreSQL may switch a named statement to a
 * generic plan, planned without the cutoff) and unnamed (planned with its values every run, as they run now), back to
 * back on one connection of one clone of the history, on durable PostgreSQL.
 *
 * Each execution runs in its own transaction, rolled back, so every run of a batch finds the same due rows (two years
 * of a list's history a rule that never ran would remove: retention catching up, its heaviest state). Per statement
 * and mode: the median wall time of the first five runs and of the runs after them (where a named statement may run
 * generic), and how many of the named runs PostgreSQL planned generic (pg_prepared_statements). The modes alternate
 * which goes first, round by round.
 *
 *   npx tsx bench/retention-plans.ts [--runs=8] [--rounds=2] [--batch=1000] [--name=sNN-retention-plans]
 *
 * Writes bench/results/<name>.md and .json. Needs the history template (built by bench/run.ts --history=1
 * --prepare-only if missing, about 20 minutes, 18 GB) in bench/run.ts's kept cluster (.cache/bench-pg).
 */
import { join } from "node:path";
import pg from "pg";
import { applyMigrations } from "../scripts/db/schema-engine.js";
import type { PrismaClient } from "../services/shared/adapters/db.js";
import { registerSqlPool, PLANNED_EACH_RUN, type Sql } from "../services/shared/adapters/sql/executor.js";
import { DEFAULT_FRAUD_RULES } from "../services/hearts/domain/fraud-rules.js";
import { readRetentionSettings } from "../services/retention/retention-settings.js";
import { retentionRules } from "../services/retention/retention-rules.js";
import { createEnvReader } from "../services/shared/runtime/config.js";
import { cloneHistory, ensureHistoryTemplate } from "./lib/history-template.js";
import {
  BENCH_DIR,
  createCleanup,
  createProgress,
  machineInfo,
  markdownTable,
  runBench,
  startBenchPostgres,
  wholeNumberArg,
  writeResults,
} from "./lib/infra.js";
import { percentile } from "./lib/stats.js";

const runs = wholeNumberArg("runs", 8);
const rounds = wholeNumberArg("rounds", 2);
const batch = wholeNumberArg("batch", 1_000);
const name = process.argv.find((a) => a.startsWith("--name="))?.slice(7) ?? "retention-plans";
/** Runs PostgreSQL plans custom before it may choose a cached generic plan for a named statement. */
const CUSTOM_RUNS = 5;
const CLONE = "bench_retention_plans";

const progress = createProgress("retention-plans");
/** The median of unsorted samples (of an even count, the mean of the middle two). */
const median = (samples: readonly number[]) => {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length / 2;
  return Number.isInteger(mid) && mid > 0 ? (sorted[mid - 1]! + sorted[mid]!) / 2 : percentile(sorted, 0.5);
};
const cleanup = createCleanup(progress);

/** The statements a rule sends for one batch and one oldest-age read, recorded by a client that runs nothing. */
async function recordRule(rule: ReturnType<typeof retentionRules>[number], now: Date): Promise<Sql[]> {
  const statements: Sql[] = [];
  const pool = {
    query: async (config: { text: string; values?: unknown[] }) => {
      statements.push({ text: config.text, values: config.values ?? [] } as unknown as Sql);
      return { rows: [], rowCount: 0 };
    },
  };
  const client = {} as PrismaClient;
  registerSqlPool(client, { pool: pool as unknown as pg.Pool, nameOf: undefined });
  await rule.removeBatch(client, now, batch);
  await rule.oldestAge(client, now);
  return statements;
}

interface ModeResult {
  /** Median ms of the first CUSTOM_RUNS runs, and of the runs after them. */
  firstMs: number;
  laterMs: number;
  /** The named mode's plans, from pg_prepared_statements (undefined for unnamed runs). */
  genericPlans?: number;
  customPlans?: number;
  rows: number;
}

/** Runs `text` `runs` times on `client`, each in a transaction rolled back; named `statementName` or unnamed. */
async function measure(client: pg.Client, sql: Sql, statementName: string | undefined): Promise<ModeResult> {
  const times: number[] = [];
  let rows = 0;
  for (let i = 0; i < runs; i++) {
    await client.query("BEGIN");
    const started = performance.now();
    const result = await client.query({ ...(statementName ? { name: statementName } : {}), text: sql.text, values: sql.values as unknown[] });
    times.push(performance.now() - started);
    rows = result.rowCount ?? 0;
    await client.query("ROLLBACK");
  }
  const out: ModeResult = { firstMs: median(times.slice(0, CUSTOM_RUNS)), laterMs: median(times.slice(CUSTOM_RUNS)), rows };
  if (statementName) {
    const { rows: plans } = await client.query<{ generic_plans: string; custom_plans: string }>(
      "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1",
      [statementName],
    );
    out.genericPlans = Number(plans[0]?.generic_plans ?? 0);
    out.customPlans = Number(plans[0]?.custom_plans ?? 0);
    await client.query(`DEALLOCATE ${statementName}`);
  }
  return out;
}

interface Row {
  rule: string;
  statement: "batch" | "oldest";
  round: number;
  named: ModeResult;
  unnamed: ModeResult;
}

async function main(): Promise<void> {
  const startedMachine = machineInfo();
  progress(`load at start ${startedMachine.loadAverage.join(" / ")}`);
  const migrate = async (url: string) => (await applyMigrations(url)).applied.length;
  const pgb = await startBenchPostgres(progress, { durability: "default", migrate, dataDir: join(BENCH_DIR, "..", ".cache", "bench-pg") });
  cleanup.add(() => pgb.stop());
  const where = { adminUrl: pgb.adminUrl, dataDir: pgb.dataDir, progress };
  const template = await ensureHistoryTemplate({ ...where, scale: 1, emptyTemplate: pgb.templateDatabase, targetDir: join(BENCH_DIR, ".."), migrate });
  const url = await cloneHistory({ ...where, template, name: CLONE });
  cleanup.add(async () => {
    const admin = new pg.Client({ connectionString: pgb.adminUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS "${CLONE}" WITH (FORCE)`);
    await admin.end();
  });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  cleanup.add(() => client.end());
  await client.query("ANALYZE");

  const now = new Date();
  const rules = retentionRules(readRetentionSettings(createEnvReader({}), DEFAULT_FRAUD_RULES));
  const rows: Row[] = [];
  let n = 0;
  for (let round = 1; round <= rounds; round++) {
    for (const rule of rules) {
      const [batchSql, oldestSql] = await recordRule(rule, now);
      for (const [statement, sql] of [
        ["batch", batchSql],
        ["oldest", oldestSql],
      ] as const) {
        if (sql === undefined) continue;
        // The text as it ran before the marker (named, so prepared) and as it runs now (unnamed).
        const unmarked = { ...sql, text: sql.text.replace(`${PLANNED_EACH_RUN} `, "") } as unknown as Sql;
        n += 1;
        const namedFirst = (round + n) % 2 === 0;
        let named: ModeResult | undefined;
        let unnamed: ModeResult | undefined;
        for (const mode of namedFirst ? ["named", "unnamed"] : ["unnamed", "named"]) {
          if (mode === "named") named = await measure(client, unmarked, `retention_plans_${n}`);
          else unnamed = await measure(client, sql, undefined);
        }
        rows.push({ rule: rule.name, statement, round, named: named!, unnamed: unnamed! });
        progress(
          `round ${round} ${rule.name} ${statement}: named ${named!.firstMs.toFixed(1)} -> ${named!.laterMs.toFixed(1)} ms (generic ${named!.genericPlans}/${runs}), unnamed ${unnamed!.firstMs.toFixed(1)} -> ${unnamed!.laterMs.toFixed(1)} ms, ${unnamed!.rows} rows`,
        );
      }
    }
  }
  const endedMachine = machineInfo();
  const fmt = (ms: number) => (ms < 10 ? ms.toFixed(2) : ms.toFixed(1));
  const byKey = new Map<string, Row[]>();
  for (const row of rows) byKey.set(`${row.rule} ${row.statement}`, [...(byKey.get(`${row.rule} ${row.statement}`) ?? []), row]);
  const table = [...byKey.entries()].map(([key, rs]) => {
    const med = (pick: (r: Row) => number) => median(rs.map(pick));
    const generic = rs.reduce((sum, r) => sum + (r.named.genericPlans ?? 0), 0);
    return [
      key,
      String(rs[0]?.unnamed.rows ?? 0),
      fmt(med((r) => r.named.firstMs)),
      fmt(med((r) => r.named.laterMs)),
      `${generic} of ${rs.length * runs}`,
      fmt(med((r) => r.unnamed.laterMs)),
      (
        med((r) => r.named.laterMs) /
        Math.max(
          0.001,
          med((r) => r.unnamed.laterMs),
        )
      ).toFixed(2),
    ];
  });
  const markdown = [
    `# Retention statements on the history: named (may run generic) against unnamed (planned each run)`,
    "",
    `Template ${template.name} (built ${template.builtAt}), cloned; durable PostgreSQL ${pgb.serverVersion}; one connection; batch ${batch}; ${runs} runs per statement and mode per round (each rolled back), ${rounds} rounds, modes alternating first.`,
    `Load average at start ${startedMachine.loadAverage.join(" / ")}, at end ${endedMachine.loadAverage.join(" / ")}; ${startedMachine.cpuModel}, ${startedMachine.nproc} cores.`,
    "",
    "Medians over rounds of each round's median run. 'runs 1-5' are planned custom in both modes; after them a named statement may run on a generic plan.",
    "",
    markdownTable(
      ["rule, statement", "rows", "named: runs 1-5 ms", "named: runs 6+ ms", "named generic plans", "unnamed: runs 6+ ms", "named / unnamed (6+)"],
      table,
    ),
    "",
  ].join("\n");
  const written = writeResults(name, { machine: { start: startedMachine, end: endedMachine }, template, batch, runs, rounds, rows }, markdown);
  progress(`wrote ${written.mdPath}`);
  process.stdout.write(`${markdown}\n`);
}

await runBench(main, cleanup, progress);
