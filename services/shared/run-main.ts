import { ConfigError } from "./config.js";
import type { Logger } from "./log.js";

/** Exit status of a process whose configuration is invalid. */
export const EXIT_CONFIG_ERROR = 2;
/** Exit status of a process that failed to start for another reason. */
export const EXIT_START_FAILED = 1;

/**
 * Runs a process's start function. Invalid configuration is reported as one log
 * line listing every problem and exits 2; any other start failure exits 1.
 */
export function runMain(log: Logger, start: () => Promise<void>): void {
  start().catch((error: unknown) => {
    if (error instanceof ConfigError) {
      log.fatal({ problems: error.problems }, error.message);
      process.exit(EXIT_CONFIG_ERROR);
    }
    log.fatal({ err: error }, "failed to start");
    process.exit(EXIT_START_FAILED);
  });
}
