// The Goals tab: the owner's network goals (vote parties across their servers; docs/reward-rules.md "Network goals"),
// each with its target, the round counted now and its progress, how often it was reached, and Delete. Goals are
// created and edited with the CLI or the API (the card says so and links the docs). An operator sees the goals of
// servers no owner has. An ES module beside app.js: it loads when the Goals tab opens ("dashboard:tab").

const d = window.dashboard;
const $ = (id) => document.getElementById(id);
const el = d.el;

/** Where the next page starts (the API's next_cursor), or null when every goal is shown. */
let nextCursor = null;

document.addEventListener("dashboard:tab", (event) => {
  if (event.detail.tab === "goals") void d.run(null, load);
});

$("goals-refresh").addEventListener("click", (event) => d.run(event.target, load));
$("goals-more").addEventListener("click", (event) => d.run(event.target, loadMore));

function showMessage(text) {
  const box = $("goals-message");
  box.className = "msg msg-ok";
  box.textContent = text;
  box.hidden = text === "";
}

/** One goal's row: its name and payees, servers, round, progress bar with its numbers, rounds reached, and Delete. */
function goalRow(g) {
  const shown = Math.min(g.progress, g.target);
  const reached = g.reached === 0 ? "Not yet" : `${g.reached}${g.last_reached_at ? `, last ${d.fmtTime(g.last_reached_at)}` : ""}`;
  return el(
    "tr",
    { dataset: { goalId: g.id } },
    el("td", {}, el("strong", {}, g.name), el("div", { class: "muted" }, g.payees === "online" ? "pays the players online" : "pays the round's voters")),
    el("td", {}, String(g.server_ids.length)),
    el("td", {}, String(g.round)),
    el(
      "td",
      {},
      el("progress", { class: "goal-progress", max: g.target, value: shown, "aria-label": `${g.name}: ${g.progress} of ${g.target} votes` }),
      el("span", { class: "goal-progress-text" }, ` ${g.progress} / ${g.target}`),
    ),
    el("td", {}, reached),
    el(
      "td",
      {},
      el(
        "button",
        { type: "button", class: "btn btn-danger", "aria-label": `Delete goal ${g.name}`, onclick: (event) => d.run(event.target, () => remove(g)) },
        "Delete",
      ),
    ),
  );
}

async function load() {
  const page = await d.api("GET", "/goals");
  nextCursor = page.next_cursor;
  const tbody = $("goals-rows");
  if (page.goals.length === 0) d.emptyRow(tbody, 6, "No network goals yet. Define one with npx rcb goals put --file party.json (see the link above).");
  else tbody.replaceChildren(...page.goals.map(goalRow));
  $("goals-more").hidden = nextCursor === null;
}

async function loadMore() {
  const page = await d.api("GET", `/goals?cursor=${encodeURIComponent(nextCursor)}`);
  nextCursor = page.next_cursor;
  $("goals-rows").append(...page.goals.map(goalRow));
  $("goals-more").hidden = nextCursor === null;
}

async function remove(goal) {
  if (!window.confirm(`Delete the goal "${goal.name}"? Votes stop counting toward it at once. Rounds it already reached are still paid.`)) return;
  const { unpaid_rounds: unpaid } = await d.api("DELETE", `/goals/${encodeURIComponent(goal.id)}`);
  await load();
  showMessage(`Deleted "${goal.name}".${unpaid > 0 ? ` ${unpaid} round(s) it reached are still being paid.` : ""}`);
}
