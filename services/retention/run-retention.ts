import { Counter, Gauge, type Registry } from "prom-client";
import type { PrismaClient } from "../shared/adapters/db.js";
import type { Logger } from "../shared/runtime/log.js";
import type { RetentionRule } from "../shared/adapters/retention-rule.js";
import { retentionRules } from "./retention-rules.js";
import type { RetentionSettings } from "./retention-settings.js";

/** The retention metrics on the running process's registry (its /metrics). */
export interface RetentionMetrics {
  /** `retention_rows_removed_total{table, rule}`: rows removed (or erased) by retention. */
  removed: Counter<"table" | "rule">;
  /** `retention_oldest_row_age_seconds{rule}`: age of the oldest row a rule governs, after the last pass (0: none). */
  oldestAge: Gauge<"rule">;
}

/** Registers the retention metrics on `registry`. */
export function createRetentionMetrics(registry: Registry): RetentionMetrics {
  return {
    removed: new Counter({
      name: "retention_rows_removed_total",
      help: "Rows removed (or whose personal fields were erased) by retention, by table and rule.",
      labelNames: ["table", "rule"] as const,
      registers: [registry],
    }),
    oldestAge: new Gauge({
      name: "retention_oldest_row_age_seconds",
      help: "Age in seconds of the oldest row each retention rule governs, after the last pass (0: none).",
      labelNames: ["rule"] as const,
      registers: [registry],
    }),
  };
}

/** What one pass needs. */
export interface RetentionPassDeps {
  db: PrismaClient;
  rules: readonly RetentionRule[];
  /** Rows one statement removes at most. */
  batchRows: number;
  /** Rows one rule removes at most in this pass (the pass's budget per rule). */
  passMaxRows: number;
  metrics?: RetentionMetrics;
  log: Logger;
  /**
   * The pass's pace: after each statement that removed rows, it waits so that its statements take at most
   * `dutyPercent` of the time (a statement of d ms is followed by d x (100 / dutyPercent - 1) ms idle), the way
   * autovacuum's cost delay keeps its work beside the hot paths. Absent (or 100): no wait. `stopping` ends the pass
   * at the next statement (a stopping process does not wait out a catch-up).
   */
  pace?: { dutyPercent: number; sleep: (ms: number) => Promise<void>; clockMs: () => number; stopping?: () => boolean };
}

/** The idle time after a statement of `statementMs` at `dutyPercent` (100: none). */
export function idleAfterMs(statementMs: number, dutyPercent: number): number {
  return dutyPercent >= 100 ? 0 : Math.max(0, statementMs) * (100 / dutyPercent - 1);
}

/** What one pass did, per rule name: rows removed, the oldest row's age after it (null: none), and failed rules. */
export interface RetentionPassResult {
  removed: Record<string, number>;
  oldestAgeSeconds: Record<string, number | null>;
  failed: string[];
}

/**
 * ONE retention pass at `now`: for each rule in turn, batches of at most `batchRows` rows, each its own short
 * statement (never one long transaction), until the rule finds nothing more due or has removed `passMaxRows`
 * (at most ceil(passMaxRows / batchRows) statements per rule), then the rule's oldest-row age. One log line with
 * the counts per rule (rule names and numbers only: never a row's content).
 */
export async function runRetentionPass(deps: RetentionPassDeps, now: Date): Promise<RetentionPassResult> {
  const result: RetentionPassResult = { removed: {}, oldestAgeSeconds: {}, failed: [] };
  const maxStatements = Math.ceil(deps.passMaxRows / deps.batchRows);
  for (const rule of deps.rules) {
    let removed = 0;
    try {
      for (let i = 0; i < maxStatements && removed < deps.passMaxRows && !deps.pace?.stopping?.(); i++) {
        const started = deps.pace?.clockMs();
        const n = await rule.removeBatch(deps.db, now, Math.min(deps.batchRows, deps.passMaxRows - removed));
        removed += n;
        deps.metrics?.removed.inc({ table: rule.table, rule: rule.name }, n);
        if (n === 0) break;
        if (deps.pace !== undefined && started !== undefined) {
          const idle = idleAfterMs(deps.pace.clockMs() - started, deps.pace.dutyPercent);
          if (idle > 0) await deps.pace.sleep(idle);
        }
      }
      const age = await rule.oldestAge(deps.db, now);
      result.oldestAgeSeconds[rule.name] = age;
      deps.metrics?.oldestAge.set({ rule: rule.name }, age ?? 0);
    } catch (error) {
      // Failure policy: skip the rule for this pass and go on with the others - what it removed stays removed
      // (each batch committed on its own), and the next pass starts it again from its oldest due row.
      result.failed.push(rule.name);
      deps.log.warn({ rule: rule.name, err: error }, "retention rule failed; retried next pass");
    }
    result.removed[rule.name] = removed;
  }
  deps.log.info({ removed: result.removed, failed: result.failed }, "retention pass");
  return result;
}

/** The retention loop of the one process that runs it: start() and stop() (waits for a pass in progress). */
export interface RetentionLoop {
  start(): void;
  stop(): Promise<void>;
}

/**
 * The loop that runs a retention pass every `settings.intervalSeconds` (the next one timed from the end of the
 * last, so passes never overlap). Started by the referral service (services/referral-service/main.ts) and by
 * the all-in-one start (scripts/start.ts); with RETENTION_ENABLED=false it runs nothing.
 *
 * Several instances at once: no lock is taken, as every rule is safe to run beside itself by construction: each
 * batch is one statement that removes (or erases) only rows past the age limit, re-checking the limit on the
 * row it locks, so two instances at worst pick the same rows, one removes them and the other finds them gone
 * (and counts nothing for them); no row is ever removed early, nor counted twice.
 */
export function createRetentionLoop(deps: {
  db: PrismaClient;
  settings: RetentionSettings;
  log: Logger;
  registry: Registry;
  now: () => Date;
  /** Overrides the rule list (tests); default retentionRules(settings). */
  rules?: readonly RetentionRule[];
}): RetentionLoop {
  const { settings, log } = deps;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  // The pace's idle wait, cut short by stop().
  let wake: (() => void) | undefined;
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const idle = setTimeout(() => {
        wake = undefined;
        resolve();
      }, ms);
      wake = () => {
        clearTimeout(idle);
        wake = undefined;
        resolve();
      };
    });
  const passDeps: RetentionPassDeps = {
    db: deps.db,
    rules: deps.rules ?? retentionRules(settings),
    batchRows: settings.batchRows,
    passMaxRows: settings.passMaxRows,
    metrics: createRetentionMetrics(deps.registry),
    log,
    pace: { dutyPercent: settings.dutyPercent, sleep, clockMs: () => performance.now(), stopping: () => stopped },
  };
  const schedule = () => {
    if (!stopped) timer = setTimeout(tick, settings.intervalSeconds * 1000);
  };
  const tick = () => {
    running = runRetentionPass(passDeps, deps.now())
      .then(() => undefined)
      .catch((error: unknown) => {
        // Failure policy: log and try again at the next interval - a pass that failed removed nothing it should not.
        log.warn({ err: error }, "retention pass failed; retried at the next interval");
      })
      .finally(() => {
        running = undefined;
        schedule();
      });
  };
  return {
    start() {
      if (!settings.enabled || stopped || timer !== undefined || running !== undefined) return;
      log.info({ intervalSeconds: settings.intervalSeconds, rules: passDeps.rules.map((r) => r.name) }, "retention loop started");
      tick();
    },
    async stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      wake?.();
      await running;
    },
  };
}
