import anyTest, { type TestFn } from "ava";
import { Code } from "@connectrpc/connect";
import { createReferralServer, errorDetails, rpcError, startHarness, type Harness } from "../../scripts/harness/referral-harness.js";

const test = anyTest as TestFn<{ h: Harness }>;

test.before(async (t) => {
  t.context.h = await startHarness();
});
test.after.always(async (t) => {
  await t.context.h?.close();
});

test("RecordClick stores the click for its server and referrer and returns an unguessable URL-safe token of 192 bits", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const res = await h.referral.recordClick({ serverId, referrerIdentity: "  alice  ", ip: "203.0.113.7", userAgent: "Mozilla/5.0" });
  t.regex(res.token, /^[A-Za-z0-9_-]{32}$/, "32 base64url characters = 24 random bytes");
  const click = await h.db.prisma.referralClick.findUniqueOrThrow({ where: { token: res.token } });
  t.like(click, { id: res.clickId, serverId, referrerIdentity: "alice", ip: "203.0.113.7", userAgent: "Mozilla/5.0", referralId: null });
  const tokens = new Set(
    await Promise.all(Array.from({ length: 20 }, async () => (await h.referral.recordClick({ serverId, referrerIdentity: "alice" })).token)),
  );
  t.is(tokens.size, 20, "every click gets its own token");
});

test("RecordClick redirect_url is the registration URL with ref_token appended, keeping its query parameters", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h, "Q", "https://game.example/join?lang=de&src=list");
  const res = await h.referral.recordClick({ serverId, referrerIdentity: "alice" });
  const url = new URL(res.redirectUrl);
  t.is(url.origin + url.pathname, "https://game.example/join");
  t.is(url.searchParams.get("lang"), "de");
  t.is(url.searchParams.get("src"), "list");
  t.is(url.searchParams.get("ref_token"), res.token);
});

test("RecordClick redirect_url is empty when the server has no registration URL", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h, "no-url", "");
  const res = await h.referral.recordClick({ serverId, referrerIdentity: "alice" });
  t.is(res.redirectUrl, "");
  t.truthy(res.token);
});

test("RecordClick for an unknown server -> NotFound unknown server", async (t) => {
  const { h } = t.context;
  for (const serverId of ["00000000-0000-4000-8000-000000000000", "not-a-uuid"]) {
    const error = await rpcError(h.referral.recordClick({ serverId, referrerIdentity: "alice" }));
    t.like(errorDetails(error), { code: Code.NotFound, message: "unknown server" }, serverId);
  }
});

test("RecordClick requires referrals enabled: links stop working when the owner turns referrals off", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  await h.admin.setReferralsEnabled({ serverId, enabled: false });
  const error = await rpcError(h.referral.recordClick({ serverId, referrerIdentity: "alice" }));
  t.like(errorDetails(error), { code: Code.NotFound, message: "referrals not enabled for this server", kind: "referrals_disabled" });
  t.is(await h.db.prisma.referralClick.count({ where: { serverId } }), 0);
});

test("RecordClick with an empty (whitespace) referrer_identity -> InvalidArgument naming the field", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const error = await rpcError(h.referral.recordClick({ serverId, referrerIdentity: "   " }));
  t.like(errorDetails(error), { code: Code.InvalidArgument, message: "referrer_identity is required" });
});
