// The plugin activity card (Integration tab, beside the check/claim card): what the reward plugins' check/claim
// calls of the picked server got, per path and player id kind (GET /servers/:id/plugin-activity). A wrong key, a
// malformed player id and a player who never voted are all answered `0` to the plugin; here they are told apart,
// with a plain-words hint when wrong keys or malformed ids are most of a plugin's calls. An ES module beside
// app.js: it loads when the Integration tab opens ("dashboard:tab") or its server changes ("dashboard:claims"),
// and again every REFRESH_MS while the tab stays open. The gateway sends calls about once a second, so a call
// shows here within a few seconds.

const d = window.dashboard;
const $ = (id) => document.getElementById(id);
const el = d.el;

/** How often the open Integration tab reloads the card. */
const REFRESH_MS = 5_000;

/** The columns of the counts, in the order the table shows them. */
const OUTCOMES = ["ok", "never_voted", "wrong_key", "malformed_id"];
const OUTCOME_BADGE = { ok: "ok", never_voted: "", wrong_key: "err", malformed_id: "err" };

/** The owner's words for each player id kind, and the form a well-formed id has. */
const KINDS = {
  steam_id: { name: "SteamID (steamid=)", form: "a SteamID64: 17 digits starting 7656119, not STEAM_0:... nor steam:<hex>" },
  username: { name: "Username (username=)", form: "an in-game name" },
  discord_id: { name: "Discord id (discordid=)", form: "a Discord user id: 17 to 20 digits" },
  minecraft_uuid: { name: "Minecraft UUID (uuid=)", form: "a Minecraft account UUID: 32 hex digits, with or without dashes" },
  account_id: { name: "Account id (accountid=)", form: "the game account id the list passed on from the vote link" },
  none: { name: "No player id (reward queue)", form: "" },
};

let serverId = "";
let open = false;
let timer;

document.addEventListener("dashboard:tab", (event) => {
  serverId = event.detail.serverId;
  open = event.detail.tab === "integration";
  schedule();
});

document.addEventListener("dashboard:claims", (event) => {
  if (event.detail.serverId === serverId && $("plugin-activity-rows").dataset.serverId === serverId) return;
  serverId = event.detail.serverId;
  open = true;
  schedule();
});

$("plugin-activity-refresh").addEventListener("click", (event) => d.run(event.target, () => load({ fromButton: true })));

/** Loads now, then every REFRESH_MS while the Integration tab is open and the page visible. */
function schedule() {
  clearTimeout(timer);
  if (!open || !serverId) return;
  void load({ fromButton: false }).finally(() => {
    clearTimeout(timer);
    if (open) timer = setTimeout(schedule, REFRESH_MS);
  });
}

async function load({ fromButton }) {
  if (!serverId || document.visibilityState === "hidden") return;
  const asked = serverId;
  try {
    const { rows } = await d.api("GET", `/servers/${encodeURIComponent(asked)}/plugin-activity`);
    if (asked !== serverId) return;
    $("plugin-activity-error").hidden = true;
    render(rows);
  } catch (error) {
    if (fromButton) throw error;
    // Failure policy: a failed background reload keeps the last table and says so in the card; the next reload tries again.
    $("plugin-activity-error").hidden = false;
    $("plugin-activity-error").textContent = `Could not reload the plugin activity: ${error.message}. It is tried again in a few seconds.`;
  }
}

/** The rows grouped per (path, id kind): counts per outcome and the newest call. */
function groupRows(rows) {
  const groups = new Map();
  for (const row of rows) {
    const key = `${row.path} ${row.player_id_kind}`;
    const group = groups.get(key) ?? { path: row.path, usedBy: row.used_by, kind: row.player_id_kind, counts: {}, last: row, malformed: null };
    group.counts[row.outcome] = (group.counts[row.outcome] ?? 0) + row.calls;
    if (row.last_at > group.last.last_at) group.last = row;
    if (row.outcome === "malformed_id") group.malformed = row;
    groups.set(key, group);
  }
  return [...groups.values()].sort((a, b) => (a.last.last_at < b.last.last_at ? 1 : -1));
}

/** A hint when wrong keys or malformed ids are at least half of a group's calls: what to change, in plain words. */
function hintOf(group) {
  const total = OUTCOMES.reduce((sum, outcome) => sum + (group.counts[outcome] ?? 0), 0);
  const wrong = group.counts.wrong_key ?? 0;
  const malformed = group.counts.malformed_id ?? 0;
  const where = `${group.path}${group.usedBy ? ` (${group.usedBy})` : ""}`;
  if (wrong > 0 && wrong * 2 >= total) {
    return `Your plugin calling ${where} sends a key this server does not have (a mistyped key, or an old one after a rotation): paste the claim key from "Claim key" above (Reveal, or Mint a key) into the plugin's config, exactly as shown under "What to paste", and reload the plugin.`;
  }
  if (malformed > 0 && malformed * 2 >= total) {
    const kind = KINDS[group.kind];
    const last = group.malformed?.last_player_id ? ` The last one was "${group.malformed.last_player_id}".` : "";
    return `Your plugin calling ${where} sends player ids that are not ${kind?.form ?? "of their kind's form"}.${last} Check the plugin's id setting (for example the FiveM script's Config.identifier = "steam"), then reload the plugin.`;
  }
  return "";
}

function render(rows) {
  const tbody = $("plugin-activity-rows");
  tbody.dataset.serverId = serverId;
  const groups = groupRows(rows);
  const hints = groups.map(hintOf).filter(Boolean);
  $("plugin-activity-hints").replaceChildren(...hints.map((text) => el("p", { class: "msg msg-error plugin-activity-hint", role: "status" }, text)));
  if (groups.length === 0) {
    d.emptyRow(
      tbody,
      9,
      'No plugin calls yet. Put the values from "What to paste" above into your reward plugin and reload it; its checks and claims show here within a few seconds.',
    );
    return;
  }
  tbody.replaceChildren(
    ...groups.map((group) =>
      el(
        "tr",
        { dataset: { path: group.path, kind: group.kind } },
        el("td", { class: "mono" }, group.path),
        el("td", {}, KINDS[group.kind]?.name ?? group.kind),
        el("td", {}, d.fmtTime(group.last.last_at)),
        el("td", { class: "mono" }, `${group.last.last_action} \u2192 ${group.last.last_answer}`),
        el("td", { class: "mono cell-name" }, group.last.last_player_id ?? "\u2013"),
        ...OUTCOMES.map((outcome) => {
          const count = group.counts[outcome] ?? 0;
          return el("td", { dataset: { outcome } }, count === 0 ? "0" : d.badge(String(count), OUTCOME_BADGE[outcome]));
        }),
      ),
    ),
  );
}
