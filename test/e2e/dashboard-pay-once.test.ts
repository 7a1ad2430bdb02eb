/**
 * The claim settings card's pay-once switch in a real browser (Debian's Chromium through playwright-core),
 * against the referral service and a gateway with the dashboard mounted: off by default, turned on and
 * saved, shown on after a reload, and in effect on the server (GetServer).
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import type { Page } from "playwright-core";
import { launchChromium, type LaunchedChromium } from "../../scripts/infra/chromium.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";

const TOKEN = `dash-${randomBytes(24).toString("base64url")}`;

interface Context {
  stack: TestStack;
  gatewayUrl: string;
  browser: LaunchedChromium;
  page: Page;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const stack = await startStack({ gateway: false, log: createLogger("dashboard-pay-once", process.env.TEST_LOG_LEVEL ?? "silent") });
  const gatewayUrl = (await stack.startGateway({ dashboard: { token: TOKEN } })).url;
  const browser = await launchChromium();
  const page = await browser.context.newPage();
  t.context = { stack, gatewayUrl, browser, page };
});
test.after.always(async (t) => {
  await t.context.browser?.close();
  await t.context.stack?.close();
});

/** Dismisses any message, runs `action`, and returns the message it brought up. */
async function flashAfter(page: Page, action: () => Promise<unknown>): Promise<string> {
  await page.evaluate('document.getElementById("flash").hidden = true');
  await action();
  await page.waitForSelector("#flash:not([hidden])");
  return (await page.textContent("#flash-text")) ?? "";
}

test.serial("browser: the claim settings card's pay-once switch is off by default, saves on, and shows on after a reload", async (t) => {
  const { page, gatewayUrl, stack } = t.context;
  await page.goto(`${gatewayUrl}/dashboard`);
  await page.fill("#token-input", TOKEN);
  await page.click("#sign-in");
  await page.waitForSelector("#app:not([hidden])");
  await page.fill("#new-server-name", "Pay Once Server");
  await flashAfter(page, () => page.click("#create-server"));
  const serverId = await page.inputValue("#server-picker");
  await page.click('.tab[data-tab="integration"]');
  await page.waitForSelector("#tab-integration:not([hidden])");

  t.false(await page.isChecked("#claims-pays-once"), "off by default");
  await page.check("#claims-pays-once");
  t.regex(await flashAfter(page, () => page.click("#save-claims")), /^Claim settings saved/);
  t.true((await stack.clients.admin.getServer({ serverId })).server!.claims!.paysOnce, "the server is in pay-once mode");

  await page.reload();
  await page.waitForSelector("#app:not([hidden])");
  await page.click('.tab[data-tab="integration"]');
  await page.waitForSelector("#tab-integration:not([hidden])");
  await page.locator("#claims-pays-once:checked").waitFor();
  t.true(await page.isChecked("#claims-pays-once"));
});
