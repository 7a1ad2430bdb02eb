/**
 * The Integration tab's Rewards card in a real browser (Debian's Chromium through playwright-core), against the
 * referral service and a gateway with the dashboard mounted: the owner edits the rules as JSON and saves them; an
 * invalid edit and a save after someone else's are refused with the service's words; the preview shows what a vote
 * gives; the pending queue lists an entry; the re-queue of a day asks first and then queues that day's acknowledged
 * entries again.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import type { Page } from "playwright-core";
import { launchChromium, type LaunchedChromium } from "../../scripts/infra/chromium.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { ackRewardEntries, queueRewardEntries } from "../../services/rewards/reward-queue-store.js";
import { runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
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
  const stack = await startStack({ gateway: false, log: createLogger("dashboard-rewards", process.env.TEST_LOG_LEVEL ?? "silent") });
  const gatewayUrl = (await stack.startGateway({ dashboard: { token: TOKEN } })).url;
  const browser = await launchChromium();
  const page = await browser.context.newPage();
  t.context = { stack, gatewayUrl, browser, page };
});
test.after.always(async (t) => {
  await t.context.browser?.close();
  await t.context.stack?.close();
});

test.serial(
  "browser: the Rewards card saves, refuses bad and stale edits with the service's words, previews, lists the queue and re-queues a day",
  async (t) => {
    const { page, gatewayUrl, stack } = t.context;
    await page.goto(`${gatewayUrl}/dashboard`);
    await page.fill("#token-input", TOKEN);
    await page.click("#sign-in");
    await page.waitForSelector("#app:not([hidden])");
    await page.fill("#new-server-name", "Rewards Server");
    await page.evaluate('document.getElementById("flash").hidden = true');
    await page.click("#create-server");
    await page.waitForSelector("#flash:not([hidden])");
    const serverId = await page.inputValue("#server-picker");
    await page.click('.tab[data-tab="integration"]');
    await page.locator("#rewards-version", { hasText: "No rules saved yet" }).waitFor();

    await page.fill("#rewards-rules", JSON.stringify({ perVote: [{ commands: ["give {playr} diamond 1"] }] }));
    await page.click("#rewards-save");
    await page.locator("#rewards-message", { hasText: "unknown placeholder {playr}" }).waitFor();
    await page.fill("#rewards-rules", JSON.stringify({ perVote: [{ commands: ["give {player} diamond 1"], onlineOnly: false }] }));
    await page.click("#rewards-save");
    await page.locator("#rewards-message", { hasText: "Saved as version 1." }).waitFor();
    t.is((await stack.clients.rewards.getRewardRules({ serverId })).version, 1);

    await page.fill("#rewards-preview-player", "Alex");
    await page.click("#rewards-preview");
    await page.locator("#rewards-preview-result", { hasText: "vote: give Alex diamond 1" }).waitFor();

    // Someone else saves meanwhile: this editor's save (from version 1) is refused, nothing overwritten.
    await stack.clients.rewards.putRewardRules({
      serverId,
      baseVersion: 1,
      rulesJson: JSON.stringify({ perVote: [{ commands: ["give {player} emerald 1"] }] }),
    });
    await page.click("#rewards-save");
    await page.locator("#rewards-message", { hasText: "changed since version 1 was read (now version 2)" }).waitFor();
    t.is((await stack.clients.rewards.getRewardRules({ serverId })).version, 2, "the other save stands");

    await runSqlTransaction(
      stack.prisma,
      async (tx) => {
        const [id] = await queueRewardEntries(tx, {
          serverId,
          heartId: null,
          player: { username: "Steve", steamId: null, discordId: null, minecraftUuid: null, accountId: null },
          rulesVersion: 1,
          entries: [{ key: "ui:vote:0", reason: "vote", commands: ["give Steve diamond 1"], onlineOnly: false }],
        });
        await ackRewardEntries(tx, { serverId, ids: [id!], at: new Date("2026-11-20T10:00:00Z") });
      },
      { timeoutMs: 10_000 },
    );
    await page.click("#rewards-reload");
    await page.locator("#rewards-queue-rows", { hasText: "Nothing pending." }).waitFor();
    await page.fill("#rewards-requeue-from", "2026-11-20");
    await page.fill("#rewards-requeue-to", "2026-11-20");
    page.once("dialog", (dialog) => void dialog.dismiss());
    await page.click("#rewards-requeue");
    await page.locator("#rewards-queue-rows", { hasText: "Nothing pending." }).waitFor();
    page.once("dialog", (dialog) => void dialog.accept());
    await page.click("#rewards-requeue");
    await page.locator("#rewards-message", { hasText: "1 re-queued of 1 looked at." }).waitFor();
    await page.locator("#rewards-queue-rows", { hasText: "give Steve diamond 1" }).waitFor();
    t.is((await stack.clients.rewardQueue.listRewardQueue({ serverId })).entries.length, 1, "the day's acknowledged entry is pending again, once");
  },
);
