/**
 * The owners' dashboard end to end: a real browser (Debian's Chromium through
 * playwright-core) against the real stack: the referral service on a database of
 * its own, a gateway with the dashboard mounted, the outbox relay on real Kafka,
 * the delivery consumer and dispatcher, and a real local receiver for callbacks.
 */
import anyTest, { type TestFn } from "ava";
import { createHmac, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import type { Page } from "playwright-core";
import { ReferralEventType } from "../../gen/proto/referral/v1/referral_pb.js";
import { launchChromium, type LaunchedChromium } from "../../scripts/infra/chromium.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { eventually } from "../helpers/eventually.js";
import { headerOf, startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { startVotifierReceiver } from "../helpers/votifier-receiver.js";
import { castFreshCountedHeart } from "../helpers/retry-overloaded.js";

const TOKEN = `dash-${randomBytes(24).toString("base64url")}`;
const BROWSER_UA = "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0";

interface Context {
  stack: TestStack;
  receiver: Receiver;
  gatewayUrl: string;
  disabledGatewayUrl: string;
  browser: LaunchedChromium;
  page: Page;
  logLines: string[];
  shots: string;
}

/**
 * What the serial browser flow learns as it goes. Module state on purpose: ava gives
 * each test a shallow copy of the context, so a test cannot hand values on through it.
 */
const flow = {
  serverId: "",
  referralSecret: "",
  /** Every secret value the page showed, to look for in the log. */
  secretsSeen: [] as string[],
  heartIp: 10,
  /** The owner's login link and session cookie value, to look for in the log. */
  ownerCredentials: [] as string[],
};

const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  // Every line the gateway and the dashboard log, to prove no secret is ever among them.
  const logLines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logLines.push(chunk.toString("utf8"));
      done();
    },
  });
  const gatewayLog = pino({ level: "debug" }, sink);
  const quiet = createLogger("dashboard-e2e", process.env.TEST_LOG_LEVEL ?? "silent");

  let gatewayUrl = "";
  const stack = await startStack({
    gateway: false,
    log: quiet,
    // "Send test referral event" posts to the public gateway: the one with the dashboard.
    get publicBaseUrl() {
      return gatewayUrl;
    },
    // Two attempts 300 ms apart, then failed: the failure screens are reachable in a second.
    pipeline: { name: "dashboard-e2e", delivery: { schedule: parseRetrySchedule("300ms", { jitterRatio: 0 }), callbackTimeoutMs: 5_000, pollIntervalMs: 100 } },
  });
  const receiver = await startReceiver();

  gatewayUrl = (await stack.startGateway({ log: gatewayLog, dashboard: { token: TOKEN } })).url;
  const disabledGatewayUrl = (await stack.startGateway({ log: quiet, dashboard: { token: undefined } })).url;

  const browser = await launchChromium();
  const page = await browser.context.newPage();
  const shots = process.env.DASHBOARD_SCREENSHOT_DIR ?? mkdtempSync(join(tmpdir(), "dashboard-shots-"));
  mkdirSync(shots, { recursive: true });
  t.context = {
    stack,
    receiver,
    gatewayUrl,
    disabledGatewayUrl,
    browser,
    page,
    logLines,
    shots,
  };
});

test.after.always(async (t) => {
  const c = t.context;
  await c.browser?.close();
  await c.stack?.close();
  await c.receiver?.close();
});

/** Calls the dashboard API directly (no browser). */
async function callApi(base: string, path: string, init: { method?: string; token?: string; body?: unknown } = {}) {
  const res = await fetch(`${base}/dashboard/api${path}`, {
    method: init.method ?? "GET",
    headers: {
      ...(init.token === undefined ? {} : { authorization: `Bearer ${init.token}` }),
      ...(init.body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** Casts a heart over RPC from a fresh identity and address; asserts it counted. */
function castCountedHeart(c: Context, username: string): Promise<string> {
  flow.heartIp += 1;
  return castFreshCountedHeart(c.stack.clients.hearts, { serverId: flow.serverId, username, ip: `203.0.${flow.heartIp}.7`, userAgent: BROWSER_UA });
}

async function openTab(page: Page, tab: string): Promise<void> {
  await page.click(`.tab[data-tab="${tab}"]`);
  await page.waitForSelector(`#tab-${tab}:not([hidden])`);
}

/** Clicks the deliveries tab's Refresh until the table shows `text`. */
async function refreshDeliveriesUntil(page: Page, text: string): Promise<string> {
  return eventually(
    async () => {
      await page.click("#refresh-deliveries");
      await page.locator("#refresh-deliveries:enabled").waitFor();
      const shown = (await page.textContent("#deliveries-table tbody")) ?? "";
      return shown.includes(text) ? shown : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 250, message: `deliveries table showing "${text}"` },
  );
}

/** The token the page keeps in sessionStorage (null when none). */
async function storedToken(page: Page): Promise<unknown> {
  return page.evaluate('sessionStorage.getItem("dashboard.token")');
}

/** Dismisses any message, runs `action`, and returns the message it brought up. */
async function flashAfter(page: Page, action: () => Promise<unknown>): Promise<string> {
  await page.evaluate('document.getElementById("flash").hidden = true');
  await action();
  await page.waitForSelector("#flash:not([hidden])");
  return (await page.textContent("#flash-text")) ?? "";
}

// ---- the JSON API without a browser ------------------------------------------------------

test.serial(
  "without DASHBOARD_TOKEN there is no operator sign-in: every bearer token is refused (401); the page still serves owners' login links",
  async (t) => {
    const page = await fetch(`${t.context.disabledGatewayUrl}/dashboard`);
    t.is(page.status, 200);
    for (const token of [TOKEN, "", "anything-of-some-length-here"]) {
      const api = await callApi(t.context.disabledGatewayUrl, "/servers", { token });
      t.is(api.status, 401);
      t.deepEqual(JSON.parse(api.text), { error: "missing or invalid dashboard token" });
    }
  },
);

test.serial("dashboard API: a missing or wrong bearer token -> 401 JSON; the right token -> 200", async (t) => {
  const base = t.context.gatewayUrl;
  for (const token of [undefined, "", "wrong-token-of-some-length", `${TOKEN}x`, TOKEN.slice(0, -1)]) {
    const res = await callApi(base, "/servers", { token });
    t.is(res.status, 401, `token ${JSON.stringify(token)}`);
    t.deepEqual(JSON.parse(res.text), { error: "missing or invalid dashboard token" });
    t.regex(res.headers.get("content-type") ?? "", /^application\/json/);
  }
  const basic = await fetch(`${base}/dashboard/api/servers`, { headers: { authorization: `Basic ${TOKEN}` } });
  t.is(basic.status, 401, "only the Bearer scheme is accepted");
  const ok = await callApi(base, "/session", { token: TOKEN });
  t.is(ok.status, 200);
  t.deepEqual(JSON.parse(ok.text), { ok: true, role: "operator" });
});

test.serial("dashboard page: served without a token, same-origin only (CSP), no external resources", async (t) => {
  const res = await fetch(`${t.context.gatewayUrl}/dashboard`);
  t.is(res.status, 200);
  t.regex(res.headers.get("content-type") ?? "", /^text\/html/);
  const csp = res.headers.get("content-security-policy") ?? "";
  t.true(csp.includes("script-src 'self'") && csp.includes("connect-src 'self'"));
  const html = await res.text();
  t.false(/(src|href)="(https?:)?\/\//.test(html), "nothing is loaded from another host");
  for (const asset of ["/dashboard/app.js", "/dashboard/app.css"]) t.is((await fetch(`${t.context.gatewayUrl}${asset}`)).status, 200, asset);
});

test.serial("dashboard API: RPC errors keep their message and map to HTTP statuses (unknown server -> 404, bad JSON -> 400)", async (t) => {
  const base = t.context.gatewayUrl;
  const unknown = await callApi(base, "/servers/00000000-0000-0000-0000-000000000001", { token: TOKEN });
  t.is(unknown.status, 404);
  t.deepEqual(JSON.parse(unknown.text), { error: "unknown server" });
  const invalid = await callApi(base, "/servers", { method: "POST", token: TOKEN, body: { name: "" } });
  t.is(invalid.status, 400);
  t.deepEqual(JSON.parse(invalid.text), { error: "name is required" });
  const badJson = await fetch(`${base}/dashboard/api/servers`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` }, body: "{not json" });
  t.is(badJson.status, 400);
  t.deepEqual(await badJson.json(), { error: "body is not valid JSON" });
  const wrongMethod = await callApi(base, "/servers", { method: "PUT", token: TOKEN });
  t.is(wrongMethod.status, 405);
  const noRoute = await callApi(base, "/nothing-here", { token: TOKEN });
  t.is(noRoute.status, 404);
});

// ---- the browser flow ----------------------------------------------------------------------

test.serial("browser: a wrong token is refused on the sign-in screen with the API's error", async (t) => {
  const { page, gatewayUrl } = t.context;
  await page.goto(`${gatewayUrl}/dashboard`);
  await page.waitForSelector("#login:not([hidden])");
  await page.fill("#token-input", "not-the-dashboard-token");
  await page.click("#sign-in");
  await page.waitForSelector("#login-error:not([hidden])");
  t.is(await page.textContent("#login-error"), "That token was not accepted: missing or invalid dashboard token");
  t.true(await page.isHidden("#app"));
  t.is(await storedToken(page), null, "a rejected token is not kept");
});

test.serial("browser: the owner signs in with the token (kept in sessionStorage), creates a server and sees it listed", async (t) => {
  const { page } = t.context;
  await page.fill("#token-input", TOKEN);
  await page.click("#sign-in");
  await page.waitForSelector("#app:not([hidden])");
  t.is(await storedToken(page), TOKEN);
  await page.fill("#new-server-name", "Dashboard E2E Server");
  await page.fill("#new-server-registration-url", "https://play.example.com/register");
  t.regex(await flashAfter(page, () => page.click("#create-server")), /Server "Dashboard E2E Server" created \(id [0-9a-f-]{36}\)/);
  const { servers } = await t.context.stack.clients.admin.listServers({});
  const server = servers.find((s) => s.name === "Dashboard E2E Server");
  t.truthy(server);
  flow.serverId = server!.id;
  t.true(((await page.textContent("#servers-table tbody")) ?? "").includes(server!.id));
  t.is(await page.inputValue("#server-picker"), server!.id, "the new server is picked");
  await page.screenshot({ path: join(t.context.shots, "overview.png"), fullPage: true });
});

test.serial("browser: referrals tab enables referrals and shows the referral link format /r/<server_id>?referrer=<player>", async (t) => {
  const { page, gatewayUrl } = t.context;
  const { serverId } = flow;
  await openTab(page, "referrals");
  await page.locator("#referrals-status", { hasText: /^disabled$/ }).waitFor();
  await page.click("#toggle-referrals");
  await page.locator("#referrals-status", { hasText: /^enabled$/ }).waitFor();
  t.true((await t.context.stack.clients.admin.getServer({ serverId })).server!.referralsEnabled);
  t.is(await page.textContent("#referral-link"), `${gatewayUrl}/r/${serverId}?referrer=<player>`);
  t.is(await page.inputValue("#registration-url"), "https://play.example.com/register");
});

test.serial("browser: a created referral secret is shown once; lists and the reloaded page never carry its value", async (t) => {
  const c = t.context;
  const { page } = c;
  const { serverId } = flow;
  await page.click("#create-secret");
  await page.waitForSelector("#referral-secret-box:not([hidden])");
  const secret = (await page.textContent("#referral-secret-box-value")) ?? "";
  t.regex(secret, /^rsec_/);
  t.true(((await page.textContent("#referral-secret-box")) ?? "").includes("Shown once"));
  flow.referralSecret = secret;
  flow.secretsSeen.push(secret);
  const { secrets } = await c.stack.clients.admin.listReferralSecrets({ serverId });
  t.is(secrets.length, 1);
  const kid = secrets[0]!.kid;
  await page.locator("#secrets-table tbody tr", { hasText: kid }).waitFor();

  const list = await callApi(c.gatewayUrl, `/servers/${serverId}/referral-secrets`, { token: TOKEN });
  t.false(list.text.includes(secret), "the list API never carries a value");
  t.deepEqual(Object.keys((JSON.parse(list.text) as { secrets: object[] }).secrets[0]!).sort(), [
    "active",
    "created_at",
    "expires_at",
    "kid",
    "revoked_at",
    "status",
  ]);

  await page.reload();
  await openTab(page, "referrals");
  await page.locator("#secrets-table tbody tr", { hasText: kid }).waitFor();
  t.true(await page.isHidden("#referral-secret-box"));
  t.false((await page.content()).includes(secret), "after a reload the value is gone from the page");

  const row = page.locator("#secrets-table tbody tr", { hasText: kid });
  await row.getByRole("button", { name: "Reveal" }).click();
  await page.waitForSelector("#referral-secret-box:not([hidden])");
  t.is(await page.textContent("#referral-secret-box-value"), secret, "an explicit Reveal shows it again");
  await page.locator("#referral-secret-box").getByRole("button", { name: "Hide" }).click();
  t.true(await page.isHidden("#referral-secret-box"));
});

test.serial(
  'browser: "Send test referral event" shows the exact signed request (header, canonical string) and the response {"ok":true,"test":true}',
  async (t) => {
    const c = t.context;
    const { page } = c;
    await page.selectOption("#test-event-type", "registered");
    await page.click("#send-test-event");
    await page.waitForSelector("#test-event-result .exchange");
    t.is(await page.textContent("#test-event-result .exchange-response-body"), '{"ok":true,"test":true}');
    t.is((await page.textContent("#test-event-result .exchange-status"))?.trim(), "200");
    t.true(((await page.textContent("#test-event-result .exchange-request")) ?? "").includes(`POST ${c.gatewayUrl}/api/referral/events`));

    const body = (await page.textContent("#test-event-result .exchange-body")) ?? "";
    const canonical = (await page.textContent("#test-event-result .exchange-canonical")) ?? "";
    const headers = (await page.textContent("#test-event-result .exchange-headers")) ?? "";
    const parsed = JSON.parse(body) as Record<string, unknown>;
    t.is(parsed.test, true);
    t.is(parsed.server_id, flow.serverId);
    const signature = /^X-Service-Signature: t=(\d+),v1=sha256=([0-9a-f]{64}),kid=(\S+)$/m.exec(headers);
    t.truthy(signature, headers);
    t.is(canonical, `${signature![1]}.${body}`, "the canonical string is <t>.<body>");
    // Independent check: HMAC-SHA256 with the secret shown at creation, over the canonical string shown.
    t.is(createHmac("sha256", flow.referralSecret).update(canonical).digest("hex"), signature?.[2] ?? "(no v1)");

    await page.screenshot({ path: join(c.shots, "referrals-test-event.png"), fullPage: true });
    t.log(`screenshots in ${c.shots}`);
  },
);

test.serial("browser: rotating keeps the old secret valid until its expiry (grace); revoking marks it revoked", async (t) => {
  const c = t.context;
  const { page } = c;
  const { serverId } = flow;
  const before = (await c.stack.clients.admin.listReferralSecrets({ serverId })).secrets;
  await page.fill("#rotate-grace-hours", "2");
  await page.click("#rotate-secret");
  await page.waitForSelector("#referral-secret-box:not([hidden])");
  const rotated = (await page.textContent("#referral-secret-box-value")) ?? "";
  t.regex(rotated, /^rsec_/);
  t.not(rotated, flow.referralSecret);
  const oldKid = before[0]!.kid;
  const oldRow = page.locator("#secrets-table tbody tr", { hasText: oldKid });
  await oldRow.locator(".badge", { hasText: "expiring" }).waitFor();
  const after = (await c.stack.clients.admin.listReferralSecrets({ serverId })).secrets;
  const old = after.find((s) => s.kid === oldKid)!;
  t.true(old.active, "the previous secret stays valid during the grace period");
  const graceMs = Number(old.expiresAt!.seconds) * 1000 - Date.now();
  t.true(graceMs > 1.9 * 3600_000 && graceMs <= 2 * 3600_000, `grace of about 2 h, got ${graceMs} ms`);

  page.once("dialog", (dialog) => void dialog.accept());
  await oldRow.getByRole("button", { name: "Revoke" }).click();
  await page.locator("#secrets-table tbody tr", { hasText: oldKid }).locator(".badge", { hasText: "revoked" }).waitFor();
  t.false((await c.stack.clients.admin.listReferralSecrets({ serverId })).secrets.find((s) => s.kid === oldKid)!.active);
  flow.referralSecret = rotated;
  flow.secretsSeen.push(rotated);
});

test.serial("browser: funnel numbers with conversion rates, and the leaderboard all-time and this month", async (t) => {
  const c = t.context;
  const { page } = c;
  const { serverId } = flow;
  const { referral } = c.stack.clients;
  for (const [referee, referrer] of [
    ["p1", "alice"],
    ["p2", "alice"],
    ["p3", "bob"],
    ["p4", "bob"],
  ] as const) {
    const { token } = await referral.recordClick({ serverId, referrerIdentity: referrer, ip: "198.51.100.1", userAgent: BROWSER_UA });
    if (referee === "p4") continue; // clicked, never registered
    await referral.applyEvent({ serverId, event: ReferralEventType.REGISTERED, token, refereeIdentity: referee, serverEventId: `reg-${referee}` });
    if (referee === "p3") continue; // registered, not qualified
    await referral.applyEvent({ serverId, event: ReferralEventType.QUALIFIED, token, serverEventId: `q-${referee}` });
  }
  await openTab(page, "hearts");
  await openTab(page, "referrals");
  // Wait for the fresh numbers, not the ones the tab showed before the referrals were made.
  await page.locator("#funnel", { hasText: "4Clicks" }).waitFor();
  await page.locator("#leaderboard-month tbody", { hasText: "alice" }).waitFor();
  const funnel = (await page.textContent("#funnel")) ?? "";
  t.true(funnel.includes("4Clicks") && funnel.includes("3Registered") && funnel.includes("2Qualified") && funnel.includes("0Reversed"), funnel);
  t.true(funnel.includes("Click \u2192 register 75.0%") && funnel.includes("Register \u2192 qualify 66.7%") && funnel.includes("Reversal rate 0.0%"), funnel);
  for (const board of ["#leaderboard-all", "#leaderboard-month"]) {
    const text = (await page.textContent(`${board} tbody`)) ?? "";
    t.true(text.startsWith("1alice20"), `${board}: ${text}`);
  }
  t.is(await page.textContent("#leaderboard-month-period"), `(${new Date().toISOString().slice(0, 7)})`);
  const monthly = page.waitForResponse((r) => r.url().includes("/funnel?scope=month"));
  await page.selectOption("#funnel-scope", "month");
  const month = (await (await monthly).json()) as { period: string; funnel: { clicks: number; qualified: number } };
  t.is(month.period, new Date().toISOString().slice(0, 7));
  t.like(month.funnel, { clicks: 4, qualified: 2 }, "this month counts the same events");
});

test.serial("browser: API errors are shown in the UI (test callback without a URL -> 409 text; invalid callback URL -> 400 text)", async (t) => {
  const { page } = t.context;
  await openTab(page, "integration");
  await page.click("#send-test-callback");
  await page.waitForSelector("#test-callback-result .msg-error");
  t.is(await page.textContent("#test-callback-result .msg-error"), "Error 409: no callback URL configured: set one in the integration tab first");

  // Beside the form's Save button (test/e2e/dashboard-first-hour.test.ts checks where), not in the banner.
  await page.fill("#callback-url", "ftp://example.com/hook");
  await page.click("#callback-form button[type=submit]");
  await page.waitForSelector("#callback-form + .control-error");
  t.is(await page.textContent("#callback-form + .control-error"), "Error 400: callback_url must use https or http");
});

test.serial('browser: setting the callback URL and "Send test callback" shows the receiver\'s 200 and the exact signed heart.test request', async (t) => {
  const c = t.context;
  const { page, receiver } = c;
  await page.fill("#callback-url", receiver.url);
  await page.check("#standard-webhooks");
  t.is(await flashAfter(page, () => page.click("#callback-form button[type=submit]")), "Callback settings saved.");
  const server = (await c.stack.clients.admin.getServer({ serverId: flow.serverId })).server!;
  t.is(server.callbackUrl, receiver.url);
  t.true(server.standardWebhooks);

  const received = receiver.requests.length;
  await page.fill("#test-username", "Notch");
  await page.click("#send-test-callback");
  await page.waitForSelector("#test-callback-result .exchange");
  t.is((await page.textContent("#test-callback-result .exchange-status"))?.trim(), "200");
  t.is(await page.textContent("#test-callback-result .exchange-response-body"), "ok");

  const [request] = (await receiver.waitForRequests(received + 1)).slice(received);
  const shownBody = (await page.textContent("#test-callback-result .exchange-body")) ?? "";
  const shownHeaders = (await page.textContent("#test-callback-result .exchange-headers")) ?? "";
  const canonical = (await page.textContent("#test-callback-result .exchange-canonical")) ?? "";
  t.is(shownBody, request!.text, "the page shows the exact bytes the receiver got");
  const body = JSON.parse(request!.text) as Record<string, unknown>;
  t.is(body.event, "heart.test");
  t.is(body.username, "Notch");
  t.is(body.heart_id, "00000000-0000-0000-0000-000000000000");
  t.is(headerOf(request!, "x-service-event"), "heart.test");
  const signatureHeader = headerOf(request!, "x-service-signature") ?? "";
  t.true(shownHeaders.includes(`X-Service-Signature: ${signatureHeader}`), shownHeaders);
  t.truthy(headerOf(request!, "webhook-signature"), "Standard Webhooks headers are sent when opted in");
  t.is(canonical, `${body.timestamp}.${request!.text}`);

  // Reveal the callback secret in the UI and check the signature independently.
  await page.click("#reveal-callback-secret");
  await page.waitForSelector("#callback-secret-box:not([hidden])");
  const callbackSecret = (await page.textContent("#callback-secret-box-value")) ?? "";
  t.regex(callbackSecret, /^whsec_/);
  flow.secretsSeen.push(callbackSecret);
  const v1 = /v1=([0-9a-f]{64})/.exec(signatureHeader)?.[1];
  t.is(createHmac("sha256", callbackSecret).update(canonical).digest("hex"), v1 ?? "(no v1)");

  await page.screenshot({ path: join(c.shots, "integration-test-callback.png"), fullPage: true });
});

test.serial("browser: a counted heart (cast over RPC) shows as a delivery with its attempts (time, status, latency); Redeliver sends it again", async (t) => {
  const c = t.context;
  const { page } = c;
  c.receiver.setFallback({ status: 200, body: "ok" });
  const heartId = await castCountedHeart(c, "Steve");
  await openTab(page, "deliveries");
  // The test callback above is a delivered delivery too, so wait for Steve's own row to be delivered.
  const row = page.locator("#deliveries-table tbody tr", { hasText: "Steve" });
  await eventually(
    async () => {
      await page.click("#refresh-deliveries");
      await page.locator("#refresh-deliveries:enabled").waitFor();
      return (await row.count()) === 1 && ((await row.textContent()) ?? "").includes("delivered");
    },
    { timeoutMs: 30_000, intervalMs: 250, message: "Steve's delivery delivered" },
  );
  await row.getByRole("button", { name: "Attempts" }).click();
  await page.waitForSelector("#delivery-detail:not([hidden])");
  t.true(((await page.textContent("#delivery-detail-facts")) ?? "").includes(heartId));
  const attempts = await page.locator("#attempts-table tbody tr").allTextContents();
  t.is(attempts.length, 1);
  t.regex(attempts[0]!, /^1\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC200\d+ ms/);
  t.true(attempts[0]!.includes(c.receiver.url));

  t.is(await flashAfter(page, () => page.click("#redeliver-one")), "Delivery queued again; it is sent right away.");
  await eventually(
    async () => {
      await page.click("#refresh-deliveries");
      return (await page.locator("#attempts-table tbody tr").count()) === 2 || undefined;
    },
    { timeoutMs: 20_000, intervalMs: 250, message: "a second attempt after Redeliver" },
  );
  t.is(c.receiver.requests.filter((r) => r.text.includes(heartId)).length, 2);
  await page.screenshot({ path: join(c.shots, "deliveries-attempts.png"), fullPage: true });
});

test.serial("browser: the deliveries status filter and 'Redeliver all failed since' requeue failed deliveries", async (t) => {
  const c = t.context;
  const { page } = c;
  c.receiver.setFallback({ status: 500, body: "boom" });
  const heartId = await castCountedHeart(c, "Herobrine");
  await eventually(() => c.stack.prisma.delivery.findFirst({ where: { heartId, status: "failed" } }).then((d) => d ?? undefined), { timeoutMs: 30_000 });
  await page.selectOption("#delivery-status", "failed");
  const failedOnly = await refreshDeliveriesUntil(page, "Herobrine");
  t.false(failedOnly.includes("Steve"), "the filter hides delivered rows");
  await page.locator("#deliveries-table tbody tr", { hasText: "Herobrine" }).getByRole("button", { name: "Attempts" }).click();
  await page.locator("#delivery-detail-facts", { hasText: heartId }).waitFor();
  t.is(await page.locator("#attempts-table tbody tr").count(), 2, "two attempts: the first and the one scheduled retry");
  t.true(((await page.textContent("#attempts-table tbody")) ?? "").includes("500"));

  c.receiver.setFallback({ status: 200, body: "ok" });
  await page.fill("#redeliver-since", "2000-01-01T00:00");
  t.is(await flashAfter(page, () => page.click("#redeliver-failed-form button[type=submit]")), "1 failed delivery queued again.");
  await eventually(() => c.stack.prisma.delivery.findFirst({ where: { heartId, status: "delivered" } }).then((d) => d ?? undefined), { timeoutMs: 30_000 });
  await page.selectOption("#delivery-status", "delivered");
  await refreshDeliveriesUntil(page, "Herobrine");
  t.pass();
});

test.serial("browser: a disabled callback (receiver answered 410) shows its reason; Re-enable resumes the held delivery", async (t) => {
  const c = t.context;
  const { page } = c;
  c.receiver.setFallback({ status: 410, body: "gone" });
  const heartId = await castCountedHeart(c, "Alex");
  await eventually(() => c.stack.clients.admin.getServer({ serverId: flow.serverId }).then((r) => r.server!.callbackDisabledReason || undefined), {
    timeoutMs: 30_000,
    message: "callback disabled after a 410",
  });
  c.receiver.setFallback({ status: 200, body: "ok" });
  await openTab(page, "integration");
  await page.waitForSelector("#callback-disabled:not([hidden])");
  t.regex((await page.textContent("#callback-disabled-reason")) ?? "", /410 Gone/);
  await page.screenshot({ path: join(c.shots, "integration-disabled.png"), fullPage: true });
  await page.click("#reenable-callback");
  await page.waitForSelector("#callback-disabled", { state: "hidden" });
  t.is((await c.stack.clients.admin.getServer({ serverId: flow.serverId })).server!.callbackDisabledReason, "");
  c.stack.pipeline!.delivery.dispatcher.wake();
  await eventually(() => c.stack.prisma.delivery.findFirst({ where: { heartId, status: "delivered" } }).then((d) => d ?? undefined), { timeoutMs: 30_000 });
  t.pass();
});

test.serial("browser: the hearts tab ranks this month's servers by counted hearts", async (t) => {
  const c = t.context;
  const { page } = c;
  await openTab(page, "hearts");
  await page.locator("#ranking-table tbody", { hasText: "Dashboard E2E Server" }).waitFor();
  const rows = await page.locator("#ranking-table tbody tr").allTextContents();
  t.is(rows.length, 1);
  t.is(rows[0], `1Dashboard E2E Server ${flow.serverId}3`);
  t.is(await page.textContent("#ranking-period"), `(${new Date().toISOString().slice(0, 7)})`);
  await page.screenshot({ path: join(c.shots, "hearts.png"), fullPage: true });
});

test.serial(
  "browser: Votifier settings (token write-only), a test vote, the pull API switch and secret; a counted heart shows as a Votifier and a pull delivery",
  async (t) => {
    const c = t.context;
    const { page } = c;
    const votifierToken = `nvt${randomBytes(12).toString("hex")}`;
    const votifier = await startVotifierReceiver({ tokens: { default: votifierToken } });
    t.teardown(() => votifier.close());
    flow.secretsSeen.push(votifierToken);
    await openTab(page, "integration");
    await page.fill("#votifier-host", votifier.host);
    await page.fill("#votifier-port", String(votifier.port));
    await page.fill("#votifier-service-name", "HeartsList");
    await page.fill("#votifier-token", votifierToken);
    t.is(await flashAfter(page, () => page.click("#votifier-form button[type=submit]")), "Votifier settings saved.");
    await page.locator("#votifier-status", { hasText: "on" }).waitFor();
    t.is(await page.inputValue("#votifier-token"), "", "the token is never shown again");
    t.is(await page.getAttribute("#votifier-token", "placeholder"), "stored; empty keeps it");

    await page.fill("#test-vote-username", "Tester");
    await page.click("#send-test-vote");
    await page.waitForSelector("#test-vote-result .exchange");
    t.regex((await page.textContent("#test-vote-result .vote-greeting")) ?? "", /^VOTIFIER 2 \S+$/);
    t.like(JSON.parse((await page.textContent("#test-vote-result .vote-payload")) ?? "{}"), { serviceName: "HeartsList", username: "Tester" });
    t.is(await page.textContent("#test-vote-result .vote-response"), '{"status":"ok"}');
    t.is(votifier.votes.length, 1);
    t.false(((await page.textContent("#test-vote-result")) ?? "").includes(votifierToken));

    await page.click("#toggle-pull");
    await page.locator("#pull-status", { hasText: "on" }).waitFor();
    await page.click("#reveal-pull-secret");
    await page.waitForSelector("#pull-secret-box:not([hidden])");
    const pullSecret = ((await page.textContent("#pull-secret-box .secret-value")) ?? "").trim();
    t.regex(pullSecret, /^psec_/);
    flow.secretsSeen.push(pullSecret);
    await page.screenshot({ path: join(c.shots, "integration-votifier-pull.png"), fullPage: true });

    const heartId = await castCountedHeart(c, "Voter");
    await votifier.waitForVotes(2, 30_000);
    t.like(votifier.votes[1], { username: "Voter", serviceName: "HeartsList" });
    await openTab(page, "deliveries");
    await page.selectOption("#delivery-status", "all");
    await page.selectOption("#delivery-transport", "votifier");
    const votifierRows = await refreshDeliveriesUntil(page, "Voter");
    t.false(votifierRows.includes("Steve"), "the transport filter hides callback deliveries");
    await page.selectOption("#delivery-transport", "pull");
    await refreshDeliveriesUntil(page, "pending");
    // The owner's poller claims the heart through the signed pull API.
    const body = JSON.stringify({ server_id: flow.serverId, heart_ids: [heartId] });
    const ts = Math.floor(Date.now() / 1000);
    const mac = createHmac("sha256", pullSecret).update(`${ts}.${body}`).digest("hex");
    const claim = await fetch(`${c.gatewayUrl}/api/pull/claims`, { method: "POST", headers: { "x-service-signature": `t=${ts},v1=sha256=${mac}` }, body });
    t.deepEqual(await claim.json(), { results: [{ heart_id: heartId, status: "claimed" }] });
    await refreshDeliveriesUntil(page, "delivered");
    await page.locator("#deliveries-table tbody tr", { hasText: "Voter" }).getByRole("button", { name: "Attempts" }).click();
    await page.locator("#delivery-detail-facts", { hasText: "pull" }).waitFor();
    t.true(((await page.textContent("#attempts-table tbody")) ?? "").includes("pull API claim"));
    await page.selectOption("#delivery-transport", "all");
    await page.screenshot({ path: join(c.shots, "deliveries-transports.png"), fullPage: true });
  },
);

test.serial(
  "browser: the Integration tab's load answering after a save does not put the older settings back (the status stays on, the saved name stays)",
  async (t) => {
    const { page } = t.context;
    await openTab(page, "hearts");
    // The tab's load of the server is fetched at once but handed to the page only after the save below answered:
    // a slow load on a loaded machine, overtaken by the owner's save.
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let delivered: () => void = () => {};
    const staleDelivered = new Promise<void>((resolve) => {
      delivered = resolve;
    });
    const serverUrl = new RegExp(`/servers/${flow.serverId}$`);
    await page.route(serverUrl, async (route) => {
      if (route.request().method() !== "GET") return route.continue();
      const response = await route.fetch();
      await released;
      await route.fulfill({ response });
      delivered();
    });
    t.teardown(() => page.unroute(serverUrl));
    await openTab(page, "integration");
    await page.locator("#votifier-status", { hasText: "on" }).waitFor();
    await page.fill("#votifier-service-name", "HeartsListRenamed");
    t.is(await flashAfter(page, () => page.click("#votifier-form button[type=submit]")), "Votifier settings saved.");
    release();
    await staleDelivered;
    // The page's handling of the late answer runs within a few tasks of its delivery.
    await page.evaluate("new Promise((resolve) => setTimeout(resolve, 200))");
    t.is(await page.inputValue("#votifier-service-name"), "HeartsListRenamed");
    t.is(await page.textContent("#votifier-status"), "on");
  },
);
test.serial("no secret value and no dashboard token ever reaches the gateway's log", async (t) => {
  const c = t.context;
  const log = c.logLines.join("");
  t.true(log.includes("/dashboard/api/"), "the dashboard's requests were logged");
  t.true(flow.secretsSeen.length >= 3);
  for (const value of [...flow.secretsSeen, TOKEN]) t.false(log.includes(value), "a secret was logged");
  t.false(/rsec_|whsec_|psec_/.test(log));
});

test.serial("browser: signing out forgets the token; an API 401 mid-session returns to sign-in", async (t) => {
  const { page } = t.context;
  await page.click("#sign-out");
  await page.waitForSelector("#login:not([hidden])");
  t.is(await storedToken(page), null);
  // A stale token in storage (for example after DASHBOARD_TOKEN changed) lands on sign-in with the reason.
  await page.evaluate('sessionStorage.setItem("dashboard.token", "stale-token-value-123")');
  await page.reload();
  await page.waitForSelector("#login-error:not([hidden])");
  t.regex((await page.textContent("#login-error")) ?? "", /rejected \(missing or invalid dashboard token\)/);
});

// ---- an owner through a login link ---------------------------------------------------------

test.serial(
  "browser (owner): a login link minted over RPC opens the dashboard as that owner (HttpOnly, SameSite=Strict cookie) showing only that owner's servers",
  async (t) => {
    const c = t.context;
    const { page } = c;
    const { access, admin } = c.stack.clients;
    const servers: Record<string, string> = {};
    for (const owner of ["browser-owner-a", "browser-owner-b"]) {
      await access.createOwner({ ownerId: owner, displayName: owner === "browser-owner-a" ? "Alice's Network" : "Bob's Network" });
      const { server } = await admin.createServer({ name: `${owner} server`, registrationUrl: "https://play.example.com/register" });
      await access.assignServer({ serverId: server!.id, ownerId: owner });
      servers[owner] = server!.id;
    }
    // As the list's backend does: mint the link, hand it to the owner, who opens it.
    const { url } = await access.createDashboardLoginLink({ ownerId: "browser-owner-a" });
    t.true(url.startsWith(`${c.gatewayUrl}/dashboard/login?token=dl_`), url);
    await page.evaluate("sessionStorage.clear()");
    await page.goto(url);
    await page.waitForSelector("#app:not([hidden])");
    t.is(new URL(page.url()).pathname, "/dashboard", "redirected to the page; the token left the address bar");
    t.is(await page.textContent("#session-owner"), "Signed in as Alice's Network");
    t.is(await storedToken(page), null, "no bearer token: the session is the cookie");

    const cookie = (await c.browser.context.cookies(`${c.gatewayUrl}/dashboard`)).find((k) => k.name === "dashboard_session");
    t.truthy(cookie);
    flow.ownerCredentials.push(new URL(url).searchParams.get("token")!, cookie!.value);
    t.like(cookie, { httpOnly: true, sameSite: "Strict", path: "/dashboard", secure: false });
    t.false(String(await page.evaluate("document.cookie")).includes("dashboard_session"), "scripts cannot read the session");

    // Only Alice's server: not Bob's, not the operator flow's (unowned) server. The page shows itself
    // before its server list arrives, so wait for the picker to be filled.
    await page.waitForSelector("#server-picker option", { state: "attached" });
    const options = await page.locator("#server-picker option").evaluateAll((els) => els.map((e) => (e as unknown as { value: string }).value));
    t.deepEqual(options, [servers["browser-owner-a"]]);
    const table = (await page.textContent("#servers-table tbody")) ?? "";
    t.true(table.includes(servers["browser-owner-a"]!));
    t.false(table.includes(servers["browser-owner-b"]!) || table.includes(flow.serverId));
    await page.screenshot({ path: join(c.shots, "owner-overview.png"), fullPage: true });

    // From the page itself, another owner's server is not found (the session is scoped by the service).
    const status = await page.evaluate(`fetch("/dashboard/api/servers/${servers["browser-owner-b"]}").then((r) => r.status)`);
    t.is(status, 404);

    // A state-changing action through the UI works (the page sends the CSRF token): enable referrals.
    await openTab(page, "referrals");
    await page.locator("#referrals-status", { hasText: /^disabled$/ }).waitFor();
    await page.click("#toggle-referrals");
    await page.locator("#referrals-status", { hasText: /^enabled$/ }).waitFor();
    t.true((await admin.getServer({ serverId: servers["browser-owner-a"]! })).server!.referralsEnabled);

    // The link was one-time.
    const reuse = await c.browser.context.newPage();
    await reuse.goto(url);
    t.is(await reuse.textContent("#login-link-error"), "this login link is invalid or expired or already used (ask for a new one)");
    await reuse.close();
  },
);

test.serial("browser (owner): signing out ends the session on the server; the page returns to sign-in", async (t) => {
  const { page } = t.context;
  await page.click("#sign-out");
  await page.waitForSelector("#login:not([hidden])");
  await eventually(async () => ((await page.evaluate('fetch("/dashboard/api/session").then((r) => r.status)')) === 401 ? true : undefined), {
    timeoutMs: 10_000,
    message: "session ended",
  });
  const { sessions } = await t.context.stack.clients.access.listDashboardSessions({ ownerId: "browser-owner-a" });
  t.is(sessions.length, 1);
  t.truthy(sessions[0]!.revokedAt, "revoked on the server, not just forgotten by the browser");
  // Neither the login link's token nor the session cookie ever reached the gateway's log.
  const log = t.context.logLines.join("");
  t.true(log.includes("/dashboard/login"), "the login request was logged");
  t.is(flow.ownerCredentials.length, 2);
  for (const value of flow.ownerCredentials) t.false(log.includes(value), "an owner credential was logged");
});
