import test from "ava";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { withKeptSections } from "../../scripts/lib/kept-sections.js";

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
