import { createEnvReader } from "../services/shared/runtime/config.js";
import { readPort, readServiceToken } from "../services/shared/runtime/process-config.js";
import { DEFAULT_SIGNING_KEY_CACHE_MS, DEFAULT_SIGNING_KEY_REFRESH_MS, DEFAULT_UNKNOWN_SERVER_CACHE_MS } from "./signing-key-cache.js";
import {
  DEFAULT_FAILED_SIGNATURE_WINDOW_MS,
  DEFAULT_FAILED_SIGNATURES_GLOBAL,
  DEFAULT_FAILED_SIGNATURES_PER_SOURCE,
  DEFAULT_REFERRAL_LINK_CLICKS_PER_IP,
  DEFAULT_REFERRAL_LINK_WINDOW_MS,
} from "./failure-limiter.js";

/** The gateway's ops port (/healthz, /readyz, /metrics), apart from the public port. */
export const DEFAULT_GATEWAY_OPS_PORT = 9080;

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
  /** How long an unknown server id is remembered; 0 asks every time. */
  unknownServerCacheMs: number;
  /** At most one key lookup per server per this interval, however many requests ask. */
  signingKeyRefreshMs: number;
  /** Failed-signature limits per window (429 with Retry-After): per source, and overall for server ids not known to exist; 0 turns a limit off. */
  failedSignatures: { windowMs: number; perSource: number; global: number };
  /** Referral-link (`/r/`) clicks per client address per window (429 with Retry-After); 0 turns it off. */
  referralLinkLimit: { windowMs: number; perIp: number };
  /** Port of /healthz, /readyz and /metrics (never the public port). */
  opsPort: number;
  /** E-mail vote reminders are on (SMTP_URL is set; only whether it is set is read here): receipt pages show the opt-in form. */
  remindersEnabled: boolean;
  /** Discord DM vote reminders are on (DISCORD_BOT_TOKEN is set; only whether it is set is read here, never the token). */
  discordDmRemindersEnabled: boolean;
}

/** Loads and validates every setting; throws ConfigError listing every problem at once. */
export function loadGatewayConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  const r = createEnvReader(env);
  const referralServiceUrl = r.string("REFERRAL_SERVICE_URL", "http://127.0.0.1:8081");
  if (!/^https?:\/\/[^/]+/.test(referralServiceUrl)) r.problem("REFERRAL_SERVICE_URL must be an http(s) URL");
  const referralServiceToken = readServiceToken(r, "REFERRAL_SERVICE_TOKEN", {
    required: true,
    hint: "the gateway's service token (scopes ingest, pull, claims, clicks:record, dashboard, receipts; plus admin for the operator dashboard); see README, Ports and the internal API",
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
    unknownServerCacheMs: r.int("UNKNOWN_SERVER_CACHE_MS", DEFAULT_UNKNOWN_SERVER_CACHE_MS, { min: 0, max: 3_600_000 }),
    // A request past the interval waits for the next lookup: a few seconds at most.
    signingKeyRefreshMs: r.int("SIGNING_KEY_REFRESH_MS", DEFAULT_SIGNING_KEY_REFRESH_MS, { min: 0, max: 5_000 }),
    failedSignatures: {
      windowMs: r.int("FAILED_SIGNATURE_WINDOW_MS", DEFAULT_FAILED_SIGNATURE_WINDOW_MS, { min: 1_000, max: 3_600_000 }),
      perSource: r.int("FAILED_SIGNATURES_PER_SOURCE", DEFAULT_FAILED_SIGNATURES_PER_SOURCE, { min: 0 }),
      global: r.int("FAILED_SIGNATURES_GLOBAL", DEFAULT_FAILED_SIGNATURES_GLOBAL, { min: 0 }),
    },
    referralLinkLimit: {
      windowMs: r.int("REFERRAL_LINK_WINDOW_MS", DEFAULT_REFERRAL_LINK_WINDOW_MS, { min: 1_000, max: 3_600_000 }),
      perIp: r.int("REFERRAL_LINK_CLICKS_PER_IP", DEFAULT_REFERRAL_LINK_CLICKS_PER_IP, { min: 0 }),
    },
    opsPort: readPort(r, "OPS_PORT", DEFAULT_GATEWAY_OPS_PORT),
    remindersEnabled: r.optionalString("SMTP_URL") !== undefined,
    discordDmRemindersEnabled: r.optionalString("DISCORD_BOT_TOKEN") !== undefined,
  });
}
