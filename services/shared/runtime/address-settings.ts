import type { EnvReader } from "./config.js";

/** How long a heart's or a click's IP, subnet and user agent are kept by default: the longest default rule window (24 h) plus a day. */
export const DEFAULT_ADDRESS_RETENTION_HOURS = 48;

/** The settings of voters' addresses on hearts and referral clicks (issue 30). */
export interface AddressSettings {
  /**
   * Hours a heart's or a click's IP, subnet and user agent are kept before the erasure pass sets them to null
   * (ADDRESS_RETENTION_HOURS): at least the longest fraud or anti-abuse window, plus a margin.
   */
  retentionHours: number;
  /** The version of the address key new rows' pseudonyms are written under (ADDRESS_KEY_VERSION; services/shared/values/address-key.ts). */
  keyVersion: number;
}

/** Reads ADDRESS_RETENTION_HOURS (default 48) and ADDRESS_KEY_VERSION (default 1); problems recorded on `r`. */
export function readAddressSettings(r: EnvReader): AddressSettings {
  return {
    retentionHours: r.int("ADDRESS_RETENTION_HOURS", DEFAULT_ADDRESS_RETENTION_HOURS, { min: 1, max: 24 * 366 }),
    keyVersion: r.int("ADDRESS_KEY_VERSION", 1, { min: 1, max: 1_000_000 }),
  };
}

/**
 * Records a problem when a rule window reaches past the address horizon: a rule that looks further back than the
 * addresses are kept would silently stop seeing them (fail closed: the process does not start).
 * `windowsSeconds` names each rule's look-back.
 */
export function checkAddressHorizon(r: EnvReader, settings: AddressSettings, windowsSeconds: Record<string, number>): void {
  const horizonSeconds = settings.retentionHours * 3600;
  for (const [rule, seconds] of Object.entries(windowsSeconds)) {
    if (seconds > horizonSeconds)
      r.problem(`ADDRESS_RETENTION_HOURS (${settings.retentionHours}) is shorter than the ${rule} window (${seconds} s): raise it, or shorten the window`);
  }
}
