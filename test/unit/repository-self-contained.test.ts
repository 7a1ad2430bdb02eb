/**
 * The repository explains itself: no tracked file (docs, comments, scripts, config) refers to a
 * document outside the repository, such as a contract kept in a sibling folder. The contract is
 * docs/contract.md. A relative path is resolved against its file's folder, so code importing a
 * sibling `shared` module inside services/ is fine, while the same path from the repository root
 * (a sibling folder of the checkout) is not.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import test from "ava";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const THIS_FILE = relative(ROOT, fileURLToPath(import.meta.url));
/** Names of documents that exist only outside the repository (split so this file does not match itself). */
const OUTSIDE_DOCUMENT = new RegExp(["referral-contract", "rulings"].map((name) => `\\b${name}\\.md\\b`).join("|"));
const RELATIVE_PATH = /(?<![.\w/])(?:\.\.\/)+[\w.-]+(?:\/[\w.-]+)*/g;

function trackedTextFiles(): string[] {
  const files = execFileSync("git", ["ls-files", "-z"], { cwd: ROOT }).toString("utf8").split("\0").filter(Boolean);
  return files.filter((f) => f !== THIS_FILE && !f.startsWith("gen/") && f !== "package-lock.json" && !/\.(png|jpg|wasm)$/.test(f));
}

/** The references in `file` that leave the repository. */
export function outsideReferences(file: string, text: string): string[] {
  const found: string[] = [];
  const named = OUTSIDE_DOCUMENT.exec(text);
  if (named) found.push(named[0]);
  const outside = (path: string) => relative(ROOT, path).startsWith("..");
  // TypeScript imports name the emitted `.js` of a `.ts` file.
  const exists = (path: string) => existsSync(path) || existsSync(path.replace(/\.js$/, ".ts"));
  for (const match of text.matchAll(RELATIVE_PATH)) {
    const fromFile = resolve(ROOT, dirname(file), match[0]);
    // Docs often write paths relative to the repository root: a path that names nothing beside its
    // file is read that way too.
    if (outside(fromFile) || (!exists(fromFile) && outside(resolve(ROOT, match[0])))) found.push(match[0]);
  }
  return found;
}

test("no tracked file refers to a document outside the repository", (t) => {
  const offenders: string[] = [];
  for (const file of trackedTextFiles()) {
    const references = outsideReferences(file, readFileSync(join(ROOT, file), "utf8"));
    if (references.length > 0) offenders.push(`${file}: ${references.join(", ")}`);
  }
  t.deepEqual(offenders, []);
});

/** `../shared`, built so this file does not name a folder outside the repository itself. */
const SIBLING = ["..", "shared"].join("/");

test("the check itself: a root document naming the sibling folder's spec is caught, a services/ import of its own shared module is not", (t) => {
  t.deepEqual(outsideReferences("README.md", `see ${SIBLING}/spec/contract`), [`${SIBLING}/spec/contract`]);
  t.deepEqual(outsideReferences("docs/rule-tests.md", `see \`${SIBLING}/spec/contract\``), [`${SIBLING}/spec/contract`]);
  t.deepEqual(outsideReferences("services/relay/main.ts", `import { x } from "${SIBLING}/runtime/config.js";`), []);
  t.true(outsideReferences("docs/x.md", `the ${["rulings", "md"].join(".")} file`).length === 1);
});

test("the README links the contract document, which exists in the repository", (t) => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  t.true(readme.includes("(docs/contract.md)"));
  t.true(readFileSync(join(ROOT, "docs/contract.md"), "utf8").length > 5_000);
});
