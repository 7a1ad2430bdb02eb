/**
 * The claim card's "What to paste" part in a real browser (Debian's Chromium through playwright-core), at 1280 and 375 px,
 * against the referral service and a gateway with the dashboard mounted: per supported reward plugin, the values of
 * gateway/dashboard/static/plugin-setup.js (the one home the CLI and docs use too) for this list's address and server,
 * each with a Copy button; the claim key reads as a placeholder until minted, then the values carry it; nothing in the
 * card is wider than the screen.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { launchChromium, type LaunchedChromium } from "../../scripts/infra/chromium.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { CLAIM_KEY_PLACEHOLDER, pluginSetups } from "../../gateway/dashboard/static/plugin-setup.js";
import { screenshotDir } from "../helpers/screenshots.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";

const TOKEN = `dash-${randomBytes(24).toString("base64url")}`;

interface Context {
  stack: TestStack;
  gatewayUrl: string;
  browser: LaunchedChromium;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const stack = await startStack({ gateway: false, log: createLogger("dashboard-claim-setup", process.env.TEST_LOG_LEVEL ?? "silent") });
  const gatewayUrl = (await stack.startGateway({ dashboard: { token: TOKEN } })).url;
  const browser = await launchChromium();
  t.context = { stack, gatewayUrl, browser };
});
test.after.always(async (t) => {
  await t.context.browser?.close();
  await t.context.stack?.close();
});

/** The card's values as shown, per plugin id, in order. */
async function shownValues(page: Page): Promise<Record<string, string[]>> {
  return page.evaluate(`Object.fromEntries([...document.querySelectorAll("#claims-setup details.plugin-setup")].map((node) =>
    [node.dataset.plugin, [...node.querySelectorAll("pre.plugin-value")].map((pre) => pre.textContent)]))`);
}

for (const width of [1280, 375]) {
  test.serial(
    `browser at ${width} px: the claim card shows each plugin's values to paste with a Copy button, the claim key filled in once minted`,
    async (t) => {
      const { gatewayUrl, browser } = t.context;
      const page = await browser.context.newPage();
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${gatewayUrl}/dashboard`);
      await page.fill("#token-input", TOKEN);
      await page.click("#sign-in");
      await page.waitForSelector("#app:not([hidden])");
      await page.fill("#new-server-name", `Claim Setup ${width}`);
      await page.click("#create-server");
      await page.locator("#server-picker option", { hasText: `Claim Setup ${width}` }).waitFor({ state: "attached" });
      const serverId = await page.inputValue("#server-picker");
      await page.click('.tab[data-tab="integration"]');
      await page.waitForSelector("#claims-setup details.plugin-setup");

      const placeholders = pluginSetups({ base: gatewayUrl, serverId });
      t.deepEqual(await shownValues(page), Object.fromEntries(placeholders.map((s) => [s.id, s.values.map((v) => v.value)])), "before a key: the placeholder");
      t.true((await shownValues(page)).easyvote?.includes(`${serverId}:${CLAIM_KEY_PLACEHOLDER}`));

      await page.click("#rotate-claim-secret");
      await page.waitForSelector("#claim-secret-box:not([hidden])");
      const claimKey = ((await page.textContent("#claim-secret-box-value")) ?? "").trim();
      t.regex(claimKey, /^vck_/);
      await page.locator("#claims-setup pre.plugin-value", { hasText: claimKey }).first().waitFor({ state: "attached" });
      const filled = pluginSetups({ base: gatewayUrl, serverId, claimKey });
      t.deepEqual(
        await shownValues(page),
        Object.fromEntries(filled.map((s) => [s.id, s.values.map((v) => v.value)])),
        "after minting: the key in every value",
      );
      t.true((await shownValues(page)).easyvote?.includes(`${serverId}:${claimKey}`), "EasyVoteExtended's <server id>:<claim key>");
      const copies = await page.$$eval("#claims-setup pre.plugin-value", (pres) =>
        pres.map((pre) => pre.nextElementSibling?.getAttribute("data-copy") === pre.id),
      );
      t.true(copies.length > 0 && copies.every(Boolean), "every value has its Copy button");

      await page.evaluate('for (const node of document.querySelectorAll("#claims-setup details.plugin-setup")) node.open = true');
      const overflow = await page.$eval("#claims-card", (card) => card.scrollWidth - card.clientWidth);
      t.true(overflow <= 0, `the card fits the screen (overflow ${overflow} px)`);
      await page.locator("#claims-setup").screenshot({ path: join(screenshotDir(), `dashboard-claim-setup-${width}.png`) });
      await page.close();
    },
  );
}
