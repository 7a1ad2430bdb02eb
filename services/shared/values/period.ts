/** Ranking, reporting and callback periods: a UTC month written "YYYY-MM" (month 01-12). */

/** THE period rule; every copy (the OpenAPI document's `period` schemas too) takes its source. */
export const PERIOD_PATTERN = /^(\d{4})-(0[1-9]|1[0-2])$/;

/** The UTC month of `at` as "YYYY-MM". */
export function periodOf(at: Date): string {
  return `${at.getUTCFullYear().toString().padStart(4, "0")}-${(at.getUTCMonth() + 1).toString().padStart(2, "0")}`;
}

/** True for a well-formed "YYYY-MM" period (month 01-12). */
export function isPeriod(value: string): boolean {
  return PERIOD_PATTERN.test(value);
}

/** The half-open UTC range [start, end) of a "YYYY-MM" period, or null when malformed. */
export function periodRange(period: string): { start: Date; end: Date } | null {
  const match = PERIOD_PATTERN.exec(period);
  if (!match) return null;
  const year = Number(match[1]);
  const month = Number(match[2]) - 1;
  return { start: new Date(Date.UTC(year, month, 1)), end: new Date(Date.UTC(year, month + 1, 1)) };
}
