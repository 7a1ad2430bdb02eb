import type { Logger } from "./log.js";

/** A background sender or scanner: start() and stop() (waits for a pass in progress). */
export interface PassLoop {
  start(): void;
  stop(): Promise<void>;
}

/**
 * Runs `pass` every `intervalMs` (timed from the end of the last, so passes never overlap), at once again when a pass
 * reports it was full (more work waits). A failed pass is logged with `failure` and tried again at the next interval.
 */
export function createPassLoop(opts: { intervalMs: number; pass: () => Promise<{ full: boolean }>; log: Logger; failure: string }): PassLoop {
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
      .pass()
      .then((r) => {
        full = r.full;
      })
      .catch((error: unknown) => {
        // Failure policy: log and try again at the next interval - a failed pass leaves its leased rows to come back.
        opts.log.warn({ err: error }, opts.failure);
      })
      .finally(() => {
        running = undefined;
        schedule(full ? 0 : opts.intervalMs);
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
