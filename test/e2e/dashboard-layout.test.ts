/**
 * The dashboard's layout in a real browser (Chromium through playwright-core) at a phone's width (375 px)
 * and a laptop's (1280 px), on the real stack with realistic rows: a long server name, referral secrets
 * (Reveal, Revoke), delivered and failed deliveries with a long error (Attempts, Redeliver), hearts, and a
 * callback disabled by a 410.
 *
 * Geometry, not looks: nothing makes the page scroll sideways; every action button and status badge in a table
 * lies inside the viewport and inside its table's visible box; the server picker is inside the viewport; the tab
 * bar either shows every tab or scrolls with a visible cue and reaches its last tab; the Integration tab shows one
 * "Callbacks are disabled" notice with one Re-enable button and no raw ISO time. Screenshots of every tab at both
 * widths go to test-results/screenshots/layout-<width>-<tab>.png.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { launchChromium, type LaunchedChromium } from "../../scripts/infra/chromium.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { findA11yViolations, formatViolations } from "../helpers/axe.js";
import { eventually } from "../helpers/eventually.js";
import { startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { screenshotDir } from "../helpers/screenshots.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { castFreshCountedHeart } from "../helpers/retry-overloaded.js";

const TOKEN = `dash-${randomBytes(24).toString("base64url")}`;
const BROWSER_UA = "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0";
const PHONE = { width: 375, height: 812 };
const LAPTOP = { width: 1280, height: 900 };
const TABS = ["overview", "referrals", "integration", "deliveries", "hearts", "trends", "debugger"] as const;
/** The integration guide's frozen heart.counted callback: secret, body, t and the header the service sends. */
const HEART = (
  JSON.parse(readFileSync(new URL("../fixtures/signature-vectors.json", import.meta.url), "utf8")) as {
    cases: Array<{ name: string; secret: string; t: number; body: string; callback_header: string }>;
  }
).cases.find((c) => c.name === "heart-counted")!;

interface Context {
  stack: TestStack;
  receiver: Receiver;
  gatewayUrl: string;
  browser: LaunchedChromium;
  page: Page;
  shots: string;
}

const flow = { serverId: "", heartIp: 10 };
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const quiet = createLogger("dashboard-layout-e2e", process.env.TEST_LOG_LEVEL ?? "silent");
  const stack = await startStack({
    gateway: false,
    callbackTimeoutMs: 5_000,
    log: quiet,
    // Two attempts 300 ms apart, then failed.
    pipeline: {
      name: "dashboard-layout",
      delivery: { schedule: parseRetrySchedule("300ms", { jitterRatio: 0 }), callbackTimeoutMs: 5_000, pollIntervalMs: 100 },
    },
  });
  const receiver = await startReceiver();
  const { url: gatewayUrl } = await stack.startGateway({ log: quiet, dashboard: { token: TOKEN } });
  const browser = await launchChromium({ viewport: LAPTOP });
  const page = await browser.context.newPage();
  t.context = { stack, receiver, gatewayUrl, browser, page, shots: screenshotDir() };
});

test.after.always(async (t) => {
  const c = t.context;
  await c.browser?.close();
  await c.stack?.close();
  await c.receiver?.close();
});

function castCountedHeart(c: Context, username: string): Promise<string> {
  flow.heartIp += 1;
  return castFreshCountedHeart(c.stack.clients.hearts, { serverId: flow.serverId, username, ip: `203.0.${flow.heartIp}.7`, userAgent: BROWSER_UA });
}

async function deliveryIs(c: Context, heartId: string, status: "delivered" | "failed"): Promise<void> {
  await eventually(() => c.stack.prisma.delivery.findFirst({ where: { heartId, status } }).then((d) => d ?? undefined), {
    timeoutMs: 30_000,
    message: `delivery of ${heartId} ${status}`,
  });
}

async function openTab(page: Page, tab: string): Promise<void> {
  await page.evaluate(`location.hash = "#${tab}"`);
  await page.waitForSelector(`#tab-${tab}:not([hidden])`);
}

/** Waits for the tab's data: a table row, a chart, or the form. */
async function tabReady(page: Page, tab: (typeof TABS)[number]): Promise<void> {
  const ready: Record<(typeof TABS)[number], string> = {
    overview: "#servers-table tbody tr td button",
    referrals: "#secrets-table tbody tr td button",
    integration: "#callback-disabled:not([hidden])",
    deliveries: "#attempts-table tbody tr td button",
    hearts: "#hearts-table tbody tr td button",
    trends: "#chart-hearts-daily",
    debugger: "#sig-form",
  };
  await page.waitForSelector(ready[tab]);
  if (tab === "deliveries") await page.locator("#deliveries-table tbody tr", { hasText: "Herobrine" }).first().waitFor();
  if (tab === "hearts") await page.locator("#ranking-table tbody tr td", { hasText: "Layout" }).first().waitFor();
  if (tab === "trends") {
    // Open every "Show the numbers": their tables are checked and shown too.
    await page.locator("#data-latency table").waitFor({ state: "attached" });
    await page.evaluate('for (const details of document.querySelectorAll("#tab-trends details")) details.open = true');
  }
  // Let late layout (the endpoint notice, fonts, charts) settle.
  await page.waitForTimeout(300);
}

interface Offender {
  what: string;
  left: number;
  right: number;
  limit: string;
}

interface LayoutReport {
  pageOverflow: number;
  offenders: Offender[];
  uncued: string[];
  deliveriesScroll: number;
}

// The code below runs in the page (a string, as in dashboard-insights.test.ts: this program has no DOM types).

/** What lies outside where it must be seen, in the page as it is now. */
async function layoutOffenders(page: Page): Promise<LayoutReport> {
  return (await page.evaluate(`(() => {
    const width = window.innerWidth;
    const offenders = [];
    // As a person first sees it: every table scrolled to its start.
    for (const wrap of document.querySelectorAll(".table-wrap")) wrap.scrollLeft = 0;
    // checkVisibility: false inside a closed <details> too (its content is laid out but not rendered).
    const visible = (node) => {
      const r = node.getBoundingClientRect();
      return r.width > 0 && r.height > 0 && node.checkVisibility({ visibilityProperty: true });
    };
    const name = (node) => node.tagName.toLowerCase() + (node.id ? "#" + node.id : "") + ' "' + (node.textContent || "").trim().slice(0, 30) + '"';
    for (const node of document.querySelectorAll(".table-wrap button, .table-wrap .badge, #server-picker, #sign-out")) {
      if (!visible(node)) continue;
      const r = node.getBoundingClientRect();
      if (r.left < -0.5 || r.right > width + 0.5) offenders.push({ what: name(node), left: r.left, right: r.right, limit: "viewport 0.." + width });
      const wrap = node.closest(".table-wrap");
      if (wrap) {
        const w = wrap.getBoundingClientRect();
        if (r.left < w.left - 0.5 || r.right > w.right + 0.5) offenders.push({ what: name(node), left: r.left, right: r.right, limit: "its table's visible box " + w.left + ".." + w.right });
      }
    }
    // A table wider than its card scrolls, with a visible cue (.scrolls draws the shadow beside the row buttons).
    const uncued = [];
    for (const wrap of document.querySelectorAll(".table-wrap")) {
      if (!visible(wrap) || wrap.scrollWidth <= wrap.clientWidth + 1) continue;
      const cue = wrap.classList.contains("scrolls") && getComputedStyle(wrap).backgroundImage.includes("gradient");
      if (!cue) uncued.push(wrap.getAttribute("aria-label") || "a table");
    }
    const deliveries = document.querySelector("#deliveries-table")?.closest(".table-wrap");
    const deliveriesScroll = deliveries && visible(deliveries) ? deliveries.scrollWidth - deliveries.clientWidth : 0;
    return { pageOverflow: document.documentElement.scrollWidth - width, offenders, uncued, deliveriesScroll };
  })()`)) as LayoutReport;
}

interface TabBarState {
  cut: number;
  scrollable: boolean;
  cueRight: boolean;
  lastShown: boolean;
  cueRightAtEnd: boolean;
}

/** The tab bar: every tab visible, or a scroll container with a visible cue whose end shows the last tab. */
async function tabBarState(page: Page): Promise<TabBarState> {
  return (await page.evaluate(`(async () => {
    const frames = () => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
    const nav = document.querySelector(".tabs");
    nav.scrollLeft = 0;
    await frames();
    const box = nav.getBoundingClientRect();
    const tabs = [...nav.querySelectorAll(".tab")];
    const cut = tabs.filter((tab) => {
      const r = tab.getBoundingClientRect();
      return r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.right > window.innerWidth + 0.5;
    }).length;
    const style = getComputedStyle(nav);
    const scrollable = nav.scrollWidth > nav.clientWidth + 1 && (style.overflowX === "auto" || style.overflowX === "scroll");
    const wrap = nav.closest(".tabs-wrap");
    const cueRight = wrap !== null && wrap.classList.contains("more-right") && getComputedStyle(wrap, "::after").opacity !== "0";
    nav.scrollLeft = nav.scrollWidth;
    await frames();
    const last = tabs.at(-1).getBoundingClientRect();
    const lastShown = last.right <= Math.min(box.right, window.innerWidth) + 0.5 && last.left >= box.left - 0.5;
    const cueRightAtEnd = wrap !== null && wrap.classList.contains("more-right");
    nav.scrollLeft = 0;
    return { cut, scrollable, cueRight, lastShown, cueRightAtEnd };
  })()`)) as TabBarState;
}

test.serial("a server with realistic rows: secrets, delivered and failed deliveries, hearts, a callback disabled by a 410", async (t) => {
  const c = t.context;
  const { stack, receiver } = c;
  const { server } = await stack.clients.admin.createServer({ name: "Layout test: a server with a rather long name for a phone", registrationUrl: "" });
  flow.serverId = server!.id;
  await stack.clients.admin.setReferralsEnabled({ serverId: flow.serverId, enabled: true });
  await stack.clients.admin.createReferralSecret({ serverId: flow.serverId });
  await stack.clients.admin.rotateReferralSecret({ serverId: flow.serverId, graceSeconds: 3600n });
  await stack.clients.admin.setCallbackSettings({ serverId: flow.serverId, callbackUrl: receiver.url, standardWebhooks: false });

  receiver.setFallback({ status: 200, body: "ok" });
  await deliveryIs(c, await castCountedHeart(c, "Steve"), "delivered");
  receiver.setFallback({ status: 500, body: "the reward database is unavailable right now, try again later" });
  await deliveryIs(c, await castCountedHeart(c, "Herobrine_the_Longest_Name_Yet"), "failed");
  receiver.setFallback({ status: 410, body: "gone" });
  await castCountedHeart(c, "Alex");
  await eventually(() => c.stack.clients.admin.getServer({ serverId: flow.serverId }).then((r) => r.server!.callbackDisabledReason || undefined), {
    timeoutMs: 30_000,
    message: "callback disabled after a 410",
  });

  const { page, gatewayUrl } = c;
  await page.goto(`${gatewayUrl}/dashboard`);
  await page.fill("#token-input", TOKEN);
  await page.click("#sign-in");
  await page.waitForSelector("#app:not([hidden])");
  await page.selectOption("#server-picker", flow.serverId);
  t.is(await page.inputValue("#server-picker"), flow.serverId);
});

for (const viewport of [LAPTOP, PHONE]) {
  test.serial(`${viewport.width} px: no tab scrolls the page sideways; every action button, status badge and the server picker is in view`, async (t) => {
    const { page, shots } = t.context;
    await page.setViewportSize(viewport);
    const problems: string[] = [];
    for (const tab of TABS) {
      await openTab(page, tab);
      if (tab === "deliveries") {
        // Open the failed delivery's attempts: the detail card and its attempts table.
        await page.locator("#deliveries-table tbody tr", { hasText: "Herobrine" }).first().waitFor();
        await page.locator("#deliveries-table tbody tr", { hasText: "Herobrine" }).getByRole("button", { name: "Attempts" }).click();
      }
      await tabReady(page, tab);
      // An owner's session also names who is signed in, beside the picker.
      await page.evaluate('document.getElementById("session-owner").textContent = "Signed in as Owner of a server with a long display name"');
      await page.evaluate('for (const wrap of document.querySelectorAll(".table-wrap")) wrap.scrollLeft = 0');
      await page.screenshot({ path: join(shots, `layout-${viewport.width}-${tab}.png`), fullPage: true });
      // Each card with a table on its own, at full resolution, for a person to look at.
      const cards = page.locator(`#tab-${tab} .card:has(.table-wrap)`);
      for (let i = 0; i < (await cards.count()); i++) {
        if (await cards.nth(i).isVisible()) await cards.nth(i).screenshot({ path: join(shots, `layout-${viewport.width}-${tab}-table-${i + 1}.png`) });
      }
      const { pageOverflow, offenders, uncued, deliveriesScroll } = await layoutOffenders(page);
      if (pageOverflow > 0) problems.push(`${tab}: the page scrolls sideways by ${pageOverflow} px`);
      for (const table of uncued) problems.push(`${tab}: the table "${table}" scrolls sideways with no cue`);
      if (viewport === LAPTOP && deliveriesScroll > 1)
        problems.push(`${tab}: at ${viewport.width} px the deliveries table is ${deliveriesScroll} px wider than its card`);
      for (const o of offenders) problems.push(`${tab}: ${o.what} at ${Math.round(o.left)}..${Math.round(o.right)}, outside ${o.limit}`);
      // The stacked (phone) and the pinned-button (wide) tables keep their accessibility: no serious or critical violation.
      if (tab === "deliveries" || tab === "referrals" || tab === "hearts") {
        const violations = await findA11yViolations(page);
        for (const v of violations) problems.push(`${tab}: axe ${formatViolations([v])}`);
      }
    }
    t.deepEqual(problems, []);
    const redeliver = (await page.evaluate('document.querySelectorAll("#deliveries-table button").length')) as number;
    t.true(redeliver >= 2, "the deliveries table was checked with its buttons");
  });

  test.serial(`${viewport.width} px: the tab bar shows every tab, or scrolls with a visible cue to its last tab`, async (t) => {
    const { page, shots } = t.context;
    await page.setViewportSize(viewport);
    await openTab(page, "overview");
    const state = await tabBarState(page);
    if (state.cut > 0) {
      t.true(state.scrollable, "tabs are cut: the bar must scroll");
      t.true(state.cueRight, "tabs are cut: a cue shows there is more to the right");
      t.true(state.lastShown, "scrolled to its end, the last tab is fully shown");
      t.false(state.cueRightAtEnd, "at the end, the cue to the right is gone");
    } else t.pass();
    await page.evaluate("window.scrollTo(0, 0)");
    await page.screenshot({ path: join(shots, `layout-${viewport.width}-tabbar.png`), clip: { x: 0, y: 0, width: viewport.width, height: 200 } });
    // The picked tab is scrolled into view.
    await openTab(page, "debugger");
    await page.waitForTimeout(400);
    const shown = (await page.evaluate(`(() => {
      const nav = document.querySelector(".tabs").getBoundingClientRect();
      const tab = document.querySelector('.tab[data-tab="debugger"]').getBoundingClientRect();
      return tab.left >= nav.left - 0.5 && tab.right <= Math.min(nav.right, window.innerWidth) + 0.5;
    })()`)) as boolean;
    t.true(shown, "the selected tab is in view");
  });

  test.serial(`${viewport.width} px: the Integration tab shows one "Callbacks are disabled" notice, one Re-enable, one date format`, async (t) => {
    const { page, shots } = t.context;
    await page.setViewportSize(viewport);
    await openTab(page, "integration");
    await page.waitForSelector("#callback-disabled:not([hidden])");
    // The notice on every tab loads after the tab's own data.
    await page.waitForTimeout(800);
    const seen = (await page.evaluate(`(() => {
      const shown = (node) => node.offsetParent !== null;
      const blocks = [...document.querySelectorAll("#app .card, #app .banner")].filter(shown);
      const notices = blocks.filter((b) => b.textContent.includes("Callbacks are disabled")).map((b) => b.textContent.replace(/\\s+/g, " ").trim());
      const reenable = [...document.querySelectorAll("#app button")].filter((b) => shown(b) && b.textContent.trim() === "Re-enable").length;
      return { notices, reenable };
    })()`)) as { notices: string[]; reenable: number };
    await page.evaluate("window.scrollTo(0, 0)");
    await page.screenshot({ path: join(shots, `layout-${viewport.width}-integration-disabled.png`), fullPage: false });
    t.is(seen.notices.length, 1, JSON.stringify(seen.notices));
    t.is(seen.reenable, 1);
    const notice = seen.notices[0] ?? "";
    t.regex(notice, /410 Gone/);
    // One moment, one format: the reason carries its time (as the service wrote it), nothing repeats it in another form.
    const formats = [/\d{4}-\d\d-\d\dT\d\d:\d\d/, /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/].filter((format) => format.test(notice));
    t.is(formats.length, 1, notice);
    t.regex(notice, /held until you re-enable/, "the notice says what happens to waiting deliveries");
  });

  test.serial(`${viewport.width} px: the signature debugger, in the page, names a callback secret pasted without whsec_ and blames no sender`, async (t) => {
    const { page, shots } = t.context;
    await page.setViewportSize(viewport);
    await openTab(page, "debugger");
    const check = async (body: string, secret: string) => {
      await page.check('input[name="sig-scheme"][value="callback"]');
      await page.fill("#sig-header", HEART.callback_header);
      await page.fill("#sig-body", body);
      await page.fill("#sig-secret", secret);
      await page.fill("#sig-now", String(HEART.t));
      await page.evaluate('document.getElementById("sig-result").replaceChildren()');
      await page.click("#sig-check");
      await page.waitForSelector("#sig-findings");
      return { verdict: await page.getAttribute("#sig-verdict", "data-verdict"), findings: (await page.textContent("#sig-findings")) ?? "" };
    };
    const noPrefix = await check(HEART.body, HEART.secret.slice("whsec_".length));
    await page.locator("#sig-result").screenshot({ path: join(shots, `layout-${viewport.width}-debugger-no-prefix.png`) });
    t.is(noPrefix.verdict, "mismatch");
    t.regex(noPrefix.findings, /The secret pasted here has no "whsec_" prefix/);
    t.notRegex(noPrefix.findings, /No common mistake/);
    const pretty = await check(JSON.stringify(JSON.parse(HEART.body), null, 2), HEART.secret);
    await page.locator("#sig-result").screenshot({ path: join(shots, `layout-${viewport.width}-debugger-reserialised.png`) });
    t.is(pretty.verdict, "mismatch");
    t.regex(pretty.findings, /your receiver \(or the log you copied from\) parsed the JSON and wrote it again/);
    t.notRegex(pretty.findings, /They signed|They keyed/);
    const { pageOverflow } = await layoutOffenders(page);
    t.true(pageOverflow <= 0, "the debugger's result does not widen the page");
  });
}
