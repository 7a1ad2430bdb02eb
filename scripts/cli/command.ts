/** The shape of one CLI command: its flags, help text and what it runs. */
import type { ParseArgsConfig } from "node:util";
import type { CliConfig } from "./config.js";
import type { Output } from "./output.js";

export type FlagSpec = NonNullable<ParseArgsConfig["options"]>;
export type FlagValues = Record<string, string | boolean | undefined>;

export interface CommandContext {
  flags: FlagValues;
  out: Output;
  /** Resolved on first use, so commands without the network never read a token. */
  config(): CliConfig;
  env: Record<string, string | undefined>;
  /** Resolves when the user presses Ctrl-C (SIGINT) or the process gets SIGTERM. */
  interrupted: AbortSignal;
  /** Reads stdin to its end (for bodies given on stdin). */
  readStdin(): Promise<Buffer>;
}

export interface Command {
  /** "servers create", "listen", ... */
  name: string;
  summary: string;
  /** The usage line after the command name, e.g. "[--name NAME] [--callback-url URL]". */
  usage: string;
  /** Flag help: [flag, meaning]. */
  flagHelp: [string, string][];
  flags: FlagSpec;
  examples?: string[];
  run(ctx: CommandContext): Promise<number>;
}

/** A string flag's value, trimmed; undefined when absent or empty. */
export function stringFlag(flags: FlagValues, name: string): string | undefined {
  const value = flags[name];
  return typeof value === "string" && value.trim() !== "" ? value.trim() : undefined;
}
