import { existsSync, readFileSync } from "node:fs";
/** A section of RELIABILITY.md measured by other means, which a campaign run keeps: its heading ends so. */
const KEPT_SECTION_MARK = "(measured apart from the campaign)";
/** The section every report ends with. */
const RUNNING_IT = "\n## Running it";

/** The `## ` sections of a markdown text, the part before the first one included (as the first element). */
function sectionsOf(text: string): string[] {
  return text.split(/\n(?=## )/);
}

const headingOf = (section: string) => section.split("\n", 1)[0]!.trimEnd();

/** Inserts `sections` before "## Running it" (or at the end when there is none). */
function insertBeforeRunningIt(report: string, sections: string[]): string {
  if (sections.length === 0) return report;
  const at = report.indexOf(RUNNING_IT);
  if (at < 0) return `${report.trimEnd()}\n\n${sections.join("\n\n")}\n`;
  return `${report.slice(0, at).trimEnd()}\n\n${sections.join("\n\n")}\n${report.slice(at)}`;
}

/**
 * The campaign's report with the sections of the previous file that were measured apart from it
 * (headings ending in KEPT_SECTION_MARK), and those whose heading is in `alsoKeep` (a phase this run
 * did not run), kept, before "## Running it": a run replaces what it measured only.
 */
export function withKeptSections(report: string, previousPath: string, alsoKeep: string[] = []): string {
  if (!existsSync(previousPath)) return report;
  const kept = sectionsOf(readFileSync(previousPath, "utf8"))
    .filter((section) => headingOf(section).endsWith(KEPT_SECTION_MARK) || alsoKeep.includes(headingOf(section)))
    .map((section) => section.trimEnd());
  return insertBeforeRunningIt(report, kept);
}

/**
 * The previous file (or `# title` when there is none) with the section `section` (which starts with its `## `
 * heading) in place of the one of the same heading, or, when it has none, before "## Running it": what a run
 * of one phase writes, leaving everything it did not measure as it was.
 */
export function withSection(previousPath: string, title: string, section: string): string {
  const previous = existsSync(previousPath) ? readFileSync(previousPath, "utf8") : `${title}\n`;
  const heading = headingOf(section);
  const sections = sectionsOf(previous);
  const at = sections.findIndex((s, i) => i > 0 && headingOf(s) === heading);
  if (at < 0) return insertBeforeRunningIt(previous, [section.trimEnd()]);
  sections[at] = `${section.trimEnd()}\n`;
  return `${sections.join("\n").trimEnd()}\n`;
}
