/**
 * Where the CLI finds the referral service, the gateway and the service token, first match wins:
 *  1. flags: --api-url, --gateway-url, --token, --data-dir;
 *  2. the environment: REFERRAL_SERVICE_URL, GATEWAY_URL, SERVICE_TOKEN (or ADMIN_SERVICE_TOKEN, the
 *     name `npm start` reads), DATA_DIR;
 *  3. the embedded default (`npm start`): the referral service on 127.0.0.1:$REFERRAL_SERVICE_PORT (8081),
 *     the gateway on 127.0.0.1:$PORT (8080), the admin token in <DATA_DIR>/service-token (DATA_DIR .data).
 * So `npm start` followed by the CLI, from the same folder, needs no configuration. The token is
 * never printed; errors name where it came from, never its value.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { CliError, EXIT_USAGE } from "./output.js";

/** The all-in-one mode's defaults (scripts/start.ts). */
export const DEFAULT_DATA_DIR = ".data";
export const DEFAULT_GATEWAY_PORT = 8080;
export const DEFAULT_REFERRAL_SERVICE_PORT = 8081;
/** The file under DATA_DIR where `npm start` keeps its admin service token. */
export const SERVICE_TOKEN_FILE = "service-token";

/** The connection flags every command accepts. */
export interface ConnectionFlags {
  "api-url"?: string | undefined;
  "gateway-url"?: string | undefined;
  token?: string | undefined;
  "data-dir"?: string | undefined;
}

export interface CliConfig {
  apiUrl: string;
  gatewayUrl: string;
  /** Read lazily: commands that need no token (sign, verify, events send) never fail on a missing one. */
  token(): string;
  /** Where the token came from, for error messages ("--token", "SERVICE_TOKEN", ".data/service-token"). */
  tokenSource(): string;
}

type Env = Record<string, string | undefined>;

function nonEmpty(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed ? trimmed : undefined;
}

function checkUrl(flag: string, value: string): string {
  try {
    const url = new URL(value);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("scheme");
  } catch {
    // Failure policy: a URL that does not parse is a usage error naming the flag, never echoing a possible secret.
    throw new CliError(`${flag} must be an http(s) URL, for example http://127.0.0.1:8081`, { exitCode: EXIT_USAGE });
  }
  return value.replace(/\/+$/, "");
}

export function resolveConfig(flags: ConnectionFlags, env: Env, cwd: string = process.cwd()): CliConfig {
  const dataDir = resolve(cwd, nonEmpty(flags["data-dir"]) ?? nonEmpty(env.DATA_DIR) ?? DEFAULT_DATA_DIR);
  const apiUrl = flags["api-url"]
    ? checkUrl("--api-url", flags["api-url"])
    : nonEmpty(env.REFERRAL_SERVICE_URL)
      ? checkUrl("REFERRAL_SERVICE_URL", env.REFERRAL_SERVICE_URL!.trim())
      : `http://127.0.0.1:${nonEmpty(env.REFERRAL_SERVICE_PORT) ?? DEFAULT_REFERRAL_SERVICE_PORT}`;
  const gatewayUrl = flags["gateway-url"]
    ? checkUrl("--gateway-url", flags["gateway-url"])
    : nonEmpty(env.GATEWAY_URL)
      ? checkUrl("GATEWAY_URL", env.GATEWAY_URL!.trim())
      : `http://127.0.0.1:${nonEmpty(env.PORT) ?? DEFAULT_GATEWAY_PORT}`;
  const tokenFile = join(dataDir, SERVICE_TOKEN_FILE);
  let found: { token: string; source: string } | undefined;
  const find = (): { token: string; source: string } => {
    if (found) return found;
    const fromFlag = nonEmpty(flags.token);
    if (fromFlag) return (found = { token: fromFlag, source: "--token" });
    for (const name of ["SERVICE_TOKEN", "ADMIN_SERVICE_TOKEN"]) {
      const value = nonEmpty(env[name]);
      if (value) return (found = { token: value, source: name });
    }
    if (existsSync(tokenFile)) {
      const value = nonEmpty(readFileSync(tokenFile, "utf8"));
      if (value) return (found = { token: value, source: tokenFile });
    }
    throw new CliError("no service token found", {
      hint: `pass --token, set SERVICE_TOKEN, or run from the folder where \`npm start\` keeps ${join(DEFAULT_DATA_DIR, SERVICE_TOKEN_FILE)} (looked in ${tokenFile})`,
    });
  };
  return { apiUrl, gatewayUrl, token: () => find().token, tokenSource: () => find().source };
}
