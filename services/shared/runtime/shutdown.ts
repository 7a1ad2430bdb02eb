import type { Logger } from "./log.js";

/** Drain budget after SIGTERM before the process exits anyway. */
export const SHUTDOWN_TIMEOUT_MS = 20_000;

/**
 * Runs `drain` once on SIGTERM/SIGINT: stop taking work, finish in-flight work,
 * close connections. Exits 0 when drained, 1 when the drain failed or timed out.
 */
export function onShutdown(log: Logger, drain: () => Promise<void>): void {
  let started = false;
  const handler = (signal: string) => {
    if (started) return;
    started = true;
    log.info({ signal }, "draining before exit");
    const timer = setTimeout(() => {
      log.error({ timeoutMs: SHUTDOWN_TIMEOUT_MS }, "drain timed out; exiting");
      process.exit(1);
    }, SHUTDOWN_TIMEOUT_MS);
    timer.unref();
    drain().then(
      () => {
        log.info("drained; exiting");
        process.exit(0);
      },
      (error: unknown) => {
        log.error({ err: error }, "drain failed; exiting");
        process.exit(1);
      },
    );
  };
  process.once("SIGTERM", () => handler("SIGTERM"));
  process.once("SIGINT", () => handler("SIGINT"));
}
