import { DomainError } from "../../shared/rpc/errors.js";
import { notNegativeText } from "../../shared/values/contract.js";

/** Default overlap after a rotation during which older secrets stay valid. */
export const DEFAULT_ROTATION_GRACE_SECONDS = 24 * 60 * 60;
/** Longest overlap an owner may ask for. */
export const MAX_ROTATION_GRACE_SECONDS = 30 * 24 * 60 * 60;

/**
 * Most active secrets of one purpose a server may hold. The gateway decrypts and tries every
 * active referral secret of a request without `kid`, so the count bounds the work one request costs.
 */
export const MAX_ACTIVE_SECRETS_PER_SERVER = 10;

/** The refusal when a server already holds the most active secrets of a purpose. */
export function tooManySecretsText(purpose: string): string {
  return `too many active ${purpose} secrets (at most ${MAX_ACTIVE_SECRETS_PER_SERVER}): revoke one, or let a rotated one expire, first`;
}

/** The lifetime fields of a stored secret. */
export interface SecretLifetime {
  expiresAt: Date | null;
  revokedAt: Date | null;
}

/** Active = not revoked and (no expiry, or an expiry still in the future). */
export function isSecretActive(secret: SecretLifetime, now: Date): boolean {
  return secret.revokedAt === null && (secret.expiresAt === null || secret.expiresAt.getTime() > now.getTime());
}

/**
 * isSecretActive as a Prisma `where` fragment, so stores fetch only active rows (the server holds at
 * most MAX_ACTIVE_SECRETS_PER_SERVER of them) before ranking them with activeSecretsNewestFirst.
 * Its SQL twin, for raw statements, is activeSecretSql (services/servers/active-secrets.ts); the
 * tests hold all three equal on one table of cases.
 */
export function activeSecretWhere(now: Date) {
  return { revokedAt: null, OR: [{ expiresAt: null }, { expiresAt: { gt: now } }] };
}

/** What ranks a secret: its lifetime, its creation and its kid. */
export interface RankedSecret extends SecretLifetime {
  createdAt: Date;
  kid: string;
}

/**
 * Newest first = created last first; equal creation times (two rotations in one clock tick) by
 * expiry - a rotation shortens every older secret's expiry, so the secret without one, then the
 * later expiry, is the newer - and last by kid (ascending), so the order is total.
 * Creation, not expiry, is the rule: a rotation creates the secret receivers and signers move to
 * (rulings: callbacks carry one `v1=` per active secret "newest first"; the test referral event is
 * signed with the current secret). A rotation only ever shortens older secrets' expiries, so
 * ordering by expiry agreed in practice, but it is a proxy for creation, not the rule.
 */
export function compareNewestFirst(a: RankedSecret, b: RankedSecret): number {
  const byCreation = b.createdAt.getTime() - a.createdAt.getTime();
  if (byCreation !== 0) return byCreation;
  const aExpiry = expiryRank(a);
  const bExpiry = expiryRank(b);
  if (aExpiry !== bExpiry) return aExpiry > bExpiry ? -1 : 1;
  return a.kid < b.kid ? -1 : a.kid > b.kid ? 1 : 0;
}

/** A secret's expiry as a number to compare; no expiry ranks above every date. */
function expiryRank(secret: SecretLifetime): number {
  return secret.expiresAt === null ? Number.POSITIVE_INFINITY : secret.expiresAt.getTime();
}

/**
 * The secrets active at `now`, newest first. Signing uses the first (the newest active secret);
 * verification accepts any of them.
 */
export function activeSecretsNewestFirst<T extends RankedSecret>(secrets: readonly T[], now: Date): T[] {
  return secrets.filter((s) => isSecretActive(s, now)).sort(compareNewestFirst);
}

/**
 * The rotation overlap in seconds: 0 means the default (24 h); negative or more
 * than 30 days is refused.
 */
export function toGraceSeconds(requested: bigint): number {
  if (requested === 0n) return DEFAULT_ROTATION_GRACE_SECONDS;
  if (requested < 0n) throw new DomainError("invalid_argument", notNegativeText("grace_seconds"));
  if (requested > BigInt(MAX_ROTATION_GRACE_SECONDS)) {
    throw new DomainError("invalid_argument", `grace_seconds must be at most ${MAX_ROTATION_GRACE_SECONDS}`);
  }
  return Number(requested);
}

/**
 * The end of a rotation's overlap: older active secrets stop being valid at
 * `now + grace` (the store leaves a secret that already expires sooner alone).
 */
export function rotationCutoff(now: Date, graceSeconds: number): Date {
  return new Date(now.getTime() + graceSeconds * 1000);
}
