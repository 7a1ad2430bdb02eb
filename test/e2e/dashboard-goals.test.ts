/**
 * The Goals tab in a real browser (Chromium through playwright-core) at a phone's width (375 px) and a laptop's
 * (1280 px), against the referral service and a gateway with the dashboard mounted: an owner sees their own network
 * goals (never another owner's) with the target, the round counted now, its progress and the rounds reached; the card
 * says goals are defined with the CLI or the API and links the docs; Delete asks first, and once accepted the goal
 * leaves the list and counts nothing more. axe finds no serious or critical violation; nothing scrolls sideways.
 * Screenshots go to test-results/screenshots/goals-<width>.png.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { launchChromium } from "../../scripts/infra/chromium.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { countGoalVotesOf } from "../../services/rewards/count-goal-votes.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { findA11yViolations, formatViolations } from "../helpers/axe.js";
import { type DashboardBrowserContext, LAPTOP, PHONE } from "../helpers/dashboard-browser.js";
import { countedHeart } from "../helpers/reward-votes.js";
import { screenshotDir } from "../helpers/screenshots.js";

const TOKEN = `dash-${randomBytes(24).toString("base64url")}`;
const test = anyTest as TestFn<DashboardBrowserContext & { ownerId: string; goals: { spring: string; summer: string; theirs: string } }>;
const log = createLogger("dashboard-goals-e2e", process.env.TEST_LOG_LEVEL ?? "silent");

/** `count` servers of a new owner. */
async function ownerWithServers(stack: TestStack, ownerId: string, count: number): Promise<string[]> {
  await stack.clients.access.createOwner({ ownerId, displayName: `Owner ${ownerId}` });
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const { server } = await stack.clients.admin.createServer({ name: `${ownerId}-${i}` });
    await stack.clients.access.assignServer({ serverId: server!.id, ownerId });
    ids.push(server!.id);
  }
  return ids;
}

const heart = (i: number, serverId: string) => countedHeart({ prefix: "goals-card", name: "V", from: "2027-04-01T10:00:00Z" }, i, serverId);

test.before(async (t) => {
  let gatewayUrl = "";
  const stack = await startStack({
    gateway: false,
    log,
    // Login links point at the gateway with the dashboard.
    get publicBaseUrl() {
      return gatewayUrl;
    },
  });
  gatewayUrl = (await stack.startGateway({ log, dashboard: { token: TOKEN } })).url;
  const ownerId = `goals-card-${randomBytes(3).toString("hex")}`;
  const mine = await ownerWithServers(stack, ownerId, 2);
  const theirs = await ownerWithServers(stack, `${ownerId}-other`, 1);
  const rewardsJson = JSON.stringify([{ commands: ["give {player} cake 1"] }]);
  const put = (name: string, serverIds: string[], target: number) =>
    stack.clients.goals.putNetworkGoal({ name, serverIds, target, payees: "voters", rewardsJson }).then((r) => r.goalId);
  const goals = {
    spring: await put("Spring party", mine, 4),
    summer: await put("Summer party", mine.slice(0, 1), 10),
    theirs: await put("Their party", theirs, 5),
  };
  // Five counted votes: the Spring party is reached once (round 1) and counts 1 of 4 in round 2; the Summer party (the first server only) 2 of 10.
  await countGoalVotesOf(stack.prisma, [heart(1, mine[0]!), heart(2, mine[1]!), heart(3, mine[0]!), heart(4, mine[1]!), heart(5, mine[1]!)], log);
  const browser = await launchChromium({ viewport: LAPTOP });
  const page = await browser.context.newPage();
  const { url } = await stack.clients.access.createDashboardLoginLink({ ownerId });
  await page.goto(url);
  await page.waitForSelector("#app:not([hidden])");
  t.context = { stack, gatewayUrl, browser, page, shots: screenshotDir(), ownerId, goals };
});

test.after.always(async (t) => {
  await t.context.browser?.close();
  await t.context.stack?.close();
});

/** The card's rows as [name, servers, round, progress text, progress bar value and max, reached]. */
async function goalRows(t: { context: DashboardBrowserContext }) {
  return t.context.page.evaluate(`[...document.querySelectorAll("#goals-rows tr[data-goal-id]")].map((r) => {
    const c = r.cells;
    const bar = c[3].querySelector("progress");
    return [c[0].querySelector("strong").textContent, c[1].textContent, c[2].textContent, c[3].querySelector(".goal-progress-text").textContent.trim(),
      bar.value + "/" + bar.max, c[4].textContent.replace(/, last .*/, ", last ...")];
  })`) as Promise<string[][]>;
}

test.serial(
  "the Goals tab lists the owner's own goals with target, round, progress and rounds reached; it says goals are defined with the CLI or the API and links the docs; axe-clean and no sideways scroll at 375 and 1280 px",
  async (t) => {
    const { page, gatewayUrl, shots } = t.context;
    await page.click('.tab[data-tab="goals"]');
    await page.waitForSelector("#tab-goals:not([hidden])");
    await page.locator("#goals-rows tr[data-goal-id]").first().waitFor();
    // Sorted by name: the two goals were created within moments of each other (the list's order is by creation).
    t.deepEqual(
      (await goalRows(t)).sort((x, y) => (x[0] as string).localeCompare(y[0] as string)),
      [
        ["Spring party", "2", "2", "1 / 4", "1/4", "1, last ..."],
        ["Summer party", "1", "1", "2 / 10", "2/10", "Not yet"],
      ],
    );
    t.false(((await page.textContent("#goals-card")) ?? "").includes("Their party"), "another owner's goal is not listed");
    const hint = (await page.textContent("#goals-card .hint")) ?? "";
    t.regex(hint, /created and edited with npx rcb goals put or the API/);
    const href = (await page.getAttribute('#goals-card .hint a[href^="/docs/"]', "href")) ?? "";
    const docs = await fetch(`${gatewayUrl}${href}`, { headers: { accept: "text/html" } });
    t.is(docs.status, 200, href);
    t.true((await docs.text()).includes(`id="${href.split("#")[1]}"`), `the docs link's anchor ${href} exists`);

    for (const viewport of [PHONE, LAPTOP]) {
      await page.setViewportSize(viewport);
      const sideways = (await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
      t.true(sideways <= 0, `${viewport.width} px: the page scrolls ${sideways} px sideways`);
      const violations = await findA11yViolations(page, { include: "#goals-card" });
      t.deepEqual(violations, [], `${viewport.width} px:\n${formatViolations(violations)}`);
      await page.locator("#goals-card").screenshot({ path: join(shots, `goals-${viewport.width}.png`) });
    }
  },
);

test.serial("Delete asks first; once accepted the goal leaves the list and is gone for the API too; another owner's goal stays", async (t) => {
  const { page, stack, goals } = t.context;
  const summerRow = page.locator(`#goals-rows tr[data-goal-id="${goals.summer}"]`);
  page.once("dialog", (dialog) => void dialog.dismiss());
  await page.click('button[aria-label="Delete goal Summer party"]');
  t.is(await summerRow.count(), 1, "a dismissed confirmation deletes nothing");
  page.once("dialog", (dialog) => void dialog.accept());
  await page.click('button[aria-label="Delete goal Summer party"]');
  await page.locator("#goals-message", { hasText: 'Deleted "Summer party".' }).waitFor();
  await summerRow.waitFor({ state: "detached" });
  t.deepEqual(
    (await goalRows(t)).map((r) => r[0]),
    ["Spring party"],
  );
  const gone = await stack.clients.goals.getNetworkGoal({ goalId: goals.summer }).then(
    () => "still there",
    (e: unknown) => Code[ConnectError.from(e).code],
  );
  t.is(gone, "NotFound");
  t.like(await stack.clients.goals.getNetworkGoal({ goalId: goals.theirs }), { name: "Their party" }, "another owner's goal is untouched");
});
