import test from "ava";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  ApplyEventResponseSchema,
  ReferralEventType,
  ReferralState,
  type ApplyEventRequestSchema,
  type ApplyEventResponse,
} from "../../gen/proto/referral/v1/referral_pb.js";
import { ResolveSigningKeysResponseSchema, SigningKeyStatus } from "../../gen/proto/servers/v1/servers_pb.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { DomainError, IllegalTransition, toConnectError } from "../../services/shared/rpc/errors.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { handleIngest } from "../../gateway/handle-ingest.js";
import type { IngestRpcs } from "../../gateway/forward.js";

// Pure tests of the order of checks: the RPCs are in-memory stand-ins that record their calls.
// The same rules run against the real referral service in test/integration/gateway-ingest.test.ts.

const NOW = new Date("2026-01-01T00:00:00Z");
const T = NOW.getTime() / 1000;
const SERVER = "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f";
const DISABLED = "11111111-1111-4111-8111-111111111111";
const NO_SECRET = "22222222-2222-4222-8222-222222222222";
const SECRET = "rsec_unit";

type ApplyBehaviour = ApplyEventResponse | Error;

function fakeRpcs(apply: ApplyBehaviour = create(ApplyEventResponseSchema, { outcome: { case: "duplicate", value: {} } })) {
  const calls = { resolve: 0, apply: [] as MessageInitShape<typeof ApplyEventRequestSchema>[] };
  const rpcs: IngestRpcs = {
    async resolveSigningKeys({ serverId }) {
      calls.resolve++;
      if (serverId === SERVER) {
        return create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.OK, keys: [{ kid: "k_1", secret: Buffer.from(SECRET) }] });
      }
      if (serverId === DISABLED) return create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.REFERRALS_DISABLED });
      if (serverId === NO_SECRET) return create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.OK, keys: [] });
      return create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.UNKNOWN_SERVER });
    },
    async applyEvent(request) {
      calls.apply.push(request);
      if (apply instanceof Error) throw apply;
      return apply;
    },
  };
  return { rpcs, calls };
}

const event = (overrides: Record<string, unknown> = {}) =>
  JSON.stringify({ event: "registered", token: "tok_1", server_id: SERVER, referee_identity: "p1", server_event_id: "reg-p1", ...overrides });

async function send(body: string | Buffer, opts: { header?: string | null; secret?: string; t?: number; kid?: string; apply?: ApplyBehaviour } = {}) {
  const raw = typeof body === "string" ? Buffer.from(body, "utf8") : body;
  const header = opts.header === null ? undefined : (opts.header ?? formatIngestSignature(opts.secret ?? SECRET, opts.t ?? T, raw, opts.kid));
  const { rpcs, calls } = fakeRpcs(opts.apply);
  const result = await handleIngest({ signatureHeader: header, rawBody: raw }, rpcs, () => NOW);
  return { status: result.reply.status, body: result.reply.body, calls };
}

test("malformed header beats invalid JSON", async (t) => {
  const r = await send("{not json", { header: "t=1" });
  t.deepEqual([r.status, r.body], [400, { error: "missing or malformed X-Service-Signature header" }]);
});

test("missing header -> 400 malformed", async (t) => {
  const r = await send(event(), { header: null });
  t.deepEqual([r.status, r.body], [400, { error: "missing or malformed X-Service-Signature header" }]);
});

test("invalid JSON beats unknown server (no RPC is made)", async (t) => {
  const r = await send('{"server_id":"00000000-0000-4000-8000-000000000000",');
  t.deepEqual([r.status, r.body, r.calls.resolve], [400, { error: "body is not valid JSON" }, 0]);
});

test("a JSON array body -> body is not valid JSON", async (t) => {
  const r = await send(`[${event()}]`);
  t.deepEqual([r.status, r.body], [400, { error: "body is not valid JSON" }]);
});

test("invalid UTF-8 -> body is not valid JSON", async (t) => {
  const r = await send(Buffer.concat([Buffer.from('{"server_id":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]));
  t.deepEqual([r.status, r.body], [400, { error: "body is not valid JSON" }]);
});

test("missing server_id beats every later check (no RPC is made)", async (t) => {
  const r = await send(JSON.stringify({ event: "nope" }), { secret: "wrong" });
  t.deepEqual([r.status, r.body, r.calls.resolve], [400, { error: "server_id is required" }, 0]);
});

test("non-string server_id -> 400 naming server_id", async (t) => {
  const r = await send(event({ server_id: 42 }));
  t.deepEqual([r.status, r.body], [400, { error: "server_id must be a string" }]);
});

test("unknown server beats bad MAC", async (t) => {
  const r = await send(event({ server_id: "33333333-3333-4333-8333-333333333333" }), { secret: "wrong" });
  t.deepEqual([r.status, r.body], [404, { error: "unknown server" }]);
});

test("a server_id that is not a uuid -> unknown server without an RPC", async (t) => {
  const r = await send(event({ server_id: "my-server" }));
  t.deepEqual([r.status, r.body, r.calls.resolve], [404, { error: "unknown server" }, 0]);
});

test("referrals disabled beats bad MAC -> 404", async (t) => {
  const r = await send(event({ server_id: DISABLED }), { secret: "wrong" });
  t.deepEqual([r.status, r.body], [404, { error: "referrals not enabled for this server" }]);
});

test("no active secret -> 404 referrals not enabled for this server", async (t) => {
  const r = await send(event({ server_id: NO_SECRET }));
  t.deepEqual([r.status, r.body], [404, { error: "referrals not enabled for this server" }]);
});

test("bad MAC -> 401 bad_signature", async (t) => {
  const r = await send(event(), { secret: "wrong" });
  t.deepEqual([r.status, r.body], [401, { error: "signature rejected: bad_signature" }]);
});

test("stale timestamp with a wrong MAC -> bad_signature", async (t) => {
  const r = await send(event(), { secret: "wrong", t: T - 3600 });
  t.deepEqual([r.status, r.body], [401, { error: "signature rejected: bad_signature" }]);
});

test("stale timestamp with a right MAC -> stale", async (t) => {
  const r = await send(event(), { t: T - 301 });
  t.deepEqual([r.status, r.body], [401, { error: "signature rejected: stale" }]);
});

test("unknown kid -> bad_signature", async (t) => {
  const r = await send(event(), { kid: "k_unknown" });
  t.deepEqual([r.status, r.body], [401, { error: "signature rejected: bad_signature" }]);
});

test("bad MAC beats invalid fields", async (t) => {
  const r = await send(event({ event: "bogus" }), { secret: "wrong" });
  t.deepEqual([r.status, r.body], [401, { error: "signature rejected: bad_signature" }]);
});

test("stale beats invalid fields", async (t) => {
  const r = await send(event({ event: "bogus" }), { t: T + 301 });
  t.deepEqual([r.status, r.body], [401, { error: "signature rejected: stale" }]);
});

test("invalid field beats test:true (a dry-run is fully validated)", async (t) => {
  const r = await send(event({ referee_identity: "", test: true }));
  t.deepEqual([r.status, r.body], [400, { error: "referee_identity is required for a registered event" }]);
});

test("test:true -> 200 {ok, test} and ApplyEvent is never called", async (t) => {
  const r = await send(event({ test: true, token: "no-such-token" }));
  t.deepEqual([r.status, r.body, r.calls.apply.length], [200, { ok: true, test: true }, 0]);
});

test("test:false is a real event", async (t) => {
  const r = await send(event({ test: false }));
  t.deepEqual([r.status, r.calls.apply.length], [200, 1]);
});

test("ApplyEvent receives trimmed values, the event type, ts and the kid that verified", async (t) => {
  const r = await send(event({ token: " tok_1 ", referee_identity: " p1\t", server_event_id: " reg-p1 ", ts: 1767225000 }));
  t.is(r.calls.apply.length, 1);
  t.like(r.calls.apply[0], {
    serverId: SERVER,
    event: ReferralEventType.REGISTERED,
    token: "tok_1",
    refereeIdentity: "p1",
    serverEventId: "reg-p1",
    ts: 1767225000n,
    kid: "k_1",
  });
});

test("applied -> 200 {ok, referral_id, state}", async (t) => {
  const apply = create(ApplyEventResponseSchema, {
    outcome: { case: "applied", value: { referralId: "0b9e4c52-8a51-4c43-a6f5-8e2f7a1d3c90", state: ReferralState.QUALIFIED, advanced: true } },
  });
  const r = await send(event({ event: "qualified" }), { apply });
  t.is(JSON.stringify(r.body), JSON.stringify({ ok: true, referral_id: "0b9e4c52-8a51-4c43-a6f5-8e2f7a1d3c90", state: "qualified" }));
});

test("duplicate -> 200 {ok, duplicate: true}", async (t) => {
  const r = await send(event(), { apply: create(ApplyEventResponseSchema, { outcome: { case: "duplicate", value: {} } }) });
  t.deepEqual([r.status, r.body], [200, { ok: true, duplicate: true }]);
});

test("first-touch conflict -> 200 {ok, ignored: first_touch_conflict}", async (t) => {
  const r = await send(event(), { apply: create(ApplyEventResponseSchema, { outcome: { case: "firstTouchConflict", value: {} } }) });
  t.deepEqual([r.status, r.body], [200, { ok: true, ignored: "first_touch_conflict" }]);
});

test("an applied outcome in state CLICKED or without a case -> 500 internal error", async (t) => {
  const clicked = create(ApplyEventResponseSchema, { outcome: { case: "applied", value: { referralId: "x", state: ReferralState.CLICKED } } });
  t.is((await send(event(), { apply: clicked })).status, 500);
  t.is((await send(event(), { apply: create(ApplyEventResponseSchema, {}) })).status, 500);
});

test("unknown token -> 404 unknown referral token for this server", async (t) => {
  const r = await send(event(), { apply: toConnectError(new DomainError("unknown_token", "unknown referral token for this server")) });
  t.deepEqual([r.status, r.body], [404, { error: "unknown referral token for this server" }]);
});

test("illegal transition -> 422 with from and event", async (t) => {
  const r = await send(event({ event: "qualified" }), { apply: toConnectError(new IllegalTransition("clicked", "qualified")) });
  t.is(JSON.stringify(r.body), JSON.stringify({ error: "invalid state transition", from: "clicked", event: "qualified" }));
  t.is(r.status, 422);
});

test("referral service down -> 503 + Retry-After (issue 18; was 500 internal error)", async (t) => {
  const r = await send(event(), { apply: new ConnectError("connect ECONNREFUSED", Code.Unavailable) });
  t.deepEqual([r.status, r.body], [503, { error: "service overloaded; retry after the Retry-After delay" }]);
});
