import type { ReadinessCheck } from "./health.js";
import { createLogger, type Logger } from "./log.js";
import { createMetrics, type Metrics } from "./metrics.js";
import { createOpsServer } from "./ops-server.js";
import { runMain } from "./run-main.js";
import { onShutdown } from "./shutdown.js";
import { createStartup, type Startup } from "./startup.js";

/** What the process skeleton hands a process's own wiring. */
export interface ServiceContext {
  log: Logger;
  metrics: Metrics;
  /** The start sequence: its `check` belongs among the ops server's checks; `waitFor` awaits a dependency. */
  startup: Startup;
  /** True once SIGTERM/SIGINT began the drain (the probes answer 503 from then on). */
  isDraining(): boolean;
}

/** One process's wiring, as its `create` returns it. */
export interface ServiceParts {
  /** The ops server's /readyz checks. */
  checks: ReadinessCheck[];
  /**
   * The start steps, run once the ops server listens on `opsPort` (so /healthz answers and /readyz
   * says what the start waits for). Logs the process's ready line; resolves false when the drain
   * began first (a `startup.waitFor` gave up).
   */
  start(opsPort: number): Promise<boolean>;
  /** After SIGTERM/SIGINT: stop taking work and finish in-flight work. The ops server closes after it. */
  drain(): Promise<void>;
  /** Closes connections (database, bus) once the ops server is closed. */
  close?(): Promise<void>;
}

/** A process: gateway, referral service, relay, delivery, or all of them in one (scripts/start.ts). */
export interface ServiceDefinition<Config extends { host: string; opsPort: number }> {
  /** Name of its logger and of its metrics. */
  name: string;
  /** Loads and validates the settings; a ConfigError exits 2 with every problem (runMain). */
  loadConfig(): Config;
  /**
   * Wires the process's parts (nothing listens or connects yet). The four back-end mains wire
   * synchronously; the all-in-one (scripts/start.ts) first starts and migrates its database,
   * since its checks and parts need the client, so it may return a promise.
   */
  create(config: Config, context: ServiceContext): ServiceParts | Promise<ServiceParts>;
}

/**
 * The skeleton of every back-end main: load the config, wire the parts, register the drain
 * (before the slow start steps, so a SIGTERM while waiting for a dependency still drains),
 * listen on the ops port first, then run the start steps and mark the process ready.
 */
export function runService<Config extends { host: string; opsPort: number }>(definition: ServiceDefinition<Config>): void {
  const log = createLogger(definition.name);
  runMain(log, async () => {
    const config = definition.loadConfig();
    const metrics = createMetrics(definition.name);
    const startup = createStartup(log);
    let draining = false;
    const parts = await definition.create(config, { log, metrics, startup, isDraining: () => draining });
    const ops = createOpsServer({ checks: parts.checks, metrics, isDraining: () => draining, log });
    onShutdown(log, async () => {
      draining = true;
      startup.stop();
      await parts.drain();
      await ops.close();
      await parts.close?.();
    });
    const opsPort = await ops.listen(config.opsPort, config.host);
    if (await parts.start(opsPort)) startup.ready();
  });
}
