/**
 * The runs of one task, shared and spaced: a caller that asks while a run is in flight shares it, and a
 * new run starts no sooner than `intervalMs` after the previous one started - a caller past that waits
 * for the next run and shares it with everyone else who asks meanwhile. However many callers ask, the
 * task runs at most once per interval, and every caller still gets an answer of a run that started no
 * earlier than it needs: this is how the gateway bounds what forged traffic can make it look up (a
 * server's keys, the list of server ids) without refusing anyone.
 */
export interface SpacedSingleFlight<T> {
  /**
   * The result of a run of `task` (the first caller's task; later callers share its run). Without `since`:
   * the run in flight, else the next one. With `since` (the clock's milliseconds): the latest run when it
   * started at or after `since` (in flight or done), else the next one.
   */
  run(task: () => Promise<T>, since?: number): Promise<T>;
}

/** Builds a SpacedSingleFlight on the given clock (milliseconds); a wait for the next run is a real timer of at most `intervalMs`. */
export function createSpacedSingleFlight<T>(opts: { intervalMs: number; now: () => number }): SpacedSingleFlight<T> {
  let latest: { at: number; value: Promise<T>; done: boolean } | undefined;
  let next: Promise<T> | undefined;

  const start = (task: () => Promise<T>): Promise<T> => {
    const run = { at: opts.now(), value: task(), done: false };
    latest = run;
    const end = () => {
      run.done = true;
    };
    run.value.then(end, end);
    return run.value;
  };

  return {
    run(task, since) {
      if (latest !== undefined && (since === undefined ? !latest.done : latest.at >= since)) return latest.value;
      if (next !== undefined) return next;
      const waitMs = latest === undefined ? 0 : latest.at + opts.intervalMs - opts.now();
      if (waitMs <= 0) return start(task);
      next = new Promise<void>((resolve) => setTimeout(resolve, waitMs)).then(() => {
        next = undefined;
        return start(task);
      });
      return next;
    },
  };
}
