import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { createEnvReader } from "../../services/shared/runtime/config.js";
import { loadOrCreateTokenFile } from "../../services/shared/runtime/token-file.js";
import { MIN_DASHBOARD_TOKEN_CHARS } from "./auth.js";

/** Name of the file holding the all-in-one mode's generated dashboard token. */
export const DASHBOARD_TOKEN_FILE = "dashboard-token";

/**
 * Reads the optional `DASHBOARD_TOKEN`; undefined (dashboard disabled) when unset.
 * Throws ConfigError when it is set but shorter than MIN_DASHBOARD_TOKEN_CHARS.
 */
export function readDashboardToken(env: Record<string, string | undefined> = process.env): string | undefined {
  const r = createEnvReader(env);
  const token = r.optionalString("DASHBOARD_TOKEN");
  if (token !== undefined && token.length < MIN_DASHBOARD_TOKEN_CHARS) {
    r.problem(`DASHBOARD_TOKEN must be at least ${MIN_DASHBOARD_TOKEN_CHARS} characters`);
  }
  if (token !== undefined && /\s/.test(token)) r.problem("DASHBOARD_TOKEN must not contain whitespace");
  return r.finish(token);
}

/** Where the dashboard token came from, for the start banner (never the token itself). */
export interface DashboardTokenSource {
  token: string;
  /** "the DASHBOARD_TOKEN environment variable" or the token file's path. */
  location: string;
}

/**
 * The all-in-one mode's token: `DASHBOARD_TOKEN` when set, otherwise the one kept
 * in `<dataDir>/dashboard-token`, generated (256 bits, mode 0600) on the first run.
 */
export function loadOrCreateDashboardToken(dataDir: string, env: Record<string, string | undefined> = process.env): DashboardTokenSource {
  const fromEnv = readDashboardToken(env);
  if (fromEnv !== undefined) return { token: fromEnv, location: "the DASHBOARD_TOKEN environment variable" };
  const path = join(dataDir, DASHBOARD_TOKEN_FILE);
  const token = loadOrCreateTokenFile(
    path,
    () => randomBytes(32).toString("base64url"),
    (t) => t.length >= MIN_DASHBOARD_TOKEN_CHARS && !/\s/.test(t),
  );
  return { token, location: path };
}
