import { ConfigError, formatConfigErrorForTerminal } from "./config.js";
import type { Logger } from "./log.js";

/** Exit status of a process whose configuration is invalid. */
export const EXIT_CONFIG_ERROR = 2;
/** Exit status of a process that failed to start for another reason. */
export const EXIT_START_FAILED = 1;

/** Where a config error goes: the process's own streams unless a test gives others. */
interface Terminal {
  stdout: { isTTY?: boolean };
  stderr: { isTTY?: boolean; write(text: string): unknown };
}

/**
 * Runs a process's start function. Invalid configuration is reported as one log
 * line listing every problem and exits 2; any other start failure exits 1. When stderr
 * is a terminal, the problems are printed there as readable lines instead; the JSON line
 * is kept whenever stdout is not a terminal too (a log collector still gets it).
 */
export function runMain(log: Logger, start: () => Promise<void>, terminal: Terminal = process): void {
  start().catch((error: unknown) => {
    if (error instanceof ConfigError) {
      if (terminal.stderr.isTTY) {
        const name = String((log.bindings() as { service?: unknown }).service ?? "process");
        terminal.stderr.write(formatConfigErrorForTerminal(error, name, EXIT_CONFIG_ERROR));
      }
      if (!terminal.stderr.isTTY || !terminal.stdout.isTTY) log.fatal({ problems: error.problems }, error.message);
      process.exit(EXIT_CONFIG_ERROR);
    } else {
      log.fatal({ err: error }, "failed to start");
      process.exit(EXIT_START_FAILED);
    }
  });
}
