/**
 * Environment parsing shared by every process. Each process's config.ts reads
 * all of its settings through one reader and calls `finish`, so a bad start
 * reports every problem at once instead of the first one.
 */

/** Thrown by `EnvReader.finish` with every problem found. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

/**
 * A ConfigError as an operator reads it on a terminal: which process did not start and why, every
 * problem on a line of its own, the exit status, and where the settings are described.
 */
export function formatConfigErrorForTerminal(error: ConfigError, processName: string, exitCode: number): string {
  const lines = [`${processName}: invalid configuration, not started (exit ${exitCode}):`, ...error.problems.map((p) => `  - ${p}`)];
  lines.push("Every setting is described in the README's settings table.");
  return `${lines.join("\n")}\n`;
}

type Env = Record<string, string | undefined>;

/** Reads typed settings from an environment, collecting problems. */
export interface EnvReader {
  string(name: string, fallback: string): string;
  optionalString(name: string): string | undefined;
  requiredString(name: string): string;
  int(name: string, fallback: number, bounds?: { min?: number; max?: number }): number;
  bool(name: string, fallback: boolean): boolean;
  list(name: string, fallback: string[]): string[];
  /** Fails the config with a custom message. */
  problem(message: string): void;
  /** Throws ConfigError when any problem was recorded; returns the value otherwise. */
  finish<T>(value: T): T;
}

/** Creates a reader over `env` (defaults to process.env). */
export function createEnvReader(env: Env = process.env): EnvReader {
  const problems: string[] = [];
  const raw = (name: string): string | undefined => {
    const value = env[name];
    return value === undefined || value.trim() === "" ? undefined : value.trim();
  };
  return {
    string: (name, fallback) => raw(name) ?? fallback,
    optionalString: (name) => raw(name),
    requiredString(name) {
      const value = raw(name);
      if (value === undefined) problems.push(`${name} is required`);
      return value ?? "";
    },
    int(name, fallback, bounds = {}) {
      const value = raw(name);
      if (value === undefined) return fallback;
      if (!/^-?\d+$/.test(value)) {
        problems.push(`${name} must be an integer, got "${value}"`);
        return fallback;
      }
      const parsed = Number(value);
      if (bounds.min !== undefined && parsed < bounds.min) problems.push(`${name} must be >= ${bounds.min}, got ${parsed}`);
      if (bounds.max !== undefined && parsed > bounds.max) problems.push(`${name} must be <= ${bounds.max}, got ${parsed}`);
      return parsed;
    },
    bool(name, fallback) {
      const value = raw(name);
      if (value === undefined) return fallback;
      if (/^(1|true|yes|on)$/i.test(value)) return true;
      if (/^(0|false|no|off)$/i.test(value)) return false;
      problems.push(`${name} must be true or false, got "${value}"`);
      return fallback;
    },
    list(name, fallback) {
      const value = raw(name);
      return value === undefined
        ? fallback
        : value
            .split(",")
            .map((s) => s.trim())
            .filter(Boolean);
    },
    problem: (message) => void problems.push(message),
    finish(value) {
      if (problems.length > 0) throw new ConfigError(problems);
      return value;
    },
  };
}
