import { existsSync, readFileSync } from "node:fs";
/** A section of RELIABILITY.md measured by other means, which a campaign run keeps: its heading ends so. */
const KEPT_SECTION_MARK = "(measured apart from the campaign)";

/**
 * The campaign's report with the sections of the previous file that were measured apart from it
 * (headings ending in KEPT_SECTION_MARK) kept, before "## Running it": a run replaces what it measured only.
 */
export function withKeptSections(report: string, previousPath: string): string {
  if (!existsSync(previousPath)) return report;
  const previous = readFileSync(previousPath, "utf8");
  const kept = previous
    .split(/\n(?=## )/)
    .filter((section) => section.split("\n", 1)[0]!.trimEnd().endsWith(KEPT_SECTION_MARK))
    .map((section) => section.trimEnd());
  if (kept.length === 0) return report;
  const at = report.indexOf("\n## Running it");
  if (at < 0) return `${report.trimEnd()}\n\n${kept.join("\n\n")}\n`;
  return `${report.slice(0, at).trimEnd()}\n\n${kept.join("\n\n")}\n${report.slice(at)}`;
}
