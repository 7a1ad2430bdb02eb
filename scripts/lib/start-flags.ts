import { parseArgs } from "node:util";

/** What `start` of scripts/infra/postgres.ts and scripts/infra/kafka.ts takes: a port and a data directory kept across runs. */
export interface StartFlags {
  port?: number;
  dataDir?: string;
}

/** Reads `--port <port>` and `--data-dir <dir>` (both optional); anything else is a problem to print with the usage line. */
export function parseStartFlags(args: string[]): StartFlags | { problem: string } {
  let values: { port?: string; "data-dir"?: string };
  try {
    values = parseArgs({ args, options: { port: { type: "string" }, "data-dir": { type: "string" } }, strict: true }).values;
  } catch (error) {
    // Failure policy: an unknown flag or a flag without its value is a usage error, reported as such.
    return { problem: (error as Error).message };
  }
  const port = values.port === undefined ? undefined : Number(values.port);
  if (port !== undefined && !(Number.isInteger(port) && port >= 1 && port <= 65_535))
    return { problem: `--port must be a port number (1-65535), got ${values.port}` };
  if (values["data-dir"] === "") return { problem: "--data-dir must name a directory" };
  return { ...(port === undefined ? {} : { port }), ...(values["data-dir"] === undefined ? {} : { dataDir: values["data-dir"] }) };
}
