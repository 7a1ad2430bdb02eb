// The Voter roles card (Integration tab): the picked server's Discord voter role (docs/discord-roles.md): its status
// line (the last Discord error and when, or the last role change), and the form that saves the bot token (never shown
// again: the field stays empty, and an empty field keeps the stored token), the guild, the role and the duration.
// An ES module beside app.js: it loads when the Integration tab opens ("dashboard:tab").

const d = window.dashboard;
const $ = (id) => document.getElementById(id);

let serverId = "";

document.addEventListener("dashboard:tab", (event) => {
  if (event.detail.tab !== "integration") return;
  serverId = event.detail.serverId;
  if (serverId) void d.run(null, load);
});

$("voter-roles-save").addEventListener("click", (event) => d.run(event.target, save));
$("voter-roles-off").addEventListener("click", (event) => d.run(event.target, turnOff));

const path = () => `/servers/${encodeURIComponent(serverId)}/voter-roles`;

/** Shows the settings: the status line and the form's fields (never the token). */
function show(v) {
  const status = $("voter-roles-status");
  status.textContent = v.status;
  status.className = `msg ${v.last_error ? "msg-error" : "msg-ok"}`;
  $("voter-roles-guild").value = v.guild_id;
  $("voter-roles-role").value = v.role_id;
  $("voter-roles-hours").value = v.configured ? String(Math.round(v.duration_seconds / 3600)) : "24";
  $("voter-roles-token").value = "";
  $("voter-roles-token").placeholder = v.bot_token_set ? "stored (leave empty to keep it)" : "the bot's token";
}

async function load() {
  const asked = serverId;
  const { voter_roles: v } = await d.api("GET", path());
  if (asked === serverId) show(v);
}

async function save() {
  const { voter_roles: v } = await d.api("PUT", path(), {
    bot_token: $("voter-roles-token").value.trim(),
    guild_id: $("voter-roles-guild").value.trim(),
    role_id: $("voter-roles-role").value.trim(),
    duration_seconds: Math.round(Number($("voter-roles-hours").value) * 3600),
  });
  show(v);
  d.showOk("Voter roles saved.");
}

async function turnOff() {
  const { voter_roles: v } = await d.api("DELETE", path());
  show(v);
  d.showOk("Voter roles turned off.");
}
