/**
 * The storage soak: simulated days of a list's traffic (bench/lib/storage-day.ts) written into two databases of one
 * PostgreSQL cluster, one without retention and one with the retention runner's rules (services/retention/) run at
 * each simulated day's end with the clock set there (nothing waits for real time). After each day both are vacuumed
 * (what autovacuum does in production, so removed rows' space is reused) and measured: database size, each table's
 * bytes with its indexes, and bytes per counted heart.
 *
 *   npx tsx bench/storage-soak.ts [--days=60] [--hearts-per-day=20000] [--servers=1000] [--voters=50000] [--history-days=N] [--name=storage/soak]
 *
 * The retained database runs the retention rules at their defaults (the longest: hearts, clicks and referrals, 400
 * days), so a short soak shows only the rules with short horizons. `--history-days=N` compresses the long horizons
 * (ended deliveries, hearts with their ledger rows and payouts, voter states, unlinked clicks, referrals) to N days,
 * below the minimums the service itself enforces (those protect live windows a simulation does not have), so a soak of
 * a few months shows the database reach its steady state: flat after N days. The steady-state size at the defaults is
 * then what each table keeps per day times its own horizon (the report gives bytes per day per table).
 *
 * Writes bench/results/<name>.md and .json. A day takes a few seconds at the defaults.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import pg from "pg";
import { createPrisma } from "../services/shared/adapters/db.js";
import { createEnvReader } from "../services/shared/runtime/config.js";
import { createLogger } from "../services/shared/runtime/log.js";
import { DEFAULT_FRAUD_RULES } from "../services/hearts/domain/fraud-rules.js";
import { readRetentionSettings } from "../services/retention/retention-settings.js";
import { retentionRules } from "../services/retention/retention-rules.js";
import { runRetentionPass } from "../services/retention/run-retention.js";
import { createCleanup, createProgress, machineInfo, RESULTS_DIR, runBench, startBenchPostgres, wholeNumberArg } from "./lib/infra.js";
import { dayEnd, storageDayStatements, storageSetupStatements } from "./lib/storage-day.js";

const arg = wholeNumberArg;
const days = arg("days", 60);
const heartsPerDay = arg("hearts-per-day", 20_000);
const servers = arg("servers", 1_000);
const voters = arg("voters", 50_000);
const name = process.argv.find((a) => a.startsWith("--name="))?.slice(7) ?? "storage/soak";
const historyDays = process.argv.some((a) => a.startsWith("--history-days=")) ? arg("history-days", 0) : undefined;

/** One database's measurement after a simulated day. */
interface DaySize {
  day: number;
  countedHearts: number;
  databaseBytes: number;
  /** Each table's bytes with its indexes and TOAST. */
  tables: Record<string, number>;
  /** Rows the day's retention passes removed or erased, per rule (the retained database only). */
  removed?: Record<string, number>;
}

const progress = createProgress("storage-soak");
const cleanup = createCleanup(progress);

async function measure(client: pg.Client, day: number): Promise<DaySize> {
  const { rows: tables } = await client.query<{ name: string; bytes: string }>(
    `SELECT c.relname AS name, pg_total_relation_size(c.oid) AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname <> '_prisma_migrations'`,
  );
  const { rows: db } = await client.query<{ bytes: string; counted: string }>(
    "SELECT pg_database_size(current_database()) AS bytes, (SELECT count(*) FROM hearts WHERE counted) AS counted",
  );
  return {
    day,
    countedHearts: Number(db[0]!.counted),
    databaseBytes: Number(db[0]!.bytes),
    tables: Object.fromEntries(tables.map((t) => [t.name, Number(t.bytes)])),
  };
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

/**
 * Bytes the database of `sizes` grew per heart counted over the last `span` days. The hearts counted are read from
 * `counted` (the database without retention: the retained one removes old hearts, so its own count stops growing).
 */
function marginalBytesPerHeart(sizes: DaySize[], counted: DaySize[], span: number): number {
  const at = (list: DaySize[], back: number) => list[Math.max(0, list.length - 1 - back)]!;
  return (at(sizes, 0).databaseBytes - at(sizes, span).databaseBytes) / Math.max(1, at(counted, 0).countedHearts - at(counted, span).countedHearts);
}

function report(kept: DaySize[], retained: DaySize[], horizonDays: number, started: number): string {
  const every = Math.max(1, Math.floor(days / 12));
  const lines = [
    `# Storage soak: ${days} simulated days, ${heartsPerDay.toLocaleString("en")} hearts a day`,
    "",
    `${servers.toLocaleString("en")} servers (40 % of hearts on one), ${voters.toLocaleString("en")} voters, a fifth of hearts from 100 carrier-grade NAT addresses, nine in ten counted; a fifth as many clicks, half linked to a referral. Each counted heart stores its claim-ledger row, its published outbox row, a delivered callback with one attempt and its exchange. Retention runs at each simulated day's end with the clock there; both databases are vacuumed after each day.${historyDays === undefined ? " Retention at its defaults." : ` Retention at its defaults, except the long horizons (ended deliveries, hearts with their ledger rows and payouts, voter states, unlinked clicks, referrals) compressed to ${historyDays} days (--history-days), so the steady state shows within the run.`} Machine: ${JSON.stringify(machineInfo())}; ${((Date.now() - started) / 1000).toFixed(0)} s.`,
    "",
    "| day | counted hearts | without retention (MiB) | with retention (MiB) |",
    "|---:|---:|---:|---:|",
  ];
  for (let i = 0; i < kept.length; i++)
    if (i % every === every - 1 || i === kept.length - 1)
      lines.push(
        `| ${kept[i]!.day + 1} | ${kept[i]!.countedHearts.toLocaleString("en")} | ${mib(kept[i]!.databaseBytes)} | ${mib(retained[i]!.databaseBytes)} |`,
      );
  const span = Math.min(7, Math.max(1, days - horizonDays - 1));
  lines.push(
    "",
    `Bytes per counted heart over the last ${span} days (the database's growth divided by the hearts counted in them): without retention ${marginalBytesPerHeart(kept, kept, span).toFixed(0)}, with retention ${marginalBytesPerHeart(retained, kept, span).toFixed(0)}. All of the database at the end, per counted heart it holds: ${(kept.at(-1)!.databaseBytes / kept.at(-1)!.countedHearts).toFixed(0)} and ${(retained.at(-1)!.databaseBytes / Math.max(1, retained.at(-1)!.countedHearts)).toFixed(0)}.`,
    "",
    `Each table at the end (MiB, with indexes), and its growth over the last ${span} days:`,
    "",
    "| table | without retention | without retention: per day | with retention | with retention: growth |",
    "|---|---:|---:|---:|---:|",
  );
  const lastKept = kept.at(-1)!;
  const lastRetained = retained.at(-1)!;
  const earlier = retained[Math.max(0, retained.length - 1 - span)]!;
  const earlierKept = kept[Math.max(0, kept.length - 1 - span)]!;
  for (const table of Object.keys(lastKept.tables).sort((a, b) => lastKept.tables[b]! - lastKept.tables[a]!)) {
    const growth = lastRetained.tables[table]! - (earlier.tables[table] ?? 0);
    const perDay = (lastKept.tables[table]! - (earlierKept.tables[table] ?? 0)) / span;
    lines.push(
      `| ${table} | ${mib(lastKept.tables[table]!)} | ${perDay === 0 ? "flat" : mib(perDay)} | ${mib(lastRetained.tables[table] ?? 0)} | ${growth === 0 ? "flat" : mib(growth)} |`,
    );
  }
  return `${lines.join("\n")}\n`;
}

await runBench(
  async () => {
    const started = Date.now();
    const postgres = await startBenchPostgres(progress);
    cleanup.add(() => postgres.stop());
    const urls = { kept: await postgres.createDatabase("soak_kept"), retained: await postgres.createDatabase("soak_retained") };
    const clients = { kept: new pg.Client({ connectionString: urls.kept }), retained: new pg.Client({ connectionString: urls.retained }) };
    for (const client of Object.values(clients)) {
      await client.connect();
      cleanup.add(() => client.end());
      // The seeding sessions write rows as the history does (bench/lib/history.ts): no triggers (a server's default
      // endpoint is written with it, with the id the day's deliveries refer to), no foreign-key checks.
      await client.query("SET session_replication_role = replica");
    }
    const prisma = createPrisma(urls.retained, { maxConnections: 2 });
    cleanup.add(() => prisma.$disconnect());
    const defaults = readRetentionSettings(createEnvReader({}), DEFAULT_FRAUD_RULES);
    const compressed = historyDays === undefined ? undefined : historyDays * 86_400;
    const settings =
      compressed === undefined
        ? defaults
        : { ...defaults, deliverySeconds: compressed, heartSeconds: compressed, clickSeconds: compressed, referralSeconds: compressed };
    const rules = retentionRules(settings);
    const log = createLogger("storage-soak", "warn");
    const start = new Date(Date.UTC(2026, 0, 1));
    for (const client of Object.values(clients)) for (const sql of storageSetupStatements(servers, start)) await client.query(sql);

    const sizes: { kept: DaySize[]; retained: DaySize[] } = { kept: [], retained: [] };
    for (let day = 0; day < days; day++) {
      const statements = storageDayStatements({ day, start, heartsPerDay, servers, voters });
      for (const client of Object.values(clients)) for (const sql of statements) await client.query(sql);
      // The day's retention, at its end: passes until one removes nothing (each pass is bounded per rule).
      const removed: Record<string, number> = {};
      for (let pass = 0; pass < 1_000; pass++) {
        const result = await runRetentionPass(
          { db: prisma, rules, batchRows: settings.batchRows, passMaxRows: settings.passMaxRows, log },
          dayEnd({ day, start }),
        );
        let any = 0;
        for (const [rule, n] of Object.entries(result.removed)) {
          removed[rule] = (removed[rule] ?? 0) + n;
          any += n;
        }
        if (any === 0) break;
      }
      for (const client of Object.values(clients)) await client.query("VACUUM");
      sizes.kept.push(await measure(clients.kept, day));
      sizes.retained.push({ ...(await measure(clients.retained, day)), removed });
      const k = sizes.kept.at(-1)!;
      const r = sizes.retained.at(-1)!;
      progress(
        `day ${day + 1}/${days}: ${k.countedHearts} counted; without retention ${mib(k.databaseBytes)} MiB, with ${mib(r.databaseBytes)} MiB; removed ${JSON.stringify(removed)}`,
      );
    }
    const horizonDays = Math.ceil(Math.max(settings.attemptExchangeSeconds, compressed ?? 0) / 86_400);
    const markdown = report(sizes.kept, sizes.retained, horizonDays, started);
    const out = join(RESULTS_DIR, name);
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(`${out}.md`, markdown);
    writeFileSync(`${out}.json`, `${JSON.stringify({ days, heartsPerDay, servers, voters, settings, sizes }, null, 2)}\n`);
    process.stdout.write(markdown);
    progress(`written ${out}.md and .json`);
  },
  cleanup,
  progress,
);
