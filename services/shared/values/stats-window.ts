import { DomainError } from "./domain-error.js";
import { betweenText } from "./contract.js";

const DAY_MS = 24 * 60 * 60 * 1000;

/** A run of whole UTC days or months for a chart: `[from, to)` plus the first and last bucket names. */
export interface StatsWindow {
  /** Midnight UTC opening the first bucket. */
  from: Date;
  /** Midnight UTC after the last bucket (exclusive). */
  to: Date;
  /** First and last bucket as `YYYY-MM-DD` (the first day of a month for monthly windows). */
  firstDay: string;
  lastDay: string;
}

/**
 * Reads a window size from an RPC field: 0 means `fallback`, negative or over `max`
 * is InvalidArgument naming the field.
 */
export function readWindowSize(value: number, field: string, fallback: number, max: number): number {
  if (value === 0) return fallback;
  if (!Number.isInteger(value) || value < 0 || value > max) throw new DomainError("invalid_argument", betweenText(field, 1, max));
  return value;
}

/** The `days` UTC days ending with the day of `now` (today included). */
export function dailyWindow(now: Date, days: number): StatsWindow {
  const today = Math.floor(now.getTime() / DAY_MS) * DAY_MS;
  const from = new Date(today - (days - 1) * DAY_MS);
  const to = new Date(today + DAY_MS);
  return { from, to, firstDay: toDay(from), lastDay: toDay(new Date(today)) };
}

/** The `months` UTC months ending with the month of `now` (this month included). */
export function monthlyWindow(now: Date, months: number): StatsWindow {
  const year = now.getUTCFullYear();
  const month = now.getUTCMonth();
  const from = new Date(Date.UTC(year, month - (months - 1), 1));
  const last = new Date(Date.UTC(year, month, 1));
  const to = new Date(Date.UTC(year, month + 1, 1));
  return { from, to, firstDay: toDay(from), lastDay: toDay(last) };
}

function toDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}
