/**
 * docs/privacy.md lists every column that holds a voter's (or an owner's) personal data: its address, user agent,
 * names and ids, or a body that can carry them. A column whose name says it holds one of those, added to the schema
 * without a row in that table, fails this test; so does a row naming a column the schema no longer has.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";

const ROOT = join(import.meta.dirname, "..", "..");

/**
 * Column names that hold personal data (or a pseudonym of it): an address or its subnet, a user agent, a player's
 * name or identity, a platform id, a display name, an e-mail address, and the bodies and payloads that carry names.
 */
const PERSONAL_COLUMN =
  /(^|_)(ip|subnet|address|user_agent|username|username_lower|identity|steam_id|discord_id|minecraft_uuid|account_id|player_key|player_id|display_name|payload|request_body|response_body|voter_key|email)(_key|_hash)?$/;

/** Every `table.column` of the schema (each model's @@map and each field's @map, else its own name). */
function schemaColumns(): Set<string> {
  const schema = readFileSync(join(ROOT, "prisma", "schema.prisma"), "utf8");
  const columns = new Set<string>();
  for (const [, name, body] of schema.matchAll(/^model (\w+) \{([\s\S]*?)^\}/gm)) {
    const table = /@@map\("(\w+)"\)/.exec(body!)?.[1] ?? name!;
    for (const line of body!.split("\n")) {
      // A scalar field: `  name Type...` whose type is not another model (relations start with an upper-case model
      // name and carry @relation, or are lists of models).
      const field = /^ {2}(\w+)\s+(\w+)(\[\])?(\?)?(.*)$/.exec(line);
      if (field === null || line.includes("@relation")) continue;
      const [, fieldName, type, list] = field;
      if (list !== undefined && !/^(String|Int|BigInt|Boolean|DateTime|Json|Bytes|Decimal|Float)$/.test(type!)) continue;
      const column = /@map\("(\w+)"\)/.exec(line)?.[1] ?? fieldName!;
      columns.add(`${table}.${column}`);
    }
  }
  return columns;
}

/** The `table.column` names in the first cell of docs/privacy.md's field table rows. */
function documentedColumns(): Set<string> {
  const doc = readFileSync(join(ROOT, "docs", "privacy.md"), "utf8");
  const rows = new Set<string>();
  for (const [, cell] of doc.matchAll(/^\| *`(\w+\.\w+)` *\|/gm)) rows.add(cell!);
  return rows;
}

test("every schema column that holds personal data has a row in docs/privacy.md", (t) => {
  const documented = documentedColumns();
  const personal = [...schemaColumns()].filter((c) => PERSONAL_COLUMN.test(c.split(".")[1]!));
  t.true(personal.length >= 20, `the schema scan found the personal columns (${personal.length})`);
  const missing = personal.filter((c) => !documented.has(c));
  t.deepEqual(missing, [], "add a row for each to the field table of docs/privacy.md");
});

test("every row of docs/privacy.md's field table names a column the schema has", (t) => {
  const columns = schemaColumns();
  const stale = [...documentedColumns()].filter((c) => !columns.has(c));
  t.deepEqual(stale, [], "remove or rename these rows of docs/privacy.md");
});

test("the personal-column pattern recognises a new address, agent or identity column and passes others", (t) => {
  for (const name of ["ip", "voter_ip", "ip_key", "subnet", "user_agent", "username", "referee_identity", "steam_id", "payload", "request_body"])
    t.true(PERSONAL_COLUMN.test(name), name);
  for (const name of ["server_id", "created_at", "counted", "status_code", "zip", "period", "token_hash"]) t.false(PERSONAL_COLUMN.test(name), name);
});
