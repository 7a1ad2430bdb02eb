import type { EnvReader } from "../shared/runtime/config.js";
import { readAddressSettings } from "../shared/runtime/address-settings.js";

/** The retention runner's settings: the loop's pace, the batch bounds, and each kind of data's age limit. */
export interface RetentionSettings {
  /** Seconds between two passes (RETENTION_INTERVAL_SECONDS). */
  intervalSeconds: number;
  /** Rows one statement removes at most (RETENTION_BATCH_ROWS). */
  batchRows: number;
  /** Rows one rule removes at most in one pass (RETENTION_PASS_MAX_ROWS): the pass's budget per rule. */
  passMaxRows: number;
  /** Hours voters' IP, subnet and user agent are kept on hearts and clicks (ADDRESS_RETENTION_HOURS, default 48). */
  addressRetentionHours: number;
}

/** Reads the retention settings (problems recorded on `r`, reported with the process's others). */
export function readRetentionSettings(r: EnvReader): RetentionSettings {
  return {
    intervalSeconds: r.int("RETENTION_INTERVAL_SECONDS", 60, { min: 1, max: 86_400 }),
    batchRows: r.int("RETENTION_BATCH_ROWS", 1_000, { min: 1, max: 10_000 }),
    passMaxRows: r.int("RETENTION_PASS_MAX_ROWS", 10_000, { min: 1, max: 1_000_000 }),
    addressRetentionHours: readAddressSettings(r).retentionHours,
  };
}
