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
