/**
 * How the CLI talks to its user, in the manner of `gh` and `stripe`: results on stdout (aligned
 * columns for people, one JSON document with --json), progress and errors on stderr, and an exit
 * code that says what happened. Errors say what to do next and never carry a secret or the token.
 */

/** Success. */
export const EXIT_OK = 0;
/** The command ran and failed (refused, unreachable, a signature that does not verify). */
export const EXIT_FAILURE = 1;
/** The command line was wrong: unknown command or flag, a missing or malformed value. */
export const EXIT_USAGE = 2;

/** An expected failure: its message (and hint) is shown as is, then the CLI exits with `exitCode`. */
export class CliError extends Error {
  readonly hint: string | undefined;
  readonly exitCode: number;
  /** With --json, written to stdout as {"error": ...} too. */
  constructor(message: string, opts: { hint?: string | undefined; exitCode?: number } = {}) {
    super(message);
    this.hint = opts.hint;
    this.exitCode = opts.exitCode ?? EXIT_FAILURE;
  }
}

/** Where a command writes. Tests and the CLI both use process streams; `json` picks the machine form. */
export interface Output {
  json: boolean;
  /** A result line for people (skipped with --json). */
  line(text?: string): void;
  /** The machine result (only with --json): one JSON document on stdout. */
  result(value: unknown): void;
  /** A progress or status line on stderr (shown in both modes: it never mixes into stdout). */
  progress(text: string): void;
  /** Aligned columns with a header row, like `gh ... list`. */
  table(headers: string[], rows: string[][]): void;
}

export function createOutput(json: boolean, streams: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream } = process): Output {
  return {
    json,
    line(text = "") {
      if (!json) streams.stdout.write(`${text}\n`);
    },
    result(value) {
      if (json) streams.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
    },
    progress(text) {
      streams.stderr.write(`${text}\n`);
    },
    table(headers, rows) {
      if (json) return;
      if (rows.length === 0) return;
      streams.stdout.write(formatTable(headers, rows));
    },
  };
}

/** Columns padded to their widest cell, two spaces apart; the last column is not padded. */
export function formatTable(headers: string[], rows: string[][]): string {
  const all = [headers, ...rows];
  const widths = headers.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length)));
  return `${all.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join("  ")).join("\n")}\n`;
}

/** `key  value` lines aligned on the key, for one record (a created server, a cast heart). */
export function formatPairs(pairs: [string, string][]): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join("\n");
}

/** Writes an error the way the CLI reports every failure: `error: ...` and a hint line; with --json also {"error"} on stdout. */
export function reportError(error: CliError, json: boolean, streams: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream } = process): void {
  streams.stderr.write(`error: ${error.message}\n${error.hint ? `  ${error.hint}\n` : ""}`);
  if (json) streams.stdout.write(`${JSON.stringify({ error: { message: error.message, ...(error.hint ? { hint: error.hint } : {}) } }, null, 2)}\n`);
}
