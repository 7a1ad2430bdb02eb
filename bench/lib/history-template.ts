/**
 * The history database kept as a template (bench/run.ts --history): built once per
 * (HISTORY_VERSION, scale) into the bench cluster's persistent data directory as
 * `bench_history_v<version>_s<scale>`, migrated forward when the target has newer
 * migrations, rebuilt when the version or the scale changes or when the template holds a
 * migration the target does not know (an older target cannot run on a newer schema).
 * Each run clones it (`CREATE DATABASE x TEMPLATE ...`), so a rerun does not rebuild it.
 *
 * A build goes into `<name>_building` and is renamed when complete: a build cut short
 * leaves no template that looks finished, and the next run drops it.
 */
import { readdirSync, statfsSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { findAppliedMigrations } from "../../scripts/db/schema-engine.js";
import { buildHistory, HISTORY_VERSION, historyRefreshStatements, historyRowsAt } from "./history.js";
import { withDatabase } from "./infra.js";

/** Every template and leftover build of this harness starts with this. */
const TEMPLATE_PREFIX = "bench_history_";
const BUILDING_SUFFIX = "_building";
/** Free disk a scale-1 build asks for: the history (under about 20 GB) plus a clone's first writes and the WAL. */
export const BUILD_FREE_BYTES_AT_SCALE_1 = 25 * 2 ** 30;
/** Free disk every build asks for at least, however small the scale. */
const MIN_FREE_BYTES = 2 ** 30;

/** The template database's name for a version and a scale (`bench_history_v1_s0_002` for scale 0.002). */
export function historyTemplateName(version: number, scale: number): string {
  return `${TEMPLATE_PREFIX}v${version}_s${String(scale).replace(/[^0-9]/g, "_")}`;
}

/** What to do with the history templates found in the cluster. */
export interface HistoryTemplatePlan {
  /** Build the wanted template (it is missing, or unusable by this target). */
  build: boolean;
  /** Databases to drop first: other versions' and scales' templates, unfinished builds, an unusable wanted one. */
  drop: string[];
  /** Migrations the target has and the kept template lacks (applied with the target's `migrate deploy`). */
  pending: string[];
}

/**
 * Decides from the databases in the cluster (`existing`), the wanted template's name, the
 * migrations that template has applied (empty when it does not exist) and the target's
 * migrations (prisma/migrations folder names).
 */
export function planHistoryTemplate(input: {
  existing: string[];
  wanted: string;
  templateMigrations: string[];
  targetMigrations: string[];
}): HistoryTemplatePlan {
  const ours = input.existing.filter((name) => name.startsWith(TEMPLATE_PREFIX));
  const drop = ours.filter((name) => name !== input.wanted);
  if (!ours.includes(input.wanted)) return { build: true, drop, pending: [] };
  const target = new Set(input.targetMigrations);
  if (input.templateMigrations.some((m) => !target.has(m))) return { build: true, drop: [...drop, input.wanted], pending: [] };
  const applied = new Set(input.templateMigrations);
  return { build: false, drop, pending: input.targetMigrations.filter((m) => !applied.has(m)) };
}

/** Free disk a build at `scale` asks for. */
export function buildFreeBytes(scale: number): number {
  return Math.max(MIN_FREE_BYTES, Math.round(BUILD_FREE_BYTES_AT_SCALE_1 * scale));
}

/** The refusal to print when `freeBytes` is less than `neededBytes` for `what`, else undefined. */
export function diskRefusal(what: string, dir: string, freeBytes: number, neededBytes: number): string | undefined {
  if (freeBytes >= neededBytes) return undefined;
  const gb = (bytes: number) => `${(bytes / 2 ** 30).toFixed(1)} GB`;
  return (
    `not enough disk for ${what}: ${gb(freeBytes)} free under ${dir}, about ${gb(neededBytes)} needed. ` +
    "Free some space, point BENCH_PG_DATA_DIR at a larger disk, or choose a smaller --history=SCALE."
  );
}

/** Free bytes (for an unprivileged user) on the file system holding `dir`. */
export function freeBytesAt(dir: string): number {
  const s = statfsSync(dir);
  return s.bavail * s.bsize;
}

/** What the run used: the template, whether it was built now, its build time and size. */
export interface HistoryTemplate {
  name: string;
  scale: number;
  version: number;
  /** True when this run built it; false when an earlier run's template was reused. */
  builtNow: boolean;
  /** Seconds the build took (this run's, or the one recorded by the run that built it). */
  buildSeconds: number;
  /** When the history was generated (its `now`). */
  builtAt: string;
  /** Migrations applied to a kept template in this run. */
  migrated: string[];
  /** pg_database_size of the template. */
  sizeBytes: number;
  rows: Record<string, number>;
  /** Every table of the template: its size with indexes and TOAST, and its rows (measured when the build ended). */
  tables: HistoryTables;
}

/** Per table: pg_total_relation_size (bytes: heap, indexes, TOAST) and count(*). */
export type HistoryTables = Record<string, { bytes: number; rows: number }>;

/** Recorded as the template database's comment by the run that built it. */
interface TemplateNote {
  builtAt: string;
  buildSeconds: number;
  /** Absent in the note of a template built before tables were measured: measured then. */
  tables?: HistoryTables;
}

/**
 * Every ordinary table of the public schema with its total size and row count, largest first:
 * the capacity model (bench/capacity.ts) reads bytes per row from them. Exact counts: run once
 * per template, not per run.
 */
export async function measureHistoryTables(client: pg.Client): Promise<HistoryTables> {
  const { rows } = await client.query<{ name: string; bytes: string }>(
    `SELECT c.relname AS name, pg_total_relation_size(c.oid)::text AS bytes
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' AND c.relkind = 'r'
      ORDER BY pg_total_relation_size(c.oid) DESC, c.relname`,
  );
  const tables: HistoryTables = {};
  for (const r of rows) {
    const count = await client.query<{ n: string }>(`SELECT count(*)::text AS n FROM "${r.name}"`);
    tables[r.name] = { bytes: Number(r.bytes), rows: Number(count.rows[0]?.n ?? Number.NaN) };
  }
  return tables;
}

/**
 * Makes sure the wanted template exists and is usable by the target, per planHistoryTemplate.
 * `emptyTemplate` is the migrated empty database the history is built into (a clone of it);
 * `migrate` runs the target's `migrate deploy` on a URL.
 */
export async function ensureHistoryTemplate(opts: {
  adminUrl: string;
  dataDir: string;
  scale: number;
  emptyTemplate: string;
  targetDir: string;
  migrate: (url: string) => Promise<unknown>;
  progress: (line: string) => void;
}): Promise<HistoryTemplate> {
  const wanted = historyTemplateName(HISTORY_VERSION, opts.scale);
  const admin = new pg.Client({ connectionString: opts.adminUrl });
  await admin.connect();
  try {
    const existing = (await admin.query<{ datname: string }>("SELECT datname FROM pg_database")).rows.map((r) => r.datname);
    const templateMigrations = existing.includes(wanted) ? await findAppliedMigrations(withDatabase(opts.adminUrl, wanted)) : [];
    const plan = planHistoryTemplate({ existing, wanted, templateMigrations, targetMigrations: migrationNames(opts.targetDir) });
    for (const name of plan.drop) {
      opts.progress(`history: dropping ${name} (another version or scale, an unfinished build, or newer than the target's migrations)`);
      await dropTemplate(admin, name);
    }
    let note: TemplateNote;
    if (plan.build) {
      const refusal = diskRefusal(`the history at scale ${opts.scale}`, opts.dataDir, freeBytesAt(opts.dataDir), buildFreeBytes(opts.scale));
      if (refusal) throw new Error(refusal);
      const building = `${wanted}${BUILDING_SUFFIX}`;
      await admin.query(`CREATE DATABASE "${building}" TEMPLATE "${opts.emptyTemplate}"`);
      const started = Date.now();
      const builtAt = new Date();
      const client = new pg.Client({ connectionString: withDatabase(opts.adminUrl, building) });
      await client.connect();
      try {
        opts.progress(`history: building ${wanted}: ${JSON.stringify(historyRowsAt(opts.scale))}`);
        await buildHistory(client, opts.scale, builtAt, opts.progress);
        note = { builtAt: builtAt.toISOString(), buildSeconds: Math.round((Date.now() - started) / 100) / 10 };
        note.tables = await measureHistoryTables(client);
      } finally {
        await client.end();
      }
      await admin.query(`ALTER DATABASE "${building}" RENAME TO "${wanted}"`);
      await admin.query(`ALTER DATABASE "${wanted}" IS_TEMPLATE true`);
      await admin.query(`COMMENT ON DATABASE "${wanted}" IS '${JSON.stringify(note)}'`);
      opts.progress(`history: ${wanted} built in ${note.buildSeconds} s`);
    } else {
      const { rows } = await admin.query<{ note: string | null }>("SELECT shobj_description(oid, 'pg_database') AS note FROM pg_database WHERE datname = $1", [
        wanted,
      ]);
      note = JSON.parse(rows[0]?.note ?? "{}") as TemplateNote;
      if (plan.pending.length > 0) {
        opts.progress(`history: migrating ${wanted} forward (${plan.pending.join(", ")})`);
        await opts.migrate(withDatabase(opts.adminUrl, wanted));
      }
      if (note.tables === undefined) {
        opts.progress(`history: measuring the tables of ${wanted} (its note predates table sizes)`);
        const client = new pg.Client({ connectionString: withDatabase(opts.adminUrl, wanted) });
        await client.connect();
        try {
          note.tables = await measureHistoryTables(client);
        } finally {
          await client.end();
        }
        await admin.query(`COMMENT ON DATABASE "${wanted}" IS '${JSON.stringify(note)}'`);
      }
      opts.progress(`history: reusing ${wanted} (built ${note.builtAt} in ${note.buildSeconds} s)`);
    }
    const size = await admin.query<{ size: string }>("SELECT pg_database_size($1)::text AS size", [wanted]);
    return {
      name: wanted,
      scale: opts.scale,
      version: HISTORY_VERSION,
      builtNow: plan.build,
      buildSeconds: note.buildSeconds,
      builtAt: note.builtAt,
      migrated: plan.pending,
      sizeBytes: Number(size.rows[0]?.size ?? Number.NaN),
      rows: historyRowsAt(opts.scale),
      tables: note.tables ?? {},
    };
  } finally {
    await admin.end();
  }
}

/**
 * Clones the template into `name` (dropped first if left over), after checking the disk holds
 * a copy, and moves the rows that must sit inside the rule windows up to now.
 */
export async function cloneHistory(opts: {
  adminUrl: string;
  dataDir: string;
  template: HistoryTemplate;
  name: string;
  progress: (line: string) => void;
}): Promise<string> {
  const refusal = diskRefusal(`a copy of ${opts.template.name}`, opts.dataDir, freeBytesAt(opts.dataDir), opts.template.sizeBytes + MIN_FREE_BYTES);
  if (refusal) throw new Error(refusal);
  const admin = new pg.Client({ connectionString: opts.adminUrl });
  await admin.connect();
  const started = Date.now();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${opts.name}" WITH (FORCE)`);
    await admin.query(`CREATE DATABASE "${opts.name}" TEMPLATE "${opts.template.name}"`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(opts.adminUrl, opts.name);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const step of historyRefreshStatements(new Date(opts.template.builtAt), new Date())) await client.query(step.sql);
  } finally {
    await client.end();
  }
  opts.progress(`history: ${opts.name} cloned from ${opts.template.name} in ${Date.now() - started} ms`);
  return url;
}

/** The target's migrations: its prisma/migrations folder names. */
function migrationNames(targetDir: string): string[] {
  return readdirSync(join(targetDir, "prisma", "migrations"), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
}

async function dropTemplate(admin: pg.Client, name: string): Promise<void> {
  await admin.query(`ALTER DATABASE "${name}" IS_TEMPLATE false`);
  await admin.query(`DROP DATABASE "${name}" WITH (FORCE)`);
}

/**
 * The history scale asked for: `--history` (scale 1), `--history=SCALE`, or BENCH_HISTORY_SCALE;
 * undefined when neither is given (the run measures the empty database only, as it always did).
 */
export function parseHistoryScale(args: string[], fromEnv: string | undefined): number | undefined {
  const flag = args.find((a) => a === "--history" || a.startsWith("--history="));
  const raw = flag === undefined ? fromEnv || undefined : flag === "--history" ? "1" : flag.slice("--history=".length);
  if (raw === undefined) return undefined;
  const scale = Number(raw);
  if (!(Number.isFinite(scale) && scale > 0)) throw new Error(`the history scale must be a number above 0 (1 = the issue's steady-state size), got ${raw}`);
  return scale;
}
