/**
 * Accessibility checks with axe-core in a real browser page (playwright-core).
 *
 *   const violations = await findA11yViolations(page);          // serious and critical only
 *   t.deepEqual(violations, [], formatViolations(violations));
 *
 * axe-core's source (from node_modules, never a CDN) is evaluated through the DevTools
 * protocol, which the page's Content-Security-Policy does not govern, so a strict CSP
 * page needs no exception for the check.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";

/** Impacts that fail a check by default. */
export const BLOCKING_IMPACTS = ["serious", "critical"] as const;

/** One violated rule and where. */
export interface A11yViolation {
  id: string;
  impact: string;
  help: string;
  /** CSS selectors of the offending elements (at most 5). */
  targets: string[];
}

let axeSource: string | undefined;

/**
 * Runs axe-core on the page (or on `opts.include`, a CSS selector) and returns the
 * violations whose impact is in `opts.impacts` (default serious and critical). Hidden
 * elements are skipped by axe itself, so run it once per visible tab.
 */
export async function findA11yViolations(page: Page, opts: { include?: string; impacts?: readonly string[] } = {}): Promise<A11yViolation[]> {
  axeSource ??= readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
  if (!(await page.evaluate("typeof window.axe === 'object'"))) await page.evaluate(axeSource);
  const impacts = opts.impacts ?? BLOCKING_IMPACTS;
  const context = JSON.stringify(opts.include ?? "body");
  const violations = (await page.evaluate(`
    axe.run(document.querySelector(${context}), { resultTypes: ["violations"] }).then((r) =>
      r.violations.map((v) => ({ id: v.id, impact: v.impact || "", help: v.help, targets: v.nodes.slice(0, 5).map((n) => n.target.join(" ")) })))
  `)) as A11yViolation[];
  return violations.filter((v) => impacts.includes(v.impact));
}

/** A readable list of violations, for an assertion message. */
export function formatViolations(violations: readonly A11yViolation[]): string {
  return violations.map((v) => `${v.impact} ${v.id}: ${v.help} -> ${v.targets.join(" | ")}`).join("\n");
}
