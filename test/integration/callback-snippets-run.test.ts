/**
 * The verification snippets of docs/callbacks.md, run as an owner would copy them: the Node blocks as ES
 * modules on this Node, the Python block on python3. Each is taken from the document itself (the fenced block
 * that defines the function), so a snippet that changes is the snippet tested. They are checked against the
 * frozen vectors (test/fixtures/signature-vectors.json, openssl; the `v1a` vector of Python `cryptography`,
 * RFC 8032's test key): a body signed for the snippet's server is returned, the same valid signature given
 * another server id is refused with the receivers' reason, and a changed byte or a stale t is refused too.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import test from "ava";
import { serverMismatchText } from "../../gateway/dashboard/signature-rules.js";

const doc = readFileSync(new URL("../../docs/callbacks.md", import.meta.url), "utf8");

/** The fenced `lang` block of docs/callbacks.md that contains `marker`. */
function snippet(lang: string, marker: string): string {
  const blocks = [...doc.matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, "g"))].map((m) => m[1] as string);
  const found = blocks.filter((b) => b.includes(marker));
  if (found.length !== 1) throw new Error(`docs/callbacks.md has ${found.length} ${lang} blocks with ${marker}`);
  return found[0]!;
}

const dir = mkdtempSync(join(tmpdir(), "callback-snippets-"));
async function importSnippet<T>(name: string, source: string): Promise<T> {
  const file = join(dir, name);
  writeFileSync(file, source);
  return (await import(pathToFileURL(file).href)) as T;
}

interface VectorCase {
  name: string;
  secret: string;
  t: number;
  body: string;
  callback_header: string;
}
const vectors = JSON.parse(readFileSync(new URL("../fixtures/signature-vectors.json", import.meta.url), "utf8")) as { cases: VectorCase[] };
const heart = vectors.cases.find((c) => c.name === "heart-counted")!;
const heartServer = (JSON.parse(heart.body) as { server_id: string }).server_id;
const tampered = heart.body.replace('"Steve_42"', '"Steve_43"');
/** Any other server. */
const OTHER_SERVER = "0d9c8b7a-6f5e-4d3c-8b2a-1f0e9d8c7b6a";
const STALE = heart.t + 301;

// The `v1a` vector of test/unit/delivery-sign-v1a.test.ts (also in receivers.test.ts).
const V1A = {
  t: 1773145800,
  id: "0b8f7e6d-5c4b-4a39-8281-706f5e4d3c2b",
  body: '{"event":"heart.counted","server_id":"7f0c2a1e-3b4d-4c5e-8f90-a1b2c3d4e5f6","username":"Steve","heart_id":"0b8f7e6d-5c4b-4a39-8281-706f5e4d3c2b","period":"2026-03","timestamp":1773145800,"streak_day":3}',
  whpk: "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
  v1a: "X7kfMYeVTyDOPwo4rzEc0Sj+CW3N8QcDy6mlN90O7hPK6ebxp2zDtHE+53K4L/aILCVKiXw545W0RMFvVn8SCg==",
};
const v1aServer = (JSON.parse(V1A.body) as { server_id: string }).server_id;

type Verdict = { event: { heart_id: string } } | { error: string };

test("Node HMAC snippet (verifyRewardCallback): the frozen vector for its server is returned; the same valid signature for another server is refused 'server_id mismatch'; a changed byte or a stale t is refused", async (t) => {
  const { verifyRewardCallback } = await importSnippet<{
    verifyRewardCallback: (rawBody: Buffer, header: string, secret: string, serverId: string, nowSeconds?: number) => Verdict;
  }>("verify-reward-callback.mjs", snippet("js", "export function verifyRewardCallback"));
  const verify = (body: string, serverId: string, now = heart.t) =>
    verifyRewardCallback(Buffer.from(body, "utf8"), heart.callback_header, heart.secret, serverId, now);
  t.like(verify(heart.body, heartServer), { event: { heart_id: JSON.parse(heart.body).heart_id } });
  t.deepEqual(verify(heart.body, OTHER_SERVER), { error: serverMismatchText(OTHER_SERVER) });
  t.deepEqual(verify(tampered, heartServer), { error: "signature rejected: bad_signature" });
  t.deepEqual(verify(heart.body, heartServer, STALE), { error: "signature rejected: stale" });
});

test("Python HMAC snippet (verify_reward_callback): the frozen vector for its server is returned; the same valid signature for another server is refused 'server_id mismatch'; a changed byte or a stale t is refused", (t) => {
  const module = join(dir, "verify_reward_callback.py");
  writeFileSync(module, snippet("python", "def verify_reward_callback"));
  const driver = [
    "import json, sys",
    `sys.path.insert(0, ${JSON.stringify(dir)})`,
    "from verify_reward_callback import verify_reward_callback",
    "out = []",
    "for c in json.load(sys.stdin):",
    "    event, error = verify_reward_callback(c['body'].encode(), c['header'], c['secret'], c['server_id'], c['now'])",
    "    out.append({'heart_id': event['heart_id']} if event else {'error': error})",
    "print(json.dumps(out))",
  ].join("\n");
  const run = (cases: Array<{ body: string; server_id: string; now: number }>) =>
    JSON.parse(
      execFileSync("python3", ["-c", driver], {
        input: JSON.stringify(cases.map((c) => ({ ...c, header: heart.callback_header, secret: heart.secret }))),
        encoding: "utf8",
      }),
    ) as Array<Record<string, string>>;
  t.deepEqual(
    run([
      { body: heart.body, server_id: heartServer, now: heart.t },
      { body: heart.body, server_id: OTHER_SERVER, now: heart.t },
      { body: tampered, server_id: heartServer, now: heart.t },
      { body: heart.body, server_id: heartServer, now: STALE },
    ]),
    [
      { heart_id: JSON.parse(heart.body).heart_id },
      { error: serverMismatchText(OTHER_SERVER) },
      { error: "signature rejected: bad_signature" },
      { error: "signature rejected: stale" },
    ],
  );
});

test("Node v1a snippet (verifyV1a): the frozen v1a vector, signed with the list's one key, is returned for its server and refused 'server_id mismatch' for any other; a changed byte or a stale t is refused", async (t) => {
  const { verifyV1a } = await importSnippet<{
    verifyV1a: (headers: Record<string, string>, rawBody: Buffer, keys: Array<{ public_key: string }>, serverId: string, nowSeconds?: number) => Verdict;
  }>("verify-v1a.mjs", snippet("js", "export function verifyV1a"));
  const headers = { "webhook-id": V1A.id, "webhook-timestamp": String(V1A.t), "webhook-signature": `v1a,${V1A.v1a}` };
  const keys = [{ public_key: V1A.whpk }];
  const verify = (body: string, serverId: string, now = V1A.t) => verifyV1a(headers, Buffer.from(body, "utf8"), keys, serverId, now);
  t.like(verify(V1A.body, v1aServer), { event: { heart_id: V1A.id } });
  t.deepEqual(verify(V1A.body, OTHER_SERVER), { error: serverMismatchText(OTHER_SERVER) });
  t.deepEqual(verify(V1A.body.replace('"Steve"', '"Steve2"'), v1aServer), { error: "signature rejected: bad_signature" });
  t.deepEqual(verify(V1A.body, v1aServer, V1A.t + 301), { error: "signature rejected: stale" });
});

test("docs/callbacks.md states the rule beside each verification snippet", (t) => {
  const prose = doc.replace(/\s+/g, " ");
  const rule = "valid signature proves the list sent it; only the `server_id` proves it is for you";
  t.true(prose.includes(`and otherwise say why it is refused. A ${rule}`), "beside the HMAC snippets");
  t.true(prose.includes(`a ${rule}. The snippet refuses a body for another server`), "beside the v1a snippet");
});
