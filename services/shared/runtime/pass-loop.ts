import type { Logger } from "./log.js";

/** A background job's loop: start() runs a first pass and schedules the next; stop() waits for a pass in progress. */
export interface PassLoop {
  start(): void;
  stop(): Promise<void>;
}

/**
 * The loop of a periodic job (the period closer, the goal payer): a pass every `intervalSeconds`, the next timed from
 * the end of the last so passes never overlap; `settings.enabled` false starts nothing. A failed pass is logged with
 * `failureText` and the next one runs at the next interval: a job's pass must roll back whole when it fails.
 */
export function createPassLoop(deps: {
  settings: { enabled: boolean; intervalSeconds: number };
  pass: () => Promise<unknown>;
  log: Logger;
  failureText: string;
}): PassLoop {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  const schedule = () => {
    if (!stopped) timer = setTimeout(tick, deps.settings.intervalSeconds * 1000);
  };
  const tick = () => {
    timer = undefined;
    running = deps
      .pass()
      .then(() => undefined)
      .catch((error: unknown) => {
        // Failure policy: log and try again at the next interval - a failed pass rolled back whole (each job's own rule), so nothing was half done by it.
        deps.log.warn({ err: error }, deps.failureText);
      })
      .finally(() => {
        running = undefined;
        schedule();
      });
  };
  return {
    start() {
      if (!deps.settings.enabled || stopped || timer !== undefined || running !== undefined) return;
      tick();
    },
    async stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      await running;
    },
  };
}
