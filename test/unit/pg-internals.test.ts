import test from "ava";
import { readFileSync } from "node:fs";
import pg from "pg";
import { PG_VERIFIED_VERSION } from "../../services/shared/adapters/sql/pg-internals.js";

/**
 * services/shared/adapters/db.ts subclasses node-postgres's Client and Query and calls methods its type definitions leave out
 * (PG_VERIFIED_VERSION lists them). A different pg, installed directly or as @prisma/adapter-pg's, may have changed
 * them: this fails until they were re-read and the constant raised.
 */
const versionOf = (path: string) => (JSON.parse(readFileSync(new URL(path, import.meta.url), "utf8")) as { version: string }).version;

test("the installed node-postgres is the version whose internals db.ts was verified against, and package.json pins it exactly", (t) => {
  t.is(
    versionOf("../../node_modules/pg/package.json"),
    PG_VERIFIED_VERSION,
    "services/shared/adapters/db.ts builds on pg internals: re-check them as PG_VERIFIED_VERSION's comment lists, then raise it",
  );
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { dependencies: Record<string, string> };
  t.is(pkg.dependencies.pg, PG_VERIFIED_VERSION, "package.json pins pg to the verified version (no range)");
});

test("the private methods db.ts overrides or calls exist on the installed node-postgres", (t) => {
  const client = pg.Client.prototype as unknown as Record<string, unknown>;
  t.is(typeof client._errorAllQueries, "function", "Client#_errorAllQueries (ConnectionLossCodedClient)");
  const query = pg.Query.prototype as unknown as Record<string, unknown>;
  for (const method of ["hasBeenParsed", "prepare", "handleCommandComplete", "submit"])
    t.is(typeof query[method], "function", `Query#${method} (BeginThenQuery)`);
});
