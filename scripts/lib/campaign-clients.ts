/**
 * The fault campaign's client side (scripts/faults.ts and its phases): how a client retries while a dependency
 * restarts, and the bound on how many requests the campaign has out at once.
 */

/** Client retries: a game server backend retries 5xx and network errors with the same ids. */
export const CLIENT_RETRY_DELAY_MS = 500;
export const CLIENT_GIVE_UP_MS = 120_000;

/** Waits `ms`. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `fn` until it returns a result `isRetryable` does not ask to retry, retrying after errors and retryable results
 * every CLIENT_RETRY_DELAY_MS until CLIENT_GIVE_UP_MS has passed; returns the result (or the last error) and the retries.
 */
export async function withRetries<T>(
  fn: () => Promise<T>,
  isRetryable: (result: T) => boolean = () => false,
): Promise<{ result?: T; retries: number; error?: unknown }> {
  const deadline = Date.now() + CLIENT_GIVE_UP_MS;
  let retries = 0;
  for (;;) {
    let error: unknown;
    try {
      const result = await fn();
      if (!isRetryable(result)) return { result, retries };
    } catch (e) {
      // Failure policy: a network error or an RPC error while a dependency restarts is retried, as a real client would.
      error = e;
    }
    if (Date.now() > deadline) return { retries, error: error ?? new Error("gave up") };
    retries++;
    await sleep(CLIENT_RETRY_DELAY_MS);
  }
}

/** A small in-flight limiter: the campaign never has more than `max` jobs out. */
export interface Limiter {
  /** Starts `job` once fewer than `max` run. */
  run(job: () => Promise<void>): void;
  /** Resolves once every job started so far (and any they started) has ended. */
  idle(): Promise<void>;
}

/** Builds a Limiter. */
export function createLimiter(max: number): Limiter {
  let active = 0;
  const waiting: (() => void)[] = [];
  const pending = new Set<Promise<void>>();
  return {
    run(job) {
      const start = async () => {
        if (active >= max) await new Promise<void>((resolve) => waiting.push(resolve));
        active++;
        try {
          await job();
        } finally {
          active--;
          waiting.shift()?.();
        }
      };
      const p = start();
      pending.add(p);
      void p.finally(() => pending.delete(p));
    },
    async idle() {
      while (pending.size > 0) await Promise.allSettled([...pending]);
    },
  };
}
