/**
 * Receipts the voter can see, on the real stack (PostgreSQL, Kafka, relay, delivery worker, a real HTTP receiver):
 * every CastHeart answer carries a receipt URL on the public gateway; the receipt (page and JSON) says counted and
 * when the callback reached the server, or not counted and when to vote again, or "waiting" while a receiver fails,
 * or "not delivered"; a wrong, tampered or truncated token is the same 404; a receipt never carries another
 * player's data, the voter's identity or IP, fraud scoring, or the server's internals (asserted on the raw bytes);
 * the JSON validates against the OpenAPI document; GetReceipt needs the `receipts` scope, which the gateway's
 * default scopes hold.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { HeartService, ReceiptOutcome } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { ClaimService, ClaimStatus, PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { DEFAULT_GATEWAY_SCOPES } from "../../services/access/bootstrap.js";
import { createReferralServiceClients } from "../../gateway/clients.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { HEART_COOLDOWN_MS } from "../../services/hearts/domain/streak.js";
import { eventually } from "../helpers/eventually.js";
import { startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { validateAgainstOpenApi } from "./openapi-validate.js";

interface Context {
  stack: TestStack;
  ok: Receiver;
  failing: Receiver;
}
const test = anyTest as TestFn<Context>;
const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";
const RECEIVER_ERROR = "reward-db-7f3a is down: connection refused to 10.9.8.7:5432";
let ipSeq = 0;

test.before(async (t) => {
  const stack = await startStack({
    allowInsecureCallbacks: true,
    // One quick retry, then an hour: a failing receiver's delivery stays pending ("waiting") for the whole test.
    pipeline: {
      name: "receipts",
      delivery: { schedule: parseRetrySchedule("200ms,1h", { jitterRatio: 0 }), pollIntervalMs: 100, allowInsecureCallbacks: true },
    },
  });
  const ok = await startReceiver();
  const failing = await startReceiver();
  failing.setFallback({ status: 500, body: RECEIVER_ERROR });
  t.context = { stack, ok, failing };
});

test.after.always(async (t) => {
  await t.context.stack?.close();
  await t.context.ok?.close();
  await t.context.failing?.close();
});

async function callbackServer(c: Context, name: string, receiver: Receiver): Promise<string> {
  const { server } = await c.stack.clients.admin.createServer({ name });
  await c.stack.clients.admin.setCallbackSettings({ serverId: server!.id, callbackUrl: receiver.url, standardWebhooks: false });
  return server!.id;
}

async function cast(c: Context, serverId: string, username: string, voterIdentity = `voter-${randomBytes(4).toString("hex")}`) {
  ipSeq += 1;
  const ip = `198.51.${100 + Math.floor(ipSeq / 250)}.${ipSeq % 250}`;
  const answer = await c.stack.clients.hearts.castHeart({ serverId, username, voterIdentity, ip, userAgent: UA });
  return { answer, voterIdentity, ip };
}

interface Fetched {
  status: number;
  text: string;
  headers: Headers;
}

async function get(url: string): Promise<Fetched> {
  const res = await fetch(url);
  return { status: res.status, text: await res.text(), headers: res.headers };
}

interface ReceiptBody {
  server_name: string;
  username: string;
  cast_at: string;
  counted: boolean;
  outcome: string;
  next_vote_at: string | null;
  period: string;
  deliveries: Array<{ transport: string; status: string; delivered_at: string | null }>;
  claim: { state: string; held_until: string | null; claimed_at: string | null; expired_at: string | null } | null;
}

async function receiptJson(t: { deepEqual(a: unknown, b: unknown, m?: string): void }, url: string): Promise<{ body: ReceiptBody; raw: Fetched }> {
  const raw = await get(`${url}.json`);
  const body = JSON.parse(raw.text) as ReceiptBody;
  t.deepEqual(validateAgainstOpenApi("/receipts/{token}.json", "get", raw.status, body).errors, [], raw.text);
  return { body, raw };
}

test("every heart's CastHeart answer carries a receipt URL on the public gateway; counted -> the receipt says counted and when the callback reached the server", async (t) => {
  const c = t.context;
  const serverId = await callbackServer(c, "Emerald Isle Survival", c.ok);
  const { answer } = await cast(c, serverId, "Herobrine");
  t.true(answer.counted);
  t.regex(answer.receiptUrl, new RegExp(`^${c.stack.gatewayUrl}/receipts/[A-Za-z0-9_-]{44}$`));

  const delivery = await eventually(
    () => c.stack.prisma.delivery.findFirst({ where: { heartId: answer.heartId, status: "delivered" } }).then((d) => d ?? undefined),
    {
      timeoutMs: 30_000,
      message: "callback delivered",
    },
  );
  const { body, raw } = await receiptJson(t, answer.receiptUrl);
  t.is(raw.status, 200);
  t.is(raw.headers.get("cache-control"), "no-store");
  t.is(raw.headers.get("content-type"), "application/json");
  const heart = await c.stack.prisma.heart.findUniqueOrThrow({ where: { id: answer.heartId } });
  t.deepEqual(body, {
    server_name: "Emerald Isle Survival",
    username: "Herobrine",
    cast_at: heart.createdAt.toISOString(),
    counted: true,
    outcome: "counted",
    next_vote_at: new Date(heart.createdAt.getTime() + HEART_COOLDOWN_MS).toISOString(),
    period: heart.period,
    deliveries: [{ transport: "callback", status: "delivered", delivered_at: delivery.deliveredAt!.toISOString() }],
    claim: null,
  });

  const page = await get(answer.receiptUrl);
  t.is(page.status, 200);
  t.is(page.headers.get("content-type"), "text/html; charset=utf-8");
  t.is(page.headers.get("cache-control"), "no-store");
  t.regex(page.headers.get("content-security-policy") ?? "", /^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*';/);
  t.is(page.headers.get("referrer-policy"), "no-referrer");
  t.false(/<script|src=|https?:\/\//.test(page.text), "no script and no external asset");
  t.regex(page.text, /Your vote counted/);
  t.regex(page.text, /Delivered<\/span> <span>Received by the server at <time datetime="[^"]+">/);
  t.true(page.text.includes(`<time datetime="${delivery.deliveredAt!.toISOString()}">`));
  t.deepEqual(validateAgainstOpenApi("/receipts/{token}", "get", page.status, undefined).errors, []);
});

test("a cooldown heart's receipt says not counted and when to vote again; a fraud-blocked one says only 'not counted'", async (t) => {
  const c = t.context;
  const serverId = await callbackServer(c, "Cooldown Castle", c.ok);
  const first = await cast(c, serverId, "Alex");
  const again = await cast(c, serverId, "Alex", first.voterIdentity);
  t.false(again.answer.counted);
  t.regex(again.answer.receiptUrl, /\/receipts\/[A-Za-z0-9_-]{44}$/, "a receipt for a heart that did not count too");
  t.not(again.answer.receiptUrl, first.answer.receiptUrl);
  const firstHeart = await c.stack.prisma.heart.findUniqueOrThrow({ where: { id: first.answer.heartId } });
  const { body } = await receiptJson(t, again.answer.receiptUrl);
  t.is(body.outcome, "cooldown");
  t.false(body.counted);
  t.is(body.next_vote_at, new Date(firstHeart.createdAt.getTime() + HEART_COOLDOWN_MS).toISOString());
  t.is(BigInt(Math.floor(Date.parse(body.next_vote_at!) / 1000)), again.answer.nextEligibleAt, "the time CastHeart gave the list");
  t.deepEqual(body.deliveries, []);
  const page = await get(again.answer.receiptUrl);
  t.regex(page.text, /Not counted: you already voted for this server in the last 24 hours\./);
  t.true(page.text.includes(`You can vote again from <time datetime="${body.next_vote_at}">`));

  // A name the fraud rules block (it does not match the username pattern): the receipt gives no reason and no score.
  const fraud = await cast(c, serverId, "Griefer<script>alert(1)</script>");
  t.false(fraud.answer.counted);
  t.true(fraud.answer.fraudScore > 0);
  const blocked = await receiptJson(t, fraud.answer.receiptUrl);
  t.is(blocked.body.outcome, "not_counted");
  t.is(blocked.body.next_vote_at, null);
  const blockedPage = await get(fraud.answer.receiptUrl);
  t.regex(blockedPage.text, /This vote was not counted\./);
  t.true(blockedPage.text.includes("Griefer&lt;script&gt;alert(1)&lt;/script&gt;"), "the typed name is escaped");
  t.false(blockedPage.text.includes("<script>"), "the page never holds the typed markup as markup");
  t.is(blocked.raw.headers.get("x-content-type-options"), "nosniff", "the JSON, holding the name as typed, is never sniffed as HTML");
  for (const raw of [blocked.raw.text, blockedPage.text]) {
    t.false(/fraud|score|pattern/i.test(raw), raw);
    for (const reason of fraud.answer.fraudReasons) t.false(raw.includes(reason));
  }
});

test("a failing receiver: the receipt says waiting (retried automatically) and shows none of the receiver's answer", async (t) => {
  const c = t.context;
  const serverId = await callbackServer(c, "Flaky Fields", c.failing);
  const { answer } = await cast(c, serverId, "Steve");
  await eventually(
    () => c.stack.prisma.delivery.findFirst({ where: { heartId: answer.heartId, status: "pending", attempts: { gte: 2 } } }).then((d) => d ?? undefined),
    { timeoutMs: 30_000, message: "two failed attempts, still pending" },
  );
  const { body, raw } = await receiptJson(t, answer.receiptUrl);
  t.deepEqual(body.deliveries, [{ transport: "callback", status: "waiting", delivered_at: null }]);
  const page = await get(answer.receiptUrl);
  t.regex(page.text, /Waiting<\/span> <span>Not delivered yet; it is retried automatically\./);
  for (const text of [raw.text, page.text]) {
    t.false(text.includes("reward-db-7f3a"), "the receiver's body");
    t.false(text.includes("500"), "the receiver's status code");
    t.false(text.includes(c.failing.url) && text.includes(String(c.failing.port)), "the callback URL");
  }
});

test("a transport that can never carry the heart: the receipt says not delivered, without the reason", async (t) => {
  const c = t.context;
  const serverId = await callbackServer(c, "Votifier Vale", c.ok);
  await c.stack.clients.admin.setVotifierSettings({ serverId, host: "127.0.0.1", port: 1, token: "nvtoken-receipts-9x2k", serviceName: "HeartsList" });
  const { answer } = await cast(c, serverId, "Twenty_characters_xx");
  t.true(answer.counted);
  t.is(answer.undeliverable.length, 1);
  await eventually(
    () => c.stack.prisma.delivery.count({ where: { heartId: answer.heartId, status: { in: ["delivered", "failed"] } } }).then((n) => n === 2 || undefined),
    { timeoutMs: 30_000, message: "callback delivered and Votifier failed" },
  );
  const { body, raw } = await receiptJson(t, answer.receiptUrl);
  t.deepEqual(
    body.deliveries.map((d) => [d.transport, d.status]),
    [
      ["callback", "delivered"],
      ["votifier", "failed"],
    ],
  );
  const page = await get(answer.receiptUrl);
  t.regex(page.text, /Not delivered<\/span> <span>It could not be delivered to the server\. Show this receipt to the server's staff\./);
  for (const text of [raw.text, page.text]) {
    t.false(/16 characters|NuVotifier|127\.0\.0\.1|nvtoken/i.test(text), text);
  }
});

test("player A's receipt never holds player B's name, A's or B's identity or IP, nor the server's internals (raw bytes)", async (t) => {
  const c = t.context;
  const serverId = await callbackServer(c, "Shared Server", c.ok);
  const a = await cast(c, serverId, "PlayerAlpha");
  const b = await cast(c, serverId, "PlayerBravo");
  await eventually(() => c.stack.prisma.delivery.count({ where: { serverId, status: "delivered" } }).then((n) => n === 2 || undefined), {
    timeoutMs: 30_000,
    message: "both delivered",
  });
  const secret = (await c.stack.clients.admin.revealCallbackSecret({ serverId })).secret;
  const delivery = await c.stack.prisma.delivery.findFirstOrThrow({ where: { heartId: a.answer.heartId } });
  const forbidden = [
    "PlayerBravo",
    b.voterIdentity,
    b.ip,
    b.answer.heartId,
    a.voterIdentity,
    a.ip,
    a.answer.heartId,
    serverId,
    delivery.id,
    c.ok.url,
    `:${c.ok.port}`,
    secret,
    UA,
    "whsec_",
    "fraud",
    "score",
    "attempt",
    "voter_identity",
    "ip",
  ].filter((s) => s !== "");
  const json = await get(`${a.answer.receiptUrl}.json`);
  const page = await get(a.answer.receiptUrl);
  t.true(json.text.includes("PlayerAlpha") && page.text.includes("PlayerAlpha"));
  for (const [what, text] of [
    ["json", json.text],
    ["page", page.text],
  ] as const) {
    for (const s of forbidden) {
      const found = s === "ip" ? /"ip"|\bip\b/i.test(text) : text.toLowerCase().includes(s.toLowerCase());
      t.false(found, `${what} holds ${s}`);
    }
  }
  t.deepEqual(Object.keys(JSON.parse(json.text)).sort(), [
    "cast_at",
    "claim",
    "counted",
    "deliveries",
    "next_vote_at",
    "outcome",
    "period",
    "server_name",
    "username",
  ]);
});

test("a wrong, tampered, truncated or foreign token is the same 404, as a page and as JSON, and never cached", async (t) => {
  const c = t.context;
  const serverId = await callbackServer(c, "Lost and Found", c.ok);
  const { answer } = await cast(c, serverId, "Finder");
  const token = answer.receiptUrl.slice(answer.receiptUrl.lastIndexOf("/") + 1);
  const base = `${c.stack.gatewayUrl}/receipts/`;
  const flip = (s: string, i: number) => `${s.slice(0, i)}${s[i] === "A" ? "B" : "A"}${s.slice(i + 1)}`;
  const wrong = [
    flip(token, 0),
    flip(token, 10),
    flip(token, 43),
    token.slice(0, 43),
    `${token}A`,
    "x",
    randomBytes(33).toString("base64url"),
    "a".repeat(500),
  ];
  const pages = new Set<string>();
  const bodies = new Set<string>();
  for (const bad of wrong) {
    const page = await get(`${base}${bad}`);
    t.is(page.status, 404, bad);
    t.is(page.headers.get("cache-control"), "no-store");
    t.is(page.headers.get("content-type"), "text/html; charset=utf-8");
    pages.add(page.text);
    const json = await get(`${base}${bad}.json`);
    t.is(json.status, 404, bad);
    t.is(json.headers.get("cache-control"), "no-store");
    t.deepEqual(validateAgainstOpenApi("/receipts/{token}.json", "get", json.status, JSON.parse(json.text)).errors, []);
    bodies.add(json.text);
  }
  t.deepEqual([...pages].length, 1, "one page for every wrong token");
  t.deepEqual([...bodies], ['{"error":"not found"}']);
  t.regex([...pages][0]!, /Receipt not found/);
  t.is((await get(answer.receiptUrl)).status, 200, "the real token still works");
  t.is((await fetch(answer.receiptUrl, { method: "POST" })).status, 405);
});

test("every answer on a receipt URL says Referrer-Policy: no-referrer and is never cached: page and JSON, found or 404, and the 405 to any other method", async (t) => {
  const c = t.context;
  const serverId = await callbackServer(c, "No Referrer", c.ok);
  const { answer } = await cast(c, serverId, "Quiet");
  const wrong = `${c.stack.gatewayUrl}/receipts/${"A".repeat(44)}`;
  const answers: Array<[string, Response]> = [];
  const urls = { page: answer.receiptUrl, json: `${answer.receiptUrl}.json`, "wrong page": wrong, "wrong json": `${wrong}.json` };
  for (const [name, url] of Object.entries(urls)) {
    for (const method of ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]) {
      const res = await fetch(url, { method });
      await res.arrayBuffer();
      answers.push([`${method} ${name} -> ${res.status}`, res]);
    }
  }
  t.deepEqual([...new Set(answers.map(([, res]) => res.status))].sort(), [200, 404, 405]);
  for (const [label, res] of answers) {
    t.is(res.headers.get("referrer-policy"), "no-referrer", label);
    t.is(res.headers.get("cache-control"), "no-store", label);
  }
});

test("GetReceipt needs the receipts scope: the gateway's default scopes hold it; a token without it is refused (the gateway answers 503), no token is unauthenticated", async (t) => {
  const c = t.context;
  const serverId = await callbackServer(c, "Scoped Server", c.ok);
  const { answer } = await cast(c, serverId, "Scoper");
  const token = answer.receiptUrl.slice(answer.receiptUrl.lastIndexOf("/") + 1);
  const { token: gatewayToken } = await c.stack.clients.access.createServiceToken({ name: "gateway-defaults", scopes: [...DEFAULT_GATEWAY_SCOPES] });
  const withDefaults = createClient(HeartService, createServiceTransport(c.stack.rpcUrl, gatewayToken));
  t.is((await withDefaults.getReceipt({ token })).receipt?.outcome, ReceiptOutcome.COUNTED);

  const { token: narrow } = await c.stack.clients.access.createServiceToken({
    name: "no-receipts",
    scopes: ["ingest", "pull", "clicks:record", "dashboard", "read", "hearts:cast"],
  });
  const refused = await createClient(HeartService, createServiceTransport(c.stack.rpcUrl, narrow))
    .getReceipt({ token })
    .catch((e: unknown) => ConnectError.from(e));
  t.is((refused as ConnectError).code, Code.PermissionDenied);
  t.regex((refused as ConnectError).rawMessage, /receipts/);
  const anonymous = await createClient(HeartService, createServiceTransport(c.stack.rpcUrl, ""))
    .getReceipt({ token })
    .catch((e: unknown) => ConnectError.from(e));
  t.is((anonymous as ConnectError).code, Code.Unauthenticated);

  // A gateway whose token lacks the scope (lost after its start) is misconfigured: 503 with Retry-After, never the receipt, never 500.
  const misconfigured = await c.stack.startGateway({ overrides: () => createReferralServiceClients(c.stack.rpcUrl, narrow) });
  t.is((await get(`${misconfigured.url}/receipts/${token}.json`)).status, 503);
  // A gateway with the default scopes serves it.
  const least = await c.stack.startGateway({ overrides: () => createReferralServiceClients(c.stack.rpcUrl, gatewayToken) });
  const served = await get(`${least.url}/receipts/${token}.json`);
  t.is(served.status, 200);
  t.is((JSON.parse(served.text) as ReceiptBody).username, "Scoper");
});

test("a server with a claim ledger: the receipt says held until the window ends, then claimed in game at; a heart beyond the per-player cap says expired", async (t) => {
  const c = t.context;
  const admin = c.stack.clients.admin;
  const { server } = await admin.createServer({ name: "Rusty Claims" });
  const serverId = server!.id;
  const { claimKey } = await admin.rotateClaimKey({ serverId });
  await admin.setClaimSettings({ serverId, holdDays: 7, maxHeldPerPlayer: 1 });
  const claims = createClient(ClaimService, createServiceTransport(c.stack.rpcUrl, TEST_SERVICE_TOKEN));

  const held = await cast(c, serverId, "Garry");
  t.true(held.answer.counted);
  const row = await c.stack.prisma.voteClaim.findUniqueOrThrow({ where: { heartId: held.answer.heartId } });
  const before = await receiptJson(t, held.answer.receiptUrl);
  t.deepEqual(before.body.claim, { state: "held", held_until: row.expiresAt.toISOString(), claimed_at: null, expired_at: null });
  t.is(row.expiresAt.getTime() - row.countedAt.getTime(), 7 * 24 * 60 * 60 * 1000);
  t.deepEqual(before.body.deliveries, [], "no callback URL: its held callback row is no delivery the voter waits for");
  const heldPage = await get(held.answer.receiptUrl);
  t.true(heldPage.text.includes(`Ready to claim</span> <span>Claim it in game before <time datetime="${row.expiresAt.toISOString()}">`), heldPage.text);

  const claimed = await claims.claimVote({ claimKey, player: { kind: PlayerIdKind.USERNAME, value: "garry" } });
  t.is(claimed.status, ClaimStatus.CLAIMED_NOW);
  const claimedAt = (await c.stack.prisma.voteClaim.findUniqueOrThrow({ where: { heartId: held.answer.heartId } })).claimedAt!;
  const after = await receiptJson(t, held.answer.receiptUrl);
  t.deepEqual(after.body.claim, { state: "claimed", held_until: row.expiresAt.toISOString(), claimed_at: claimedAt.toISOString(), expired_at: null });
  t.true((await get(held.answer.receiptUrl)).text.includes(`Claimed</span> <span>Claimed in game at <time datetime="${claimedAt.toISOString()}">`));

  // The cap is 1: a second held heart of the same player expires the first (reason cap, which the receipt does not name).
  const first = await cast(c, serverId, "Capped");
  const second = await cast(c, serverId, "Capped");
  t.true(first.answer.counted && second.answer.counted);
  const expiredRow = await c.stack.prisma.voteClaim.findUniqueOrThrow({ where: { heartId: first.answer.heartId } });
  t.is(expiredRow.state, "expired");
  const expired = await receiptJson(t, first.answer.receiptUrl);
  t.deepEqual(expired.body.claim, {
    state: "expired",
    held_until: expiredRow.expiresAt.toISOString(),
    claimed_at: null,
    expired_at: expiredRow.expiredAt!.toISOString(),
  });
  const expiredPage = await get(first.answer.receiptUrl);
  t.regex(expiredPage.text, /Expired<\/span> <span>It was not claimed in game and expired at <time/);
  t.is((await receiptJson(t, second.answer.receiptUrl)).body.claim?.state, "held");
  for (const text of [expired.raw.text, expiredPage.text]) t.false(/\bcap\b|vck_|capped/.test(text.replaceAll("Capped", "")), text);
});

test("a server with no way to receive rewards yet (no callback URL): the counted heart's receipt shows no phantom delivery, only 'not handed to the server yet'", async (t) => {
  const c = t.context;
  const { server } = await c.stack.clients.admin.createServer({ name: "Unwired Isle" });
  const { answer } = await cast(c, server!.id, "Notch");
  t.true(answer.counted);
  // The consumer stores the callback row and holds it until a URL is set; the receipt leaves it out.
  await eventually(() => c.stack.prisma.delivery.findFirst({ where: { heartId: answer.heartId, transport: "callback" } }).then((d) => d ?? undefined), {
    timeoutMs: 30_000,
    message: "held callback row stored",
  });
  const { body } = await receiptJson(t, answer.receiptUrl);
  t.deepEqual(body.deliveries, []);
  t.is(body.claim, null);
  t.regex((await get(answer.receiptUrl)).text, /Not handed to the server yet\. Reload this page later to see when it is\./);
});
