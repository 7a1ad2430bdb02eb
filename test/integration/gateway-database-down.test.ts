/**
 * While the database is down (PostgreSQL stopped: connection refused) or restarting (open connections cut
 * with SQLSTATE 57P01), the public gateway answers a retryable 503 with Retry-After, never a 500: on
 * ingest (the contract's 503 text, docs/contract.md), on the plugins' check and claim (their own body
 * format: the digit `0`, or the JSON family's body) and on the pull API ("temporarily unavailable", not
 * "overloaded"). The cause is logged. The database is a PostgreSQL server of this file's own
 * (createPrivateDatabase), so stopping it disturbs no other test file.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { CONTRACT_ERRORS, ERROR_TEXT } from "../../services/shared/values/contract.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { createPrivateDatabase, type PrivateDatabase } from "../../scripts/harness/db.js";
import { eventually } from "../helpers/eventually.js";
import { startStack, type TestGateway, type TestStack } from "../../scripts/harness/stack.js";
import { captureLog, nowSeconds, type CapturedLog, type RawResponse } from "./gateway-stack.js";
import { validateAgainstOpenApi, validateTextAgainstOpenApi } from "./openapi-validate.js";

interface Fixture {
  serverId: string;
  referralSecret: string;
  clickToken: string;
  claimKey: string;
  pullSecret: string;
  steamId: string;
}

interface Context {
  db: PrivateDatabase;
  stack: TestStack;
  gateway: TestGateway;
  gatewayLog: CapturedLog;
  serviceLog: CapturedLog;
  fixture: Fixture;
}

const test = anyTest.serial as TestFn<Context>;

test.before(async (t) => {
  const db = await createPrivateDatabase();
  const serviceLog = captureLog("debug");
  const stack = await startStack({ gateway: false, database: db, log: serviceLog.log });
  const gatewayLog = captureLog("debug");
  // The key cache off: every signed request asks the service for its keys, as a cold cache does.
  const gateway = await stack.startGateway({ log: gatewayLog.log, overrides: () => ({ signingKeyCacheMs: 0 }) });
  const { clients } = stack;
  const { server } = await clients.admin.createServer({ name: "Database down", registrationUrl: "" });
  const serverId = server!.id;
  await clients.admin.setReferralsEnabled({ serverId, enabled: true });
  const referralSecret = (await clients.admin.createReferralSecret({ serverId })).secret;
  const clickToken = (await clients.referral.recordClick({ serverId, referrerIdentity: "referrer-1" })).token;
  const { claimKey } = await clients.admin.rotateClaimKey({ serverId });
  await clients.admin.setPullEnabled({ serverId, enabled: true });
  const pullSecret = (await clients.admin.revealPullSecret({ serverId })).secret;
  const steamId = "76561198000000042";
  const cast = await clients.hearts.castHeart({
    serverId,
    username: "Player42",
    voterIdentity: `voter-${randomBytes(4).toString("hex")}`,
    ip: "198.51.100.42",
    userAgent: "Mozilla/5.0 database-down test",
    steamId,
  });
  if (!cast.counted) throw new Error(`the heart did not count: ${cast.reason}`);
  t.context = { db, stack, gateway, gatewayLog, serviceLog, fixture: { serverId, referralSecret, clickToken, claimKey, pullSecret, steamId } };
});

test.after.always(async (t) => {
  await t.context.stack?.close();
});

type Answer = RawResponse;

async function answerOf(res: Response): Promise<Answer> {
  return { status: res.status, text: await res.text(), headers: res.headers };
}

function signedPost(base: string, path: string, secret: string, body: unknown): Promise<Answer> {
  const raw = JSON.stringify(body);
  return fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-signature": formatIngestSignature(secret, nowSeconds(), raw) },
    body: raw,
  }).then(answerOf);
}

/** The four paths a dependency outage reaches: ingest, the plugins' check and claim, and the pull API. */
function requests(context: Context, round: string) {
  const base = context.gateway.url;
  const f = context.fixture;
  const votes = (query: string) => fetch(`${base}/api/votes?${query}&key=${encodeURIComponent(f.claimKey)}&steamid=${f.steamId}`).then(answerOf);
  return {
    ingest: () =>
      signedPost(base, "/api/referral/events", f.referralSecret, {
        event: "registered",
        token: f.clickToken,
        server_id: f.serverId,
        referee_identity: `referee-${round}`,
        server_event_id: `reg-${round}`,
      }),
    check: () => votes("object=votes&element=claim"),
    claim: () => votes("action=claim"),
    checkJson: () => fetch(`${base}/api/votes/json?action=status&key=${encodeURIComponent(f.claimKey)}&steamid=${f.steamId}`).then(answerOf),
    pull: () => signedPost(base, "/api/pull/hearts", f.pullSecret, { server_id: f.serverId }),
  };
}

/** Retry-After: whole seconds, at least 1. */
function assertRetryAfter(t: { true(v: boolean, m?: string): void }, answer: Answer, what: string): void {
  const value = Number(answer.headers.get("retry-after"));
  t.true(Number.isInteger(value) && value >= 1 && value <= 60, `${what}: Retry-After ${answer.headers.get("retry-after")}`);
}

test("PostgreSQL stopped: ingest, check, claim and pull answer 503 with Retry-After and a text naming the cause, never 500; then they work again", async (t) => {
  const { db } = t.context;
  const during = requests(t.context, "down");
  await db.server.stopServer();
  let restarted = false;
  try {
    const ingest = await during.ingest();
    t.is(ingest.status, 503, ingest.text);
    t.deepEqual(JSON.parse(ingest.text), { error: ERROR_TEXT.overloaded }, "ingest keeps the contract's 503 text");
    assertRetryAfter(t, ingest, "ingest");
    t.deepEqual(validateAgainstOpenApi("/api/referral/events", "post", ingest.status, JSON.parse(ingest.text)).errors, []);

    for (const [what, ask] of [
      ["check", during.check],
      ["claim", during.claim],
    ] as const) {
      const answer = await ask();
      t.is(answer.status, 503, `${what}: ${answer.text}`);
      t.is(answer.text, "0", `${what}: the plugins' body format, a digit that pays nothing`);
      t.is(answer.headers.get("content-type"), "text/plain", what);
      assertRetryAfter(t, answer, what);
      t.deepEqual(validateTextAgainstOpenApi("/api/votes", "get", answer.status, answer.text).errors, [], what);
    }
    const json = await during.checkJson();
    t.is(json.status, 503, json.text);
    t.like(JSON.parse(json.text), { voted: false, claimed: false, status: "not_found" });
    assertRetryAfter(t, json, "check (JSON)");
    t.deepEqual(validateAgainstOpenApi("/api/votes/json", "get", json.status, JSON.parse(json.text)).errors, []);

    const pull = await during.pull();
    t.is(pull.status, 503, pull.text);
    t.deepEqual(JSON.parse(pull.text), { error: CONTRACT_ERRORS.unavailable.text });
    t.regex(CONTRACT_ERRORS.unavailable.text, /temporarily unavailable/);
    t.notRegex(CONTRACT_ERRORS.unavailable.text, /overloaded/);
    assertRetryAfter(t, pull, "pull");
    t.deepEqual(validateAgainstOpenApi("/api/pull/hearts", "post", pull.status, JSON.parse(pull.text)).errors, []);

    const refused = t.context.gatewayLog.lines.filter((line) => line.status === 503);
    t.true(refused.length >= 5 && refused.every((line) => line.err !== undefined && line.outcome === "service_unavailable"), "each 503's cause is logged");
    t.false(
      t.context.gatewayLog.lines.some((line) => line.status === 500),
      "no request was answered 500",
    );

    await db.server.startServer();
    restarted = true;
    const after = requests(t.context, "after");
    await eventually(async () => (await after.ingest()).status === 200, { timeoutMs: 30_000 });
    t.is((await after.check()).text, "1", "the heart is there to claim");
    t.is((await after.pull()).status, 200);
  } finally {
    if (!restarted) await db.server.startServer();
  }
});

test("PostgreSQL restarting under traffic (connections cut with 57P01, or ended without a message): no request is answered 500", async (t) => {
  const { db } = t.context;
  const statuses = new Map<number, number>();
  let round = 0;
  let restarting = true;
  const traffic = (async () => {
    while (restarting) {
      const r = requests(t.context, `restart-${++round}`);
      const answers = await Promise.all([r.ingest(), r.check(), r.pull()]);
      for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
    }
  })();
  try {
    await db.server.restart();
  } finally {
    restarting = false;
    await traffic;
  }
  const internal = t.context.serviceLog.lines.filter((line) => line.msg === "rpc failed with an internal error").map((line) => JSON.stringify(line.err));
  t.false(statuses.has(500), `statuses seen: ${JSON.stringify([...statuses])}; internal errors: ${internal.join("; ")}`);
});
