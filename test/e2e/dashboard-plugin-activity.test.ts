/**
 * The plugin activity card (Integration tab) in a real browser (Chromium through playwright-core) at a phone's
 * width (375 px) and a laptop's (1280 px), on the real stack with the gateway's production flush interval: a
 * reward plugin that sends a wrong key and one that sends a malformed SteamID are both answered `0`, exactly as
 * a player who never voted; the card tells them apart within seconds, with a hint that says what to change.
 * Screenshots go to test-results/screenshots/plugin-activity-<width>.png.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { launchChromium } from "../../scripts/infra/chromium.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { type DashboardBrowserContext, LAPTOP, PHONE } from "../helpers/dashboard-browser.js";
import { eventually } from "../helpers/eventually.js";
import { pluginGet } from "../../scripts/harness/plugin-clients.js";
import { screenshotDir } from "../helpers/screenshots.js";
import { startStack } from "../../scripts/harness/stack.js";

const TOKEN = `dash-${randomBytes(24).toString("base64url")}`;
const test = anyTest as TestFn<DashboardBrowserContext>;
/** A server with a claim key per viewport, made before signing in so the picker lists them. */
const servers = new Map<number, { serverId: string; claimKey: string }>();

test.before(async (t) => {
  const quiet = createLogger("dashboard-plugin-activity-e2e", process.env.TEST_LOG_LEVEL ?? "silent");
  const stack = await startStack({ gateway: false, log: quiet });
  const { url: gatewayUrl } = await stack.startGateway({ log: quiet, dashboard: { token: TOKEN } });
  for (const viewport of [PHONE, LAPTOP]) {
    const { server } = await stack.clients.admin.createServer({ name: `Plugin activity ${viewport.width}` });
    const { claimKey } = await stack.clients.admin.rotateClaimKey({ serverId: server!.id });
    servers.set(viewport.width, { serverId: server!.id, claimKey });
  }
  const browser = await launchChromium({ viewport: LAPTOP });
  const page = await browser.context.newPage();
  await page.goto(`${gatewayUrl}/dashboard`);
  await page.fill("#token-input", TOKEN);
  await page.click("#sign-in");
  await page.waitForSelector("#app:not([hidden])");
  t.context = { stack, gatewayUrl, browser, page, shots: screenshotDir() };
});

test.after.always(async (t) => {
  await t.context.browser?.close();
  await t.context.stack?.close();
});

async function openIntegrationOf(page: Page, serverId: string): Promise<void> {
  if ((await page.inputValue("#server-picker")) !== serverId) await page.selectOption("#server-picker", serverId);
  await page.evaluate('location.hash = "#integration"');
  await page.waitForSelector("#tab-integration:not([hidden])");
}

for (const viewport of [PHONE, LAPTOP]) {
  test.serial(
    `${viewport.width} px: a wrong key and a malformed SteamID, both answered 0, show in the plugin activity card within seconds, each with a hint saying what to change`,
    async (t) => {
      const { page, gatewayUrl, shots } = t.context;
      await page.setViewportSize(viewport);
      const { serverId, claimKey } = servers.get(viewport.width)!;
      await openIntegrationOf(page, serverId);

      const empty = page.locator("#plugin-activity-rows td.empty");
      await empty.waitFor();
      t.regex(
        (await empty.textContent()) ?? "",
        /No plugin calls yet\. Put the values from "What to paste" above into your reward plugin/,
        "the empty card says what to do next",
      );

      const wrongKey = `vck_${randomBytes(32).toString("base64url").slice(0, 43)}`;
      const wrong = await pluginGet(`${gatewayUrl}/api/votes?action=status&key=${wrongKey}&server=${serverId}&steamid=76561198000000042`);
      const malformed = await pluginGet(`${gatewayUrl}/api/?object=votes&element=claim&key=${claimKey}&steamid=STEAM_0:1:42`);
      t.deepEqual([wrong.body, malformed.body], ["0", "0"], "the plugins get 0 for both, as for a player who never voted");

      const hints = await eventually(
        async () => {
          const texts = await page.locator(".plugin-activity-hint").allTextContents();
          return texts.length === 2 ? texts : undefined;
        },
        { timeoutMs: 20_000, message: "both hints in the card" },
      );
      t.true(
        hints.some(
          (h) =>
            h.startsWith("Your plugin calling /api/votes") &&
            h.includes("sends a key this server does not have") &&
            h.includes('paste the claim key from "Claim key" above'),
        ),
        hints.join(" | "),
      );
      t.true(
        hints.some((h) => h.startsWith("Your plugin calling /api/ (") && h.includes("not a SteamID64") && h.includes('The last one was "STEAM_0:1:42"')),
        hints.join(" | "),
      );
      const counts = async (path: string) =>
        page.evaluate(`(() => {
        const row = [...document.querySelectorAll("#plugin-activity-rows tr")].find((r) => r.dataset.path === ${JSON.stringify(path)});
        return Object.fromEntries([...row.querySelectorAll("td[data-outcome]")].map((c) => [c.dataset.outcome, c.textContent]));
      })()`);
      t.deepEqual(await counts("/api/votes"), { ok: "0", never_voted: "0", wrong_key: "1", malformed_id: "0" });
      t.deepEqual(await counts("/api/"), { ok: "0", never_voted: "0", wrong_key: "0", malformed_id: "1" });

      const html = await page.content();
      t.false(html.includes(wrongKey), "the wrong key is nowhere on the page");
      const sideways = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth");
      t.true((sideways as number) <= 0, `the page scrolls ${sideways} px sideways`);
      await page.locator("#plugin-activity-card").screenshot({ path: join(shots, `plugin-activity-${viewport.width}.png`) });
    },
  );
}
