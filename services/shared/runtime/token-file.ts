import { existsSync, readFileSync, writeFileSync } from "node:fs";

/**
 * A token kept in a file of the all-in-one mode's data folder: read when the file
 * exists, otherwise created with `generate()` (mode 0600, never overwritten). Throws
 * when the file holds no usable token (`isUsable`), naming the file, never its content.
 */
export function loadOrCreateTokenFile(path: string, generate: () => string, isUsable: (token: string) => boolean): string {
  if (!existsSync(path)) writeFileSync(path, `${generate()}\n`, { mode: 0o600, flag: "wx" });
  const token = readFileSync(path, "utf8").trim();
  if (!isUsable(token)) throw new Error(`${path} does not hold a usable token; delete it to create a new one`);
  return token;
}
