import test from "ava";
import { validateEvent, type JsonObject } from "../../gateway/validate-event.js";
import { handleReferralLink } from "../../gateway/handle-referral-link.js";
import { toApplyEventCommand, toRecordClickCommand } from "../../services/referral/domain/commands.js";
import { toRegistrationUrl, toServerName } from "../../services/servers/domain/server-fields.js";
import { validateCallbackUrl } from "../../services/shared/values/callback-url.js";
import { DomainError } from "../../services/shared/rpc/errors.js";
import { FIELD_RULES, boundField, fieldProblem, type FieldName } from "../../services/shared/values/field-rules.js";

const SERVER_ID = "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f";
const BTREE_ROW_LIMIT_BYTES = 2704;
/** The most UTF-8 bytes one UTF-16 code unit can take. */
const MAX_UTF8_BYTES_PER_UNIT = 3;

for (const field of Object.keys(FIELD_RULES) as FieldName[]) {
  const rule = FIELD_RULES[field] as { maxChars: number; overflow?: string };
  test(`field table: ${field} refuses a NUL and ${rule.overflow === "truncate" ? "cuts" : "refuses"} more than ${rule.maxChars} characters`, (t) => {
    t.is(fieldProblem(field, "a\u0000b"), `${field} must not contain NUL characters`);
    t.throws(() => boundField(field, "\u0000"), { instanceOf: DomainError, message: `${field} must not contain NUL characters` });
    const atLimit = "x".repeat(rule.maxChars);
    t.is(boundField(field, atLimit), atLimit);
    const over = "x".repeat(rule.maxChars + 1);
    if (rule.overflow === "truncate") {
      t.is(boundField(field, over), atLimit);
    } else {
      t.is(fieldProblem(field, over), `${field} must be at most ${rule.maxChars} characters`);
      const error = t.throws(() => boundField(field, "x".repeat(2 * 1024 * 1024)), { instanceOf: DomainError });
      t.is(error?.kind, "invalid_argument");
    }
  });
}

test("field table: the longest values fit PostgreSQL's btree index row limit, also in the (token, type, server_event_id) unique index", (t) => {
  const bytes = (field: FieldName) => FIELD_RULES[field].maxChars * MAX_UTF8_BYTES_PER_UNIT;
  t.true(bytes("token") + 32 + bytes("server_event_id") < BTREE_ROW_LIMIT_BYTES);
  for (const field of ["voter_identity", "referee_identity", "referrer_identity"] as const) t.true(16 + bytes(field) < BTREE_ROW_LIMIT_BYTES, field);
  t.true(bytes("username") <= 256, "a username fits a Votifier frame with room for the rest");
});

const ingest = (overrides: JsonObject): string => {
  const result = validateEvent({ event: "registered", token: "tok", server_id: SERVER_ID, referee_identity: "p", server_event_id: "e", ...overrides });
  return result.kind === "invalid" ? result.error : "valid";
};

test("gateway ingest: a NUL in token, server_event_id or referee_identity is a 400 naming the field", (t) => {
  t.is(ingest({ token: "to\u0000k" }), "token must not contain NUL characters");
  t.is(ingest({ server_event_id: "\u0000" }), "server_event_id must not contain NUL characters");
  t.is(ingest({ referee_identity: "p\u0000" }), "referee_identity must not contain NUL characters");
});

test("gateway ingest: over-long token, server_event_id and referee_identity are 400 naming the field; at the limit they pass", (t) => {
  t.is(ingest({ token: "t".repeat(257) }), "token must be at most 256 characters");
  t.is(ingest({ server_event_id: "e".repeat(513) }), "server_event_id must be at most 512 characters");
  t.is(ingest({ referee_identity: "p".repeat(513) }), "referee_identity must be at most 512 characters");
  t.is(ingest({ token: "t".repeat(256), server_event_id: "e".repeat(512), referee_identity: "p".repeat(512) }), "valid");
});

test("gateway referral link: a NUL or over-long referrer is a 400 naming referrer, without calling the service", async (t) => {
  let calls = 0;
  const rpcs = {
    recordClick: async () => {
      calls++;
      throw new Error("must not be called");
    },
  };
  for (const [referrer, text] of [
    ["a\u0000b", "referrer must not contain NUL characters"],
    ["r".repeat(513), "referrer must be at most 512 characters"],
  ] as const) {
    const result = await handleReferralLink({ serverId: SERVER_ID, referrer, ip: "192.0.2.1", userAgent: "" }, rpcs);
    t.deepEqual(result.reply, { status: 400, body: { error: text } });
  }
  t.is(calls, 0);
});

test("RPC commands take their bounds from the same table", (t) => {
  const apply = { serverId: SERVER_ID, event: "registered", token: "tok", refereeIdentity: "p", serverEventId: "e", ts: 0n, kid: "" };
  t.throws(() => toApplyEventCommand({ ...apply, token: "a\u0000" }), { message: "token must not contain NUL characters" });
  t.throws(() => toApplyEventCommand({ ...apply, refereeIdentity: "x".repeat(3000) }), { message: "referee_identity must be at most 512 characters" });
  t.throws(() => toApplyEventCommand({ ...apply, kid: "k\u0000" }), { message: "kid must not contain NUL characters" });
  const click = { serverId: SERVER_ID, referrerIdentity: "r", ip: "", userAgent: "" };
  t.throws(() => toRecordClickCommand({ ...click, referrerIdentity: "r\u0000" }), { message: "referrer_identity must not contain NUL characters" });
  t.throws(() => toRecordClickCommand({ ...click, ip: "1".repeat(65) }), { message: "ip must be at most 64 characters" });
  t.is(toRecordClickCommand({ ...click, userAgent: "u".repeat(5000) }).userAgent?.length, 1024, "a user agent is a signal: cut, not refused");
  t.throws(() => toServerName("n\u0000"), { message: "name must not contain NUL characters" });
  t.throws(() => toRegistrationUrl(`https://example.com/${"a".repeat(2048)}`), { message: "registration_url must be at most 2048 characters" });
  const callback = validateCallbackUrl("https://example.com/\u0000", { allowInsecure: false });
  t.deepEqual(callback, { ok: false, error: "callback_url must not contain NUL characters" });
});
