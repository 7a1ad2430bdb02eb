import test from "ava";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { withKeptSections, withSection } from "../../scripts/lib/kept-sections.js";

const REPORT = "# Reliability\n\nnew figures\n\n## Running it\n\nnpm run faults\n";

test("a campaign run keeps the previous file's sections measured apart from it, before 'Running it', and drops the rest", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "kept-"));
  const previous = join(dir, "RELIABILITY.md");
  writeFileSync(
    previous,
    "# Reliability\n\nold figures\n\n## Delivery take-over (measured apart from the campaign)\n\ntake-over table\n\n## Running it\n\nold text\n",
  );
  t.is(
    withKeptSections(REPORT, previous),
    "# Reliability\n\nnew figures\n\n## Delivery take-over (measured apart from the campaign)\n\ntake-over table\n\n## Running it\n\nnpm run faults\n",
  );
});

test("with no previous file, or none of its sections kept, the report is written as it is", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "kept-"));
  t.is(withKeptSections(REPORT, join(dir, "missing.md")), REPORT);
  const previous = join(dir, "RELIABILITY.md");
  writeFileSync(previous, "# Reliability\n\n## Hearts per fault\n\nold\n");
  t.is(withKeptSections(REPORT, previous), REPORT);
});

test("a run without a phase keeps that phase's section from the previous file, with the sections measured apart", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "kept-"));
  const previous = join(dir, "RELIABILITY.md");
  writeFileSync(previous, "# Reliability\n\nold figures\n\n## Pay once\n\npay-once table\n\n## Hearts per fault\n\nold\n\n## Running it\n\nold text\n");
  t.is(
    withKeptSections(REPORT, previous, ["## Pay once"]),
    "# Reliability\n\nnew figures\n\n## Pay once\n\npay-once table\n\n## Running it\n\nnpm run faults\n",
  );
});

test("a run of one phase replaces that phase's section in place and leaves the rest of the file as it was", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "kept-"));
  const previous = join(dir, "RELIABILITY.md");
  writeFileSync(
    previous,
    "# Reliability\n\nfigures\n\n## Pay once\n\nold table\n\n## Floods (measured apart from the campaign)\n\nfloods\n\n## Running it\n\ntext\n",
  );
  t.is(
    withSection(previous, "# Reliability", "## Pay once\n\nnew table\n"),
    "# Reliability\n\nfigures\n\n## Pay once\n\nnew table\n\n## Floods (measured apart from the campaign)\n\nfloods\n\n## Running it\n\ntext\n",
  );
  writeFileSync(previous, "# Reliability\n\nfigures\n\n## Running it\n\ntext\n");
  t.is(withSection(previous, "# Reliability", "## Pay once\n\nnew table\n"), "# Reliability\n\nfigures\n\n## Pay once\n\nnew table\n\n## Running it\n\ntext\n");
  t.is(withSection(join(dir, "missing.md"), "# Reliability", "## Pay once\n\nnew table\n"), "# Reliability\n\n## Pay once\n\nnew table\n");
});
