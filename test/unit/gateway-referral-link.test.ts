import test from "ava";
import { create } from "@bufbuild/protobuf";
import { RecordClickResponseSchema } from "../../gen/proto/referral/v1/referral_pb.js";
import { DomainError, toConnectError } from "../../services/shared/rpc/errors.js";
import { handleReferralLink, type ReferralLinkRpcs } from "../../gateway/handle-referral-link.js";
import { resolveRequestId } from "../../gateway/request-id.js";

const SERVER = "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f";

function rpcs(answer: { redirectUrl?: string; error?: Error } = {}) {
  const calls: unknown[] = [];
  const fake: ReferralLinkRpcs = {
    async recordClick(request) {
      calls.push(request);
      if (answer.error) throw answer.error;
      return create(RecordClickResponseSchema, { token: "tok_abc", clickId: "c1", redirectUrl: answer.redirectUrl ?? "" });
    },
  };
  return { fake, calls };
}

const input = (overrides: Partial<Parameters<typeof handleReferralLink>[0]> = {}) => ({
  serverId: SERVER,
  referrer: "alex",
  ip: "203.0.113.7",
  userAgent: "ua",
  ...overrides,
});

test("missing or blank referrer -> 400 `referrer is required` without recording a click", async (t) => {
  for (const referrer of [null, "", "  "]) {
    const { fake, calls } = rpcs();
    const result = await handleReferralLink(input({ referrer }), fake);
    t.deepEqual(result.reply, { status: 400, body: { error: "referrer is required" } });
    t.is(calls.length, 0);
  }
});

test("a server id that is not a uuid -> 404 `unknown server` without recording a click", async (t) => {
  const { fake, calls } = rpcs();
  t.deepEqual((await handleReferralLink(input({ serverId: "nope" }), fake)).reply, { status: 404, body: { error: "unknown server" } });
  t.is(calls.length, 0);
});

test("a registration URL -> 302 to the URL built by the referral service, never cached", async (t) => {
  const { fake, calls } = rpcs({ redirectUrl: "https://play.example.org/register?ref_token=tok_abc" });
  const result = await handleReferralLink(input({ referrer: " alex " }), fake);
  t.deepEqual(result.reply, {
    status: 302,
    body: undefined,
    headers: { location: "https://play.example.org/register?ref_token=tok_abc", "cache-control": "no-store" },
  });
  t.like(calls[0], { serverId: SERVER, referrerIdentity: "alex", ip: "203.0.113.7", userAgent: "ua" });
});

test("no registration URL -> 200 {token}", async (t) => {
  const { fake } = rpcs();
  t.like((await handleReferralLink(input(), fake)).reply, { status: 200, body: { token: "tok_abc" } });
});

test("unknown server / referrals disabled from the service -> their 404 texts; other failures -> 500", async (t) => {
  const unknown = rpcs({ error: toConnectError(new DomainError("unknown_server", "unknown server")) });
  t.deepEqual((await handleReferralLink(input(), unknown.fake)).reply, { status: 404, body: { error: "unknown server" } });
  const disabled = rpcs({ error: toConnectError(new DomainError("referrals_disabled", "x")) });
  t.deepEqual((await handleReferralLink(input(), disabled.fake)).reply, { status: 404, body: { error: "referrals not enabled for this server" } });
  const boom = rpcs({ error: new Error("down") });
  const failed = await handleReferralLink(input(), boom.fake);
  t.deepEqual(failed.reply, { status: 500, body: { error: "internal error" } });
  t.truthy(failed.cause);
});

test("request id: a safe caller id is kept; a missing, overlong or unsafe one is replaced by a uuid", (t) => {
  t.is(resolveRequestId("abc-123_x.y:z"), "abc-123_x.y:z");
  t.is(resolveRequestId(["first", "second"]), "first");
  for (const bad of [undefined, "", "x".repeat(129), "has space", "new\nline", 'quote"']) {
    t.regex(resolveRequestId(bad), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, String(bad));
  }
});
