/**
 * The dashboard's delivery side in a real browser (Chromium through playwright-core) against
 * the real stack: the referral service on a database of its own, a gateway with the dashboard,
 * the outbox relay on real Kafka, the delivery consumer and dispatcher, and a real receiver.
 *
 * It answers, from the dashboard alone: did player X's reward arrive, and what exactly did my
 * endpoint answer; it shows endpoint health, the endpoint notice (failing, disabled, auto-disabled
 * after 5 days) and the test callback as a delivery. Screenshots go to test-results/screenshots/.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { launchChromium, type LaunchedChromium } from "../../scripts/infra/chromium.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { eventually } from "../helpers/eventually.js";
import { headerOf, startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { findA11yViolations, formatViolations } from "../helpers/axe.js";
import { castFreshCountedHeart } from "../helpers/retry-overloaded.js";

const TOKEN = `dash-${randomBytes(24).toString("base64url")}`;
const BROWSER_UA = "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0";
const DAY_MS = 24 * 60 * 60 * 1000;
/** Kept by the test run (gitignored); the README names it. */
const SCREENSHOTS = join(process.cwd(), "test-results", "screenshots");

interface Context {
  stack: TestStack;
  receiver: Receiver;
  gatewayUrl: string;
  browser: LaunchedChromium;
  page: Page;
}

/** What the serial flow learns as it goes (ava hands each test a shallow copy of the context). */
const flow = { serverId: "", heartIp: 10, clockOffsetMs: 0 };

const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const quiet = createLogger("dashboard-deliveries-e2e", process.env.TEST_LOG_LEVEL ?? "silent");
  const stack = await startStack({
    gateway: false,
    callbackTimeoutMs: 5_000,
    log: quiet,
    // One clock for the whole stack, movable forward (the auto-disable test skips five days).
    now: () => new Date(Date.now() + flow.clockOffsetMs),
    // Two attempts 300 ms apart, then failed.
    pipeline: {
      name: "dashboard-deliveries",
      delivery: { schedule: parseRetrySchedule("300ms", { jitterRatio: 0 }), callbackTimeoutMs: 5_000, pollIntervalMs: 100 },
    },
  });
  const receiver = await startReceiver();
  const { url: gatewayUrl } = await stack.startGateway({ log: quiet, dashboard: { token: TOKEN } });
  const browser = await launchChromium({ viewport: { width: 1280, height: 900 } });
  const page = await browser.context.newPage();
  t.context = { stack, receiver, gatewayUrl, browser, page };
});

test.after.always(async (t) => {
  const c = t.context;
  await c.browser?.close();
  await c.stack?.close();
  await c.receiver?.close();
});

/** Casts a heart over RPC from a fresh identity and address; asserts it counted. */
function castCountedHeart(c: Context, username: string): Promise<string> {
  flow.heartIp += 1;
  return castFreshCountedHeart(c.stack.clients.hearts, { serverId: flow.serverId, username, ip: `203.0.${flow.heartIp}.7`, userAgent: BROWSER_UA });
}

async function openTab(page: Page, tab: string): Promise<void> {
  await page.click(`.tab[data-tab="${tab}"]`);
  await page.waitForSelector(`#tab-${tab}:not([hidden])`);
}

/** Searches the delivery log for a player until their row shows `status`. */
async function searchPlayerUntil(page: Page, username: string, status: string) {
  const row = page.locator("#deliveries-table tbody tr", { hasText: username });
  await page.fill("#delivery-username", username);
  await eventually(
    async () => {
      await page.click("#refresh-deliveries");
      await page.locator("#refresh-deliveries:enabled").waitFor();
      return (await row.count()) === 1 && ((await row.textContent()) ?? "").includes(status);
    },
    { timeoutMs: 30_000, intervalMs: 250, message: `${username}'s delivery ${status}` },
  );
  return row;
}

/** Waits until the endpoint notice shows `title`, reloading the deliveries tab meanwhile. */
async function bannerShows(page: Page, title: string): Promise<string> {
  return eventually(
    async () => {
      await page.click("#refresh-deliveries");
      await page.locator("#refresh-deliveries:enabled").waitFor();
      if (await page.isHidden("#endpoint-banner")) return undefined;
      return (await page.textContent("#endpoint-banner-title")) === title ? ((await page.textContent("#endpoint-banner")) ?? "") : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 250, message: `the notice "${title}"` },
  );
}

test.serial("sign in; a server with a callback URL (its callback secret is created with it)", async (t) => {
  const { page, gatewayUrl, stack, receiver } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: "Deliveries E2E", registrationUrl: "" });
  flow.serverId = server!.id;
  await stack.clients.admin.setCallbackSettings({ serverId: flow.serverId, callbackUrl: receiver.url, standardWebhooks: false });
  await page.goto(`${gatewayUrl}/dashboard`);
  await page.fill("#token-input", TOKEN);
  await page.click("#sign-in");
  await page.waitForSelector("#app:not([hidden])");
  t.is(await page.inputValue("#server-picker"), flow.serverId);
  t.true(await page.isHidden("#endpoint-banner"), "no notice for a new, healthy server");
});

test.serial(
  "did player X's reward arrive, and what exactly did my endpoint answer: search the player, open the attempt, see the exact request and response",
  async (t) => {
    const c = t.context;
    const { page, receiver } = c;
    receiver.setFallback({ status: 200, headers: { "content-type": "application/json", "x-receiver": "game-7" }, body: '{"rewarded":true}' });
    const heartId = await castCountedHeart(c, "Steve");
    await castCountedHeart(c, "Alex");
    await openTab(page, "deliveries");
    const row = await searchPlayerUntil(page, "Steve", "delivered");
    t.false(((await page.textContent("#deliveries-table tbody")) ?? "").includes("Alex"), "the search shows only the player's deliveries");
    await row.getByRole("button", { name: "Attempts" }).click();
    await page.locator("#delivery-detail-facts", { hasText: heartId }).waitFor();
    await page.waitForSelector("#attempt-exchange-body .attempt-exchange");

    const request = receiver.requests.find((r) => r.text.includes(heartId))!;
    const shownHeaders = (await page.textContent("#attempt-exchange-body .exchange-headers")) ?? "";
    t.is(await page.textContent("#attempt-exchange-body .exchange-body"), request.text, "the exact bytes the receiver got");
    t.true(shownHeaders.includes(`X-Service-Signature: ${headerOf(request, "x-service-signature")}`), shownHeaders);
    t.true(shownHeaders.includes("X-Service-Event: heart.counted"));
    t.false(/whsec_/.test(shownHeaders), "no secret on screen");
    t.is((await page.textContent("#attempt-exchange-body .exchange-status"))?.trim(), "200");
    t.is(await page.textContent("#attempt-exchange-body .exchange-response-body"), '{"rewarded":true}');
    t.true(((await page.textContent("#attempt-exchange-body .exchange-response-headers")) ?? "").includes("x-receiver: game-7"));
    t.true(((await page.textContent("#attempt-exchange-body .exchange-request .exchange-line")) ?? "").startsWith(`POST ${receiver.url}`));

    const health = (await page.textContent("#endpoint-health")) ?? "";
    t.is(await page.textContent("#health-rate-24h .stat-value"), "100.0%", health);
    t.regex((await page.textContent("#health-last-success")) ?? "", /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
    await page.screenshot({ path: join(SCREENSHOTS, "deliveries-attempt-exchange.png"), fullPage: true });
    // The attempt exchange and the health card: axe finds no serious or critical violation.
    const violations = await findA11yViolations(page);
    t.deepEqual(violations, [], formatViolations(violations));
  },
);

test.serial(
  "a failing endpoint: the health card shows the success rates and the last failure reason; a notice says it is failing and when it would be disabled",
  async (t) => {
    const c = t.context;
    const { page, receiver } = c;
    receiver.setFallback({ status: 500, headers: { "content-type": "text/plain" }, body: "database down" });
    await castCountedHeart(c, "Herobrine");
    await searchPlayerUntil(page, "Herobrine", "failed");
    const banner = await bannerShows(page, "Your endpoint is failing.");
    t.true(banner.includes("receiver answered 500"), banner);
    t.regex(banner, /disabled automatically at \d{4}-\d{2}-\d{2} /);
    t.true(banner.includes("1 delivery failed for good in the last 7 days."), banner);
    t.is(await page.textContent("#health-last-failure-reason"), "receiver answered 500");
    t.is(await page.textContent("#health-failed-7d .stat-value"), "1");
    // Two successes (Steve, Alex) and two failures (Herobrine's two attempts).
    t.is(await page.textContent("#health-rate-24h .stat-value"), "50.0%");
    t.true(((await page.textContent("#health-rate-24h .stat-label")) ?? "").includes("2 of 4"));

    await page.locator("#deliveries-table tbody tr", { hasText: "Herobrine" }).getByRole("button", { name: "Attempts" }).click();
    await page.locator("#attempt-exchange-body .exchange-response-body", { hasText: "database down" }).waitFor();
    t.is(await page.locator("#attempts-table tbody tr").count(), 2);
    await page.screenshot({ path: join(SCREENSHOTS, "deliveries-failing-endpoint.png"), fullPage: true });
    // The notice is on every tab.
    await openTab(page, "overview");
    await page.waitForSelector("#endpoint-banner:not([hidden])");
    t.is(await page.textContent("#endpoint-banner-title"), "Your endpoint is failing.");
  },
);

test.serial(
  "the test callback is a delivery: the first exchange shows at once (503), it is retried until a 2xx, and it opens in the delivery log",
  async (t) => {
    const c = t.context;
    const { page, receiver } = c;
    receiver.setFallback({ status: 200, body: "ok" });
    receiver.enqueue({ status: 503, body: "warming up" });
    await openTab(page, "integration");
    await page.waitForSelector("#endpoint-banner:not([hidden])");
    t.is(await page.textContent("#endpoint-banner-title"), "Your endpoint is failing.", "the notice on the integration tab too");
    await page.fill("#test-username", "Notch");
    await page.click("#send-test-callback");
    await page.waitForSelector("#test-callback-result .exchange");
    t.is((await page.textContent("#test-callback-result .exchange-status"))?.trim(), "503", "the first attempt's answer at once");
    t.is(await page.textContent("#test-callback-result .exchange-response-body"), "warming up");
    await page.waitForSelector("#test-callback-delivery:not([hidden])");
    const stored = (await page.textContent("#test-callback-delivery")) ?? "";
    t.true(stored.includes("pending"), stored);
    const deliveryId = /[0-9a-f-]{36}/.exec(stored)?.[0] ?? "";
    t.truthy(deliveryId);
    await page.screenshot({ path: join(SCREENSHOTS, "integration-test-callback-delivery.png"), fullPage: true });

    await page.click("#open-test-delivery");
    await page.waitForSelector("#tab-deliveries:not([hidden])");
    await page.locator("#delivery-detail-id", { hasText: deliveryId }).waitFor();
    const row = page.locator("#deliveries-table tbody tr", { hasText: "Notch" });
    await eventually(
      async () => {
        await page.click("#refresh-deliveries");
        await page.locator("#refresh-deliveries:enabled").waitFor();
        const shown = (await row.textContent()) ?? "";
        return ((await page.locator("#attempts-table tbody tr").count()) === 2 && shown.includes("delivered")) || undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250, message: "the retry of the test delivery" },
    );
    const attempts = await page.locator("#attempts-table tbody tr").allTextContents();
    t.regex(attempts[0]!, /503/);
    t.regex(attempts[1]!, /200/);
    t.true(((await page.textContent("#delivery-detail-facts")) ?? "").includes("00000000-0000-0000-0000-000000000000"), "heart.test keeps the nil heart_id");
    t.true(((await row.textContent()) ?? "").includes("heart.test"), "listed in the delivery log as heart.test");
    t.true(
      (await page.isHidden("#endpoint-banner")) || (await page.textContent("#endpoint-banner-title")) !== "Your endpoint is failing.",
      "a 2xx ends the failing run",
    );

    // Redeliverable like any other delivery.
    const before = receiver.requests.length;
    await page.click("#redeliver-one");
    await receiver.waitForRequests(before + 1);
    t.is(JSON.parse(receiver.requests[before]!.text).event, "heart.test");
    await eventually(() => c.stack.prisma.delivery.findFirst({ where: { id: deliveryId, status: "delivered" } }).then((d) => d ?? undefined), {
      timeoutMs: 30_000,
      message: "the redelivered test delivered",
    });
  },
);

test.serial("a 410 disables the callback: the notice shows the reason on every tab; Re-enable on the notice resumes the held delivery", async (t) => {
  const c = t.context;
  const { page, receiver } = c;
  receiver.setFallback({ status: 410, body: "gone" });
  await castCountedHeart(c, "Creeper");
  await openTab(page, "deliveries");
  const banner = await bannerShows(page, "Callbacks are disabled.");
  t.regex(banner, /receiver answered 410 Gone at /);
  t.true(banner.includes("1 waiting delivery is held until you re-enable."), banner);
  t.true(await page.isVisible("#endpoint-banner-reenable"));
  await page.screenshot({ path: join(SCREENSHOTS, "deliveries-disabled-notice.png"), fullPage: true });
  receiver.setFallback({ status: 200, body: "ok" });
  await page.click("#endpoint-banner-reenable");
  await page.waitForSelector("#endpoint-banner-reenable", { state: "hidden" });
  c.stack.pipeline!.delivery.dispatcher.wake();
  await searchPlayerUntil(page, "Creeper", "delivered");
  t.pass();
});

test.serial("after 5 days of nothing but failures the endpoint is disabled automatically; the notice and the health card show why", async (t) => {
  const c = t.context;
  const { page, receiver } = c;
  receiver.setFallback({ status: 502, body: "bad gateway" });
  await castCountedHeart(c, "Zombie");
  await eventually(
    () => c.stack.prisma.delivery.findFirst({ where: { serverId: flow.serverId, username: "Zombie", status: "failed" } }).then((d) => d ?? undefined),
    { timeoutMs: 30_000, message: "Zombie's delivery failed for good" },
  );
  // Five days and an hour later (the whole stack's clock), the next delivery fails too.
  flow.clockOffsetMs = 5 * DAY_MS + 3_600_000;
  await castCountedHeart(c, "Skeleton");
  await openTab(page, "deliveries");
  const banner = await bannerShows(page, "Callbacks are disabled.");
  t.regex(banner, /every attempt failed for 5 days \(since \d{4}-\d{2}-\d{2}T[^)]+\); last error: receiver answered 502/);
  t.regex((await page.textContent("#health-disabled")) ?? "", /every attempt failed for 5 days/);
  t.is(await page.textContent("#endpoint-health-state"), "disabled");
  // Its delivery waits for callbacks to be re-enabled: held, not pending with a next attempt in the past.
  const row = await searchPlayerUntil(page, "Skeleton", "held");
  t.regex((await row.textContent()) ?? "", /held until callbacks are re-enabled/);
  await row.getByRole("button", { name: "Attempts" }).click();
  await page.locator("#attempt-exchange-body .exchange-response-body", { hasText: "bad gateway" }).waitFor();
  await page.screenshot({ path: join(SCREENSHOTS, "deliveries-auto-disabled.png"), fullPage: true });
  // The disabled notice, the health card and the exchange together: no serious or critical violation.
  const violations = await findA11yViolations(page);
  t.deepEqual(violations, [], formatViolations(violations));
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: join(SCREENSHOTS, "deliveries-phone.png"), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });
  const server = (await c.stack.clients.admin.getServer({ serverId: flow.serverId })).server!;
  t.regex(server.callbackDisabledReason, /^every attempt failed for 5 days/);
});

test.serial("dashboard API: a delivery is only reachable through its own server", async (t) => {
  const c = t.context;
  const { server: other } = await c.stack.clients.admin.createServer({ name: "Someone else", registrationUrl: "" });
  const { deliveries } = await c.stack.clients.delivery.listDeliveries({ serverId: flow.serverId });
  const id = deliveries[0]!.id;
  const get = (serverId: string) =>
    fetch(`${c.gatewayUrl}/dashboard/api/servers/${serverId}/deliveries/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const mine = await get(flow.serverId);
  t.is(mine.status, 200);
  const body = (await mine.json()) as { attempts: { request: { headers: Record<string, string> } | null }[] };
  t.truthy(body.attempts[0]?.request?.headers["X-Service-Signature"]);
  const theirs = await get(other!.id);
  t.is(theirs.status, 404);
  t.deepEqual(await theirs.json(), { error: "unknown delivery" });
  const old = await fetch(`${c.gatewayUrl}/dashboard/api/deliveries/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  t.is(old.status, 404, "no unscoped delivery route");
  const badSearch = await fetch(`${c.gatewayUrl}/dashboard/api/servers/${flow.serverId}/deliveries?username=${"x".repeat(201)}`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  t.is(badSearch.status, 400);
});
