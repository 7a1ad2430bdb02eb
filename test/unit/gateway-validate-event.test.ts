import test from "ava";
import { parseJsonObject, readServerId, validateEvent, type JsonObject } from "../../gateway/validate-event.js";

const SERVER_ID = "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f";
const base = (overrides: JsonObject = {}): JsonObject => ({
  event: "registered",
  token: "tok_1",
  server_id: SERVER_ID,
  referee_identity: "player-1",
  server_event_id: "reg-player-1",
  ...overrides,
});
const errorOf = (body: JsonObject) => {
  const result = validateEvent(body);
  return result.kind === "invalid" ? result.error : "valid";
};

test("invalid JSON, invalid UTF-8, a BOM and non-object JSON all parse to null (-> body is not valid JSON)", (t) => {
  for (const raw of ["{", "", "not json", "[]", "[1]", "null", "42", '"str"', "true"]) {
    t.is(parseJsonObject(Buffer.from(raw, "utf8")), null, raw);
  }
  t.is(parseJsonObject(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])), null, "invalid UTF-8 inside a string");
  t.is(parseJsonObject(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("{}")])), null, "leading BOM");
  t.deepEqual(parseJsonObject(Buffer.from(' {"a":"é"} \n', "utf8")), { a: "é" });
});

test("server_id missing, empty after trim, or not a string -> 400 naming server_id", (t) => {
  for (const value of [undefined, null, "", "   ", 42, true, ["x"], { id: 1 }]) {
    const body: JsonObject = value === undefined ? {} : { server_id: value };
    const result = readServerId(body);
    t.is(result.kind, "invalid", String(value));
    if (result.kind === "invalid") t.regex(result.error, /^server_id /);
  }
  t.deepEqual(readServerId({ server_id: `  ${SERVER_ID}\t` }), { kind: "ok", value: SERVER_ID });
});

test("event outside registered|qualified|reversed (or not a string, or missing) -> the contract's text", (t) => {
  for (const event of ["Registered", "clicked", "", 1, null, undefined, ["registered"]]) {
    t.is(errorOf(base({ event })), "event must be one of registered|qualified|reversed", String(event));
  }
});

test("registered without referee_identity (missing, null, empty, blank) -> the contract's text", (t) => {
  for (const referee of [undefined, null, "", "   "]) {
    t.is(errorOf(base({ referee_identity: referee })), "referee_identity is required for a registered event", String(referee));
  }
});

test("qualified and reversed do not need referee_identity", (t) => {
  t.is(errorOf(base({ event: "qualified", referee_identity: undefined })), "valid");
  t.is(errorOf(base({ event: "reversed", referee_identity: "" })), "valid");
});

test("token and server_event_id: missing or empty after trim -> `<field> is required`, wrong type -> `<field> must be a string`", (t) => {
  for (const field of ["token", "server_event_id"]) {
    t.is(errorOf(base({ [field]: undefined })), `${field} is required`);
    t.is(errorOf(base({ [field]: "  " })), `${field} is required`);
    t.is(errorOf(base({ [field]: 7 })), `${field} must be a string`);
  }
});

test("referee_identity of the wrong JSON type -> 400 naming the field, even on later events", (t) => {
  t.is(errorOf(base({ referee_identity: 12 })), "referee_identity must be a string");
  t.is(errorOf(base({ event: "qualified", referee_identity: { id: 1 } })), "referee_identity must be a string");
});

test("ts must be an integer in int64 range when present", (t) => {
  for (const ts of [1.5, "1767225600", true, 1e19, -1e19]) {
    t.is(errorOf(base({ ts })), "ts must be an integer (unix seconds)", String(ts));
  }
  const ok = validateEvent(base({ ts: 1767225600 }));
  t.is(ok.kind === "ok" ? ok.value.ts : undefined, 1767225600n);
  t.is(errorOf(base({ ts: null })), "valid");
});

test("test must be a boolean when present", (t) => {
  t.is(errorOf(base({ test: "true" })), "test must be a boolean");
  t.is(errorOf(base({ test: 1 })), "test must be a boolean");
  const dry = validateEvent(base({ test: true }));
  t.true(dry.kind === "ok" && dry.value.test);
});

test("strings are trimmed and unknown extra fields are accepted", (t) => {
  const result = validateEvent(base({ token: "  tok_1 ", server_event_id: "\treg-1\n", referee_identity: " p1 ", extra: { nested: [1] } }));
  t.deepEqual(result, {
    kind: "ok",
    value: { event: "registered", token: "tok_1", serverId: SERVER_ID, serverEventId: "reg-1", refereeIdentity: "p1", test: false },
  });
});

test("the first failing field wins, in the documented order: event, token, server_event_id, referee_identity, ts, test", (t) => {
  t.is(errorOf({ server_id: SERVER_ID, ts: "x", test: "y" }), "event must be one of registered|qualified|reversed");
  t.is(errorOf({ event: "registered", server_id: SERVER_ID, ts: "x" }), "token is required");
  t.is(errorOf({ event: "registered", server_id: SERVER_ID, token: "a", ts: "x" }), "server_event_id is required");
  t.is(
    errorOf({ event: "registered", server_id: SERVER_ID, token: "a", server_event_id: "b", ts: "x" }),
    "referee_identity is required for a registered event",
  );
  t.is(errorOf(base({ ts: "x", test: "y" })), "ts must be an integer (unix seconds)");
});
