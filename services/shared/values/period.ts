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

/**
 * The ISO 8601 week of `at` (UTC) as "YYYY-Www": weeks run Monday to Sunday, and week 01 is the week with the year's
 * first Thursday, so the days around New Year can belong to the other year's week (2027-01-01, a Friday, is in
 * "2026-W53"; 2024-12-30, a Monday, is in "2025-W01").
 */
export function isoWeekOf(at: Date): string {
  const DAY_MS = 86_400_000;
  const day = Math.floor(at.getTime() / DAY_MS);
  // 1970-01-01 was a Thursday: Monday = 0 ... Sunday = 6.
  const weekday = (((day + 3) % 7) + 7) % 7;
  // The week's Thursday decides its year.
  const thursday = new Date((day - weekday + 3) * DAY_MS);
  const year = thursday.getUTCFullYear();
  const week = Math.floor((thursday.getTime() - Date.UTC(year, 0, 1)) / (7 * DAY_MS)) + 1;
  return `${year.toString().padStart(4, "0")}-W${week.toString().padStart(2, "0")}`;
}

/** An ISO week as isoWeekOf writes it: "YYYY-Www" (week 01-53). */
export const ISO_WEEK_PATTERN = /^(\d{4})-W(0[1-9]|[1-4]\d|5[0-3])$/;

/**
 * The half-open UTC range [Monday 00:00, next Monday 00:00) of an ISO week "YYYY-Www", or null when malformed. Week 01
 * is the week holding 4 January, so "2026-W53" runs from 2026-12-28 to 2027-01-04.
 */
export function isoWeekRange(week: string): { start: Date; end: Date } | null {
  const match = ISO_WEEK_PATTERN.exec(week);
  if (!match) return null;
  const DAY_MS = 86_400_000;
  const jan4 = Date.UTC(Number(match[1]), 0, 4);
  // Monday = 0 ... Sunday = 6.
  const weekday = (new Date(jan4).getUTCDay() + 6) % 7;
  const start = jan4 - weekday * DAY_MS + (Number(match[2]) - 1) * 7 * DAY_MS;
  return { start: new Date(start), end: new Date(start + 7 * DAY_MS) };
}
