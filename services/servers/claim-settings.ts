import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError } from "../shared/rpc/errors.js";
import { claimKeyLookupHash, generateClaimKey, generateKid } from "../shared/runtime/secrets.js";
import {
  MAX_ACTIVE_SECRETS_PER_SERVER,
  activeSecretWhere,
  activeSecretsNewestFirst,
  isSecretActive,
  rotationCutoff,
  toGraceSeconds,
  tooManySecretsText,
} from "./domain/secret-policy.js";
import { lockServer, type SecretMeta, type SecretWithValue } from "./secret-store.js";
import { requireServer } from "./server-exists.js";
import { WITH_DEFAULT_ENDPOINT, type ServerRecord } from "./server-store.js";

/** Bounds and defaults of the claim ledger's settings (the schema's defaults are the same). */
export const CLAIM_HOLD_DAYS = { min: 1, max: 90, default: 30 } as const;
export const CLAIM_MAX_HELD = { min: 1, max: 1000, default: 20 } as const;

/** The invalid_argument text of a setting out of its range (0 keeps the current value). */
export function claimSettingRangeText(field: "hold_days" | "max_held_per_player", range: { min: number; max: number }): string {
  return `${field} must be ${range.min} to ${range.max}, or 0 to keep the current value`;
}

/**
 * RotateClaimKey: mints the server's claim key (`vck_`), or a new one; the value is returned once.
 * Sealed like every secret (`server_secrets`, purpose `claim`), plus its SHA-256 in `lookup_hash` so a
 * check finds the server by the key alone. The previous key stops at once unless `graceSeconds` (>0)
 * keeps it answering for an overlap (the same rotation rule as the other secrets: domain/secret-policy.ts).
 * The first key turns the claim ledger on (servers.claims_enabled), in the same transaction.
 */
export async function rotateClaimKey(deps: CoreDeps, serverId: string, graceSeconds: bigint): Promise<SecretWithValue> {
  // 0 means no overlap here (a claim key is rotated when it leaked); any other value is bounded as for other secrets.
  const grace = graceSeconds === 0n ? 0 : toGraceSeconds(graceSeconds);
  const now = deps.now();
  const cutoff = rotationCutoff(now, grace);
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    await tx.serverSecret.updateMany({ where: { serverId, purpose: "claim", ...activeSecretWhere(cutoff) }, data: { expiresAt: cutoff } });
    const active = await tx.serverSecret.count({ where: { serverId, purpose: "claim", ...activeSecretWhere(now) } });
    if (active >= MAX_ACTIVE_SECRETS_PER_SERVER) throw new DomainError("failed_precondition", tooManySecretsText("claim"));
    const claimKey = generateClaimKey();
    const row = await tx.serverSecret.create({
      data: {
        serverId,
        purpose: "claim",
        kid: generateKid(),
        ciphertext: deps.secretBox.seal(claimKey),
        lookupHash: claimKeyLookupHash(claimKey),
        createdAt: now,
      },
    });
    await tx.server.update({ where: { id: serverId }, data: { claimsEnabled: true } });
    return { info: toMeta(row, now), secret: claimKey };
  });
}

/** RevealClaimKey: the newest active claim key, on the owner's explicit request (404 `no claim key` when none). */
export async function revealClaimKey(deps: CoreDeps, serverId: string): Promise<SecretWithValue> {
  await requireServer(deps, serverId);
  const now = deps.now();
  const rows = await deps.prisma.serverSecret.findMany({ where: { serverId, purpose: "claim", ...activeSecretWhere(now) } });
  const [row] = activeSecretsNewestFirst(rows, now);
  if (!row) throw new DomainError("not_found", "no claim key");
  return { info: toMeta(row, now), secret: deps.secretBox.open(row.ciphertext) };
}

function toMeta(row: { kid: string; createdAt: Date; expiresAt: Date | null; revokedAt: Date | null }, now: Date): SecretMeta {
  return { kid: row.kid, createdAt: row.createdAt, expiresAt: row.expiresAt, revokedAt: row.revokedAt, active: isSecretActive(row, now) };
}

/**
 * SetClaimSettings: the hold window and the per-player cap (0 keeps a value), and pay-once mode
 * (absent keeps it; services/claims/pay-once.ts): it applies to hearts paid from then on.
 */
export async function setClaimSettings(
  deps: CoreDeps,
  serverId: string,
  input: { holdDays: number; maxHeldPerPlayer: number; payOnce?: boolean },
): Promise<ServerRecord> {
  const inRange = (v: number, r: { min: number; max: number }) => v === 0 || (v >= r.min && v <= r.max);
  if (!inRange(input.holdDays, CLAIM_HOLD_DAYS)) throw new DomainError("invalid_argument", claimSettingRangeText("hold_days", CLAIM_HOLD_DAYS));
  if (!inRange(input.maxHeldPerPlayer, CLAIM_MAX_HELD)) {
    throw new DomainError("invalid_argument", claimSettingRangeText("max_held_per_player", CLAIM_MAX_HELD));
  }
  await requireServer(deps, serverId);
  return deps.prisma.$transaction(async (tx) => {
    await lockServer(tx, serverId);
    return tx.server.update({
      where: { id: serverId },
      data: {
        ...(input.holdDays === 0 ? {} : { claimHoldDays: input.holdDays }),
        ...(input.maxHeldPerPlayer === 0 ? {} : { claimMaxHeld: input.maxHeldPerPlayer }),
        ...(input.payOnce === undefined ? {} : { payOnce: input.payOnce }),
      },
      include: WITH_DEFAULT_ENDPOINT,
    });
  });
}
