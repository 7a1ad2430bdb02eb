import { pino, type DestinationStream, type Logger } from "pino";

export type { Logger };

/**
 * Creates the structured JSON logger for a process. Secrets never reach it:
 * the redaction list covers every field name that could carry one.
 */
export function createLogger(service: string, level = process.env.LOG_LEVEL ?? "info", destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service },
    redact: {
      paths: [
        "secret",
        "*.secret",
        "secrets",
        "*.secrets",
        "headers.authorization",
        "*.headers.authorization",
        'headers["x-service-signature"]',
        '*.headers["x-service-signature"]',
        "databaseUrl",
        "*.databaseUrl",
        "secretsKey",
        "*.secretsKey",
      ],
      censor: "[redacted]",
    },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}

/**
 * The address part of a URL, `host:port` (the scheme's usual port when none is written: `defaultPort`), never
 * its user, password, path or query; a URL that does not parse is `<unparseable url>`.
 */
export function addressOf(url: string, defaultPort: number): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port === "" ? defaultPort : parsed.port}`;
  } catch {
    // Failure policy: an unparseable URL is named as a placeholder, never raw (it may hold a password).
    return "<unparseable url>";
  }
}

/** Removes the password from a connection URL so it can be logged. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    // Failure policy: an unparseable URL is logged as a placeholder, never raw.
    return "<unparseable url>";
  }
}
