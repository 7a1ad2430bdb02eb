import type { Logger } from "./log.js";

/** A periodic job's loop: start() and stop() (waits for a pass in progress). */
export interface PassLoop {
  start(): void;
  stop(): Promise<void>;
}

/**
 * Runs `pass(now)` every `intervalSeconds` (timed from the end of the last, so passes never overlap), at once again when
 * a pass claimed a full batch (`claimed >= batchRows`). A failed pass is logged with `failureText` and the loop goes on
 * at the next interval: the job's claimed rows are leased, so they come back by themselves.
 */
export function createPassLoop(opts: {
  pass: (now: Date) => Promise<{ claimed: number }>;
  batchRows: number;
  intervalSeconds: number;
  now: () => Date;
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
      .then((r) => {
        full = r.claimed >= opts.batchRows;
      })
      .catch((error: unknown) => {
        // Failure policy: log and try again at the next interval - a failed pass leaves its leased rows to come back.
        opts.log.warn({ err: error }, opts.failureText);
      })
      .finally(() => {
        running = undefined;
        schedule(full ? 0 : opts.intervalSeconds * 1000);
      });
  };
  return {
    start() {
      if (stopped || timer !== undefined || running !== undefined) return;
      tick();
    },
    async stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      await running;
    },
  };
}
