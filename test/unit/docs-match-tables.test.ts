/**
 * The docs state the service's limits and statuses from the code's one tables, checked here both ways:
 * `services/shared/values/field-rules.ts` (every text field's bound) and `services/shared/values/contract.ts` (every error's
 * status and text). A field, limit, status or text in the code but missing from a document's table fails, and
 * so does one in a table that the code does not have (or has with another number or status). Prose that names
 * a field's length or a dashboard limit is checked against the constant that holds it.
 */
import { readFileSync } from "node:fs";
import test from "ava";
import { MAX_BODY_BYTES } from "../../gateway/raw-body.js";
import { MAX_USERNAME_FILTER_CHARS } from "../../gateway/dashboard/api.js";
import { DEFAULT_JITTER_RATIO, DEFAULT_RETRY_SCHEDULE, RETRY_AFTER_CAP_MS } from "../../services/delivery/pipeline/retry-schedule.js";
import { CALLBACK_TIMEOUT_MS } from "../../services/delivery/pipeline/send-callback.js";
import { HEART_COOLDOWN_MS } from "../../services/hearts/domain/streak.js";
import {
  CHECK_ERRORS,
  CONTRACT_ERRORS,
  DASHBOARD_ERRORS,
  atMostCharsText,
  notBooleanText,
  notStringText,
  requiredText,
  unixSecondsText,
  type ContractErrorKind,
} from "../../services/shared/values/contract.js";
import { FIELD_RULES, type FieldName, type FieldRule } from "../../services/shared/values/field-rules.js";
import { SIGNATURE_TOLERANCE_SECONDS } from "../../services/shared/values/signature.js";

const read = (relative: string) => readFileSync(new URL(`../../${relative}`, import.meta.url), "utf8");

/** The rows (cells, `\|` unescaped) of the first Markdown table whose header row is exactly `header`. */
export function tableRows(doc: string, header: string): string[][] {
  const lines = doc.split("\n");
  const start = lines.indexOf(header);
  if (start === -1) return [];
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("|")) break;
    const cells = line
      .slice(1, -1)
      .split(/(?<!\\)\|/)
      .map((cell) => cell.trim().replaceAll("\\|", "|"));
    rows.push(cells);
  }
  return rows;
}

/** The `code spans` of a cell. */
function codeSpans(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1] as string);
}

// ---- Field limits -----------------------------------------------------------------------------

const FIELD_TABLE_HEADER = "| field | where it comes in | at most | over the limit |";

interface DocumentedLimit {
  field: string;
  maxChars: number;
  truncates: boolean;
}

function documentedLimits(doc: string): DocumentedLimit[] {
  return tableRows(doc, FIELD_TABLE_HEADER).map(([field = "", , atMost = "", over = ""]) => ({
    field: codeSpans(field)[0] ?? field,
    maxChars: Number(atMost.replaceAll(",", "")),
    truncates: /^cut to /.test(over),
  }));
}

/** What is wrong between a document's field table and FIELD_RULES, both ways. */
export function fieldTableProblems(doc: string): string[] {
  const documented = documentedLimits(doc);
  const problems: string[] = [];
  if (documented.length === 0) return [`no table with the header ${FIELD_TABLE_HEADER}`];
  for (const [field, rule] of Object.entries(FIELD_RULES) as Array<[FieldName, FieldRule]>) {
    const row = documented.find((d) => d.field === field);
    if (!row) problems.push(`${field}: in the code (at most ${rule.maxChars}), not in the docs`);
    else {
      if (row.maxChars !== rule.maxChars) problems.push(`${field}: docs ${row.maxChars}, code ${rule.maxChars}`);
      if (row.truncates !== (rule.overflow === "truncate")) problems.push(`${field}: docs and code differ on cutting vs refusing`);
      if (row.truncates && !doc.includes(`cut to ${rule.maxChars}`)) problems.push(`${field}: cut to another length`);
    }
  }
  for (const row of documented) if (!(row.field in FIELD_RULES)) problems.push(`${row.field}: in the docs, not in the code's table`);
  return problems;
}

for (const file of ["docs/contract.md", "docs/limits.md"]) {
  test(`${file}: its field-limit table is FIELD_RULES, both ways`, (t) => {
    t.deepEqual(fieldTableProblems(read(file)), []);
  });
}

/** A stated length: "at most 256 characters", "longer than 512 characters", "up to 256 characters", "over 64 characters". */
const STATED_LENGTH = /(?:at most|longer than|up to|over) (\d[\d,]*) characters/i;

/**
 * Every prose statement of a field's length, checked against FIELD_RULES: in each table cell or sentence
 * that states a length, every field of the table named there (as `field`, or by the row's first cell) has
 * that limit; in a list of limits ("`token` 256, `server_event_id` 512") each field has its number. A
 * sentence giving one length to every string field is refused.
 */
export function proseLimitProblems(doc: string): string[] {
  const problems: string[] = [];
  const check = (field: string, stated: number, where: string) => {
    if (field in FIELD_RULES && stated !== FIELD_RULES[field as FieldName].maxChars) problems.push(`${field}: ${stated} in "${where}"`);
  };
  for (const line of doc.split("\n")) {
    if (/\b(each|every|all) (string )?fields? (is|are|has|have)( at most)? \d+/i.test(line)) problems.push(`one length for every field: ${line}`);
    const rowField = /^\| `([a-z_]+)` \|/.exec(line)?.[1];
    const segments = line.startsWith("|") ? line.split(/(?<!\\)\|/) : line.split(/\. (?=[A-Z`])/);
    for (const segment of segments) {
      const match = STATED_LENGTH.exec(segment);
      if (match === null) continue;
      // The fields named before the length and after any earlier number are the ones it is about.
      const before = segment.slice(0, match.index).split(/\d/).at(-1) ?? "";
      const fields = new Set(codeSpans(before).filter((span) => span in FIELD_RULES));
      if (rowField !== undefined) fields.add(rowField);
      for (const field of fields) check(field, Number((match[1] as string).replaceAll(",", "")), line);
    }
    // A list of limits: "`token` 256, `referrer` (links) 512, a `voter_identity` over 512".
    for (const m of line.matchAll(/`([a-z_]+)`(?: \([^)]*\))? (?:(?:over|at most|up to) )?(\d[\d,]*)\b/g)) {
      check(m[1] as string, Number((m[2] as string).replaceAll(",", "")), line);
    }
  }
  return problems;
}

for (const file of [
  "docs/contract.md",
  "docs/integration-guide.md",
  "docs/limits.md",
  "docs/referral-rules.md",
  "docs/callbacks.md",
  "docs/votifier-and-pull.md",
  "README.md",
]) {
  test(`${file}: every length it states for a field is the field's limit`, (t) => {
    t.deepEqual(proseLimitProblems(read(file)), []);
  });
}

test("the ingest request tables state each bounded field's limit (contract and integration guide)", (t) => {
  for (const file of ["docs/contract.md", "docs/integration-guide.md"]) {
    const rows = tableRows(read(file), "| Field | Type | Required | Rules |");
    t.true(rows.length >= 7, file);
    for (const [name = "", , , rules = ""] of rows) {
      const field = codeSpans(name)[0] ?? "";
      if (!(field in FIELD_RULES)) continue;
      t.regex(rules, new RegExp(`at most ${FIELD_RULES[field as FieldName].maxChars} characters`, "i"), `${file}: ${field}`);
    }
  }
});

// ---- Statuses and error texts -------------------------------------------------------------------

/** The texts a field check writes, with `<field>` and `<n>` for the parts that vary. */
const FIELD_CHECK_TEXTS = [
  requiredText("<field>"),
  notStringText("<field>"),
  atMostCharsText("<field>", 0).replace("0", "<n>"),
  // nulText takes a field of the table; the template is the same text with `<field>`.
  `<field> must not contain NUL characters`,
  unixSecondsText("ts"),
  notBooleanText("test"),
] as const;

const CONTRACT_ERROR_LIST = Object.entries(CONTRACT_ERRORS) as Array<[ContractErrorKind, { status: number; text: string }]>;

interface DocumentedError {
  status: number;
  texts: string[];
}

/** What is wrong between a document's errors and the code's, both ways (`required` = the kinds it must list). */
export function errorTableProblems(documented: DocumentedError[], required: readonly ContractErrorKind[]): string[] {
  const problems: string[] = [];
  if (documented.length === 0) return ["no errors table"];
  const invalidFieldStatus = CHECK_ERRORS.invalidField.status;
  for (const kind of required) {
    const { status, text } = CONTRACT_ERRORS[kind];
    if (!documented.some((row) => row.status === status && row.texts.includes(text))) problems.push(`${status} ${text}: in the code, not in the docs`);
  }
  for (const text of FIELD_CHECK_TEXTS) {
    if (!documented.some((row) => row.status === invalidFieldStatus && row.texts.includes(text)))
      problems.push(`${invalidFieldStatus} ${text}: in the code, not in the docs`);
  }
  for (const row of documented) {
    if (row.texts.length === 0) problems.push(`${row.status}: a row without an error text`);
    for (const text of row.texts) {
      const known = CONTRACT_ERROR_LIST.find(([, e]) => e.text === text);
      if (known) {
        if (known[1].status !== row.status) problems.push(`${text}: docs ${row.status}, code ${known[1].status}`);
      } else if ((FIELD_CHECK_TEXTS as readonly string[]).includes(text)) {
        if (row.status !== invalidFieldStatus) problems.push(`${text}: docs ${row.status}, code ${invalidFieldStatus}`);
      } else problems.push(`${row.status} ${text}: in the docs, not in the code`);
    }
  }
  return problems;
}

/** contract.md: `| Status | \`error\` text | Cause |`, texts in code spans. */
function contractErrors(doc: string): DocumentedError[] {
  // A bare name (`from`, `event`: the 422's extra fields) is not an error text.
  const texts = (cell: string) => codeSpans(cell).filter((span) => span.includes(" "));
  return tableRows(doc, "| Status | `error` text | Cause |").map(([status = "", cell = ""]) => ({ status: Number(status), texts: texts(cell) }));
}

/** integration-guide.md: `| Status | Body | Cause |`, texts in `{"error": "..."}` bodies. */
function guideErrors(doc: string): DocumentedError[] {
  return tableRows(doc, "| Status | Body | Cause |").map(([status = "", bodies = ""]) => ({
    status: Number(status),
    texts: codeSpans(bodies).map((body) => /"error": ?"([^"]*)"/.exec(body)?.[1] ?? body),
  }));
}

const EVERY_CONTRACT_ERROR = CONTRACT_ERROR_LIST.map(([kind]) => kind);

test("docs/contract.md: its errors table is the code's error table, both ways (statuses and exact texts)", (t) => {
  t.deepEqual(errorTableProblems(contractErrors(read("docs/contract.md")), EVERY_CONTRACT_ERROR), []);
});

test("docs/integration-guide.md: its ingest errors table is the code's, both ways (statuses and exact texts)", (t) => {
  // The guide's table is the ingest endpoint's: the pull API's 404 and the other paths' 503 are in their own sections, other paths in section 11.
  const notOnIngest: readonly ContractErrorKind[] = ["pullDisabled", "notFound", "unavailable"];
  const ingest = EVERY_CONTRACT_ERROR.filter((kind) => !notOnIngest.includes(kind));
  t.deepEqual(errorTableProblems(guideErrors(read("docs/integration-guide.md")), ingest), []);
});

test("every status the contract's errors table names is one the code answers, and every one the code answers is there", (t) => {
  const documented = new Set(contractErrors(read("docs/contract.md")).map((row) => row.status));
  const code = new Set([...CONTRACT_ERROR_LIST.map(([, e]) => e.status), CHECK_ERRORS.invalidField.status]);
  t.deepEqual([...documented].sort(), [...code].sort());
});

test("docs/dashboard.md: the dashboard API's own errors and the RPC mapping carry the code's statuses and texts", (t) => {
  const doc = read("docs/dashboard.md");
  const rows = [...tableRows(doc, "| RPC error | HTTP status |"), ...tableRows(doc, "| Problem | Answer |")].map(([, answer = ""]) => answer);
  t.true(rows.length >= 10);
  for (const { status, text } of Object.values(DASHBOARD_ERRORS)) {
    t.true(
      rows.some((answer) => answer.startsWith(`${status} `) && codeSpans(answer).includes(text)),
      `${status} ${text}: in the code, not in docs/dashboard.md`,
    );
  }
  const fixed: Array<{ status: number; text: string }> = [...Object.values(DASHBOARD_ERRORS), ...Object.values(CONTRACT_ERRORS)];
  const statuses = new Set<number>([...fixed.map((e) => e.status), ...Object.values(CHECK_ERRORS).map((e) => e.status)]);
  for (const answer of rows) {
    const status = Number(/^\d{3}/.exec(answer)?.[0]);
    t.true(statuses.has(status), `${answer}: a status the code does not answer`);
    // A fixed text shown beside a status is that status's text in the code (a NotFound example is the service's own text).
    for (const text of codeSpans(answer)) {
      const known = fixed.find((e) => e.text === text);
      if (known) t.is(known.status, status, text);
    }
  }
});

test("docs/dashboard.md: the deliveries username filter and the hearts search state the code's limits", (t) => {
  const MAX_HEARTS_QUERY_CHARS = FIELD_RULES.query.maxChars;
  const doc = read("docs/dashboard.md");
  t.regex(doc, new RegExp(`\\(\`username\`: a case-insensitive part of the player name, at most ${MAX_USERNAME_FILTER_CHARS} characters\\)`));
  t.regex(doc, new RegExp(`\`q\` is at most ${MAX_HEARTS_QUERY_CHARS} characters`));
  t.deepEqual([...doc.matchAll(/at most (\d+) characters/g)].map((m) => Number(m[1])).sort(), [MAX_USERNAME_FILTER_CHARS, MAX_HEARTS_QUERY_CHARS].sort());
});

test("docs/contract.md: its Limits table states the code's body size, clock window, callback timeout, heart cooldown and retry count", (t) => {
  const rows = new Map(tableRows(read("docs/contract.md"), "| Limit | Value |").map(([limit = "", value = ""]) => [limit, value]));
  t.is(rows.get("Body size (ingest)"), `${MAX_BODY_BYTES / 1024} KiB`);
  t.regex(rows.get("Signature timestamp window") ?? "", new RegExp(`^±${SIGNATURE_TOLERANCE_SECONDS} s`));
  t.is(rows.get("Callback attempt timeout"), `${CALLBACK_TIMEOUT_MS / 1000} s`);
  t.notRegex(rows.get("String fields") ?? "missing", /^\d+ characters/);
  t.is(rows.get("Heart cooldown per voter identity and server"), `${HEART_COOLDOWN_MS / 3_600_000} hours`);
  const retries = DEFAULT_RETRY_SCHEDULE.split(",");
  t.regex(rows.get("Callback retries") ?? "", new RegExp(`^${retries.length} retries`));
});

test("docs/contract.md: the delivery schedule it states is the code's default (delays, jitter, Retry-After cap)", (t) => {
  const doc = read("docs/contract.md");
  const words = (delay: string) => delay.replace(/^(\d+)(s|m|h)$/, (_, n: string, unit: string) => `${n} ${unit === "m" ? "min" : unit}`);
  const delays = DEFAULT_RETRY_SCHEDULE.split(",").map(words);
  const listed = `${delays.slice(0, -1).join(", ")} and ${delays.at(-1)}`;
  t.true(doc.replace(/\s+/g, " ").includes(`retries after ${listed} (±${DEFAULT_JITTER_RATIO * 100} % jitter)`), listed);
  t.true(doc.includes(`(capped at ${RETRY_AFTER_CAP_MS / 3_600_000} h)`));
  t.true(doc.includes(`timeout ${CALLBACK_TIMEOUT_MS / 1000} s per attempt`));
});

// ---- The checks themselves ------------------------------------------------------------------------

test("the checks catch drift both ways: a missing row, an extra row, a wrong number, a wrong status", (t) => {
  const good = [
    FIELD_TABLE_HEADER,
    "|---|---|---|---|",
    ...Object.entries(FIELD_RULES).map(([f, r]) => `| \`${f}\` | x | ${r.maxChars} | ${"overflow" in r ? `cut to ${r.maxChars}` : "400"} |`),
  ].join("\n");
  t.deepEqual(fieldTableProblems(good), []);
  t.true(fieldTableProblems(good.replace("| `token` | x | 256 |", "| `token` | x | 512 |")).some((p) => p.startsWith("token: docs 512")));
  t.true(fieldTableProblems(good.replace(/\n\| `kid` [^\n]*/, "")).some((p) => p.startsWith("kid: in the code")));
  t.true(fieldTableProblems(`${good}\n| \`nickname\` | x | 10 | 400 |`).some((p) => p.startsWith("nickname: in the docs")));
  t.deepEqual(proseLimitProblems("- Decided here: each string field is at most 512 characters."), [
    "one length for every field: - Decided here: each string field is at most 512 characters.",
  ]);
  t.deepEqual(proseLimitProblems("| `token` | string | yes | At most 512 characters. |"), [
    'token: 512 in "| `token` | string | yes | At most 512 characters. |"',
  ]);
  t.deepEqual(proseLimitProblems("| Field limits | `token` 256, `server_event_id` 300 |").length, 1);

  const all: DocumentedError[] = [
    ...CONTRACT_ERROR_LIST.map(([, e]) => ({ status: e.status, texts: [e.text] })),
    { status: 400, texts: [...FIELD_CHECK_TEXTS] },
  ];
  t.deepEqual(errorTableProblems(all, EVERY_CONTRACT_ERROR), []);
  t.deepEqual(
    errorTableProblems(
      all.filter((row) => row.status !== 429),
      EVERY_CONTRACT_ERROR,
    ),
    [`429 ${CONTRACT_ERRORS.tooManyFailedSignatures.text}: in the code, not in the docs`],
  );
  t.deepEqual(errorTableProblems([...all, { status: 418, texts: ["teapot"] }], EVERY_CONTRACT_ERROR), ["418 teapot: in the docs, not in the code"]);
  t.deepEqual(errorTableProblems([...all, { status: 500, texts: ["body too large"] }], EVERY_CONTRACT_ERROR), ["body too large: docs 500, code 413"]);
  t.deepEqual(tableRows("| Status | `error` text | Cause |\n|---|---|---|\n| 400 | `a\\|b` | c |", "| Status | `error` text | Cause |"), [
    ["400", "`a|b`", "c"],
  ]);
});
