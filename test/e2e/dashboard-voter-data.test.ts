/**
 * The Hearts tab's "A voter's data" form in a real browser (Debian's Chromium through playwright-core), against the
 * referral service and a gateway with the dashboard mounted: Export downloads the voter's JSON document; Erase asks
 * for confirmation (a dismissed dialog erases nothing), then erases and shows the tombstone.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { Page } from "playwright-core";
import { launchChromium, type LaunchedChromium } from "../../scripts/infra/chromium.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { retryOverloaded } from "../helpers/retry-overloaded.js";

const TOKEN = `dash-${randomBytes(24).toString("base64url")}`;

interface Context {
  stack: TestStack;
  gatewayUrl: string;
  browser: LaunchedChromium;
  page: Page;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const stack = await startStack({ gateway: false, log: createLogger("dashboard-voter-data", process.env.TEST_LOG_LEVEL ?? "silent") });
  const gatewayUrl = (await stack.startGateway({ dashboard: { token: TOKEN } })).url;
  const browser = await launchChromium();
  const page = await browser.context.newPage();
  t.context = { stack, gatewayUrl, browser, page };
});
test.after.always(async (t) => {
  await t.context.browser?.close();
  await t.context.stack?.close();
});

test.serial("browser: the voter data form exports the voter as a JSON download, and erases them only after the confirmation", async (t) => {
  const { page, gatewayUrl, stack } = t.context;
  await page.goto(`${gatewayUrl}/dashboard`);
  await page.fill("#token-input", TOKEN);
  await page.click("#sign-in");
  await page.waitForSelector("#app:not([hidden])");
  await page.fill("#new-server-name", "Voter Data Server");
  await page.evaluate('document.getElementById("flash").hidden = true');
  await page.click("#create-server");
  await page.waitForSelector("#flash:not([hidden])");
  const serverId = await page.inputValue("#server-picker");
  const cast = await retryOverloaded(() =>
    stack.clients.hearts.castHeart({
      serverId,
      username: "Ui_Voter",
      voterIdentity: "ui-voter",
      ip: "198.51.100.41",
      userAgent: "Mozilla/5.0 UiVoter",
    }),
  );
  await page.click('.tab[data-tab="hearts"]');
  await page.waitForSelector("#voter-data-card");

  await page.selectOption("#voter-data-kind", "username");
  await page.fill("#voter-data-key", "ui_voter");
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#voter-data-export")]);
  t.is(download.suggestedFilename(), `voter-data-${serverId}.json`);
  const doc = JSON.parse(await readFile((await download.path())!, "utf8")) as { servers: { hearts: { id: string }[] }[] };
  t.deepEqual(
    doc.servers[0]!.hearts.map((h) => h.id),
    [cast.heartId],
    "the download is the voter's export",
  );

  const erasures: string[] = [];
  page.on("request", (request) => void (request.url().endsWith("/voter-data/erase") && erasures.push(request.method())));
  page.once("dialog", (dialog) => void dialog.dismiss());
  await page.click("#voter-data-erase");
  await page.locator("#voter-data-result", { hasText: "Not erased." }).waitFor();
  // The page sends an erasure in the same task as it shows its result; the round trips below let its request event arrive.
  t.is((await stack.prisma.heart.findUniqueOrThrow({ where: { id: cast.heartId } })).username, "Ui_Voter", "a dismissed confirmation erases nothing");
  t.deepEqual(erasures, [], "and sends nothing");

  page.once("dialog", (dialog) => void dialog.accept());
  await page.click("#voter-data-erase");
  await page.locator("#voter-data-result", { hasText: /^Erased/ }).waitFor();
  const shown = (await page.textContent("#voter-data-result")) ?? "";
  const heart = await stack.prisma.heart.findUniqueOrThrow({ where: { id: cast.heartId } });
  t.regex(heart.username, /^erased:/);
  t.true(shown.includes(heart.username), "the page shows the tombstone");
  t.regex(shown, /^Erased: 1 heart;/);
  t.deepEqual(erasures, ["POST"], "one erasure request, after the confirmation");
  const audit = (await stack.clients.voters.listVoterDataAudit({ limit: 50 })).entries.filter((e) => e.serverId === serverId);
  t.deepEqual(
    audit.map((e) => e.action),
    ["erase", "export"],
    "one erasure: the dismissed confirmation sent nothing",
  );
});
