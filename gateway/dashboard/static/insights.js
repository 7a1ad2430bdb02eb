// Hearts list (Hearts tab) and charts (Trends tab) of the picked server. An ES module
// beside app.js: it uses the helpers app.js shares on window.dashboard and loads when
// app.js announces a tab ("dashboard:tab"). Charts are drawn by Chart.js, which the
// gateway serves itself (/dashboard/vendor/chart.umd.min.js); each chart also has its
// numbers in a table and a text summary for screen readers.

const d = window.dashboard;
const $ = (id) => document.getElementById(id);
const el = d.el;

const COLORS = {
  counted: "#1e7a46",
  cooldown: "#b7791f",
  fraud: "#b42318",
  delivered: "#1e7a46",
  failed: "#b42318",
  pending: "#667085",
  p50: "#2563eb",
  p95: "#d6336c",
  max: "#667085",
  funnel: "#d6336c",
};
/** Hearts per page of the list ("Load more" fetches the next). */
const HEARTS_PAGE_SIZE = 25;
const VERDICT_BADGE = { counted: "ok", cooldown: "warn", fraud: "err" };

let serverId = "";
const hearts = { nextToken: null, shown: 0, filters: null };
const charts = new Map();

document.addEventListener("dashboard:tab", (event) => {
  serverId = event.detail.serverId;
  if (event.detail.tab === "hearts") d.run(null, () => searchHearts());
  if (event.detail.tab === "trends" && serverId) d.run(null, loadTrends);
});

// ---- hearts list ------------------------------------------------------------------------

function currentFilters() {
  return {
    q: $("hearts-query").value.trim(),
    verdict: $("hearts-verdict").value,
    claim: $("hearts-claim").value,
    from: $("hearts-from").value,
    to: $("hearts-to").value,
  };
}

async function searchHearts() {
  const tbody = $("hearts-table").tBodies[0];
  $("hearts-no-server").hidden = Boolean(serverId);
  if (!serverId) {
    d.emptyRow(tbody, 8, "No server picked.");
    $("hearts-more").hidden = true;
    $("hearts-count").textContent = "";
    return;
  }
  hearts.filters = currentFilters();
  hearts.shown = 0;
  tbody.replaceChildren();
  await loadHeartsPage(null);
}

async function loadHeartsPage(pageToken) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(hearts.filters)) if (value) params.set(key, value);
  params.set("page_size", String(HEARTS_PAGE_SIZE));
  if (pageToken) params.set("page_token", pageToken);
  const page = await d.api("GET", `${d.serverPath("/hearts")}?${params}`);
  const tbody = $("hearts-table").tBodies[0];
  const filtered = Object.entries(hearts.filters).some(([key, value]) => value && !((key === "verdict" || key === "claim") && value === "all"));
  if (!pageToken && page.hearts.length === 0)
    d.emptyRow(
      tbody,
      8,
      filtered
        ? "No hearts with these filters. Clear Player and the days, and set Verdict and Claim to All, to see every heart."
        : "No hearts yet. Share your server's vote page with players: each heart cast shows here, counted or not.",
    );
  else tbody.append(...page.hearts.map(heartRow));
  hearts.shown += page.hearts.length;
  hearts.nextToken = page.next_page_token;
  $("hearts-more").hidden = !page.next_page_token;
  $("hearts-count").textContent = `${hearts.shown} shown${page.next_page_token ? "; more below" : ""}`;
}

function heartRow(h) {
  return el(
    "tr",
    { dataset: { heartId: h.heart_id } },
    el("td", { class: "nowrap" }, d.fmtTime(h.cast_at)),
    el("td", {}, el("strong", {}, h.username), el("div", { class: "muted small" }, h.voter_identity), ...platformIdLines(h)),
    el("td", {}, d.badge(h.verdict, VERDICT_BADGE[h.verdict])),
    el("td", {}, String(h.fraud_score)),
    el(
      "td",
      { class: "cell-reasons" },
      h.fraud_reasons.length === 0 ? "\u2013" : el("ul", { class: "reasons" }, ...h.fraud_reasons.map((r) => el("li", {}, r))),
    ),
    el("td", {}, h.streak_day === null ? "\u2013" : `day ${h.streak_day}`),
    el("td", {}, claimCell(h)),
    el("td", {}, deliveryCell(h)),
  );
}

const CLAIM_BADGE = { held: "warn", claimed: "ok", expired: "err", withdrawn: "err" };

/** The heart's claim-ledger state: held until, claimed at, or expired (and why). */
function claimCell(h) {
  if (h.claim === null) return "\u2013";
  const { state, expired_reason: reason, expires_at: until, claimed_at: at } = h.claim;
  const note =
    state === "held"
      ? `until ${d.fmtTime(until)}`
      : state === "claimed"
        ? d.fmtTime(at)
        : state === "expired"
          ? reason === "cap"
            ? "player's cap"
            : "window ended"
          : "";
  return el("div", {}, d.badge(state, CLAIM_BADGE[state]), note ? el("div", { class: "muted small" }, note) : "");
}

/** The voter's platform ids, one small line each (only those given). */
function platformIdLines(h) {
  const ids = [
    ["Steam", h.steam_id],
    ["Discord", h.discord_id],
    ["Minecraft", h.minecraft_uuid],
    ["Account", h.account_id],
  ];
  return ids.filter(([, value]) => value).map(([label, value]) => el("div", { class: "muted small" }, `${label}: `, el("code", {}, value)));
}

function deliveryCell(h) {
  if (h.deliveries.length === 0) return h.verdict === "counted" ? el("span", { class: "muted" }, "not created yet") : "\u2013";
  return el("div", { class: "delivery-list" }, ...h.deliveries.map((x) => deliveryLine(h, x)));
}

function deliveryLine(h, x) {
  const answer = x.last_status_code === null ? "" : ` \u00b7 HTTP ${x.last_status_code}`;
  // A held delivery reads as held, with what releases it (the same state as on the Deliveries tab).
  const shown = d.deliveryState(x);
  return el(
    "span",
    { class: "delivery-cell", dataset: { transport: x.transport } },
    el("span", { class: "small" }, x.transport),
    shown.label === "held" ? d.badge("held", "warn") : d.deliveryBadge(x.status),
    shown.label === "held" ? el("span", { class: "muted small" }, shown.next) : "",
    el("span", { class: "muted small" }, `${x.attempts} attempt${x.attempts === 1 ? "" : "s"}${answer}`),
    el(
      "button",
      {
        type: "button",
        class: "btn btn-small",
        onclick: () => d.openDelivery(x.id),
        "aria-label": `Attempts of the ${x.transport} delivery for ${h.username}`,
      },
      "Attempts",
    ),
  );
}

$("hearts-filter").addEventListener("submit", (event) => {
  event.preventDefault();
  d.run(event.submitter, searchHearts);
});
$("hearts-more").addEventListener("click", (event) => d.run(event.target, () => loadHeartsPage(hearts.nextToken)));

// ---- trends ---------------------------------------------------------------------------------

async function loadTrends() {
  const days = $("trends-days").value;
  const [heartStats, deliveryStats, funnel] = await Promise.all([
    d.api("GET", `${d.serverPath("/stats/hearts")}?days=${days}&months=12`),
    d.api("GET", `${d.serverPath("/stats/deliveries")}?days=${days}&transport=${$("trends-transport").value}`),
    d.api("GET", `${d.serverPath("/funnel")}?scope=${$("trends-funnel-scope").value}`),
  ]);
  renderHearts("hearts-daily", heartStats.daily, `last ${days} days`);
  renderHearts("hearts-monthly", heartStats.monthly, "last 12 months");
  renderDeliveries(deliveryStats.days, days);
  renderLatency(deliveryStats.days, days);
  renderFunnel(funnel.funnel, funnel.scope === "month" ? `this month (${funnel.period})` : "all time");
}

const sum = (rows, key) => rows.reduce((total, row) => total + (row[key] || 0), 0);

function renderHearts(name, buckets, span) {
  const labels = buckets.map((b) => b.bucket);
  drawChart(
    `chart-${name}`,
    {
      type: "bar",
      data: {
        labels,
        datasets: ["counted", "cooldown", "fraud"].map((verdict) => ({
          label: verdict,
          data: buckets.map((b) => b[verdict]),
          backgroundColor: COLORS[verdict],
          stack: "hearts",
        })),
      },
      options: stackedOptions("hearts"),
    },
    `Hearts, ${span}: ${sum(buckets, "counted")} counted, ${sum(buckets, "cooldown")} cooldown, ${sum(buckets, "fraud")} fraud.`,
  );
  dataTable(
    `data-${name}`,
    ["Period", "Counted", "Cooldown", "Fraud"],
    buckets.map((b) => [b.bucket, b.counted, b.cooldown, b.fraud]),
  );
}

const TRANSPORT_NAMES = { callback: "Reward callbacks", votifier: "Votifier votes", pull: "Pull API claims", all: "Deliveries (all transports)" };

function renderDeliveries(days, span) {
  const what = TRANSPORT_NAMES[$("trends-transport").value];
  drawChart(
    "chart-deliveries",
    {
      type: "bar",
      data: {
        labels: days.map((x) => x.day),
        datasets: ["delivered", "failed", "pending"].map((status) => ({
          label: status,
          data: days.map((x) => x[status]),
          backgroundColor: COLORS[status],
          stack: "deliveries",
        })),
      },
      options: stackedOptions("deliveries"),
    },
    `${what}, last ${span} days: ${sum(days, "delivered")} delivered, ${sum(days, "failed")} failed, ${sum(days, "pending")} pending.`,
  );
  dataTable(
    "data-deliveries",
    ["Day", "Delivered", "Failed", "Pending", "Attempts", "Succeeded"],
    days.map((x) => [x.day, x.delivered, x.failed, x.pending, x.attempts, x.attempts_ok]),
  );
}

function renderLatency(days, span) {
  const withAttempts = days.filter((x) => x.attempts > 0);
  const worst = withAttempts.reduce((max, x) => Math.max(max, x.latency_p95_ms), 0);
  drawChart(
    "chart-latency",
    {
      type: "line",
      data: {
        labels: days.map((x) => x.day),
        datasets: [
          { label: "median", data: days.map((x) => x.latency_p50_ms), borderColor: COLORS.p50, backgroundColor: COLORS.p50, spanGaps: true },
          { label: "95th percentile", data: days.map((x) => x.latency_p95_ms), borderColor: COLORS.p95, backgroundColor: COLORS.p95, spanGaps: true },
          {
            label: "slowest",
            data: days.map((x) => x.latency_max_ms),
            borderColor: COLORS.max,
            backgroundColor: COLORS.max,
            borderDash: [4, 4],
            spanGaps: true,
          },
        ],
      },
      options: { ...baseOptions(), scales: { y: { beginAtZero: true, title: { display: true, text: "ms" } } } },
    },
    withAttempts.length === 0
      ? `No callback attempts in the last ${span} days.`
      : `Callback latency, last ${span} days: the worst daily 95th percentile was ${worst} ms.`,
  );
  dataTable(
    "data-latency",
    ["Day", "Attempts", "Median ms", "95th pct ms", "Slowest ms"],
    days.map((x) => [x.day, x.attempts, x.latency_p50_ms ?? "\u2013", x.latency_p95_ms ?? "\u2013", x.latency_max_ms ?? "\u2013"]),
  );
}

function renderFunnel(f, span) {
  drawChart(
    "chart-funnel",
    {
      type: "bar",
      data: {
        labels: ["Clicks", "Registered", "Qualified", "Reversed"],
        datasets: [{ label: "referrals", data: [f.clicks, f.registered, f.qualified, f.reversed], backgroundColor: COLORS.funnel }],
      },
      options: { ...baseOptions(), indexAxis: "y", plugins: { legend: { display: false } }, scales: { x: { beginAtZero: true, ticks: { precision: 0 } } } },
    },
    `Referral funnel, ${span}: ${f.clicks} clicks, ${f.registered} registered, ${f.qualified} qualified, ${f.reversed} reversed.`,
  );
  const rate = (term, value, detail) => [
    el("dt", {}, term),
    el("dd", {}, el("strong", {}, d.fmtRate(value)), el("span", { class: "muted small" }, ` ${detail}`)),
  ];
  $("funnel-rates").replaceChildren(
    ...rate("Click \u2192 registered", f.click_to_register_rate, `${f.registered} of ${f.clicks}`),
    ...rate("Registered \u2192 qualified", f.register_to_qualify_rate, `${f.qualified} of ${f.registered}`),
    ...rate("Qualified \u2192 reversed", f.reversal_rate, `${f.reversed} of ${f.qualified}`),
  );
}

function baseOptions() {
  return {
    responsive: true,
    maintainAspectRatio: false,
    animation: false,
    interaction: { mode: "index", intersect: false },
    plugins: { legend: { position: "bottom" } },
  };
}

function stackedOptions(unit) {
  return {
    ...baseOptions(),
    scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: unit } } },
  };
}

/** Draws (or redraws) a chart; the canvas's accessible name carries the summary. */
function drawChart(canvasId, config, summary) {
  const canvas = $(canvasId);
  canvas.setAttribute("aria-label", summary);
  canvas.dataset.summary = summary;
  charts.get(canvasId)?.destroy();
  if (typeof window.Chart !== "function") {
    // Failure policy: without the chart library the numbers table and the summary still answer.
    canvas.replaceChildren(document.createTextNode(summary));
    return;
  }
  charts.set(canvasId, new window.Chart(canvas, config));
}

function dataTable(containerId, headers, rows) {
  const table = el("table", { class: "table table-compact" }, el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", { scope: "col" }, h)))));
  table.append(el("tbody", {}, ...rows.map((cells) => el("tr", {}, ...cells.map((c) => el("td", {}, String(c)))))));
  $(containerId).replaceChildren(table);
}

$("trends-days").addEventListener("change", () => d.run(null, loadTrends));
$("trends-transport").addEventListener("change", () => d.run(null, loadTrends));
$("trends-funnel-scope").addEventListener("change", () => d.run(null, loadTrends));
$("refresh-trends").addEventListener("click", (event) => d.run(event.target, loadTrends));
