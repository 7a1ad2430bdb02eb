/**
 * The test command (`npm test`). Starts what the tests need, runs them, stops it:
 *  1. a throwaway PostgreSQL cluster (initdb/pg_ctl) unless DATABASE_URL is given,
 *  2. a single-node Kafka 3.9 broker in KRaft mode (jars from Maven Central, cached
 *     in .cache/) unless KAFKA_BROKERS is given,
 *  3. a template database migrated through Prisma's WASM schema engine, which each
 *     integration test file clones into a database of its own,
 *  4. Debian packages the tests run (Chromium for the dashboard, php-cli and php-curl for the PHP
 *     snippet, tini for the image's entry command): apt-get, as root, when missing, its output in
 *     .cache/apt-get.log,
 *  5. ava over test/unit, test/integration and test/e2e (or `--unit` for unit only),
 * then prints the plain closing line `N passed, M failed`.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import pg from "pg";
import { startPostgres } from "./infra/postgres.js";
import { startKafka } from "./infra/kafka.js";
import { applyMigrations, diffSchemaAgainstMigrations } from "./db/schema-engine.js";
import { CSHARP_REQUIREMENT, ensureAptPackages, LUA_REQUIREMENT, PHP_REQUIREMENT, TINI_REQUIREMENT } from "./infra/apt.js";
import { CHROMIUM_REQUIREMENT } from "./infra/chromium.js";

/** The migrated template each test file clones; TEST_TEMPLATE_DB_NAME lets several checkouts share one DATABASE_URL server. */
const TEMPLATE_DB = process.env.TEST_TEMPLATE_DB_NAME || "referral_template";
/** Debian packages the tests run beside Node: Chromium (dashboard), PHP with curl (PHP snippet, receiver and reward script), Mono (C# receiver, uMod plugin), Lua (FiveM resource), tini (the image's init). */
const TEST_REQUIREMENTS = [CHROMIUM_REQUIREMENT, PHP_REQUIREMENT, CSHARP_REQUIREMENT, LUA_REQUIREMENT, TINI_REQUIREMENT];
const args = process.argv.slice(2);
const unitOnly = args.includes("--unit");
const avaArgs = args.filter((a) => a !== "--unit");

const stops: (() => Promise<void>)[] = [];
const step = (message: string) => process.stderr.write(`[test] ${message}\n`);

async function withDatabase(adminUrl: string, name: string): Promise<string> {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

async function prepareTemplate(adminUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${TEMPLATE_DB}" WITH (FORCE)`);
    await client.query(`CREATE DATABASE "${TEMPLATE_DB}"`);
  } finally {
    await client.end();
  }
  const { applied } = await applyMigrations(await withDatabase(adminUrl, TEMPLATE_DB));
  step(`template database migrated (${applied.length} migrations)`);
  // Failure policy: a schema change without its migration fails the run before any test.
  const drift = await diffSchemaAgainstMigrations(adminUrl);
  if (drift.trim() !== "") throw new Error(`prisma/schema.prisma and prisma/migrations differ; run npm run db:migrate:dev -- --name <change>:\n${drift}`);
}

async function main(): Promise<number> {
  const env: Record<string, string> = { ...(process.env as Record<string, string>) };
  if (!unitOnly) {
    const started = Date.now();
    const [database, kafka] = await Promise.all([
      (async () => {
        if (process.env.DATABASE_URL) {
          step("using DATABASE_URL (needs permission to create databases)");
          return { url: process.env.DATABASE_URL };
        }
        step("starting a throwaway PostgreSQL cluster");
        const pgServer = await startPostgres();
        stops.push(() => pgServer.stop());
        return { url: pgServer.url };
      })(),
      (async () => {
        if (process.env.KAFKA_BROKERS) {
          step("using KAFKA_BROKERS");
          return { brokers: process.env.KAFKA_BROKERS };
        }
        step("starting a single-node Kafka broker (KRaft)");
        const broker = await startKafka();
        stops.push(() => broker.stop());
        return { brokers: broker.brokers };
      })(),
      // Installed here rather than in the tests, so a first install never runs into ava's timeout.
      ensureAptPackages(TEST_REQUIREMENTS, { log: (line) => step(`apt: ${line}`) }),
    ]);
    await prepareTemplate(database.url);
    env.TEST_PG_ADMIN_URL = database.url;
    env.TEST_TEMPLATE_DB = TEMPLATE_DB;
    env.KAFKA_BROKERS = kafka.brokers;
    step(`infrastructure ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
  const files = avaArgs.length > 0 ? avaArgs : unitOnly ? ["test/unit/**/*.test.ts"] : [];
  return runAva(files, env);
}

/** Runs ava with TAP output, echoes it, and prints `N passed, M failed`. */
function runAva(files: string[], env: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["node_modules/ava/entrypoints/cli.mjs", "--tap", ...files], {
      env,
      stdio: ["ignore", "pipe", "inherit"],
    });
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    const lines = createInterface({ input: child.stdout });
    lines.on("line", (line) => {
      process.stdout.write(`${line}\n`);
      if (/^ok \d+/.test(line)) {
        if (/# SKIP/i.test(line)) skipped++;
        else passed++;
      } else if (/^not ok \d+/.test(line)) {
        if (/# TODO/i.test(line)) skipped++;
        else failed++;
      }
    });
    child.on("close", (code) => {
      const suffix = skipped > 0 ? `, ${skipped} skipped` : "";
      process.stdout.write(`${passed} passed, ${failed} failed${suffix}\n`);
      resolve(code === 0 && failed === 0 && passed > 0 ? 0 : 1);
    });
  });
}

async function stopAll(): Promise<void> {
  for (const stop of stops.reverse()) {
    try {
      await stop();
    } catch (error) {
      // Failure policy: keep stopping the rest; a leftover temp dir is not worth failing the run.
      step(`stop failed: ${(error as Error).message}`);
    }
  }
}

let exitCode = 1;
try {
  exitCode = await main();
} catch (error) {
  process.stderr.write(`[test] setup failed: ${(error as Error).stack ?? String(error)}\n`);
  process.stdout.write("0 passed, 1 failed\n");
} finally {
  await stopAll();
}
process.exit(exitCode);
