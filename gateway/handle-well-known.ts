import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { ListWebhookSigningKeysResponse } from "../gen/proto/servers/v1/servers_pb.js";
import { fromRpcError, type HttpReply } from "./http-errors.js";

/**
 * The list's published ed25519 public keys for the `v1a` callback signature (Standard Webhooks'
 * asymmetric scheme), public and without any credential: a game plugin fetches them to verify that
 * a callback came from the list. Only public material ever leaves here: the RPC answers nothing
 * else, and this module copies named fields only.
 */

/** Standard Webhooks' key list: `{"keys":[{kid, alg, public_key: "whpk_...", created_at, expires_at}]}`. */
export const WEBHOOK_KEYS_PATH = "/.well-known/webhook-keys.json";
/** The same keys as a JSON Web Key Set (RFC 7517; OKP/Ed25519 keys, RFC 8037), for JOSE libraries. */
export const JWKS_PATH = "/.well-known/jwks.json";
/** How long receivers and caches may keep the answer. Receivers refetch once when no cached key verifies. */
export const WELL_KNOWN_MAX_AGE_SECONDS = 300;
/** How long the gateway reuses the referral service's answer (shorter than the receivers' max-age). */
export const WELL_KNOWN_CACHE_MS = 30_000;

/** One key of webhook-keys.json. */
export interface PublishedKeyJson {
  kid: string;
  alg: string;
  public_key: string;
  created_at: string;
  /** null while the key signs; after a rotation, the end of its overlap. */
  expires_at: string | null;
}

/** The keys as webhook-keys.json publishes them (current first). */
export function toWebhookKeysJson(answer: ListWebhookSigningKeysResponse): { keys: PublishedKeyJson[] } {
  return {
    keys: answer.keys.map((k) => ({
      kid: k.kid,
      alg: k.alg,
      public_key: k.publicKey,
      created_at: k.createdAt ? timestampDate(k.createdAt).toISOString() : "",
      expires_at: k.expiresAt ? timestampDate(k.expiresAt).toISOString() : null,
    })),
  };
}

/** The keys as a JWKS: `x` is the raw public key, base64url (RFC 8037). */
export function toJwks(answer: ListWebhookSigningKeysResponse): {
  keys: Array<{ kty: "OKP"; crv: "Ed25519"; alg: "EdDSA"; use: "sig"; kid: string; x: string }>;
} {
  return {
    keys: answer.keys.map((k) => ({
      kty: "OKP",
      crv: "Ed25519",
      alg: "EdDSA",
      use: "sig",
      kid: k.kid,
      x: Buffer.from(k.publicKey.replace(/^whpk_/, ""), "base64").toString("base64url"),
    })),
  };
}

/** Serves both documents from one cached answer of ListWebhookSigningKeys. */
export interface WellKnownKeys {
  reply(path: typeof WEBHOOK_KEYS_PATH | typeof JWKS_PATH): Promise<{ reply: HttpReply; cause?: unknown }>;
}

export function createWellKnownKeys(deps: { listKeys: () => Promise<ListWebhookSigningKeysResponse>; now: () => Date; cacheMs?: number }): WellKnownKeys {
  const cacheMs = deps.cacheMs ?? WELL_KNOWN_CACHE_MS;
  let cached: { answer: ListWebhookSigningKeysResponse; at: number } | undefined;
  return {
    async reply(path) {
      const at = deps.now().getTime();
      if (!cached || at - cached.at >= cacheMs) {
        try {
          cached = { answer: await deps.listKeys(), at };
        } catch (error) {
          // Failure policy: the referral service is away: the public 500 (or its mapped answer), never a stale-forever list.
          return fromRpcError(error);
        }
      }
      const body = path === JWKS_PATH ? toJwks(cached.answer) : toWebhookKeysJson(cached.answer);
      return { reply: { status: 200, body, headers: { "cache-control": `public, max-age=${WELL_KNOWN_MAX_AGE_SECONDS}` } } };
    },
  };
}
