/**
 * The voter's receipt page in a real browser (Debian Chromium through playwright-core) at a phone's width (375 px)
 * and a laptop's (1280 px), on the real stack (PostgreSQL, Kafka, relay, delivery worker, a real receiver): a counted
 * heart delivered by callback and waiting for the server's pull, a counted heart whose callback could not be
 * delivered, a cooldown heart, a heart that did not count (with a long name as typed), hearts of a server with a claim
 * ledger (ready to claim in game, claimed), and an unknown receipt.
 *
 * Each page: its one stylesheet applies under the strict CSP (no violation reported, the styles are in effect),
 * nothing makes it scroll sideways, its main box lies inside the viewport, its text says the verdict, and axe finds
 * no serious or critical violation. Screenshots go to test-results/screenshots/receipt-<width>-<case>.png.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { createClient } from "@connectrpc/connect";
import { ClaimService, ClaimStatus, PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { launchChromium, type LaunchedChromium } from "../../scripts/infra/chromium.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { findA11yViolations, formatViolations } from "../helpers/axe.js";
import { eventually } from "../helpers/eventually.js";
import { startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { screenshotDir } from "../helpers/screenshots.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { retryOverloaded } from "../helpers/retry-overloaded.js";

const UA = "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0";
const PHONE = { width: 375, height: 812 };
const LAPTOP = { width: 1280, height: 900 };

interface Context {
  stack: TestStack;
  ok: Receiver;
  failing: Receiver;
  browser: LaunchedChromium;
  page: Page;
  shots: string;
  /** Receipt URL by case name, and the text each page must show. */
  cases: Array<{ name: string; url: string; says: RegExp; status: number }>;
  cspViolations: string[];
}
const test = anyTest as TestFn<Context>;
let ipSeq = 20;

test.before(async (t) => {
  const quiet = createLogger("receipt-page-e2e", process.env.TEST_LOG_LEVEL ?? "silent");
  const stack = await startStack({
    allowInsecureCallbacks: true,
    log: quiet,
    // Two attempts 300 ms apart, then failed.
    pipeline: {
      name: "receipt-page",
      delivery: { schedule: parseRetrySchedule("300ms", { jitterRatio: 0 }), pollIntervalMs: 100, allowInsecureCallbacks: true },
    },
  });
  const ok = await startReceiver();
  const failing = await startReceiver();
  failing.setFallback({ status: 503, body: "maintenance" });
  const browser = await launchChromium({ viewport: PHONE });
  const page = await browser.context.newPage();
  const cspViolations: string[] = [];
  page.on("console", (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) cspViolations.push(message.text());
  });
  t.context = { stack, ok, failing, browser, page, shots: screenshotDir(), cases: [], cspViolations };
});

test.after.always(async (t) => {
  await t.context.browser?.close();
  await t.context.stack?.close();
  await t.context.ok?.close();
  await t.context.failing?.close();
});

async function cast(c: Context, serverId: string, username: string, voterIdentity = `voter-${randomBytes(4).toString("hex")}`) {
  ipSeq += 1;
  const answer = await retryOverloaded(() => c.stack.clients.hearts.castHeart({ serverId, username, voterIdentity, ip: `203.0.113.${ipSeq}`, userAgent: UA }));
  return { answer, voterIdentity };
}

async function deliveries(c: Context, heartId: string, expected: Record<string, string>): Promise<void> {
  await eventually(
    async () => {
      const rows = await c.stack.prisma.delivery.findMany({ where: { heartId } });
      return rows.length === Object.keys(expected).length && rows.every((r) => expected[r.transport] === r.status);
    },
    { timeoutMs: 30_000, message: `deliveries of ${heartId}: ${JSON.stringify(expected)}` },
  );
}

test.serial("hearts with every kind of receipt: delivered and waiting, not delivered, cooldown, not counted, unknown", async (t) => {
  const c = t.context;
  const admin = c.stack.clients.admin;
  const { server } = await admin.createServer({ name: "Emerald Isle Survival & Creative — a server with a rather long name for a phone" });
  const serverId = server!.id;
  await admin.setCallbackSettings({ serverId, callbackUrl: c.ok.url, standardWebhooks: false });
  await admin.setPullEnabled({ serverId, enabled: true });
  const counted = await cast(c, serverId, "Herobrine");
  await deliveries(c, counted.answer.heartId, { callback: "delivered", pull: "pending" });
  const again = await cast(c, serverId, "Herobrine", counted.voterIdentity);
  const refused = await cast(c, serverId, "xX_Dragon<Slayer>_of_the_Northern_Realms_Xx");

  const { server: flaky } = await admin.createServer({ name: "Flaky Fields" });
  await admin.setCallbackSettings({ serverId: flaky!.id, callbackUrl: c.failing.url, standardWebhooks: false });
  const failed = await cast(c, flaky!.id, "Alex");
  await deliveries(c, failed.answer.heartId, { callback: "failed" });

  const { server: rusty } = await admin.createServer({ name: "Rusty Claims" });
  const { claimKey } = await admin.rotateClaimKey({ serverId: rusty!.id });
  const claimedHeart = await cast(c, rusty!.id, "Garry");
  const claims = createClient(ClaimService, createServiceTransport(c.stack.rpcUrl, TEST_SERVICE_TOKEN));
  t.is((await claims.claimVote({ claimKey, player: { kind: PlayerIdKind.USERNAME, value: "Garry" } })).status, ClaimStatus.CLAIMED_NOW);
  const heldHeart = await cast(c, rusty!.id, "Facepunch_Fan");

  t.true(counted.answer.counted);
  t.false(again.answer.counted);
  t.false(refused.answer.counted);
  c.cases.push(
    { name: "counted", url: counted.answer.receiptUrl, says: /Your vote counted[\s\S]*Delivered[\s\S]*Waiting/, status: 200 },
    { name: "failed", url: failed.answer.receiptUrl, says: /Your vote counted[\s\S]*Not delivered/, status: 200 },
    { name: "cooldown", url: again.answer.receiptUrl, says: /Not counted: you already voted[\s\S]*You can vote again from/, status: 200 },
    { name: "not-counted", url: refused.answer.receiptUrl, says: /This vote was not counted/, status: 200 },
    { name: "claim-held", url: heldHeart.answer.receiptUrl, says: /Your vote counted[\s\S]*Reward in game[\s\S]*Ready to claim/, status: 200 },
    { name: "claim-claimed", url: claimedHeart.answer.receiptUrl, says: /Reward in game[\s\S]*Claimed in game at/, status: 200 },
    { name: "unknown", url: `${c.stack.gatewayUrl}/receipts/${randomBytes(33).toString("base64url")}`, says: /Receipt not found/, status: 404 },
  );
});

/** What lies outside the viewport, and whether the page's stylesheet is in effect. */
async function layoutOf(page: Page): Promise<{ overflow: number; mainLeft: number; mainRight: number; styled: boolean; width: number }> {
  return (await page.evaluate(`(() => {
    const main = document.querySelector("main").getBoundingClientRect();
    return {
      overflow: document.documentElement.scrollWidth - window.innerWidth,
      mainLeft: main.left,
      mainRight: main.right,
      width: window.innerWidth,
      // The stylesheet gives <main> a border radius; blocked by the CSP, it would have none.
      styled: getComputedStyle(document.querySelector("main")).borderTopLeftRadius === "12px",
    };
  })()`)) as { overflow: number; mainLeft: number; mainRight: number; styled: boolean; width: number };
}

for (const viewport of [PHONE, LAPTOP]) {
  test.serial(`${viewport.width} px: every receipt page is styled under its CSP, fits the width, says its verdict, and passes axe`, async (t) => {
    const c = t.context;
    t.true(c.cases.length === 7, "the receipts were made");
    await c.page.setViewportSize(viewport);
    const problems: string[] = [];
    for (const kase of c.cases) {
      const response = await c.page.goto(kase.url);
      t.is(response?.status(), kase.status, kase.name);
      await c.page.screenshot({ path: join(c.shots, `receipt-${viewport.width}-${kase.name}.png`), fullPage: true });
      const layout = await layoutOf(c.page);
      if (layout.overflow > 0) problems.push(`${kase.name}: the page scrolls sideways by ${layout.overflow} px`);
      if (layout.mainLeft < 0 || layout.mainRight > layout.width)
        problems.push(`${kase.name}: the receipt box lies at ${layout.mainLeft}..${layout.mainRight}`);
      if (!layout.styled) problems.push(`${kase.name}: the stylesheet is not in effect`);
      const text = (await c.page.textContent("main")) ?? "";
      if (!kase.says.test(text)) problems.push(`${kase.name}: the page does not say ${kase.says}: ${text}`);
      for (const v of await findA11yViolations(c.page)) problems.push(`${kase.name}: axe ${formatViolations([v])}`);
    }
    t.deepEqual(problems, []);
    t.deepEqual(c.cspViolations, [], "no CSP violation");
  });
}
