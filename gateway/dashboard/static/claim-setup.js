// The claim card's "What to paste" part (Integration tab): per supported reward plugin, the exact
// values for this list and server (plugin-setup.js, the one home of these values), each with a Copy
// button. An ES module beside app.js: app.js announces the server, and the claim key when the owner
// reveals or mints it ("dashboard:claims"); until then the key reads CLAIM_KEY_PLACEHOLDER.

import { CLAIM_KEY_PLACEHOLDER, pluginSetups } from "./plugin-setup.js";

const d = window.dashboard;

document.addEventListener("dashboard:claims", (event) => {
  const { serverId, claimKey } = event.detail;
  render(serverId, claimKey);
});

function render(serverId, claimKey) {
  const box = document.getElementById("claims-setup");
  const setups = pluginSetups({ base: location.origin, serverId, claimKey });
  box.replaceChildren(
    d.el("h3", {}, "What to paste into your reward plugin"),
    d.el(
      "p",
      { class: "hint" },
      claimKey
        ? "These values carry your claim key: keep them out of screenshots and public repositories."
        : `Reveal or mint the claim key above to fill in ${CLAIM_KEY_PLACEHOLDER}.`,
    ),
    ...setups.map((setup) =>
      d.el(
        "details",
        { class: "plugin-setup", dataset: { plugin: setup.id } },
        d.el("summary", {}, setup.plugin),
        d.el("p", { class: "muted" }, setup.where),
        ...setup.values.map((item, n) => {
          const id = `claims-setup-${setup.id}-${n}`;
          return d.el(
            "div",
            { class: "field" },
            d.el("span", { class: "label" }, item.label),
            d.el(
              "div",
              { class: "copy-row" },
              d.el("pre", { id, class: "mono-box plugin-value" }, item.value),
              d.el("button", { type: "button", class: "btn btn-small", dataset: { copy: id }, "aria-label": `Copy ${item.label}` }, "Copy"),
            ),
          );
        }),
      ),
    ),
  );
}
