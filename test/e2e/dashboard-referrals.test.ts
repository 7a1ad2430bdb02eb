/**
 * The Referrals tab's review queue in a real browser (Debian's Chromium through playwright-core)
 * against the real stack: a seeded self-referral farm (one IP, twenty referees through `/r/` clicks,
 * signed `registered` and `qualified` events through the gateway) is flagged and held; the owner,
 * signed in through a login link, approves it on the Referrals tab; the leaderboard then counts it.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { ReviewMode } from "../../gen/proto/referral/v1/referral_review_pb.js";
import { launchChromium } from "../../scripts/infra/chromium.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { findA11yViolations, formatViolations } from "../helpers/axe.js";
import type { DashboardBrowserContext } from "../helpers/dashboard-browser.js";
import { eventually } from "../helpers/eventually.js";
import { screenshotDir } from "../helpers/screenshots.js";
import { startStack } from "../../scripts/harness/stack.js";

const TOKEN = `dash-${randomBytes(24).toString("base64url")}`;
const FARM_IP = "198.51.100.77";
const FARM_SIZE = 20;

interface Context extends DashboardBrowserContext {
  serverId: string;
  secret: string;
}
const test = anyTest as TestFn<Context>;
const pageErrors: string[] = [];

test.before(async (t) => {
  const quiet = createLogger("dashboard-referrals-e2e", process.env.TEST_LOG_LEVEL ?? "silent");
  let gatewayUrl = "";
  const stack = await startStack({
    gateway: false,
    log: quiet,
    // Login links point at the gateway with the dashboard.
    get publicBaseUrl() {
      return gatewayUrl;
    },
  });
  // Behind a trusted proxy: the farm's clicks all carry one client address.
  gatewayUrl = (await stack.startGateway({ log: quiet, dashboard: { token: TOKEN }, overrides: () => ({ trustProxy: true }) })).url;
  const { admin, access, reviews } = stack.clients;
  await access.createOwner({ ownerId: "farm-owner", displayName: "Farm Owner" });
  const { server } = await admin.createServer({ name: "Reviewed server", registrationUrl: "" });
  const serverId = server!.id;
  await access.assignServer({ serverId, ownerId: "farm-owner" });
  await admin.setReferralsEnabled({ serverId, enabled: true });
  const { secret } = await admin.createReferralSecret({ serverId });
  await reviews.setReferralReviewMode({ serverId, mode: ReviewMode.LOOSE });
  const browser = await launchChromium({ viewport: { width: 1280, height: 900 } });
  const page = await browser.context.newPage();
  page.on("console", (message) => {
    if (message.type() === "error" && !/status of 401 \(Unauthorized\)/.test(message.text())) pageErrors.push(message.text());
  });
  page.on("pageerror", (error) => pageErrors.push(error.message));
  t.context = { stack, gatewayUrl, browser, page, shots: screenshotDir(), serverId, secret };
});

test.after.always(async (t) => {
  await t.context.browser?.close();
  await t.context.stack?.close();
});

async function postEvent(c: Context, body: Record<string, unknown>): Promise<void> {
  const raw = JSON.stringify(body);
  const res = await fetch(`${c.gatewayUrl}/api/referral/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-signature": formatIngestSignature(c.secret, Math.floor(Date.now() / 1000), raw) },
    body: raw,
  });
  if (res.status !== 200) throw new Error(`ingest answered ${res.status}: ${await res.text()}`);
}

async function leaderboardText(page: Page): Promise<string> {
  return (await page.textContent("#leaderboard-all")) ?? "";
}

test.serial(
  "browser (owner): a seeded farm (one IP, twenty referees) is flagged and held; approved on the Referrals tab, the leaderboard counts it",
  async (t) => {
    const c = t.context;
    for (let i = 0; i < FARM_SIZE; i++) {
      const res = await fetch(`${c.gatewayUrl}/r/${c.serverId}?referrer=farmer`, {
        headers: { "x-forwarded-for": FARM_IP, "user-agent": "Mozilla/5.0 Firefox/130.0" },
      });
      t.is(res.status, 200);
      const { token } = (await res.json()) as { token: string };
      await postEvent(c, { event: "registered", token, server_id: c.serverId, referee_identity: `farm-alt-${i}`, server_event_id: `reg-${i}` });
      await postEvent(c, { event: "qualified", token, server_id: c.serverId, server_event_id: `q-${i}` });
    }
    const { referrals } = await c.stack.clients.reviews.listReferrals({ serverId: c.serverId, flaggedOnly: true, pageSize: 100 });
    t.is(referrals.length, FARM_SIZE, "every farm referral is flagged");
    t.deepEqual((await c.stack.clients.referral.getLeaderboard({ serverId: c.serverId })).entries, [], "held credit is not on the leaderboard");

    const { page } = c;
    const { url } = await c.stack.clients.access.createDashboardLoginLink({ ownerId: "farm-owner" });
    await page.goto(url);
    await page.waitForSelector("#app:not([hidden])");
    await page.click('.tab[data-tab="referrals"]');
    await page.waitForSelector("#tab-referrals:not([hidden])");
    // The tab loads its data after showing itself: the mode arrives with it.
    await eventually(async () => ((await page.inputValue("#review-mode")) === "loose" ? true : undefined), { timeoutMs: 15_000, message: "mode shown" });
    await page.selectOption("#referral-review", "held");
    await page.click("#referral-search");
    await eventually(async () => ((await page.locator("#referrals-table tbody tr[data-referral-id]").count()) === FARM_SIZE ? true : undefined), {
      timeoutMs: 15_000,
      message: "the twenty held referrals are listed",
    });
    t.false((await leaderboardText(page)).includes("farmer"));
    const firstRow = (await page.textContent("#referrals-table tbody tr:first-child")) ?? "";
    t.regex(firstRow, /farmer/);
    t.regex(firstRow, /ip_fanout/);
    t.regex(firstRow, /held/);

    // The detail shows the signals and the events.
    await page.click("#referrals-table tbody tr:first-child button:has-text('Details')");
    await page.waitForSelector("#referral-detail:not([hidden])");
    const detail = (await page.textContent("#referral-detail")) ?? "";
    t.regex(detail, /no_activity/);
    t.regex(detail, /registered.*qualified/s);
    t.deepEqual(await findA11yViolations(page, { include: "#review-card" }), [], formatViolations(await findA11yViolations(page, { include: "#review-card" })));
    await page.screenshot({ path: join(c.shots, "referrals-review-held.png"), fullPage: true });

    // Approve them one by one (each approval reloads the held list, which shrinks).
    for (let left = FARM_SIZE; left > 0; left--) {
      await page.click("#referrals-table tbody tr:first-child button:has-text('Approve')");
      await eventually(async () => ((await page.locator("#referrals-table tbody tr[data-referral-id]").count()) === left - 1 ? true : undefined), {
        timeoutMs: 15_000,
        message: `${left - 1} held referrals left`,
      });
    }
    // The leaderboard reloads after each approval: wait for the one drawn after the last of them.
    const row = await eventually(
      async () => {
        const text = await leaderboardText(page);
        return /farmer\s*20/.test(text) ? text : undefined;
      },
      { timeoutMs: 15_000, message: "the leaderboard counts the farmer's 20 approved referrals" },
    );
    t.regex(row, /farmer\s*20/);
    const { entries } = await c.stack.clients.referral.getLeaderboard({ serverId: c.serverId });
    t.like(entries[0], { referrerIdentity: "farmer", credits: 20n });
    await page.screenshot({ path: join(c.shots, "referrals-review-approved.png"), fullPage: true });
    t.deepEqual(pageErrors, []);
  },
);
