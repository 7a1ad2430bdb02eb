import { Prisma } from "../../gen/prisma/client.js";
import type { Tx } from "../shared/adapters/db.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import type { HeldReleaseDeps } from "./held-release.js";
import { DomainError, unknownServer } from "../shared/rpc/errors.js";
import { generateCallbackSecret, generateKid, generatePullSecret, generateReferralSecret } from "../shared/runtime/secrets.js";
import { isUuid } from "../shared/values/ids.js";
import { requireServer } from "./server-exists.js";
import { activeSecretSql } from "./active-secrets.js";
import {
  MAX_ACTIVE_SECRETS_PER_SERVER,
  activeSecretWhere,
  activeSecretsNewestFirst,
  compareNewestFirst,
  isSecretActive,
  rotationCutoff,
  tooManySecretsText,
} from "./domain/secret-policy.js";

/** Which secret family: referral ingest (`rsec_`), reward callback (`whsec_`) or pull API (`psec_`). */
export type SecretPurpose = "referral" | "callback" | "pull";

/** A secret's metadata, never its value. */
export interface SecretMeta {
  kid: string;
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
  active: boolean;
}

/** A freshly created (or revealed) secret: metadata plus the plaintext value. */
export interface SecretWithValue {
  info: SecretMeta;
  secret: string;
}

/** The gateway's view of a server's ingest keys. */
export type SigningKeysResolution =
  | { status: "unknown_server" }
  | { status: "referrals_disabled" }
  | { status: "ok"; keys: Array<{ kid: string; secret: string }> };

/**
 * Locks the server row for the rest of the transaction, so secret and settings changes of one
 * server are serialised (two concurrent rotations cannot both leave an unexpired older secret).
 * Throws unknown_server when there is no such server.
 *
 * The lock is taken by an update that changes nothing (`SET id = id`), so these model-API
 * transactions need no raw SQL: an update locks its row (FOR NO KEY UPDATE) until the transaction
 * ends, and a second lockServer of the server waits for it. Unlike `SELECT ... FOR UPDATE` it does
 * not hold back inserts of the server's own rows (hearts, clicks, deliveries), which no caller needs.
 */
export async function lockServer(tx: Tx, serverId: string): Promise<void> {
  const locked = isUuid(serverId) ? await tx.server.updateMany({ where: { id: serverId }, data: { id: serverId } }) : { count: 0 };
  if (locked.count === 0) throw unknownServer();
}

/**
 * Whose secrets of `purpose` a call acts on: the server's, and for `callback` secrets one of its
 * endpoints' (every callback secret belongs to an endpoint: services/servers/endpoint-store.ts).
 */
function secretScope(serverId: string, purpose: SecretPurpose, endpointId?: string) {
  return { serverId, purpose, ...(endpointId === undefined ? {} : { endpointId }) };
}

/**
 * Adds an active secret inside the caller's transaction (which holds the server lock); the value
 * is sealed at rest. Refused (failed_precondition) when the server (for a callback secret: the
 * endpoint `endpointId`) already holds MAX_ACTIVE_SECRETS_PER_SERVER active secrets of that purpose.
 */
export async function insertSecret(deps: CoreDeps, tx: Tx, serverId: string, purpose: SecretPurpose, now: Date, endpointId?: string): Promise<SecretWithValue> {
  const active = await tx.serverSecret.count({ where: { ...secretScope(serverId, purpose, endpointId), ...activeSecretWhere(now) } });
  if (active >= MAX_ACTIVE_SECRETS_PER_SERVER) throw new DomainError("failed_precondition", tooManySecretsText(purpose));
  const secret = purpose === "referral" ? generateReferralSecret() : purpose === "pull" ? generatePullSecret() : generateCallbackSecret();
  const row = await tx.serverSecret.create({
    data: { serverId, endpointId: endpointId ?? null, purpose, kid: generateKid(), ciphertext: deps.secretBox.seal(secret), createdAt: now },
  });
  return { info: toMeta(row, now), secret };
}

/** CreateReferralSecret: adds an active referral secret; its value is returned once. */
export async function createReferralSecret(deps: CoreDeps, serverId: string): Promise<SecretWithValue> {
  const now = deps.now();
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    return insertSecret(deps, tx, serverId, "referral", now);
  });
}

/**
 * Rotation: a new secret; every older active secret of the same purpose stays
 * valid until `now + grace` (unless it already expires sooner). Revocation is
 * still immediate during the overlap. A callback endpoint's new secret releases
 * its held deliveries (held for want of a secret) in the same transaction.
 */
export async function rotateSecret(
  deps: CoreDeps & HeldReleaseDeps,
  serverId: string,
  purpose: SecretPurpose,
  graceSeconds: number,
  endpointId?: string,
): Promise<SecretWithValue> {
  const now = deps.now();
  const cutoff = rotationCutoff(now, graceSeconds);
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    await tx.serverSecret.updateMany({
      // Every secret still active at the cutoff (an older expiry is left alone).
      where: { ...secretScope(serverId, purpose, endpointId), ...activeSecretWhere(cutoff) },
      data: { expiresAt: cutoff },
    });
    const minted = await insertSecret(deps, tx, serverId, purpose, now, endpointId);
    if (purpose === "callback" && endpointId !== undefined) await deps.releaseHeld(tx, { serverId, endpointId });
    return minted;
  });
}

/** Revokes a referral secret by kid, effective immediately (idempotent; 404 for an unknown kid). */
export async function revokeReferralSecret(deps: CoreDeps, serverId: string, kid: string): Promise<SecretMeta> {
  await requireServer(deps, serverId);
  const now = deps.now();
  const where = { serverId, purpose: "referral" as const, kid: kid.trim() };
  await deps.prisma.serverSecret.updateMany({ where: { ...where, revokedAt: null }, data: { revokedAt: now } });
  const row = await deps.prisma.serverSecret.findFirst({ where });
  if (!row) throw new DomainError("not_found", "unknown secret kid");
  return toMeta(row, now);
}

/** Lists a server's referral secrets (active or not), newest first, without values. */
export async function listReferralSecrets(deps: CoreDeps, serverId: string): Promise<SecretMeta[]> {
  await requireServer(deps, serverId);
  const now = deps.now();
  const rows = await deps.prisma.serverSecret.findMany({ where: { serverId, purpose: "referral" } });
  return rows.sort(compareNewestFirst).map((row) => toMeta(row, now));
}

/** The owner's explicit reveal of one referral secret (a revoked one is not revealed). */
export async function revealReferralSecret(deps: CoreDeps, serverId: string, kid: string): Promise<string> {
  await requireServer(deps, serverId);
  const row = await deps.prisma.serverSecret.findFirst({ where: { serverId, purpose: "referral", kid: kid.trim() } });
  if (!row) throw new DomainError("not_found", "unknown secret kid");
  if (row.revokedAt !== null) throw new DomainError("failed_precondition", "secret is revoked");
  return deps.secretBox.open(row.ciphertext);
}

/** The newest active callback secret of the endpoint `endpointId` and its metadata (404 when none). */
export async function revealCallbackSecret(deps: CoreDeps, serverId: string, endpointId: string): Promise<SecretWithValue> {
  return revealNewestSecret(deps, serverId, "callback", endpointId);
}

/** The newest active secret of `purpose` (of the endpoint, for a callback secret) and its metadata (404 `no <purpose> secret` when none). */
export async function revealNewestSecret(deps: CoreDeps, serverId: string, purpose: "callback" | "pull", endpointId?: string): Promise<SecretWithValue> {
  await requireServer(deps, serverId);
  const now = deps.now();
  const [row] = activeSecretsNewestFirst(
    await deps.prisma.serverSecret.findMany({ where: { ...secretScope(serverId, purpose, endpointId), ...activeSecretWhere(now) } }),
    now,
  );
  if (!row) throw new DomainError("not_found", `no ${purpose} secret`);
  return { info: toMeta(row, now), secret: deps.secretBox.open(row.ciphertext) };
}

interface SigningKeyRow {
  enabled: boolean;
  kid: string | null;
  ciphertext: string | null;
  created_at: Date | null;
  expires_at: Date | null;
  revoked_at: Date | null;
}

/**
 * ResolveSigningKeys, the gateway's hot path: ONE query joins the server to its
 * active referral secrets (newest first). unknown_server for no such server or
 * an id that is not a uuid; referrals_disabled when referrals are off or no
 * secret is active; otherwise ok with the opened secrets.
 */
export async function resolveSigningKeys(deps: CoreDeps, rawServerId: string): Promise<SigningKeysResolution> {
  const resolved = await resolveActiveKeys(deps, rawServerId, "referral");
  return resolved.status === "disabled" ? { status: "referrals_disabled" } : resolved;
}

/** The gateway's view of a server's pull API keys. */
export type PullKeysResolution = { status: "unknown_server" } | { status: "pull_disabled" } | { status: "ok"; keys: Array<{ kid: string; secret: string }> };

/**
 * ResolvePullKeys, for the gateway's signed pull API: like ResolveSigningKeys, with
 * the pull switch and the active pull secrets. pull_disabled when the pull API is
 * off or no pull secret is active.
 */
export async function resolvePullKeys(deps: CoreDeps, rawServerId: string): Promise<PullKeysResolution> {
  const resolved = await resolveActiveKeys(deps, rawServerId, "pull");
  return resolved.status === "disabled" ? { status: "pull_disabled" } : resolved;
}

/** One query: the server's switch for `purpose` and its active secrets of that purpose, newest first. */
async function resolveActiveKeys(
  deps: CoreDeps,
  rawServerId: string,
  purpose: "referral" | "pull",
): Promise<{ status: "unknown_server" } | { status: "disabled" } | { status: "ok"; keys: Array<{ kid: string; secret: string }> }> {
  const serverId = rawServerId.trim();
  if (!isUuid(serverId)) return { status: "unknown_server" };
  const now = deps.now();
  const rows = await runSql<SigningKeyRow>(
    deps.prisma,
    Prisma.sql`
      SELECT CASE WHEN ${purpose} = 'pull' THEN s.pull_enabled ELSE s.referrals_enabled END AS enabled,
             k.kid, k.ciphertext, k.created_at, k.expires_at, k.revoked_at
      FROM servers s
      LEFT JOIN server_secrets k ON k.server_id = s.id AND k.purpose = ${purpose}::"SecretPurpose" AND ${activeSecretSql("k", now)}
      WHERE s.id = ${serverId}::uuid`,
  );
  const first = rows[0];
  if (!first) return { status: "unknown_server" };
  if (!first.enabled) return { status: "disabled" };
  const secrets = rows.flatMap((r) =>
    r.kid !== null && r.ciphertext !== null && r.created_at !== null
      ? [{ kid: r.kid, ciphertext: r.ciphertext, createdAt: r.created_at, expiresAt: r.expires_at, revokedAt: r.revoked_at }]
      : [],
  );
  const keys = activeSecretsNewestFirst(secrets, now).map((s) => ({ kid: s.kid, secret: deps.secretBox.open(s.ciphertext) }));
  return keys.length === 0 ? { status: "disabled" } : { status: "ok", keys };
}

function toMeta(row: { kid: string; createdAt: Date; expiresAt: Date | null; revokedAt: Date | null }, now: Date): SecretMeta {
  return { kid: row.kid, createdAt: row.createdAt, expiresAt: row.expiresAt, revokedAt: row.revokedAt, active: isSecretActive(row, now) };
}
