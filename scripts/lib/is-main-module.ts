import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";

/** True when the module at `moduleUrl` (pass `import.meta.url`) is the script Node was started with. */
export function isMainModule(moduleUrl: string): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return moduleUrl === pathToFileURL(realpathSync(entry)).href;
  } catch {
    // Failure policy: an unresolvable entry path means we were imported, not run.
    return false;
  }
}
