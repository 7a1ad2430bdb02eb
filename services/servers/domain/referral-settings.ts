import { DomainError } from "../../shared/rpc/errors.js";
import { integerBetweenText } from "../../shared/values/contract.js";

/** The attribution window a server starts with, in days (the schema's default of `servers.attribution_window_days`). */
export const DEFAULT_ATTRIBUTION_WINDOW_DAYS = 90;
/** Bounds of a server's attribution window, in days. */
export const ATTRIBUTION_WINDOW_DAYS = { min: 1, max: 365 } as const;
/** Bounds of a server's lock period after `qualified`, in days (0: no lock, the default). */
export const LOCK_DAYS = { min: 0, max: 365 } as const;

/** The referral settings a SetReferralSettings call changes (absent: unchanged). */
export interface ReferralSettings {
  attributionWindowDays?: number;
  lockDays?: number;
}

/**
 * Validates SetReferralSettings: `attribution_window_days` 1-365 and `lock_days` 0-365 when given;
 * otherwise DomainError invalid_argument naming the field and its range.
 */
export function toReferralSettings(input: { attributionWindowDays?: number | undefined; lockDays?: number | undefined }): ReferralSettings {
  const settings: ReferralSettings = {};
  if (input.attributionWindowDays !== undefined) {
    settings.attributionWindowDays = inRange("attribution_window_days", input.attributionWindowDays, ATTRIBUTION_WINDOW_DAYS);
  }
  if (input.lockDays !== undefined) settings.lockDays = inRange("lock_days", input.lockDays, LOCK_DAYS);
  return settings;
}

function inRange(field: string, value: number, range: { min: number; max: number }): number {
  if (!Number.isInteger(value) || value < range.min || value > range.max) {
    throw new DomainError("invalid_argument", integerBetweenText(field, range.min, range.max));
  }
  return value;
}
