import { accessSync, constants as fsConstants } from "node:fs";

/** True when `path` exists and this process may execute it. */
export function isExecutable(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return true;
  } catch {
    // Failure policy: "not there / not executable" is the answer, not an error; the caller installs or reports.
    return false;
  }
}
