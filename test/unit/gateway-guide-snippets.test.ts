import { readFileSync } from "node:fs";
import test from "ava";
import { ERROR_TEXT } from "../../gateway/http-errors.js";

// The integration guide must not drift from the code it documents: the snippets are
// included verbatim, the frozen vectors and every contract error text appear in it.

const read = (relative: string) => readFileSync(new URL(relative, import.meta.url), "utf8");
const guide = read("../../docs/integration-guide.md");
const SNIPPETS = ["sign-and-send.mjs", "sign_and_send.py", "sign_and_send.php", "sign_and_send.go", "sign-and-send.sh", "pull-hearts.mjs", "pull_hearts.py"];

for (const name of SNIPPETS) {
  test(`the integration guide contains the ${name} snippet verbatim`, (t) => {
    const content = read(`../fixtures/snippets/${name}`);
    t.true(content.length > 200);
    t.true(guide.includes(content), `docs/integration-guide.md does not contain test/fixtures/snippets/${name} verbatim`);
  });
}

test("the integration guide shows every frozen vector: its openssl command line, MAC and headers", (t) => {
  const vectors = JSON.parse(read("../fixtures/signature-vectors.json")) as {
    cases: Array<{ openssl: string; mac_hex: string; ingest_header: string; callback_header: string }>;
    callback_rotation: { callback_header: string };
  };
  for (const c of vectors.cases) {
    t.true(guide.includes(c.openssl), c.openssl);
    t.true(guide.includes(`SHA2-256(stdin)= ${c.mac_hex}`), c.mac_hex);
    t.true(guide.includes(c.ingest_header), c.ingest_header);
    t.true(guide.includes(c.callback_header), c.callback_header);
  }
  t.true(guide.includes(vectors.callback_rotation.callback_header));
});

test("the integration guide lists every contract error text", (t) => {
  for (const text of Object.values(ERROR_TEXT)) {
    // The table escapes "|" inside Markdown cells.
    t.true(guide.includes(text) || guide.includes(text.replaceAll("|", "\\|")), text);
  }
});
