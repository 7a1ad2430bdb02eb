import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The folder browser tests write screenshots to: `test-results/screenshots/` at the
 * repository root (git-ignored, kept after the run). DASHBOARD_SCREENSHOT_DIR overrides it.
 */
export function screenshotDir(): string {
  const dir = process.env.DASHBOARD_SCREENSHOT_DIR ?? join(fileURLToPath(new URL("../../", import.meta.url)), "test-results", "screenshots");
  mkdirSync(dir, { recursive: true });
  return dir;
}
