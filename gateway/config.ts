import { createEnvReader } from "../services/shared/config.js";
import { readPort, readServiceToken } from "../services/shared/process-config.js";
import { DEFAULT_SIGNING_KEY_CACHE_MS } from "./signing-key-cache.js";

/** Settings of the public HTTP gateway, validated at start. */
export interface GatewayConfig {
  host: string;
  port: number;
  referralServiceUrl: string;
  /** The gateway's own bearer token for the referral service (REFERRAL_SERVICE_TOKEN). */
  referralServiceToken: string;
  /** The public base URL; an https one marks the dashboard session cookie Secure. */
  publicBaseUrl: string;
  /** Take the client address of referral clicks from the last X-Forwarded-For entry. */
  trustProxy: boolean;
  /** How long a server's active signing keys are reused; 0 asks the referral service on every request. */
  signingKeyCacheMs: number;
}

/** Loads and validates every setting; throws ConfigError listing every problem at once. */
export function loadGatewayConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  const r = createEnvReader(env);
  const referralServiceUrl = r.string("REFERRAL_SERVICE_URL", "http://127.0.0.1:8081");
  if (!/^https?:\/\/[^/]+/.test(referralServiceUrl)) r.problem("REFERRAL_SERVICE_URL must be an http(s) URL");
  const referralServiceToken = readServiceToken(r, "REFERRAL_SERVICE_TOKEN", {
    required: true,
    hint: "the gateway's service token (scopes ingest, pull, clicks:record, dashboard; plus admin for the operator dashboard); see README, Ports and the internal API",
  });
  const publicBaseUrl = r.string("PUBLIC_BASE_URL", "http://127.0.0.1:8080");
  if (!/^https?:\/\/[^/]+/.test(publicBaseUrl)) r.problem("PUBLIC_BASE_URL must be an http(s) URL");
  return r.finish({
    host: r.string("HOST", "0.0.0.0"),
    port: readPort(r, "PORT", 8080),
    referralServiceUrl,
    referralServiceToken: referralServiceToken ?? "",
    publicBaseUrl,
    trustProxy: r.bool("TRUST_PROXY", false),
    signingKeyCacheMs: r.int("SIGNING_KEY_CACHE_MS", DEFAULT_SIGNING_KEY_CACHE_MS, { min: 0, max: 60_000 }),
  });
}
