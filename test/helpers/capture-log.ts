/**
 * A pino logger whose JSON lines are kept in memory, so tests can assert what was (not) logged:
 * `raw` as written, `lines` parsed.
 */
import { Writable } from "node:stream";
import { pino, type Logger } from "pino";

/** A log sink that keeps every JSON line, so tests can assert what was (not) logged. */
export interface CapturedLog {
  log: Logger;
  lines: Array<Record<string, unknown>>;
  raw: string[];
}

/** A pino logger at `level` whose output is captured in memory. */
export function captureLog(level = "info"): CapturedLog {
  const lines: Array<Record<string, unknown>> = [];
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line.trim() === "") continue;
        raw.push(line);
        lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  return { log: pino({ level }, sink), lines, raw };
}
