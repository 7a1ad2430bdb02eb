import test from "ava";
import { DomainError, type DomainErrorKind } from "../../services/shared/rpc/errors.js";
import { toApplyEventCommand, toRecordClickCommand, type ApplyEventInput } from "../../services/referral/domain/commands.js";
import { periodOf as toPeriod, periodRange } from "../../services/shared/values/period.js";
import { toRedirectUrl } from "../../services/referral/domain/redirect-url.js";

const SERVER = "6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f";
const valid: ApplyEventInput = {
  serverId: SERVER,
  event: "registered",
  token: "tok",
  refereeIdentity: "player-1",
  serverEventId: "reg-1",
  ts: 0n,
  kid: "",
};

const invalid: Array<{ rule: string; input: Partial<ApplyEventInput>; kind: DomainErrorKind; message: string }> = [
  {
    rule: "unspecified event -> the contract's enum text",
    input: { event: null },
    kind: "invalid_argument",
    message: "event must be one of registered|qualified|reversed",
  },
  {
    rule: "unknown event name -> the contract's enum text",
    input: { event: "clicked" },
    kind: "invalid_argument",
    message: "event must be one of registered|qualified|reversed",
  },
  {
    rule: "registered without referee_identity -> the contract's text",
    input: { refereeIdentity: "" },
    kind: "invalid_argument",
    message: "referee_identity is required for a registered event",
  },
  {
    rule: "whitespace-only referee_identity counts as missing",
    input: { refereeIdentity: "   " },
    kind: "invalid_argument",
    message: "referee_identity is required for a registered event",
  },
  { rule: "empty token -> 400 naming token", input: { token: " " }, kind: "invalid_argument", message: "token is required" },
  { rule: "empty server_id -> 400 naming server_id", input: { serverId: "" }, kind: "invalid_argument", message: "server_id is required" },
  {
    rule: "empty server_event_id -> 400 naming server_event_id",
    input: { serverEventId: "\t" },
    kind: "invalid_argument",
    message: "server_event_id is required",
  },
  {
    rule: "overlong server_event_id -> 400",
    input: { serverEventId: "x".repeat(513) },
    kind: "invalid_argument",
    message: "server_event_id must be at most 512 characters",
  },
  { rule: "server_id that is not a uuid -> unknown server", input: { serverId: "srv-1" }, kind: "unknown_server", message: "unknown server" },
];

for (const c of invalid) {
  test(`toApplyEventCommand: ${c.rule}`, (t) => {
    const error = t.throws(() => toApplyEventCommand({ ...valid, ...c.input }), { instanceOf: DomainError });
    t.is(error?.kind, c.kind);
    t.is(error?.message, c.message);
  });
}

test("toApplyEventCommand trims every field", (t) => {
  const command = toApplyEventCommand({
    ...valid,
    serverId: ` ${SERVER} `,
    token: " tok ",
    refereeIdentity: " p1 ",
    serverEventId: " e1 ",
    kid: " k_1 ",
    ts: 1700000000n,
  });
  t.deepEqual(command, { serverId: SERVER, event: "registered", token: "tok", refereeIdentity: "p1", serverEventId: "e1", kid: "k_1", callerTs: 1700000000n });
});

test("referee_identity is ignored on qualified and reversed (not required, not kept)", (t) => {
  t.is(toApplyEventCommand({ ...valid, event: "qualified", refereeIdentity: "" }).refereeIdentity, null);
  t.is(toApplyEventCommand({ ...valid, event: "reversed", refereeIdentity: "someone" }).refereeIdentity, null);
});

test("toRecordClickCommand requires a non-empty trimmed referrer_identity", (t) => {
  const error = t.throws(() => toRecordClickCommand({ serverId: SERVER, referrerIdentity: "  ", ip: "", userAgent: "" }), { instanceOf: DomainError });
  t.is(error?.message, "referrer_identity is required");
  t.deepEqual(toRecordClickCommand({ serverId: SERVER, referrerIdentity: " alice ", ip: " 203.0.113.9 ", userAgent: "" }), {
    serverId: SERVER,
    referrerIdentity: "alice",
    ip: "203.0.113.9",
    userAgent: null,
  });
});

test("toPeriod is the UTC month, not the local one", (t) => {
  t.is(toPeriod(new Date("2024-01-31T23:59:59.999Z")), "2024-01");
  t.is(toPeriod(new Date("2024-02-01T00:00:00.000Z")), "2024-02");
  t.is(toPeriod(new Date("2024-12-31T23:30:00-02:00")), "2025-01");
});

test("periodRange is the half-open UTC month and rejects malformed periods", (t) => {
  t.deepEqual(periodRange("2024-12"), { start: new Date("2024-12-01T00:00:00Z"), end: new Date("2025-01-01T00:00:00Z") });
  for (const bad of ["2024-13", "2024-00", "2024-1", "24-01", "2024-01-01", ""]) t.is(periodRange(bad), null, bad);
});

const redirects: Array<[string | null, string, string]> = [
  ["https://game.example/register", "T0k", "https://game.example/register?ref_token=T0k"],
  ["https://game.example/register?lang=de&x=1", "T0k", "https://game.example/register?lang=de&x=1&ref_token=T0k"],
  ["https://game.example/register?ref_token=old", "T0k", "https://game.example/register?ref_token=T0k"],
  ["https://game.example/register#top", "T0k", "https://game.example/register?ref_token=T0k#top"],
  [null, "T0k", ""],
  ["", "T0k", ""],
];

for (const [registrationUrl, token, expected] of redirects) {
  test(`redirect URL keeps existing query params and appends ref_token: ${String(registrationUrl)}`, (t) => {
    t.is(toRedirectUrl(registrationUrl, token), expected);
  });
}
