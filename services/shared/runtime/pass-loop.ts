import type { Logger } from "./log.js";

/** A periodic job's loop: start() runs a first pass and schedules the next; stop() waits for a pass in progress. */
export interface PassLoop {
  start(): void;
  stop(): Promise<void>;
}

/**
 * THE loop of the periodic jobs (the reminder sender, the voter role job, the period closer, the goal payer, the owner
 * alerts' scan and sender): runs
 * `pass(now)` every `intervalSeconds`, the next timed from the end of the last so passes never overlap; again at once
 * when more is due: the pass answered `{ full: true }`, or (with `batchRows`) it claimed a full batch (`claimed >= batchRows`). `enabled` false
 * starts nothing. A failed pass is logged with `failureText` and the next runs at the next interval: each job's pass
 * rolls back whole or leaves leased rows that come back by themselves.
 */
export function createPassLoop(opts: {
  pass: (now: Date) => Promise<unknown>;
  intervalSeconds: number;
  now: () => Date;
  batchRows?: number;
  enabled?: boolean;
  log: Logger;
  failureText: string;
}): PassLoop {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  const schedule = (ms: number) => {
    if (!stopped) timer = setTimeout(tick, ms);
  };
  const tick = () => {
    timer = undefined;
    let full = false;
    running = opts
      .pass(opts.now())
      .then((result) => {
        const r = result as { claimed?: unknown; full?: unknown } | undefined;
        full = r?.full === true || (opts.batchRows !== undefined && typeof r?.claimed === "number" && r.claimed >= opts.batchRows);
      })
      .catch((error: unknown) => {
        // Failure policy: log and try again at the next interval - a failed pass rolled back whole, or left its leased rows to come back.
        opts.log.warn({ err: error }, opts.failureText);
      })
      .finally(() => {
        running = undefined;
        schedule(full ? 0 : opts.intervalSeconds * 1000);
      });
  };
  return {
    start() {
      if (opts.enabled === false || stopped || timer !== undefined || running !== undefined) return;
      tick();
    },
    async stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      await running;
    },
  };
}
