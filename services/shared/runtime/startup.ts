import { withTimeout, type ReadinessCheck } from "./health.js";
import type { Logger } from "./log.js";

/** One attempt to reach a dependency at start is bounded by this, so a problem is reported within 10 s. */
export const DEPENDENCY_ATTEMPT_TIMEOUT_MS = 6_000;
/** Pause between two attempts. */
export const DEPENDENCY_RETRY_DELAY_MS = 2_000;
/** While a dependency stays unreachable, its failure is logged again at this interval (not on every attempt). */
const REPEAT_LOG_INTERVAL_MS = 30_000;

/** A dependency a process needs before it can start its work. */
export interface Dependency {
  /** "database", "kafka", ... (the /readyz check of the same name reports it afterwards). */
  name: string;
  /** What is tried, for people: a redacted URL or the broker list. Never a secret. */
  target: string;
  /** One bounded attempt; resolves when the dependency answers. */
  attempt: () => Promise<void>;
  /** Bound of one attempt; default DEPENDENCY_ATTEMPT_TIMEOUT_MS. */
  timeoutMs?: number;
}

/**
 * The start sequence of a process whose ops server listens first: `/healthz` answers at once,
 * and `/readyz` carries a `startup` check that says what the process is still waiting for.
 */
export interface Startup {
  /** The `startup` readiness check: down with the reason until `ready()`. */
  readonly check: ReadinessCheck;
  /**
   * Retries `dependency.attempt` until it succeeds. The first failure is logged at once (each
   * attempt is bounded), then every REPEAT_LOG_INTERVAL_MS while it lasts. Resolves true when
   * reached, false when `stop()` was called first (the process is shutting down).
   */
  waitFor(dependency: Dependency): Promise<boolean>;
  /** Marks the start as complete; the `startup` check turns ok. */
  ready(): void;
  /** Ends any wait (SIGTERM during the start). */
  stop(): void;
}

/** Creates the start sequence of one process. */
export function createStartup(log: Logger): Startup {
  let status = "starting";
  let done = false;
  let stopped = false;
  let wakeSleeper: (() => void) | undefined;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wakeSleeper = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  return {
    check: {
      name: "startup",
      check: async () => {
        if (!done) throw new Error(status);
      },
    },
    async waitFor({ name, target, attempt, timeoutMs = DEPENDENCY_ATTEMPT_TIMEOUT_MS }) {
      const since = Date.now();
      let lastLogged = 0;
      for (let attempts = 1; !stopped; attempts++) {
        status = `waiting for ${name} at ${target}`;
        try {
          await withTimeout(attempt(), timeoutMs);
          if (attempts > 1) log.info({ dependency: name, target, attempts }, `${name} reached at ${target}`);
          return true;
        } catch (error) {
          // Failure policy: keep the process up and retry - an orchestrator sees /healthz alive and /readyz
          // saying why it is not ready; exiting would only restart into the same wait.
          const reason = describeFailure(error);
          status = `waiting for ${name} at ${target}: ${reason} (attempt ${attempts}, for ${Math.round((Date.now() - since) / 1000)} s)`;
          if (lastLogged === 0 || Date.now() - lastLogged >= REPEAT_LOG_INTERVAL_MS) {
            lastLogged = Date.now();
            log.error(
              { dependency: name, target, attempts, error: reason },
              `cannot reach ${name} at ${target}: ${reason}; retrying every ${DEPENDENCY_RETRY_DELAY_MS / 1000} s`,
            );
          }
        }
        await sleep(DEPENDENCY_RETRY_DELAY_MS);
      }
      return false;
    },
    ready() {
      done = true;
    },
    stop() {
      stopped = true;
      wakeSleeper?.();
    },
  };
}

/**
 * One line for a failed attempt: whitespace collapsed, and for Prisma's multi-line "Invalid
 * `prisma.<model>.<call>()` invocation ... Message: `<cause>`" only the cause.
 */
function describeFailure(error: unknown): string {
  const text = (error instanceof Error ? error.message : String(error)).replace(/\s+/g, " ").trim();
  return /Message: `([^`]+)`/.exec(text)?.[1] ?? text;
}
