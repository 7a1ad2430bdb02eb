import type { CoreDeps } from "../shared/deps.js";
import { DomainError } from "../shared/errors.js";
import { toGraceSeconds } from "./domain/secret-policy.js";
import { revealNewestSecret, rotateSecret, type SecretWithValue } from "./secret-store.js";
import { requireServer } from "./server-exists.js";
import { WITH_DEFAULT_ENDPOINT, type ServerRecord } from "./server-store.js";
import { lockServer } from "./secret-store.js";

/** Bounds and defaults of the claim ledger's settings (the schema's defaults are the same). */
export const CLAIM_HOLD_DAYS = { min: 1, max: 90, default: 30 } as const;
export const CLAIM_MAX_HELD = { min: 1, max: 1000, default: 20 } as const;

/** The invalid_argument text of a setting out of its range (0 keeps the current value). */
export function claimSettingRangeText(field: "hold_days" | "max_held_per_player", range: { min: number; max: number }): string {
  return `${field} must be ${range.min} to ${range.max}, or 0 to keep the current value`;
}

/**
 * RotateClaimKey: mints the server's claim key (`vck_`), or a new one; the value is returned once.
 * The previous key stops at once unless `graceSeconds` (>0) keeps it answering for an overlap. The
 * first key turns the claim ledger on (servers.claims_enabled), in the same transaction.
 */
export async function rotateClaimKey(deps: CoreDeps, serverId: string, graceSeconds: bigint): Promise<SecretWithValue> {
  // 0 means no overlap here (a claim key is rotated when it leaked); any other value is bounded as for other secrets.
  const grace = graceSeconds === 0n ? 0 : toGraceSeconds(graceSeconds);
  return rotateSecret(deps, serverId, "claim", grace, undefined, (tx) => tx.server.update({ where: { id: serverId }, data: { claimsEnabled: true } }));
}

/** RevealClaimKey: the newest active claim key, on the owner's explicit request (404 `no claim secret` when none). */
export async function revealClaimKey(deps: CoreDeps, serverId: string): Promise<SecretWithValue> {
  return revealNewestSecret(deps, serverId, "claim");
}

/** SetClaimSettings: the hold window and the per-player cap (0 keeps a value); `payOnce` is stored, not yet in effect. */
export async function setClaimSettings(
  deps: CoreDeps,
  serverId: string,
  input: { holdDays: number; maxHeldPerPlayer: number; payOnce: boolean | undefined },
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
        ...(input.payOnce === undefined ? {} : { claimPayOnce: input.payOnce }),
      },
      include: WITH_DEFAULT_ENDPOINT,
    });
  });
}
