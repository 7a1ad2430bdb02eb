/**
 * A server owner's first hour on the dashboard, in a real browser (Chromium through playwright-core) at a
 * phone's width (375 px) and a laptop's (1280 px), on the real stack: a fresh server with nothing yet, and a
 * server with a counted heart whose callback has no URL (its delivery is held).
 *
 * Each test states one rule the owner relies on: an error is shown beside the control that caused it; a button
 * offers only what the state allows; a refused test vote names its likely cause; a held delivery reads as held;
 * an empty list says what to do next; every tab is reachable without sideways scrolling; no placeholder is cut.
 * Screenshots go to test-results/screenshots/first-hour-<width>-<what>.png.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { launchChromium } from "../../scripts/infra/chromium.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { findA11yViolations, formatViolations } from "../helpers/axe.js";
import { type DashboardBrowserContext, LAPTOP, PHONE } from "../helpers/dashboard-browser.js";
import { eventually } from "../helpers/eventually.js";
import { screenshotDir } from "../helpers/screenshots.js";
import { startStack } from "../../scripts/harness/stack.js";
import { retryOverloaded } from "../helpers/retry-overloaded.js";

const TOKEN = `dash-${randomBytes(24).toString("base64url")}`;
const BROWSER_UA = "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0";
const TABS = ["overview", "referrals", "integration", "deliveries", "hearts", "trends", "debugger"] as const;
/** How far below its button an error may start and still read as the button's (px). */
const NEAR_PX = 160;

const flow = { freshId: "", heldId: "", closedPort: 0 };
const test = anyTest as TestFn<DashboardBrowserContext>;

test.before(async (t) => {
  const quiet = createLogger("dashboard-first-hour-e2e", process.env.TEST_LOG_LEVEL ?? "silent");
  const stack = await startStack({
    gateway: false,
    log: quiet,
    pipeline: {
      name: "dashboard-first-hour",
      delivery: { schedule: parseRetrySchedule("300ms", { jitterRatio: 0 }), callbackTimeoutMs: 5_000, pollIntervalMs: 100 },
    },
  });
  const { url: gatewayUrl } = await stack.startGateway({ log: quiet, dashboard: { token: TOKEN } });
  const browser = await launchChromium({ viewport: LAPTOP });
  const page = await browser.context.newPage();
  t.context = { stack, gatewayUrl, browser, page, shots: screenshotDir() };
});

test.after.always(async (t) => {
  await t.context.browser?.close();
  await t.context.stack?.close();
});

async function openTab(page: Page, tab: string): Promise<void> {
  await page.evaluate(`location.hash = "#${tab}"`);
  await page.waitForSelector(`#tab-${tab}:not([hidden])`);
}

/** Opens the Integration tab and waits until its settings are rendered. */
async function openIntegration(page: Page): Promise<void> {
  await openTab(page, "integration");
  await page.waitForSelector("#integration-fields:not([disabled])");
  await page.waitForLoadState("networkidle");
}

async function pickServer(page: Page, serverId: string): Promise<void> {
  if ((await page.inputValue("#server-picker")) !== serverId) await page.selectOption("#server-picker", serverId);
}

/** Holds the browser's loads of a server's settings until `release()`; `held()` counts the loads caught; `stop()` unroutes. */
async function holdSettings(page: Page, serverId: string): Promise<{ held: () => number; release: () => void; stop: () => Promise<void> }> {
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const path = `/dashboard/api/servers/${serverId}`;
  const matches = (url: URL) => url.pathname === path;
  let held = 0;
  await page.route(matches, async (route) => {
    held++;
    await released;
    await route.continue();
  });
  return { held: () => held, release: () => release(), stop: () => page.unroute(matches) };
}

interface NearError {
  text: string;
  below: number;
  inView: boolean;
  flashShown: boolean;
}

/** Clicks `button` and returns the error shown for it: its text, how far below the button it starts, and whether the banner showed. */
async function errorAfter(page: Page, button: string, result = ""): Promise<NearError> {
  await page.evaluate('document.getElementById("flash").hidden = true');
  await page.click(button);
  const shown = result || `[role="alert"].control-error`;
  await page.waitForSelector(`${shown}:visible`);
  await page.waitForTimeout(200);
  return (await page.evaluate(`(() => {
    const button = document.querySelector(${JSON.stringify(button)}).getBoundingClientRect();
    const errors = [...document.querySelectorAll(${JSON.stringify(result ? `${result} .msg-error` : ".control-error")})].filter((e) => e.checkVisibility());
    // The error nearest below the button (the test checks it is this button's by its text).
    const gap = (e) => Math.abs(e.getBoundingClientRect().top - button.bottom);
    const error = errors.sort((a, b) => gap(a) - gap(b))[0];
    const r = error.getBoundingClientRect();
    return {
      text: error.textContent.trim(),
      below: r.top - button.bottom,
      inView: r.left >= -0.5 && r.right <= window.innerWidth + 0.5,
      flashShown: !document.getElementById("flash").hidden,
    };
  })()`)) as NearError;
}

test.serial("setup: a fresh server, and a server whose counted heart waits for a callback URL", async (t) => {
  const { stack, page, gatewayUrl } = t.context;
  const fresh = await stack.clients.admin.createServer({ name: "First hour: fresh", registrationUrl: "" });
  flow.freshId = fresh.server!.id;
  const held = await stack.clients.admin.createServer({ name: "First hour: held", registrationUrl: "" });
  flow.heldId = held.server!.id;
  const cast = await retryOverloaded(() =>
    stack.clients.hearts.castHeart({
      serverId: flow.heldId,
      username: "Steve",
      voterIdentity: `voter-${randomBytes(4).toString("hex")}`,
      ip: "203.0.113.9",
      userAgent: BROWSER_UA,
    }),
  );
  t.true(cast.counted);
  await eventually(() => stack.prisma.delivery.findFirst({ where: { heartId: cast.heartId, transport: "callback" } }).then((d) => d ?? undefined), {
    timeoutMs: 30_000,
    message: "the held callback delivery",
  });
  // A port nothing listens on: port 1 (tcpmux), below the ephemeral range, so no listener of a test running beside this
  // one can take it (a started-and-stopped listener's port was once reused by another test's server: no refusal, a
  // silent connection, "No answer").
  flow.closedPort = 1;

  await page.goto(`${gatewayUrl}/dashboard`);
  await page.fill("#token-input", TOKEN);
  await page.click("#sign-in");
  await page.waitForSelector("#app:not([hidden])");
  await pickServer(page, flow.heldId);
});

test.serial(
  "settings that load after the owner began typing leave the typed values and ticked boxes as they are; a save then shows what was stored",
  async (t) => {
    const { page } = t.context;
    await page.setViewportSize(LAPTOP);
    await pickServer(page, flow.freshId);
    await openIntegration(page);
    // The next load of this server's settings is held until the owner has typed.
    const settingsPath = `/dashboard/api/servers/${flow.freshId}`;
    const hold = await holdSettings(page, flow.freshId);
    try {
      await openTab(page, "overview");
      await openTab(page, "integration");
      await eventually(() => hold.held() > 0 || undefined, { timeoutMs: 10_000, message: "the settings load on its way" });
      await page.fill("#votifier-host", "mc.example.net");
      await page.fill("#votifier-port", "8193");
      await page.check("#claims-pays-once");
      const answered = page.waitForResponse((response) => new URL(response.url()).pathname === settingsPath);
      hold.release();
      await answered;
      await page.waitForLoadState("networkidle");
      t.is(await page.inputValue("#votifier-host"), "mc.example.net", "the late load left the typed host");
      t.is(await page.inputValue("#votifier-port"), "8193");
      t.true(await page.isChecked("#claims-pays-once"), "the late load left the ticked box");
    } finally {
      hold.release();
      await hold.stop();
    }
    await page.fill("#votifier-service-name", "HeartsList");
    await page.fill("#votifier-token", "nvt-first-hour");
    await page.click("#votifier-form button[type=submit]");
    await page.waitForSelector("#votifier-status .badge-ok, #votifier-form .control-error:visible");
    t.deepEqual(await page.locator("#votifier-form .control-error:visible").allTextContents(), [], "the save succeeded");
    t.is(await page.inputValue("#votifier-port"), "8193", "after the save the form shows what was stored");
    await page.click("#votifier-off");
    await page.waitForSelector("#votifier-off[hidden]", { state: "attached" });
    t.is(await page.inputValue("#votifier-host"), "", "turning Votifier off empties the form it saved");
    t.true(await page.isChecked("#claims-pays-once"), "another form's typed box is still as the owner left it");
  },
);

test.serial(
  "picking another server disables the Integration tab until that server's settings are shown: the previous server's values cannot be saved under it",
  async (t) => {
    const { page } = t.context;
    await page.setViewportSize(LAPTOP);
    await pickServer(page, flow.freshId);
    await openIntegration(page);
    const hold = await holdSettings(page, flow.heldId);
    try {
      await page.selectOption("#server-picker", flow.heldId);
      await eventually(() => hold.held() > 0 || undefined, { timeoutMs: 10_000, message: "the held server's settings on their way" });
      t.true(await page.isDisabled("#votifier-host"), "the previous server's form cannot be typed into");
      t.true(await page.isDisabled("#votifier-form button[type=submit]"), "nor saved");
      t.true(await page.isDisabled("#callback-form button[type=submit]"));
      hold.release();
      await page.waitForSelector("#integration-fields:not([disabled])");
      t.false(await page.isDisabled("#votifier-host"), "the picked server's settings shown: the form is open again");
    } finally {
      hold.release();
      await hold.stop();
    }
  },
);

for (const viewport of [PHONE, LAPTOP]) {
  test.serial(`${viewport.width} px: a failed save or test on the Integration tab shows its error beside its button, not as a banner above`, async (t) => {
    const { page, shots } = t.context;
    await page.setViewportSize(viewport);
    await pickServer(page, flow.heldId);
    await openIntegration(page);

    await page.fill("#votifier-host", "not a host!");
    await page.fill("#votifier-port", "8192");
    await page.fill("#votifier-service-name", "HeartsList");
    const votifier = await errorAfter(page, "#votifier-form button[type=submit]");
    await page.locator("#votifier-card").screenshot({ path: join(shots, `first-hour-${viewport.width}-votifier-error.png`) });
    t.is(votifier.text, "Error 400: votifier host must be a host name or an IP address");
    t.false(votifier.flashShown, "no banner far above");
    t.true(votifier.below >= -1 && votifier.below <= NEAR_PX, `the error starts ${votifier.below} px below its button`);
    t.true(votifier.inView);

    await page.fill("#callback-url", "ftp://example.com/hook");
    const callback = await errorAfter(page, "#callback-form button[type=submit]");
    t.is(callback.text, "Error 400: callback_url must use https or http");
    t.false(callback.flashShown);
    t.true(callback.below >= -1 && callback.below <= NEAR_PX, `the error starts ${callback.below} px below its button`);
    t.is(await page.locator(".control-error:visible").count(), 2, "each control keeps its own error");

    await page.click("#add-endpoint");
    await page.fill("#endpoint-url", "ftp://example.com/endpoint");
    await page.locator("#endpoint-event-types input").first().check();
    const endpoint = await errorAfter(page, "#save-endpoint");
    t.regex(endpoint.text, /^Error 400: /);
    t.false(endpoint.flashShown);
    t.true(endpoint.below >= -1 && endpoint.below <= NEAR_PX, `the error starts ${endpoint.below} px below its button`);
    await page.click("#cancel-endpoint");

    const testCallback = await errorAfter(page, "#send-test-callback", "#test-callback-result");
    t.is(testCallback.text, "Error 409: no callback URL configured: set one in the integration tab first");
    t.false(testCallback.flashShown);
    t.true(testCallback.below >= -1 && testCallback.below <= NEAR_PX, `the error starts ${testCallback.below} px below its button`);

    // The errors shown beside their controls keep the page accessible.
    const violations = await findA11yViolations(page);
    t.is(violations.length, 0, formatViolations(violations));

    // A save that works clears its control's error.
    await page.fill("#callback-url", "");
    await page.click("#callback-form button[type=submit]");
    await page.waitForSelector("#callback-form + .control-error", { state: "detached" });
  });

  test.serial(`${viewport.width} px: Votifier off offers no "Turn off"; on, it does; every toggle names the change it makes`, async (t) => {
    const { page, stack } = t.context;
    await page.setViewportSize(viewport);
    await stack.clients.admin.setVotifierSettings({ serverId: flow.freshId, host: "", port: 0, serviceName: "", token: "" });
    await page.reload();
    await page.waitForSelector("#app:not([hidden])");
    await pickServer(page, flow.freshId);
    await openIntegration(page);
    await page.locator("#votifier-status", { hasText: "off" }).waitFor();
    t.false(await page.isVisible("#votifier-off"), "Votifier is off: no Turn off");
    t.is(await page.textContent("#toggle-pull"), "Turn on");
    t.is((await page.textContent("#pull-status"))?.trim(), "off");
    t.false(await page.isVisible("#reveal-claim-secret"), "no claim key yet: nothing to reveal");
    t.is(await page.textContent("#rotate-claim-secret"), "Mint a key");

    await page.fill("#votifier-host", "127.0.0.1");
    await page.fill("#votifier-port", String(flow.closedPort));
    await page.fill("#votifier-service-name", "HeartsList");
    await page.fill("#votifier-token", "nvt-wrong-or-right");
    await page.click("#votifier-form button[type=submit]");
    await page.locator("#votifier-status", { hasText: "on" }).waitFor();
    t.true(await page.isVisible("#votifier-off"), "Votifier is on: Turn off is offered");
    await page.click("#toggle-pull");
    await page.locator("#pull-status", { hasText: "on" }).waitFor();
    t.is(await page.textContent("#toggle-pull"), "Turn off");
    await page.click("#toggle-pull");
    await page.locator("#pull-status", { hasText: "off" }).waitFor();
  });

  test.serial(`${viewport.width} px: a test vote refused with ECONNREFUSED names the likely causes in plain words, the raw error below`, async (t) => {
    const { page, shots } = t.context;
    await page.setViewportSize(viewport);
    await pickServer(page, flow.freshId);
    await openIntegration(page);
    await page.locator("#votifier-status", { hasText: "on" }).waitFor();
    await page.fill("#test-vote-username", "Tester");
    await page.click("#send-test-vote");
    await page.waitForSelector("#test-vote-result .vote-hint");
    await page.locator("#votifier-card").screenshot({ path: join(shots, `first-hour-${viewport.width}-test-vote-refused.png`) });
    const hint = (await page.textContent("#test-vote-result .vote-hint")) ?? "";
    t.regex(hint, /not running/i, "the listener may not be running");
    t.regex(hint, /host|port/i, "the host or port may be wrong");
    t.regex(hint, /token/i, "the token may be wrong");
    t.regex(hint, /config\.yml/, "where to look");
    const whole = (await page.textContent("#test-vote-result")) ?? "";
    t.true(whole.includes("connection failed: ECONNREFUSED"), "the raw error is kept");
    t.true(whole.indexOf(hint.trim().slice(0, 20)) < whole.indexOf("connection failed: ECONNREFUSED"), "the hint comes first, the raw error below");
  });

  test.serial(`${viewport.width} px: a callback held for want of a URL shows as held, with no next attempt in the past`, async (t) => {
    const { page, shots } = t.context;
    await page.setViewportSize(viewport);
    await pickServer(page, flow.heldId);
    await openTab(page, "deliveries");
    const row = page.locator("#deliveries-table tbody tr", { hasText: "Steve" }).first();
    await row.waitFor();
    await page.locator("#deliveries-table").screenshot({ path: join(shots, `first-hour-${viewport.width}-held.png`) });
    const headers = (await page.locator("#deliveries-table thead th").allTextContents()).map((s) => s.trim());
    const cells = (await row.locator("td").allTextContents()).map((s) => s.trim());
    const status = cells[headers.indexOf("Status")] ?? "";
    const next = cells[headers.indexOf("Next attempt")] ?? "";
    t.is(status, "held", JSON.stringify(cells));
    t.notRegex(next, /ago|\d{4}-\d\d-\d\d|\d\d:\d\d/, "no next attempt in the past");
    t.regex(next, /callback URL/i, "the row says what releases it");

    // The Hearts tab says the same of the heart's callback.
    await openTab(page, "hearts");
    const cell = page.locator("#hearts-table tbody tr", { hasText: "Steve" }).first().locator(".delivery-cell[data-transport=callback]");
    await cell.waitFor();
    const text = (await cell.textContent()) ?? "";
    t.regex(text, /held/, text);
    t.notRegex(text, /pending/, "not shown as pending");
    t.regex(text, /callback URL/i, "the heart's callback says what releases it");
  });

  test.serial(`${viewport.width} px: empty lists say what to do next (deliveries, hearts, referrals, endpoints)`, async (t) => {
    const { page, shots } = t.context;
    await page.setViewportSize(viewport);
    await pickServer(page, flow.freshId);
    const emptyText = async (selector: string) => {
      await page.waitForSelector(selector);
      return ((await page.textContent(selector)) ?? "").trim();
    };
    await openTab(page, "deliveries");
    const deliveries = await emptyText("#deliveries-table td.empty");
    await openTab(page, "hearts");
    const hearts = await emptyText("#hearts-table td.empty");
    await openTab(page, "referrals");
    const referrals = await emptyText("#referrals-table td.empty");
    await openIntegration(page);
    const endpoints = await emptyText("#endpoints-list .endpoint-url");
    await page.screenshot({ path: join(shots, `first-hour-${viewport.width}-empty-integration.png`), fullPage: true });
    const nextStep = /\b(set|create|share|send|add|put|open)\b/i;
    for (const [list, text] of Object.entries({ deliveries, hearts, referrals, endpoints })) {
      t.regex(text, nextStep, `${list}: "${text}" says what to do next`);
      t.notRegex(text, /match\.?$|^\(no /i, `${list}: "${text}" does not read like an error`);
    }
  });

  test.serial(`${viewport.width} px: every tab's button is inside the viewport and the page is no wider than it`, async (t) => {
    const { page, shots } = t.context;
    await page.setViewportSize(viewport);
    await openTab(page, "overview");
    await page.evaluate("window.scrollTo(0, 0)");
    await page.screenshot({ path: join(shots, `first-hour-${viewport.width}-tabs.png`), clip: { x: 0, y: 0, width: viewport.width, height: 260 } });
    const report = (await page.evaluate(`(() => {
      const width = window.innerWidth;
      const outside = [...document.querySelectorAll(".tabs .tab")]
        .map((tab) => ({ name: tab.textContent.trim(), r: tab.getBoundingClientRect() }))
        .filter(({ r }) => r.left < -0.5 || r.right > width + 0.5 || r.width === 0)
        .map(({ name }) => name);
      return { outside, pageWidth: document.documentElement.scrollWidth, width };
    })()`)) as { outside: string[]; pageWidth: number; width: number };
    t.deepEqual(report.outside, [], "tabs outside the viewport");
    t.true(report.pageWidth <= report.width, `document ${report.pageWidth} px wide in a ${report.width} px viewport`);
    for (const tab of TABS) {
      await page.click(`.tabs .tab[data-tab="${tab}"]`);
      await page.waitForSelector(`#tab-${tab}:not([hidden])`);
    }
  });

  test.serial(`${viewport.width} px: every input's placeholder fits its box`, async (t) => {
    const { page } = t.context;
    await page.setViewportSize(viewport);
    await pickServer(page, flow.freshId);
    const cut: string[] = [];
    for (const tab of TABS) {
      await openTab(page, tab);
      await page.waitForTimeout(300);
      const found = (await page.evaluate(`(() => {
        const canvas = document.createElement("canvas").getContext("2d");
        const cut = [];
        for (const input of document.querySelectorAll("#tab-${tab} input[placeholder], #tab-${tab} textarea[placeholder]")) {
          if (!input.checkVisibility()) continue;
          const style = getComputedStyle(input);
          canvas.font = style.font;
          const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
          const need = canvas.measureText(input.placeholder).width;
          if (need > room + 0.5) cut.push("#" + input.id + ' "' + input.placeholder + '" needs ' + Math.ceil(need) + " px, has " + Math.floor(room));
        }
        return cut;
      })()`)) as string[];
      cut.push(...found.map((f) => `${tab}: ${f}`));
    }
    t.deepEqual(cut, []);
  });
}
