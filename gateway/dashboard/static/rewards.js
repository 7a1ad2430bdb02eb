// The Rewards card (Integration tab): the picked server's reward rules (docs/reward-rules.md) as JSON to edit, save
// (from the version shown: a save after someone else's is refused, never merged) and preview; when its reward plugin
// last listed the queue; the pending queue; and the re-queue of a time range after a lost game server
// (docs/reward-queue.md). An ES module beside app.js: it loads when the Integration tab opens ("dashboard:tab").

const d = window.dashboard;
const $ = (id) => document.getElementById(id);
const el = d.el;

/** The queue path a reward plugin lists (the plugin activity rows of it say when it was last seen). */
const QUEUE_PATH = "/api/rewards/queue";

let serverId = "";
/** The version the editor holds: the base of the next save. */
let baseVersion = 0;

document.addEventListener("dashboard:tab", (event) => {
  if (event.detail.tab !== "integration") return;
  if (event.detail.serverId === serverId && $("rewards-rules").dataset.serverId === serverId) return;
  serverId = event.detail.serverId;
  if (serverId) void d.run(null, load);
});

$("rewards-reload").addEventListener("click", (event) => d.run(event.target, load));
$("rewards-save").addEventListener("click", (event) => d.run(event.target, save));
$("rewards-preview").addEventListener("click", (event) => d.run(event.target, preview));
$("rewards-requeue").addEventListener("click", (event) => d.run(event.target, requeue));

const path = (rest) => `/servers/${encodeURIComponent(serverId)}/${rest}`;

/** The editor's text as rules; a parse error is said beside the editor and nothing is sent. */
function editedRules() {
  try {
    return JSON.parse($("rewards-rules").value);
  } catch (error) {
    // Failure policy: broken JSON is the owner's to fix; said where they typed it, nothing sent.
    showMessage("err", `The rules are not valid JSON: ${error.message}`);
    return undefined;
  }
}

function showMessage(kind, text) {
  const box = $("rewards-message");
  box.className = `msg ${kind === "err" ? "msg-error" : "msg-ok"}`;
  box.textContent = text;
  box.hidden = text === "";
}

async function load() {
  const asked = serverId;
  const [rules, queue, activity] = await Promise.all([
    d.api("GET", path("reward-rules")),
    d.api("GET", path("reward-queue")),
    d.api("GET", path("plugin-activity")),
  ]);
  if (asked !== serverId) return;
  baseVersion = rules.version;
  $("rewards-rules").value = JSON.stringify(rules.rules, null, 2);
  $("rewards-rules").dataset.serverId = asked;
  $("rewards-version").textContent =
    rules.version === 0 ? "No rules saved yet (version 0)." : `Version ${rules.version}, saved ${d.fmtTime(rules.saved_at)} by ${rules.saved_by}.`;
  showMessage("", "");
  renderLastSeen(activity.rows);
  renderQueue(queue.entries);
}

/** When a plugin last listed the queue (any outcome), from the plugin activity rows. */
function renderLastSeen(rows) {
  const last = rows
    .filter((r) => r.path === QUEUE_PATH)
    .map((r) => r.last_at)
    .sort()
    .at(-1);
  $("rewards-plugin-seen").textContent = last
    ? `A reward plugin last listed the queue ${d.fmtTime(last)}.`
    : "No reward plugin has listed the queue in the last hour: check its URL and claim key (docs/plugins).";
}

function renderQueue(entries) {
  const tbody = $("rewards-queue-rows");
  if (entries.length === 0) return d.emptyRow(tbody, 4, "Nothing pending.");
  tbody.replaceChildren(
    ...entries.map((e) =>
      el(
        "tr",
        {},
        el("td", {}, d.fmtTime(e.created_at)),
        el("td", {}, e.reason),
        el("td", {}, e.username, e.online_only ? " (online only)" : ""),
        el("td", { class: "mono" }, e.commands.join("\n")),
      ),
    ),
  );
}

async function save() {
  const rules = editedRules();
  if (rules === undefined) return;
  try {
    const { version } = await d.api("PUT", path("reward-rules"), { base_version: baseVersion, rules });
    await load();
    showMessage("ok", `Saved as version ${version}.`);
  } catch (error) {
    // Failure policy: the service's words (every problem with its field, or "changed since") shown in the card.
    showMessage("err", error.message);
  }
}

async function preview() {
  const rules = editedRules();
  if (rules === undefined) return;
  const body = {
    rules,
    player: $("rewards-preview-player").value || "Steve",
    month_total: Number($("rewards-preview-month").value) || 1,
    streak: Number($("rewards-preview-streak").value) || 1,
  };
  try {
    const result = await d.api("POST", path("reward-rules/preview"), body);
    const lines = [
      `Weight ${result.weight}.`,
      ...result.entries.map((e) => `${e.reason}: ${e.commands.join(" | ")}${e.online_only ? " (online only)" : ""}`),
      ...result.skipped.map((s) => `skipped ${s.key}: ${s.why}`),
    ];
    if (result.entries.length === 0 && result.skipped.length === 0) lines.push("This vote gives nothing.");
    $("rewards-preview-result").textContent = lines.join("\n");
    showMessage("", "");
  } catch (error) {
    // Failure policy: as save: the service's words in the card.
    showMessage("err", error.message);
  }
}

async function requeue() {
  const from = $("rewards-requeue-from").value;
  const to = $("rewards-requeue-to").value;
  if (!from || !to) return showMessage("err", "Pick the first and the last day to re-queue.");
  if (
    !window.confirm(`Queue again everything the plugin acknowledged from ${from} to ${to} (UTC days, both included)? Players get those rewards a second time.`)
  )
    return showMessage("", "");
  const end = new Date(`${to}T00:00:00Z`);
  end.setUTCDate(end.getUTCDate() + 1);
  let after = null;
  let requeued = 0;
  let scanned = 0;
  try {
    // A page of at most 500 entries per call; progress after each.
    do {
      const page = await d.api("POST", path("reward-queue/requeue"), { from: `${from}T00:00:00Z`, to: end.toISOString(), after });
      requeued += page.requeued;
      scanned += page.scanned;
      after = page.next_after;
      showMessage("ok", `${requeued} re-queued of ${scanned} looked at${after ? "..." : "."}`);
    } while (after);
    renderQueue((await d.api("GET", path("reward-queue"))).entries);
  } catch (error) {
    // Failure policy: pages done stay done (each is its own transaction); the count so far and the error are shown.
    showMessage("err", `${error.message} (${requeued} re-queued before it)`);
  }
}
