/**
 * Referral anti-abuse through the real stack: `/r/` clicks and signed ingest through the gateway,
 * the referral service on PostgreSQL, the review RPCs (docs/referral-rules.md, "Anti-abuse").
 * A seeded farm (one IP, twenty referees) is flagged and held, off the leaderboard, then approved
 * and counted; when an address's fan-out first passes its limit, its earlier referees are flagged too; strict mode declines; an unflagged referral counts as before; a server that has not
 * opted in keeps the contract's counting; the ingest answers never change because of flags.
 */
import test from "ava";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { ReferralState } from "../../gen/proto/referral/v1/referral_pb.js";
import { ExportFormat, ReferralReviewService, ReviewAction, ReviewMode, ReviewState } from "../../gen/proto/referral/v1/referral_review_pb.js";
import { createRpcClients } from "../../services/shared/rpc/service-clients.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { TOO_MANY_CLICKS_TEXT } from "../../gateway/handle-referral-link.js";
import { startGatewayStack, type GatewayStack, type TestServer } from "./gateway-stack.js";

let stack: GatewayStack;
let rpc: ReturnType<typeof createRpcClients>;
const CLICKS_PER_IP = 40;

test.before(async () => {
  // Clicks carry the address of the proxy's X-Forwarded-For entry, so each test plays its own addresses.
  stack = await startGatewayStack({ gatewayOverrides: () => ({ trustProxy: true, referralLinkLimit: { perIp: CLICKS_PER_IP, windowMs: 60_000 } }) });
  rpc = createRpcClients(createServiceTransport(stack.serviceUrl, TEST_SERVICE_TOKEN));
});
test.after.always(async () => {
  await stack?.close();
});

const BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0";
let ipSeq = 0;
/** A fresh address in a /24 of its own per call (198.18.0.0/15, the benchmarking range: never a real voter). */
const freshIp = () => {
  ipSeq += 1;
  return `198.${18 + Math.floor(ipSeq / 250)}.${ipSeq % 250}.7`;
};

/** GET /r/<server>?referrer=... from `ip` (via the trusted proxy header). */
function link(serverId: string, referrer: string, ip: string) {
  return fetch(`${stack.baseUrl}/r/${serverId}?referrer=${encodeURIComponent(referrer)}`, {
    redirect: "manual",
    headers: { "x-forwarded-for": ip, "user-agent": BROWSER },
  });
}

async function clickToken(serverId: string, referrer: string, ip: string): Promise<string> {
  const res = await link(serverId, referrer, ip);
  if (res.status !== 200) throw new Error(`/r/ answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

async function createServer(mode: ReviewMode | null): Promise<TestServer> {
  const server = await stack.createServer();
  if (mode !== null) await rpc.reviews.setReferralReviewMode({ serverId: server.serverId, mode });
  return server;
}

/** Registers `referee` through `token` (no qualification), asserting a 200; returns the answer's body. */
async function postRegistered(t: { is(a: unknown, b: unknown, m?: string): void }, server: TestServer, token: string, referee: string) {
  const reg = await stack.postSigned(server, {
    event: "registered",
    token,
    server_id: server.serverId,
    referee_identity: referee,
    server_event_id: `reg-${referee}`,
  });
  t.is(reg.status, 200, reg.text);
  return { body: JSON.parse(reg.text) as { ok: boolean; state: string; referral_id: string } };
}

/** Registers `referee` through `token` (no qualification); returns the referral id. */
async function register(t: { is(a: unknown, b: unknown, m?: string): void }, server: TestServer, token: string, referee: string): Promise<string> {
  return (await postRegistered(t, server, token, referee)).body.referral_id;
}

/** Registers `referee` through `token` and qualifies them, asserting the contract's answers (flags never change them). */
async function registerAndQualify(t: { is(a: unknown, b: unknown, m?: string): void }, server: TestServer, token: string, referee: string) {
  const { body: registered } = await postRegistered(t, server, token, referee);
  t.is(registered.ok, true);
  t.is(registered.state, "registered");
  const qual = await stack.postSigned(server, { event: "qualified", token, server_id: server.serverId, server_event_id: `q-${referee}` });
  t.is(qual.status, 200, qual.text);
  t.is(qual.text, JSON.stringify({ ...registered, state: "qualified" }));
  return registered.referral_id;
}

/** A farm: `n` clicks on `referrer`'s link from one IP, each registered as a new referee and qualified. */
async function seedFarm(t: { is(a: unknown, b: unknown, m?: string): void }, server: TestServer, referrer: string, ip: string, n: number): Promise<string[]> {
  const tokens: string[] = [];
  for (let i = 0; i < n; i++) tokens.push(await clickToken(server.serverId, referrer, ip));
  const ids: string[] = [];
  for (const [i, token] of tokens.entries()) ids.push(await registerAndQualify(t, server, token, `${referrer}-alt-${i}`));
  return ids;
}

async function leaderboard(serverId: string) {
  const { entries } = await rpc.referral.getLeaderboard({ serverId });
  return Object.fromEntries(entries.map((e) => [e.referrerIdentity, Number(e.credits)]));
}

/** An honest referral: a click from `clickIp` (its own address by default), a referee who voted (from elsewhere) before qualifying. */
async function honestReferral(t: { is(a: unknown, b: unknown, m?: string): void }, server: TestServer, referrer: string, referee: string, clickIp = freshIp()) {
  const token = await clickToken(server.serverId, referrer, clickIp);
  const id = await register(t, server, token, referee);
  const heart = await rpc.hearts.castHeart({
    serverId: server.serverId,
    username: referee,
    voterIdentity: `acct-${referee}`,
    ip: freshIp(),
    userAgent: BROWSER,
  });
  t.is(heart.counted, true);
  const qual = await stack.postSigned(server, { event: "qualified", token, server_id: server.serverId, server_event_id: `q-${referee}` });
  t.is(qual.status, 200, qual.text);
  return id;
}

test("a self-referral farm (one IP, twenty referees) is flagged and held off the leaderboard; approved it is counted, declined it is not; an honest referral counts throughout", async (t) => {
  const server = await createServer(ReviewMode.LOOSE);
  const farmIp = freshIp();
  const ids = await seedFarm(t, server, "farmer", farmIp, 20);
  const honestId = await honestReferral(t, server, "honest", "Friend");

  const flagged = await rpc.reviews.listReferrals({ serverId: server.serverId, flaggedOnly: true, pageSize: 100 });
  t.deepEqual(flagged.referrals.map((r) => r.id).sort(), [...ids].sort());
  for (const r of flagged.referrals) {
    t.is(r.review, ReviewState.HELD);
    t.is(r.state, ReferralState.QUALIFIED);
    t.false(r.counted);
    const codes = r.signals.map((s) => s.code);
    t.true(codes.includes("click_velocity") && codes.includes("no_activity"), codes.join(","));
    // From the fourth referee on the IP has fanned out, and the fourth flags the first three too (back-flagging).
    t.true(codes.includes("ip_fanout"), `${r.refereeIdentity}: ${codes.join(",")}`);
  }
  const honest = (await rpc.reviews.getReferralDetail({ referralId: honestId })).referral!;
  t.deepEqual(honest.signals, []);
  t.is(honest.review, ReviewState.NONE);
  t.true(honest.counted);
  t.deepEqual(await leaderboard(server.serverId), { honest: 1 });

  for (const referralId of ids) {
    const res = await rpc.reviews.reviewReferral({ referralId, action: ReviewAction.APPROVE });
    t.true(res.changed);
    t.is(res.referral?.review, ReviewState.APPROVED);
  }
  t.false((await rpc.reviews.reviewReferral({ referralId: ids[0]!, action: ReviewAction.APPROVE })).changed, "approving again changes nothing");
  t.deepEqual(await leaderboard(server.serverId), { farmer: 20, honest: 1 });

  t.true((await rpc.reviews.reviewReferral({ referralId: ids[0]!, action: ReviewAction.DECLINE })).changed);
  t.deepEqual(await leaderboard(server.serverId), { farmer: 19, honest: 1 });

  const detail = await rpc.reviews.getReferralDetail({ referralId: ids[0]! });
  t.deepEqual(
    detail.events.map((e) => [e.type, e.serverEventId, e.outcome]),
    [
      ["registered", "reg-farmer-alt-0", "advanced"],
      ["qualified", "q-farmer-alt-0", "advanced"],
    ],
  );
  t.is(detail.referral?.review, ReviewState.DECLINED);
  t.truthy(detail.referral?.reviewedAt);
});

test("strict mode declines flagged referrals automatically; the owner may still approve one", async (t) => {
  const server = await createServer(ReviewMode.STRICT);
  const ids = await seedFarm(t, server, "striker", freshIp(), 5);
  const { referrals } = await rpc.reviews.listReferrals({ serverId: server.serverId, review: ReviewState.DECLINED });
  t.deepEqual(referrals.map((r) => r.id).sort(), [...ids].sort());
  t.deepEqual(await leaderboard(server.serverId), {});
  await rpc.reviews.reviewReferral({ referralId: ids[0]!, action: ReviewAction.APPROVE });
  t.deepEqual(await leaderboard(server.serverId), { striker: 1 });
});

test("a server that has not opted in keeps the contract's counting: nothing is flagged or held", async (t) => {
  const server = await createServer(null);
  t.is((await rpc.reviews.getReferralReviewMode({ serverId: server.serverId })).mode, ReviewMode.OFF);
  await seedFarm(t, server, "unwatched", freshIp(), 5);
  const { referrals } = await rpc.reviews.listReferrals({ serverId: server.serverId });
  t.is(referrals.length, 5);
  for (const r of referrals) {
    t.deepEqual(r.signals, []);
    t.is(r.review, ReviewState.NONE);
  }
  t.deepEqual(await leaderboard(server.serverId), { unwatched: 5 });
});

test("self-referral: the referee is the referrer (any case), or the link was opened from the referrer's own voting address", async (t) => {
  const server = await createServer(ReviewMode.LOOSE);
  const home = freshIp();
  await rpc.hearts.castHeart({ serverId: server.serverId, username: "Alex", voterIdentity: "alex", ip: home, userAgent: BROWSER });
  const same = await stack.postSigned(server, {
    event: "registered",
    token: await clickToken(server.serverId, "alex", freshIp()),
    server_id: server.serverId,
    referee_identity: "ALEX",
    server_event_id: "reg-self",
  });
  const sameId = (JSON.parse(same.text) as { referral_id: string }).referral_id;
  // The referee's hearts are the referrer's own (same name), so their address is the referrer's too.
  t.deepEqual(
    (await rpc.reviews.getReferralDetail({ referralId: sameId })).referral?.signals.map((s) => s.code),
    ["self_referral", "self_referral_ip"],
  );
  const fromHome = await stack.postSigned(server, {
    event: "registered",
    token: await clickToken(server.serverId, "alex", home),
    server_id: server.serverId,
    referee_identity: "sock-puppet",
    server_event_id: "reg-puppet",
  });
  const homeReferral = (await rpc.reviews.getReferralDetail({ referralId: (JSON.parse(fromHome.text) as { referral_id: string }).referral_id })).referral!;
  t.deepEqual(
    homeReferral.signals.map((s) => s.code),
    ["self_referral_ip"],
  );
  t.is(homeReferral.review, ReviewState.HELD);
});

test("the referral list filters by state, review and referrer and pages without repeats; exports are CSV and JSON of the same rows", async (t) => {
  const server = await createServer(ReviewMode.LOOSE);
  const farm = await seedFarm(t, server, "exporter", freshIp(), 5);
  const honestId = await honestReferral(t, server, "kind", "Pal");
  const registeredOnly = await stack.postSigned(server, {
    event: "registered",
    token: await clickToken(server.serverId, "kind", freshIp()),
    server_id: server.serverId,
    referee_identity: "Newbie",
    server_event_id: "reg-newbie",
  });
  t.is(registeredOnly.status, 200);

  const seen: string[] = [];
  let pageToken = "";
  do {
    const page = await rpc.reviews.listReferrals({ serverId: server.serverId, pageSize: 2, pageToken });
    seen.push(...page.referrals.map((r) => r.id));
    pageToken = page.nextPageToken;
  } while (pageToken !== "");
  t.is(seen.length, 7);
  t.is(new Set(seen).size, 7);
  t.is((await rpc.reviews.listReferrals({ serverId: server.serverId, referrerIdentity: "kind" })).referrals.length, 2);
  t.is((await rpc.reviews.listReferrals({ serverId: server.serverId, state: ReferralState.REGISTERED })).referrals.length, 1);
  t.is((await rpc.reviews.listReferrals({ serverId: server.serverId, review: ReviewState.NONE })).referrals.length, 2);
  t.is((await rpc.reviews.listReferrals({ serverId: server.serverId, review: ReviewState.HELD, referrerIdentity: "exporter" })).referrals.length, 5);

  const json = await rpc.reviews.exportReferrals({ serverId: server.serverId, referrerIdentity: "exporter", format: ExportFormat.JSON });
  t.is(json.contentType, "application/json");
  t.is(json.rows, 5);
  t.false(json.truncated);
  const rows = JSON.parse(json.body) as Array<Record<string, unknown>>;
  t.deepEqual(rows.map((r) => r.id).sort(), [...farm].sort());
  const fifth = rows.find((r) => r.referee_identity === "exporter-alt-4")!;
  t.like(fifth, { id: farm[4], referrer_identity: "exporter", state: "qualified", review: "held", counted: false, signals: ["ip_fanout", "no_activity"] });
  // The count stops one past the limit (bounded work): five referees read as four, which is past three.
  t.deepEqual(fifth.signal_details, { ip_fanout: { referees: 4, max: 3, windowMinutes: 1440 }, no_activity: { hearts: 0, min: 1 } });

  const csv = await rpc.reviews.exportReferrals({ serverId: server.serverId, format: ExportFormat.CSV });
  t.is(csv.contentType, "text/csv; charset=utf-8");
  const lines = csv.body.trimEnd().split("\r\n");
  t.is(lines[0], "id,referrer_identity,referee_identity,state,registered_at,qualified_at,reversed_at,review,reviewed_at,counted,signals,signal_details");
  t.is(lines.length, 8);
  const honestLine = lines.find((l) => l.startsWith(honestId)) ?? "";
  t.regex(honestLine, /^[0-9a-f-]{36},kind,Pal,qualified,[^,]+,[^,]+,,none,,true,,\{\}$/);
  const farmLine = lines.find((l) => l.startsWith(farm[4]!)) ?? "";
  t.regex(
    farmLine,
    /,exporter,exporter-alt-4,qualified,[^,]+,[^,]+,,held,,false,ip_fanout no_activity,"\{""ip_fanout"":\{""max"":3,""referees"":4,""windowMinutes"":1440\},""no_activity"":\{""min"":1,""hearts"":0\}\}"$/,
  );
});

test("`/r/` past the per-IP limit -> 429 with Retry-After; other addresses and the signed ingest are not affected", async (t) => {
  const server = await createServer(null);
  const ip = freshIp();
  for (let i = 0; i < CLICKS_PER_IP; i++) t.is((await link(server.serverId, "busy", ip)).status, 200);
  const limited = await link(server.serverId, "busy", ip);
  t.is(limited.status, 429);
  t.is(await limited.text(), JSON.stringify({ error: TOO_MANY_CLICKS_TEXT }));
  const retryAfter = Number(limited.headers.get("retry-after"));
  t.true(retryAfter >= 1 && retryAfter <= 60, String(retryAfter));
  t.is((await link(server.serverId, "busy", freshIp())).status, 200);
  const token = await stack.click(server.serverId, "busy");
  const posted = await stack.postSigned(
    server,
    { event: "registered", token, server_id: server.serverId, referee_identity: "after-limit", server_event_id: "reg-after-limit" },
    { headers: { "x-forwarded-for": ip } },
  );
  t.is(posted.status, 200, posted.text);
});

test("review RPCs: a token without the scope is refused; reviewing an unflagged referral or with no action is refused", async (t) => {
  const server = await createServer(ReviewMode.LOOSE);
  const honestId = await honestReferral(t, server, "plain", "Buddy");
  const ingestOnly = (await rpc.access.createServiceToken({ name: `ingest-only-${Date.now()}`, scopes: ["ingest", "read"] })).token;
  const reviews = createClient(ReferralReviewService, createServiceTransport(stack.serviceUrl, ingestOnly));
  const denied = await t.throwsAsync(reviews.reviewReferral({ referralId: honestId, action: ReviewAction.APPROVE }));
  t.is(ConnectError.from(denied).code, Code.PermissionDenied);
  const deniedMode = await t.throwsAsync(reviews.setReferralReviewMode({ serverId: server.serverId, mode: ReviewMode.STRICT }));
  t.is(ConnectError.from(deniedMode).code, Code.PermissionDenied);
  const anonymous = createClient(ReferralReviewService, createServiceTransport(stack.serviceUrl, "rst_not-a-token"));
  t.is(ConnectError.from(await t.throwsAsync(anonymous.listReferrals({ serverId: server.serverId }))).code, Code.Unauthenticated);

  const notFlagged = ConnectError.from(await t.throwsAsync(rpc.reviews.reviewReferral({ referralId: honestId, action: ReviewAction.APPROVE })));
  t.is(notFlagged.code, Code.FailedPrecondition);
  t.is(notFlagged.rawMessage, "referral is not flagged for review");
  const noAction = ConnectError.from(await t.throwsAsync(rpc.reviews.reviewReferral({ referralId: honestId })));
  t.is(noAction.code, Code.InvalidArgument);
  t.is(noAction.rawMessage, "action must be approve or decline");
});

test("concurrent reviews of one held referral: each answer is consistent, exactly the last write stands, and the leaderboard agrees with it", async (t) => {
  const server = await createServer(ReviewMode.LOOSE);
  const [referralId] = await seedFarm(t, server, "racer", freshIp(), 1);
  const actions = Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? ReviewAction.APPROVE : ReviewAction.DECLINE));
  const answers = await Promise.all(actions.map((action) => rpc.reviews.reviewReferral({ referralId: referralId!, action })));
  answers.forEach((answer, i) => t.is(answer.referral?.review, actions[i] === ReviewAction.APPROVE ? ReviewState.APPROVED : ReviewState.DECLINED));
  t.true(answers.some((a) => a.changed));
  const final = (await rpc.reviews.getReferralDetail({ referralId: referralId! })).referral!;
  t.true(final.review === ReviewState.APPROVED || final.review === ReviewState.DECLINED);
  t.deepEqual(await leaderboard(server.serverId), final.review === ReviewState.APPROVED ? { racer: 1 } : {});
});

test("fan-out back-flagging: the referee that passes an address's limit flags the earlier referees from it too (at most the limit's number), a qualified and counted one included; another address's referee is untouched", async (t) => {
  const server = await createServer(ReviewMode.LOOSE);
  const farmIp = freshIp();
  // The first referee qualifies with a vote of their own (no signal): counted on the leaderboard.
  const first = await honestReferral(t, server, "spreader", "spread-0", farmIp);
  const ids = [first];
  for (let i = 1; i < 3; i++) {
    const token = await clickToken(server.serverId, "spreader", farmIp);
    ids.push(await register(t, server, token, `spread-${i}`));
  }
  const elsewhere = await register(t, server, await clickToken(server.serverId, "spreader", freshIp()), "spread-elsewhere");
  const before = await Promise.all(ids.map(async (id) => (await rpc.reviews.getReferralDetail({ referralId: id })).referral!));
  t.deepEqual(
    before.map((r) => [r.review, r.signals.length]),
    [
      [ReviewState.NONE, 0],
      [ReviewState.NONE, 0],
      [ReviewState.NONE, 0],
    ],
    "three referees from one address: at the limit (3), nothing flagged",
  );
  t.deepEqual(await leaderboard(server.serverId), { spreader: 1 });

  const fourth = await register(t, server, await clickToken(server.serverId, "spreader", farmIp), "spread-3");
  for (const id of [...ids, fourth]) {
    const r = (await rpc.reviews.getReferralDetail({ referralId: id })).referral!;
    t.is(r.review, ReviewState.HELD, r.refereeIdentity);
    t.deepEqual(
      r.signals.map((s) => s.code),
      ["ip_fanout"],
      r.refereeIdentity,
    );
    t.like(JSON.parse(r.signals[0]!.detailsJson), { referees: 4, max: 3 });
  }
  t.false((await rpc.reviews.getReferralDetail({ referralId: first })).referral!.counted, "the qualified one is held: off the leaderboard until approved");
  t.deepEqual(await leaderboard(server.serverId), {});
  const other = (await rpc.reviews.getReferralDetail({ referralId: elsewhere })).referral!;
  t.deepEqual([other.review, other.signals], [ReviewState.NONE, []], "another address's referee is not flagged");

  // An owner's decision stands: an approved referral is not held again by a later referee from the address (the fifth
  // referee's walk finds the newest three before it, the approved fourth among them).
  t.true((await rpc.reviews.reviewReferral({ referralId: fourth, action: ReviewAction.APPROVE })).changed);
  await register(t, server, await clickToken(server.serverId, "spreader", farmIp), "spread-4");
  t.is((await rpc.reviews.getReferralDetail({ referralId: fourth })).referral!.review, ReviewState.APPROVED);
});
