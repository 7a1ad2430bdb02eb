import type { PrismaClient } from "../shared/adapters/db.js";
import { isUniqueViolation } from "../shared/values/db-errors.js";
import { DomainError } from "../shared/rpc/errors.js";
import { isUuid } from "../shared/values/ids.js";
import { generateServiceToken, hashToken } from "../shared/runtime/secrets.js";
import { SCOPES, isScope, type Scope } from "./scopes.js";

/** How long a checked token is reused before the database is asked again; a revoke takes effect within this. */
export const SERVICE_TOKEN_CACHE_MS = 1_000;
/** Entries the token cache keeps at most (a flood of random tokens cannot grow it further). */
const MAX_CACHED_TOKENS = 1_000;

const TOKEN_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** A stored service token, never its value. */
export interface ServiceTokenRecord {
  id: string;
  name: string;
  scopes: string[];
  createdAt: Date;
  revokedAt: Date | null;
}

/** A token that passed the check: who is calling and with which scopes. */
export interface ServiceCaller {
  tokenId: string;
  name: string;
  scopes: readonly string[];
}

/** Validates a token name (1-64 of letters, digits, `.`, `_`, `-`). */
export function toTokenName(raw: string): string {
  const name = raw.trim();
  if (!TOKEN_NAME_PATTERN.test(name)) throw new DomainError("invalid_argument", "name must be 1-64 letters, digits, '.', '_' or '-'");
  return name;
}

/** Validates a scope list: at least one, each a known scope, duplicates dropped. */
export function toScopes(raw: readonly string[]): Scope[] {
  const scopes = [...new Set(raw.map((s) => s.trim()).filter((s) => s !== ""))];
  if (scopes.length === 0) throw new DomainError("invalid_argument", `scopes must name at least one of ${SCOPES.join(", ")}`);
  const unknown = scopes.filter((s) => !isScope(s));
  if (unknown.length > 0) throw new DomainError("invalid_argument", `unknown scope ${JSON.stringify(unknown[0])}; known scopes: ${SCOPES.join(", ")}`);
  return scopes as Scope[];
}

/** Mints a token; its value is returned once and only its SHA-256 is stored. */
export async function createServiceToken(
  prisma: PrismaClient,
  now: Date,
  input: { name: string; scopes: readonly string[] },
): Promise<{ record: ServiceTokenRecord; token: string }> {
  const name = toTokenName(input.name);
  const scopes = toScopes(input.scopes);
  const token = generateServiceToken();
  try {
    const record = await prisma.serviceToken.create({ data: { name, scopes, tokenHash: hashToken(token), createdAt: now } });
    return { record, token };
  } catch (error) {
    // Failure policy: a taken name is the caller's mistake (409); anything else is internal.
    if (isUniqueViolation(error)) throw new DomainError("conflict", `a service token named ${JSON.stringify(name)} exists (revoke it or pick another name)`);
    throw error;
  }
}

/** Every token, newest first (values are never stored, so never listed). */
export async function listServiceTokens(prisma: PrismaClient): Promise<ServiceTokenRecord[]> {
  return prisma.serviceToken.findMany({
    orderBy: [{ createdAt: "desc" }, { id: "asc" }],
    select: { id: true, name: true, scopes: true, createdAt: true, revokedAt: true },
  });
}

/** Revokes a token by id or name (idempotent); 404 `unknown service token`. */
export async function revokeServiceToken(prisma: PrismaClient, now: Date, idOrName: string): Promise<ServiceTokenRecord> {
  const key = idOrName.trim();
  const where = isUuid(key) ? { id: key } : { name: key };
  await prisma.serviceToken.updateMany({ where: { ...where, revokedAt: null }, data: { revokedAt: now } });
  const row =
    key === "" ? null : await prisma.serviceToken.findFirst({ where, select: { id: true, name: true, scopes: true, createdAt: true, revokedAt: true } });
  if (!row) throw new DomainError("not_found", "unknown service token");
  return row;
}

/** What `ensureServiceToken` did. */
export type EnsureOutcome = "created" | "replaced" | "unchanged" | "revoked";

/**
 * Bootstraps a token from a setting: the row named `name` gets this token's hash and
 * `scopes`. A different token under the same name replaces the old one (the old value
 * stops working); the same token once revoked stays revoked ("revoked"). Safe when several
 * instances bootstrap the same token at once: one creates the row, the others find it.
 */
export async function ensureServiceToken(
  prisma: PrismaClient,
  now: Date,
  input: { name: string; token: string; scopes: readonly Scope[] },
  raced = false,
): Promise<EnsureOutcome> {
  const tokenHash = hashToken(input.token);
  const existing = await prisma.serviceToken.findUnique({ where: { name: input.name } });
  if (!existing) {
    try {
      await prisma.serviceToken.create({ data: { name: input.name, tokenHash, scopes: [...input.scopes], createdAt: now } });
      return "created";
    } catch (error) {
      // Failure policy: replicas booting at once race to create the row; the loser decides again against the winner's
      // row (once: a conflict that persists, such as this hash under another name, is thrown as before).
      if (!isUniqueViolation(error) || raced) throw error;
      return ensureServiceToken(prisma, now, input, true);
    }
  }
  if (existing.tokenHash === tokenHash) {
    if (existing.revokedAt) return "revoked";
    if (existing.scopes.join(" ") === input.scopes.join(" ")) return "unchanged";
    await prisma.serviceToken.update({ where: { id: existing.id }, data: { scopes: [...input.scopes] } });
    return "replaced";
  }
  await prisma.serviceToken.update({ where: { id: existing.id }, data: { tokenHash, scopes: [...input.scopes], revokedAt: null, createdAt: now } });
  return "replaced";
}

/** Tokens that work now. */
export async function countActiveServiceTokens(prisma: PrismaClient): Promise<number> {
  return prisma.serviceToken.count({ where: { revokedAt: null } });
}

/** Checks a presented token; undefined for unknown or revoked ones. */
export type TokenVerifier = (token: string) => Promise<ServiceCaller | undefined>;

/**
 * The token check of the auth interceptor: SHA-256 of the presented token, looked up
 * by its unique hash. Answers (also "no such token") are reused for `ttlMs`, so a
 * revoke takes effect within that time and a flood of wrong tokens costs one query
 * per distinct token per `ttlMs`. Concurrent checks of one token share one lookup
 * (single flight): when an answer expires under load, one query refreshes it, not
 * one per call in flight.
 */
export function createTokenVerifier(prisma: PrismaClient, opts: { ttlMs?: number; now?: () => number } = {}): TokenVerifier {
  const ttlMs = opts.ttlMs ?? SERVICE_TOKEN_CACHE_MS;
  const clock = opts.now ?? Date.now;
  const cache = new Map<string, { caller: ServiceCaller | undefined; until: number }>();
  const inFlight = new Map<string, Promise<ServiceCaller | undefined>>();
  const lookUp = async (tokenHash: string, at: number): Promise<ServiceCaller | undefined> => {
    const row = await prisma.serviceToken.findUnique({ where: { tokenHash }, select: { id: true, name: true, scopes: true, revokedAt: true } });
    const caller = row && !row.revokedAt ? { tokenId: row.id, name: row.name, scopes: row.scopes } : undefined;
    if (ttlMs > 0) {
      if (cache.size >= MAX_CACHED_TOKENS) cache.clear();
      cache.set(tokenHash, { caller, until: at + ttlMs });
    }
    return caller;
  };
  return async (token) => {
    const tokenHash = hashToken(token);
    const at = clock();
    const hit = cache.get(tokenHash);
    if (hit && hit.until > at) return hit.caller;
    const pending = inFlight.get(tokenHash);
    if (pending) return pending;
    // Failure policy: a failed lookup is not cached; the calls sharing it fail (unauthenticated is
    // decided by the interceptor) and the next call asks the database again.
    const lookup = lookUp(tokenHash, at).finally(() => inFlight.delete(tokenHash));
    inFlight.set(tokenHash, lookup);
    return lookup;
  };
}
