/**
 * The dashboard's Hearts list, Trends charts and Signature debugger in a real browser
 * (Debian's Chromium through playwright-core) against the real stack: the referral
 * service on a database of its own, a gateway with the dashboard, the outbox relay on
 * real Kafka, the delivery consumer and dispatcher, and a real local receiver. Every
 * tab is checked with axe-core and for overflow at 1280 px and 375 px; screenshots go
 * to test-results/screenshots/.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Page, Request } from "playwright-core";
import { DeliveryStatus } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { ReferralEventType } from "../../gen/proto/referral/v1/referral_pb.js";
import { launchChromium, type LaunchedChromium } from "../../scripts/infra/chromium.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { findA11yViolations, formatViolations } from "../helpers/axe.js";
import { eventually } from "../helpers/eventually.js";
import { startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { screenshotDir } from "../helpers/screenshots.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";

const TOKEN = `dash-${randomBytes(24).toString("base64url")}`;
const UA = "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0";
/** A username whose callbacks the receiver always refuses (500): its delivery fails for good. */
const REFUSED = "Refused_Rita";
const TABS = ["overview", "referrals", "integration", "deliveries", "hearts", "trends", "debugger"] as const;

interface Vector {
  name: string;
  secret: string;
  t: number;
  body: string;
  mac_hex: string;
  ingest_header: string;
  callback_header: string;
}
const vectors = JSON.parse(readFileSync(new URL("../fixtures/signature-vectors.json", import.meta.url), "utf8")) as {
  cases: Vector[];
  callback_rotation: { secrets_newest_first: string[]; t: number; body: string; callback_header: string };
};

interface Context {
  stack: TestStack;
  receiver: Receiver;
  gatewayUrl: string;
  browser: LaunchedChromium;
  page: Page;
  shots: string;
}

/** What the serial flow learns as it goes (ava hands each test a copy of the context). */
const flow = {
  serverId: "",
  /** Counted hearts by username. */
  counted: new Map<string, string>(),
  cooldownId: "",
  fraudId: "",
  totalHearts: 0,
};

const test = anyTest as TestFn<Context>;
/** Console errors and uncaught exceptions of the main page. */
const pageErrors: string[] = [];

test.before(async (t) => {
  const quiet = createLogger("dashboard-insights-e2e", process.env.TEST_LOG_LEVEL ?? "silent");
  const stack = await startStack({
    gateway: false,
    log: quiet,
    // Two attempts 200 ms apart, then failed.
    pipeline: {
      name: "dashboard-insights",
      delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), callbackTimeoutMs: 5_000, pollIntervalMs: 100 },
    },
  });
  // The receiver refuses one player's callbacks, so the charts show failures too.
  const receiver = await startReceiver({
    fallback: (req) => (req.text.includes(`"username":"${REFUSED}"`) ? { status: 500, body: "nope" } : { status: 200, body: "ok" }),
  });
  const { url: gatewayUrl } = await stack.startGateway({ log: quiet, dashboard: { token: TOKEN } });
  const browser = await launchChromium({ viewport: { width: 1280, height: 900 } });
  const page = await browser.context.newPage();
  // Anything the page reports as an error (a CSP violation, a failed script) fails the last test.
  page.on("console", (message) => {
    // The sign-in screen's session probe (GET /dashboard/api/session without a credential) is an expected
    // 401, which Chromium reports as a failed resource; anything else is an error of the page.
    if (message.type() === "error" && !/status of 401 \(Unauthorized\)/.test(message.text())) pageErrors.push(message.text());
  });
  page.on("pageerror", (error) => pageErrors.push(error.message));
  t.context = { stack, receiver, gatewayUrl, browser, page, shots: screenshotDir() };
});

test.after.always(async (t) => {
  const c = t.context;
  await c.browser?.close();
  await c.stack?.close();
  await c.receiver?.close();
});

let ipCounter = 0;
/** A fresh address on a fresh /24 each time, so no fraud rule links two test voters. */
function freshIp(): string {
  ipCounter++;
  return `10.${20 + (ipCounter >> 8)}.${ipCounter & 0xff}.9`;
}

async function openTab(page: Page, tab: string): Promise<void> {
  await page.click(`.tab[data-tab="${tab}"]`);
  await page.waitForSelector(`#tab-${tab}:not([hidden])`);
}

/**
 * Waits until `expression` is true in the page. Evaluated over the DevTools protocol:
 * page.waitForFunction would eval inside the page, which its CSP (no unsafe-eval) forbids.
 */
async function waitInPage(page: Page, expression: string): Promise<void> {
  await eventually(async () => ((await page.evaluate(expression)) === true ? true : undefined), { timeoutMs: 15_000, intervalMs: 100, message: expression });
}

/** The page scrolls sideways (something is wider than the window)? */
async function pageOverflowPx(page: Page): Promise<number> {
  return (await page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")) as number;
}

/** Cards whose content is wider than the card (their tables must scroll inside a .table-wrap instead). */
async function overflowingCards(page: Page): Promise<string[]> {
  return (await page.evaluate(`
    [...document.querySelectorAll(".tab-panel:not([hidden]) .card")]
      .filter((card) => card.scrollWidth > card.clientWidth + 1)
      .map((card) => (card.querySelector("h2") || card).textContent.trim().slice(0, 40))
  `)) as string[];
}

// ---- data, through the real RPCs and the real delivery pipeline --------------------------------

test.serial("setup: a server with a callback URL, 30 counted hearts, a cooldown, a fraud, a refused player and a referral funnel", async (t) => {
  const { stack, receiver } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: "Insights E2E Server" });
  flow.serverId = server!.id;
  const serverId = flow.serverId;
  await stack.clients.admin.setCallbackSettings({ serverId, callbackUrl: receiver.url, standardWebhooks: false });
  await stack.clients.admin.setReferralsEnabled({ serverId, enabled: true });

  const cast = (username: string, voterIdentity: string) => stack.clients.hearts.castHeart({ serverId, username, voterIdentity, ip: freshIp(), userAgent: UA });
  for (let i = 1; i <= 28; i++) {
    const res = await cast(`Player_${String(i).padStart(2, "0")}`, `voter-${i}`);
    t.true(res.counted);
    flow.counted.set(`Player_${String(i).padStart(2, "0")}`, res.heartId);
  }
  const steve = await cast("Steve_42", "voter-steve");
  flow.counted.set("Steve_42", steve.heartId);
  const rita = await cast(REFUSED, "voter-rita");
  flow.counted.set(REFUSED, rita.heartId);
  const again = await cast("Steve_42", "voter-steve");
  t.false(again.counted);
  flow.cooldownId = again.heartId;
  const fraud = await cast("bad<name>", "voter-bot");
  t.false(fraud.counted);
  flow.fraudId = fraud.heartId;
  flow.totalHearts = 32;

  // Funnel: 4 clicks, 3 registered, 2 qualified, 1 reversed.
  const tokens: string[] = [];
  for (let i = 0; i < 4; i++)
    tokens.push((await stack.clients.referral.recordClick({ serverId, referrerIdentity: "referrer-1", ip: freshIp(), userAgent: UA })).token);
  const apply = (event: ReferralEventType, i: number) =>
    stack.clients.referral.applyEvent({ serverId, event, token: tokens[i]!, refereeIdentity: `referee-${i}`, serverEventId: `${event}-${i}` });
  for (const i of [0, 1, 2]) await apply(ReferralEventType.REGISTERED, i);
  for (const i of [0, 1]) await apply(ReferralEventType.QUALIFIED, i);
  await apply(ReferralEventType.REVERSED, 0);

  // Every counted heart's callback ends: delivered, or failed for the refused player.
  await eventually(
    async () => {
      const { deliveries } = await stack.clients.delivery.listDeliveries({ serverId, limit: 100 });
      return deliveries.length === 30 && deliveries.every((d) => d.status !== DeliveryStatus.PENDING) ? deliveries : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250, message: "30 deliveries finished" },
  );
});

test.serial("browser: sign in and pick the server", async (t) => {
  const { page, gatewayUrl } = t.context;
  await page.goto(`${gatewayUrl}/dashboard`);
  await page.waitForSelector("#login:not([hidden])");
  const loginViolations = await findA11yViolations(page);
  t.deepEqual(loginViolations, [], `sign-in screen:\n${formatViolations(loginViolations)}`);
  await page.fill("#token-input", TOKEN);
  await page.click("#sign-in");
  await page.waitForSelector("#app:not([hidden])");
  await page.selectOption("#server-picker", flow.serverId);
  t.is(await page.inputValue("#server-picker"), flow.serverId);
});

// ---- Hearts ------------------------------------------------------------------------------------

test.serial("hearts: the list shows every heart newest first with verdict, fraud score and reasons, streak and its callback; Load more pages on", async (t) => {
  const { page, shots } = t.context;
  await openTab(page, "hearts");
  await page.waitForSelector("#hearts-table tbody tr[data-heart-id]");
  const firstPage = await page.locator("#hearts-table tbody tr[data-heart-id]").count();
  t.is(firstPage, 25, "the first page holds 25");
  t.is(await page.textContent("#hearts-count"), "25 shown; more below");
  const top = page.locator("#hearts-table tbody tr").first();
  t.is(await top.getAttribute("data-heart-id"), flow.fraudId, "newest first: the fraud heart was cast last");
  const topText = (await top.textContent()) ?? "";
  t.true(topText.includes("bad<name>") && topText.includes("fraud") && topText.includes("100"), topText);
  t.regex(topText, /username: /, "the fraud reason is shown");
  const cooldown = (await page.locator(`tr[data-heart-id="${flow.cooldownId}"]`).textContent()) ?? "";
  t.true(cooldown.includes("cooldown") && cooldown.includes("Steve_42"), cooldown);
  await page.click("#hearts-more");
  await page.locator("#hearts-count", { hasText: `${flow.totalHearts} shown` }).waitFor();
  t.is(await page.locator("#hearts-table tbody tr[data-heart-id]").count(), flow.totalHearts);
  t.true(await page.isHidden("#hearts-more"), "no more pages");
  await page.screenshot({ path: join(shots, "hearts-1280.png"), fullPage: true });
});

test.serial("hearts: did player X's reward arrive? search by name shows the delivery and its answer, and opens its attempts", async (t) => {
  const { page } = t.context;
  await page.fill("#hearts-query", "steve");
  await page.click("#hearts-search");
  await page.locator("#hearts-count", { hasText: /^2 shown$/ }).waitFor();
  const counted = page.locator(`tr[data-heart-id="${flow.counted.get("Steve_42")}"]`);
  const text = (await counted.textContent()) ?? "";
  t.true(text.includes("counted") && text.includes("delivered") && text.includes("HTTP 200") && text.includes("day 1"), text);
  await counted.locator("button", { hasText: "Attempts" }).click();
  await page.waitForSelector("#tab-deliveries:not([hidden])");
  await page.waitForSelector("#delivery-detail:not([hidden])");
  await page.locator("#delivery-detail-facts", { hasText: flow.counted.get("Steve_42")! }).waitFor();
  t.true(((await page.textContent("#attempts-table tbody")) ?? "").includes("200"));
  await openTab(page, "hearts");
  await page.fill("#hearts-query", "");
  await page.selectOption("#hearts-verdict", "counted");
  await page.fill("#hearts-query", REFUSED);
  await page.click("#hearts-search");
  await page.locator("#hearts-count", { hasText: /^1 shown$/ }).waitFor();
  const rita = (await page.textContent("#hearts-table tbody")) ?? "";
  t.true(rita.includes("failed") && rita.includes("HTTP 500") && rita.includes("2 attempts"), rita);
  await page.selectOption("#hearts-verdict", "fraud");
  await page.fill("#hearts-query", "");
  await page.click("#hearts-search");
  // The previous search also showed one heart: wait for this one's row, not the count.
  await page.locator(`#hearts-table tr[data-heart-id="${flow.fraudId}"]`).waitFor();
  t.is(await page.textContent("#hearts-count"), "1 shown");
  const today = new Date().toISOString().slice(0, 10);
  await page.selectOption("#hearts-verdict", "all");
  await page.fill("#hearts-to", "2020-01-01");
  await page.click("#hearts-search");
  await page.locator("#hearts-table tbody", { hasText: "No hearts with these filters." }).waitFor();
  await page.fill("#hearts-from", today);
  await page.fill("#hearts-to", today);
  await page.click("#hearts-search");
  await page.locator("#hearts-count", { hasText: "25 shown; more below" }).waitFor();
  t.pass();
});

// ---- Trends --------------------------------------------------------------------------------------

/** The datasets Chart.js drew on a canvas: label -> values. */
async function chartData(page: Page, canvasId: string): Promise<Record<string, Array<number | null>>> {
  return (await page.evaluate(`(() => {
    const chart = Chart.getChart(document.getElementById(${JSON.stringify(canvasId)}));
    if (!chart) return null;
    return Object.fromEntries(chart.data.datasets.map((d) => [d.label, d.data]));
  })()`)) as Record<string, Array<number | null>>;
}
const total = (values: Array<number | null> | undefined) => (values ?? []).reduce<number>((a, b) => a + (b ?? 0), 0);

test.serial(
  "trends: how are my votes and referrals trending? hearts per day and month, callbacks by outcome, latency and the funnel are drawn from SQL aggregates",
  async (t) => {
    const { page, shots } = t.context;
    await openTab(page, "trends");
    await waitInPage(
      page,
      `(() => { const c = document.getElementById("chart-funnel"); return Boolean(window.Chart && Chart.getChart(c) && c.dataset.summary); })()`,
    );
    const daily = await chartData(page, "chart-hearts-daily");
    t.is(daily.counted?.length, 30, "30 days by default");
    t.deepEqual([total(daily.counted), total(daily.cooldown), total(daily.fraud)], [30, 1, 1]);
    t.is(daily.counted?.at(-1), 30, "all of them today");
    const monthly = await chartData(page, "chart-hearts-monthly");
    t.is(monthly.counted?.length, 12);
    t.is(monthly.counted?.at(-1), 30);
    const deliveries = await chartData(page, "chart-deliveries");
    t.deepEqual([total(deliveries.delivered), total(deliveries.failed), total(deliveries.pending)], [29, 1, 0]);
    const latency = await chartData(page, "chart-latency");
    t.true((latency["95th percentile"]?.at(-1) ?? -1) >= 0, "today's latency is drawn");
    t.is(latency.median?.[0], null, "days without attempts are gaps, not zeros");
    const funnel = await chartData(page, "chart-funnel");
    t.deepEqual(funnel.referrals, [4, 3, 2, 1]);
    const rates = (await page.textContent("#funnel-rates")) ?? "";
    t.true(rates.includes("75.0%") && rates.includes("3 of 4") && rates.includes("66.7%") && rates.includes("50.0%"), rates);
    t.is(await page.getAttribute("#chart-hearts-daily", "aria-label"), "Hearts, last 30 days: 30 counted, 1 cooldown, 1 fraud.");
    t.is(await page.getAttribute("#chart-deliveries", "aria-label"), "Reward callbacks, last 30 days: 29 delivered, 1 failed, 0 pending.");
    // The numbers behind each chart are on the page too.
    await page.click("#tab-trends details >> nth=2");
    const todayRow = (await page.locator("#data-deliveries tbody tr").last().locator("td").allTextContents()).slice(0, 4);
    t.deepEqual(todayRow, [new Date().toISOString().slice(0, 10), "29", "1", "0"]);
    await page.selectOption("#trends-days", "7");
    await waitInPage(page, `Chart.getChart(document.getElementById("chart-hearts-daily")).data.labels.length === 7`);
    await page.screenshot({ path: join(shots, "trends-1280.png"), fullPage: true });
  },
);

test.serial("trends: Chart.js is served by the gateway itself, and the page keeps its strict CSP", async (t) => {
  const { gatewayUrl } = t.context;
  const chart = await fetch(`${gatewayUrl}/dashboard/vendor/chart.umd.min.js`);
  t.is(chart.status, 200);
  t.regex(chart.headers.get("content-type") ?? "", /^text\/javascript/);
  t.true((await chart.text()).includes("Chart.js v4"));
  const page = await fetch(`${gatewayUrl}/dashboard`);
  const csp = page.headers.get("content-security-policy") ?? "";
  t.true(csp.includes("script-src 'self'") && csp.includes("style-src 'self'") && !csp.includes("unsafe"), csp);
  const html = await page.text();
  t.false(/(src|href)="(https?:)?\/\//.test(html), "nothing from another host");
  t.false(/<script(?![^>]*\bsrc=)[^>]*>/.test(html), "no inline script");
  t.false(/\bstyle="/.test(html), "no inline style");
});

// ---- Signature debugger ----------------------------------------------------------------------------

/** The server a body is for (the server being debugged, unless a test names another). */
const serverIdOf = (body: string) => (JSON.parse(body) as { server_id: string }).server_id;

async function checkSignatureInPage(
  page: Page,
  input: { scheme: "ingest" | "callback"; header: string; body: string; secret: string; now: number; serverId?: string },
) {
  await page.check(`input[name="sig-scheme"][value="${input.scheme}"]`);
  await page.fill("#sig-header", input.header);
  await page.fill("#sig-body", input.body);
  await page.fill("#sig-server", input.serverId ?? serverIdOf(input.body));
  await page.fill("#sig-secret", input.secret);
  await page.fill("#sig-now", String(input.now));
  await page.evaluate('document.getElementById("sig-result").replaceChildren()');
  await page.click("#sig-check");
  await page.waitForSelector("#sig-verdict");
  return {
    verdict: await page.getAttribute("#sig-verdict", "data-verdict"),
    verdictText: (await page.textContent("#sig-verdict")) ?? "",
    findings: (await page.textContent("#sig-findings")) ?? "",
    canonical: await page.textContent("#sig-canonical").catch(() => null),
    expectedHeader: (await page.locator("#sig-expected-header").count()) > 0 ? await page.textContent("#sig-expected-header") : null,
    engine: (await page.textContent("#sig-result")) ?? "",
  };
}

test.serial(
  "debugger: why did my signature check fail? frozen vectors verify in both schemes; each mistake is named; no request carries the secret",
  async (t) => {
    const { page, shots } = t.context;
    const requests: Request[] = [];
    const record = (request: Request) => requests.push(request);
    page.on("request", record);
    try {
      await openTab(page, "debugger");
      const v = vectors.cases[0]!;
      const ok = await checkSignatureInPage(page, { scheme: "ingest", header: v.ingest_header, body: v.body, secret: v.secret, now: v.t });
      t.is(ok.verdict, "valid", ok.findings);
      t.is(ok.expectedHeader, v.ingest_header);
      t.is(ok.canonical, `${v.t}.${v.body}`);
      t.true(ok.engine.includes("the browser's WebCrypto"), "localhost is a secure context");

      const wrongSecret = await checkSignatureInPage(page, {
        scheme: "ingest",
        header: v.ingest_header,
        body: v.body,
        secret: vectors.cases[1]!.secret,
        now: v.t,
      });
      t.is(wrongSecret.verdict, "mismatch");
      t.true(wrongSecret.verdictText.includes('401 "signature rejected: bad_signature"'), wrongSecret.verdictText);
      t.true(wrongSecret.findings.includes(`, got ${v.mac_hex}`), wrongSecret.findings);

      const bodyAlone = await checkSignatureInPage(page, {
        scheme: "ingest",
        header: `t=${v.t},v1=sha256=${(await import("node:crypto")).createHmac("sha256", v.secret).update(v.body).digest("hex")}`,
        body: v.body,
        secret: v.secret,
        now: v.t,
      });
      t.true(bodyAlone.findings.includes("They signed the body alone."), bodyAlone.findings);

      const stale = await checkSignatureInPage(page, { scheme: "ingest", header: v.ingest_header, body: v.body, secret: v.secret, now: v.t + 301 });
      t.is(stale.verdict, "stale");
      t.true(stale.verdictText.includes('401 "signature rejected: stale"'));

      const malformed = await checkSignatureInPage(page, { scheme: "ingest", header: v.callback_header, body: v.body, secret: v.secret, now: v.t });
      t.is(malformed.verdict, "malformed");
      t.true(malformed.verdictText.includes('400 "missing or malformed X-Service-Signature header"'));
      t.true(malformed.findings.includes("v1 is bare hex"), malformed.findings);

      const r = vectors.callback_rotation;
      const rotationInput = { scheme: "callback", header: r.callback_header, body: r.body, secret: r.secrets_newest_first[1]!, now: r.t } as const;
      const rotation = await checkSignatureInPage(page, rotationInput);
      t.is(rotation.verdict, "valid");
      t.true(rotation.findings.includes("v1 #2 matches"), rotation.findings);
      // The same valid signature, debugged for another server: refused with the receivers' reason.
      const other = "0d9c8b7a-6f5e-4d3c-8b2a-1f0e9d8c7b6a";
      const elsewhere = await checkSignatureInPage(page, { ...rotationInput, serverId: other });
      t.is(elsewhere.verdict, "refused");
      t.true(elsewhere.verdictText.includes(`403 "server_id mismatch: this receiver is for server ${other}"`), elsewhere.verdictText);
      t.true(elsewhere.findings.includes("only the server_id proves it is for you"), elsewhere.findings);
      await page.screenshot({ path: join(shots, "debugger-1280.png"), fullPage: true });
    } finally {
      page.off("request", record);
    }
    const secrets = [...vectors.cases.map((c) => c.secret), ...vectors.callback_rotation.secrets_newest_first];
    for (const request of requests) {
      const carried = [request.url(), JSON.stringify(await request.allHeaders()), request.postData() ?? ""].join("\n");
      for (const secret of secrets) t.false(carried.includes(secret), `${request.method()} ${request.url()} carried a secret`);
    }
    t.deepEqual(
      // Opening the tab refreshes the page-wide endpoint notice (a GET of the server's endpoint health, checked above
      // to carry no secret); that is the page's, not the debugger's.
      requests
        .map((r) => new URL(r.url()).pathname)
        .filter((p) => p !== "/dashboard/signature-rules.json" && !/^\/dashboard\/api\/servers\/[0-9a-f-]{36}\/endpoint-health$/.test(p)),
      [],
      "the debugger makes no request but the public rules file",
    );
    await openTab(t.context.page, "hearts");
    t.is(await page.inputValue("#sig-secret"), "", "leaving the tab forgets the secret");
  },
);

test.serial("debugger: without WebCrypto (plain http on another host is not a secure context) the plain-JS HMAC gives the same answers", async (t) => {
  const { browser, gatewayUrl } = t.context;
  const page = await browser.context.newPage();
  try {
    await page.addInitScript('Object.defineProperty(window, "isSecureContext", { value: false })');
    await page.goto(`${gatewayUrl}/dashboard#debugger`);
    await page.fill("#token-input", TOKEN);
    await page.click("#sign-in");
    await page.waitForSelector("#tab-debugger:not([hidden])");
    for (const v of vectors.cases) {
      const ok = await checkSignatureInPage(page, { scheme: "callback", header: v.callback_header, body: v.body, secret: v.secret, now: v.t });
      t.is(ok.verdict, "valid", v.name);
      t.true(ok.engine.includes("plain-JavaScript HMAC-SHA256"), v.name);
    }
    const wrong = await checkSignatureInPage(page, {
      scheme: "callback",
      header: `t=${vectors.cases[0]!.t},v1=${"0".repeat(64)}`,
      body: vectors.cases[0]!.body,
      secret: vectors.cases[0]!.secret,
      now: vectors.cases[0]!.t,
    });
    t.is(wrong.verdict, "mismatch");
  } finally {
    await page.close();
  }
});

test.serial("debugger: a test callback's exact request opens in the debugger; the owner's secret verifies it, the wrong kind of secret is named", async (t) => {
  const { page, stack } = t.context;
  await openTab(page, "integration");
  await page.fill("#test-username", "Debug_Dora");
  await page.click("#send-test-callback");
  const open = page.locator("#test-callback-result .exchange-debug");
  await open.waitFor();
  await open.click();
  await page.waitForSelector("#tab-debugger:not([hidden])");
  t.true(await page.isChecked('input[name="sig-scheme"][value="callback"]'), "a callback is checked with the callback scheme");
  const header = await page.inputValue("#sig-header");
  t.regex(header, /^t=\d+,v1=[0-9a-f]{64}$/);
  t.true((await page.inputValue("#sig-body")).includes('"username":"Debug_Dora"'));
  t.is(await page.inputValue("#sig-now"), /^t=(\d+)/.exec(header)![1]!, "t is checked against its own send time");
  t.is(await page.evaluate("document.activeElement.id"), "sig-secret", "the secret field waits for the owner");
  t.is(await page.inputValue("#sig-server"), flow.serverId, "the server being debugged is the one selected");
  const { secret } = await stack.clients.admin.revealCallbackSecret({ serverId: flow.serverId });
  await page.fill("#sig-secret", secret);
  await page.click("#sig-check");
  await page.locator("#sig-verdict[data-verdict=valid]").waitFor();
  const referralSecret = (await stack.clients.admin.createReferralSecret({ serverId: flow.serverId })).secret;
  await page.fill("#sig-secret", referralSecret);
  await page.click("#sig-check");
  await page.locator("#sig-verdict[data-verdict=mismatch]").waitFor();
  t.true(((await page.textContent("#sig-findings")) ?? "").includes("This is a referral secret (rsec_)"));
});

// ---- Every tab: accessibility and layout at desktop and phone widths ------------------------------

test.serial("every tab: referral hint reads ref_token=<token> (no garbled entity); axe finds no serious or critical violation", async (t) => {
  const { page } = t.context;
  await page.setViewportSize({ width: 1280, height: 900 });
  await openTab(page, "referrals");
  const hint = (await page.locator("#tab-referrals .hint").first().textContent()) ?? "";
  t.true(hint.includes("ref_token=<token> added to its query"), hint);
  t.false(/hellip|&\w+;/.test(hint), hint);
  for (const tab of TABS) {
    await openTab(page, tab);
    if (tab === "trends")
      await waitInPage(page, `(() => { const c = document.getElementById("chart-funnel"); return Boolean(window.Chart && Chart.getChart(c)); })()`);
    const violations = await findA11yViolations(page);
    t.deepEqual(violations, [], `${tab}:\n${formatViolations(violations)}`);
  }
});

for (const width of [1280, 375]) {
  test.serial(`every tab at ${width} px: nothing overflows the page or its card (tables scroll inside); screenshots kept`, async (t) => {
    const { page, shots } = t.context;
    await page.setViewportSize({ width, height: 900 });
    // The delivery detail card is part of the deliveries tab when open.
    for (const tab of TABS) {
      await openTab(page, tab);
      if (tab === "hearts") await page.waitForSelector("#hearts-table tbody tr");
      if (tab === "deliveries") await page.waitForSelector("#deliveries-table tbody tr[data-delivery-id]");
      if (tab === "trends")
        await waitInPage(page, `(() => { const c = document.getElementById("chart-funnel"); return Boolean(window.Chart && Chart.getChart(c)); })()`);
      t.is(await pageOverflowPx(page), 0, `${tab}: the page scrolls sideways`);
      t.deepEqual(await overflowingCards(page), [], `${tab}: a card overflows`);
      await page.screenshot({ path: join(shots, `${tab}-${width}.png`), fullPage: true });
    }
    const phoneViolations = width === 375 ? await findA11yViolations(page) : [];
    t.deepEqual(phoneViolations, [], formatViolations(phoneViolations));
  });
}

test.serial("the page reported no error in the whole run: no CSP violation (Chart.js included), no script error", (t) => {
  // The 401 of the wrong-token check in other files does not happen here; a favicon is data: (no 404).
  t.deepEqual(pageErrors, []);
});
