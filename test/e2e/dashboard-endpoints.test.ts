/**
 * Callback endpoints on the Integration tab in a real browser (Debian's Chromium through playwright-core)
 * against the real stack: the owner, signed in through a login link, adds an endpoint subscribed to
 * `referral.qualified` with public-key `v1a` signatures on, sees its secret once, then sees it in the list
 * (event type, v1a badge, no secret); the reward callback's own v1a switch saves. At a phone's width (375 px) and a laptop's (1280 px): nothing scrolls
 * sideways, axe finds nothing on the endpoints card; screenshots go to
 * test-results/screenshots/endpoints-<width>.png. Then a Discord channel: the webhook URL, a vote message and its
 * preview; the list shows the webhook's id and the page never its token.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { launchChromium } from "../../scripts/infra/chromium.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { findA11yViolations, formatViolations } from "../helpers/axe.js";
import { type DashboardBrowserContext, LAPTOP, PHONE } from "../helpers/dashboard-browser.js";
import { eventually } from "../helpers/eventually.js";
import { screenshotDir } from "../helpers/screenshots.js";
import { startStack } from "../../scripts/harness/stack.js";

const TOKEN = `dash-${randomBytes(24).toString("base64url")}`;
const ENDPOINT_URL = "https://play.example.com/hooks/referrals-qualified";

interface Context extends DashboardBrowserContext {
  serverId: string;
}
const test = anyTest as TestFn<Context>;
const pageErrors: string[] = [];

test.before(async (t) => {
  const quiet = createLogger("dashboard-endpoints-e2e", process.env.TEST_LOG_LEVEL ?? "silent");
  let gatewayUrl = "";
  const stack = await startStack({
    gateway: false,
    log: quiet,
    // Login links point at the gateway with the dashboard.
    get publicBaseUrl() {
      return gatewayUrl;
    },
  });
  gatewayUrl = (await stack.startGateway({ log: quiet, dashboard: { token: TOKEN } })).url;
  const { admin, access } = stack.clients;
  await access.createOwner({ ownerId: "endpoint-owner", displayName: "Endpoint Owner" });
  const { server } = await admin.createServer({ name: "Endpoints server", registrationUrl: "" });
  const serverId = server!.id;
  await access.assignServer({ serverId, ownerId: "endpoint-owner" });
  await admin.setCallbackSettings({ serverId, callbackUrl: "https://play.example.com/hooks/hearts", standardWebhooks: true });
  const browser = await launchChromium({ viewport: LAPTOP });
  const page = await browser.context.newPage();
  page.on("console", (message) => {
    if (message.type() === "error" && !/status of 401 \(Unauthorized\)/.test(message.text())) pageErrors.push(message.text());
  });
  page.on("pageerror", (error) => pageErrors.push(error.message));
  t.context = { stack, gatewayUrl, browser, page, shots: screenshotDir(), serverId };
});

test.after.always(async (t) => {
  await t.context.browser?.close();
  await t.context.stack?.close();
});

async function endpointRows(page: Page): Promise<number> {
  return page.locator("#endpoints-list li.endpoint-item").count();
}

/** Sideways overflow of the page, in pixels (0: none). */
async function pageOverflow(page: Page): Promise<number> {
  return (await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
}

test.serial(
  "browser (owner): adds an endpoint for referral.qualified with v1a on, sees its secret once, then sees it in the list; switches v1a on the reward callback",
  async (t) => {
    const c = t.context;
    const { page } = c;
    const { url } = await c.stack.clients.access.createDashboardLoginLink({ ownerId: "endpoint-owner" });
    await page.goto(url);
    await page.waitForSelector("#app:not([hidden])");
    await page.click('.tab[data-tab="integration"]');
    await page.waitForSelector("#tab-integration:not([hidden])");
    await eventually(async () => ((await endpointRows(page)) === 1 ? true : undefined), { timeoutMs: 15_000, message: "the default endpoint is listed" });
    t.regex((await page.textContent("#endpoints-list")) ?? "", /default/);

    await page.click("#add-endpoint");
    await page.waitForSelector("#endpoint-form:not([hidden])");
    await page.fill("#endpoint-url", ENDPOINT_URL);
    await page.check('input[name="endpoint-event-type"][value="referral.qualified"]');
    await page.check("#endpoint-public-key");
    await page.selectOption("#endpoint-payload-version", "2");
    // The form at a phone's width: in view, labelled (axe), no sideways scroll.
    await page.setViewportSize(PHONE);
    t.true((await pageOverflow(page)) <= 0, "the form does not scroll sideways at 375 px");
    const formViolations = await findA11yViolations(page, { include: "#endpoints-card" });
    t.deepEqual(formViolations, [], `the form:\n${formatViolations(formViolations)}`);
    await page.locator("#endpoints-card").screenshot({ path: join(c.shots, "endpoints-form-375.png") });
    await page.setViewportSize(LAPTOP);
    await page.click("#save-endpoint");

    await page.waitForSelector("#endpoint-secret-box:not([hidden])");
    const secret = ((await page.textContent("#endpoint-secret-box-value")) ?? "").trim();
    t.regex(secret, /^whsec_/);
    t.regex((await page.textContent("#endpoint-secret-box")) ?? "", /Shown once/);
    t.true(await page.isHidden("#endpoint-form"));
    await eventually(async () => ((await endpointRows(page)) === 2 ? true : undefined), { timeoutMs: 15_000, message: "the new endpoint is listed" });
    const row = page.locator("#endpoints-list li.endpoint-item", { hasText: ENDPOINT_URL });
    const rowText = (await row.textContent()) ?? "";
    t.regex(rowText, /referral\.qualified/);
    t.regex(rowText, /v1a public key/);
    t.notRegex(rowText, /heart\.counted/);
    t.false(rowText.includes(secret), "the list never shows the secret");
    const [created] = (await c.stack.clients.admin.listEndpoints({ serverId: c.serverId })).endpoints.filter((e) => !e.isDefault);
    t.like(created, { url: ENDPOINT_URL, eventTypes: ["referral.qualified"], publicKeySignatures: true, standardWebhooks: false, payloadVersion: 2 });

    for (const viewport of [PHONE, LAPTOP]) {
      await page.setViewportSize(viewport);
      await page.waitForTimeout(200);
      t.true((await pageOverflow(page)) <= 0, `nothing scrolls sideways at ${viewport.width} px`);
      const violations = await findA11yViolations(page, { include: "#endpoints-card" });
      t.deepEqual(violations, [], `${viewport.width} px:\n${formatViolations(violations)}`);
      await page.locator("#endpoints-card").screenshot({ path: join(c.shots, `endpoints-${viewport.width}.png`) });
    }

    // The reward callback (the default endpoint) switches v1a on too; the list follows.
    await page.check("#public-key-signatures-switch");
    await page.click('#callback-form button[type="submit"]');
    await page.waitForSelector("#public-key-signatures:not([hidden])");
    t.like((await c.stack.clients.admin.getServer({ serverId: c.serverId })).server, { publicKeySignatures: true, standardWebhooks: true });
    await eventually(
      async () => (/v1a public key/.test((await page.locator("#endpoints-list li.endpoint-item").first().textContent()) ?? "") ? true : undefined),
      { timeoutMs: 15_000, message: "the default endpoint shows v1a" },
    );

    // Shown once: after a reload the page holds the endpoint, not its secret.
    await page.reload();
    await page.waitForSelector("#tab-integration:not([hidden])");
    await eventually(async () => ((await endpointRows(page)) === 2 ? true : undefined), { timeoutMs: 15_000, message: "listed after a reload" });
    t.true(await page.isHidden("#endpoint-secret-box"));
    t.false(((await page.content()) ?? "").includes(secret), "the secret is gone after a reload");
    t.deepEqual(pageErrors, []);
  },
);

test.serial("browser (owner): adds a Discord channel with a vote message, previews it, sees the webhook id in the list and never its token", async (t) => {
  const c = t.context;
  const { page } = c;
  const token = "BrowserWebhookTokenNeverShown_0123456789abc";
  await page.click("#add-discord");
  await page.waitForSelector("#discord-form:not([hidden])");
  await page.fill("#discord-webhook-url", `https://discord.com/api/webhooks/123456789012345676/${token}`);
  await page.fill("#discord-template", "{{player}} voted! {{month_total}} this month");
  await page.click("#preview-discord");
  await eventually(async () => ((await page.textContent("#discord-preview")) === "Steve voted! 12 this month" ? true : undefined), {
    timeoutMs: 15_000,
    message: "the preview shows the sample vote",
  });
  const violations = await findA11yViolations(page, { include: "#endpoints-card" });
  t.deepEqual(violations, [], `the Discord form:\n${formatViolations(violations)}`);
  await page.click("#save-discord");
  await eventually(async () => ((await endpointRows(page)) === 3 ? true : undefined), { timeoutMs: 15_000, message: "the Discord channel is listed" });
  const row = page.locator("#endpoints-list li.endpoint-item", { hasText: "Discord webhook 123456789012345676" });
  t.regex((await row.textContent()) ?? "", /Discord/);
  t.false(((await page.content()) ?? "").includes(token), "the page never holds the token");
  const discord = (await c.stack.clients.admin.listEndpoints({ serverId: c.serverId })).endpoints.find((e) => e.kind === "discord");
  t.deepEqual(
    discord?.discordTemplates.map((x) => [x.eventType, x.template]),
    [["heart.counted", "{{player}} voted! {{month_total}} this month"]],
  );
  t.deepEqual(pageErrors, []);
});
