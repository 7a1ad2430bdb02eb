/**
 * Offline replacement for `prisma migrate deploy | dev | diff`, built on Prisma's WASM schema
 * engine (see ./schema-engine.ts). Works with real PostgreSQL and with PGlite served by
 * scripts/infra/embedded-postgres.ts.
 *
 *   npx tsx scripts/db/migrate.ts deploy                 apply pending migrations to $DATABASE_URL
 *   npx tsx scripts/db/migrate.ts dev --name <name>      create a migration from schema changes, then apply it
 *   npx tsx scripts/db/migrate.ts check                  exit 1 and print the SQL when schema and migrations differ
 *
 * Exit codes: 0 success, 1 failure or drift, 2 usage error. The password of DATABASE_URL is never printed.
 */
import { parseArgs } from "node:util";
import {
  applyMigrations,
  createMigration,
  DEFAULT_MIGRATIONS_DIR,
  DEFAULT_SCHEMA_PATH,
  diffSchemaAgainstMigrations,
  type ShadowDatabaseMode,
} from "./schema-engine.js";
import { isMainModule } from "../lib/is-main-module.js";

const EXIT_OK = 0;
const EXIT_FAILURE = 1;
const EXIT_USAGE = 2;
const SHADOW_MODES: readonly ShadowDatabaseMode[] = ["auto", "same-server", "embedded"];

const USAGE = `usage: npx tsx scripts/db/migrate.ts <command> [options]

commands:
  deploy               apply every pending migration to DATABASE_URL
  dev --name <name>    create prisma/migrations/<timestamp>_<name>/migration.sql from the changes in
                       prisma/schema.prisma (shadow database: a temporary database on the server of
                       DATABASE_URL, or an in-memory PGlite when it is PGlite), then apply it
                       --create-only   only create the migration, do not apply anything
  check                print the SQL between the migrations and prisma/schema.prisma and exit 1 when
                       it is not empty (DATABASE_URL optional: without it, an in-memory PGlite is used)

options:
  --migrations-dir <dir>   default ${DEFAULT_MIGRATIONS_DIR}
  --schema <path>          default ${DEFAULT_SCHEMA_PATH}
  --shadow <mode>          auto (default) | same-server | embedded
  -h, --help
`;

class UsageError extends Error {}

/** Replaces the password of a postgres URL with `***` (for display). */
export function redactDatabaseUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    // Failure policy: an unparsable URL is shown as a placeholder rather than risking printing a secret.
    return "<unparsable DATABASE_URL>";
  }
}

/** Removes the password of `url` (raw and URL-encoded) from any text that is about to be printed. */
function redactSecrets(text: string, url: string | undefined): string {
  if (!url) return text;
  let password = "";
  try {
    password = new URL(url).password;
  } catch {
    // Failure policy: if the URL cannot be parsed we cannot know its password; fall back to scrubbing the whole URL.
    return text.split(url).join("<DATABASE_URL>");
  }
  if (!password) return text;
  let redacted = text.split(url).join(redactDatabaseUrl(url));
  for (const secret of new Set([password, decodeURIComponent(password)])) redacted = redacted.split(secret).join("***");
  return redacted;
}

function requireDatabaseUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new UsageError("DATABASE_URL is not set (e.g. DATABASE_URL=postgresql://user:password@host:5432/db).");
  return url;
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: "string" },
      "create-only": { type: "boolean", default: false },
      "migrations-dir": { type: "string" },
      schema: { type: "string" },
      shadow: { type: "string", default: "auto" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  const [command, ...extra] = positionals;
  if (values.help || command === undefined) {
    process.stdout.write(USAGE);
    return values.help ? EXIT_OK : EXIT_USAGE;
  }
  if (extra.length > 0) throw new UsageError(`unexpected argument(s): ${extra.join(" ")}`);
  const shadow = values.shadow as ShadowDatabaseMode;
  if (!SHADOW_MODES.includes(shadow)) throw new UsageError(`--shadow must be one of ${SHADOW_MODES.join(", ")}`);

  const log = (line: string): void => {
    process.stderr.write(`${line}\n`);
  };
  const common = { migrationsDir: values["migrations-dir"], schemaPath: values.schema, shadow, log };

  switch (command) {
    case "deploy": {
      const url = requireDatabaseUrl();
      log(`target: ${redactDatabaseUrl(url)}`);
      const startedAtMs = Date.now();
      const { applied } = await applyMigrations(url, common);
      for (const name of applied) process.stdout.write(`applied ${name}\n`);
      process.stdout.write(`database is up to date (${applied.length} applied in ${Date.now() - startedAtMs} ms)\n`);
      return EXIT_OK;
    }
    case "dev": {
      if (!values.name) throw new UsageError("dev needs --name <name>, e.g. --name add_delivery_attempts");
      const url = requireDatabaseUrl();
      log(`target: ${redactDatabaseUrl(url)}`);
      if (!values["create-only"]) {
        // Like `prisma migrate dev`: the development database first catches up with the existing history.
        for (const name of (await applyMigrations(url, common)).applied) process.stdout.write(`applied ${name}\n`);
      }
      const created = await createMigration(url, values.name, common);
      if (created === null) {
        process.stdout.write("no schema changes, no migration created\n");
      } else {
        process.stdout.write(`created ${created}\n`);
      }
      if (!values["create-only"]) {
        for (const name of (await applyMigrations(url, common)).applied) process.stdout.write(`applied ${name}\n`);
        process.stdout.write("database is up to date\n");
      }
      return EXIT_OK;
    }
    case "check": {
      const url = process.env.DATABASE_URL || undefined;
      log(url ? `shadow database server: ${redactDatabaseUrl(url)}` : "DATABASE_URL not set: replaying the migrations in an in-memory PGlite");
      const drift = await diffSchemaAgainstMigrations(url, common);
      if (drift === "") {
        process.stdout.write("schema and migrations are in sync\n");
        return EXIT_OK;
      }
      process.stderr.write(
        "The Prisma schema differs from the migrations (schema changed without a migration?). Create one with\n" +
          "  npx tsx scripts/db/migrate.ts dev --name <name>\nSQL missing from the migrations:\n",
      );
      process.stdout.write(drift.endsWith("\n") ? drift : `${drift}\n`);
      return EXIT_FAILURE;
    }
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

/** Exits once stdout and stderr are flushed (a bare process.exit can truncate output piped to CI logs). */
function exitAfterFlush(code: number): void {
  process.stdout.write("", () => process.stderr.write("", () => process.exit(code)));
}

if (isMainModule(import.meta.url)) {
  main(process.argv.slice(2)).then(exitAfterFlush, (error: unknown) => {
    const usage = error instanceof UsageError || Boolean((error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS"));
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`error: ${redactSecrets(message, process.env.DATABASE_URL)}\n`);
    if (usage) process.stderr.write(`\n${USAGE}`);
    exitAfterFlush(usage ? EXIT_USAGE : EXIT_FAILURE);
  });
}
