/**
 * `npm run build`: compiles the processes to JavaScript in dist/ (tsconfig.build.json) and copies
 * beside them the files they read at run time relative to their own location, so that
 * `node dist/<process>/main.js` works from dist/ alone (plus node_modules):
 *  - the dashboard's static files (gateway/dashboard/routes.ts reads ./static/),
 *  - docs/ (gateway/landing.ts serves some of them at /docs/<file>),
 *  - prisma/schema.prisma and prisma/migrations (scripts/db/schema-engine.ts reads <root>/prisma/).
 * dist/ is rebuilt from scratch each time and is not committed.
 */
import { spawnSync } from "node:child_process";
import { cpSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (this file lives in `<root>/scripts/`). */
const ROOT = fileURLToPath(new URL("../", import.meta.url));
/** Where the compiled output goes (tsconfig.build.json's outDir). */
export const DIST_DIR = join(ROOT, "dist");
/** Files read at run time relative to the code, copied to the same place under dist/. */
export const RUNTIME_ASSETS = ["gateway/dashboard/static", "docs", "prisma/schema.prisma", "prisma/migrations"] as const;

rmSync(DIST_DIR, { recursive: true, force: true });
const tsc = spawnSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", join(ROOT, "tsconfig.build.json")], { stdio: "inherit" });
if (tsc.status !== 0) {
  process.stderr.write("[build] tsc failed\n");
  process.exit(tsc.status ?? 1);
}
for (const asset of RUNTIME_ASSETS) cpSync(join(ROOT, asset), join(DIST_DIR, asset), { recursive: true });
process.stdout.write(`[build] compiled to ${DIST_DIR} and copied ${RUNTIME_ASSETS.join(", ")}\n`);
