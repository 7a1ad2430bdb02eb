/**
 * The values to paste into each reward plugin (gateway/dashboard/static/plugin-setup.js) are the ones the docs give:
 * one home for the dashboard's claim card, `rcb claims setup` and docs/votifier-and-pull.md. Also: the claim key is
 * filled in everywhere once known, and escaped where the plugin's config format needs it (RocketMod's XML).
 */
import test from "ava";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CLAIM_KEY_PLACEHOLDER, pluginSetups } from "../../gateway/dashboard/static/plugin-setup.js";

const DOC = readFileSync(join(import.meta.dirname, "../../docs/votifier-and-pull.md"), "utf8");

test("every value the claim card shows, for https://list.example and the placeholders, is written as is in docs/votifier-and-pull.md", (t) => {
  for (const setup of pluginSetups({ base: "https://list.example", serverId: "<server id>" })) {
    for (const { label, value } of setup.values) {
      for (const line of value.split("\n")) t.true(DOC.includes(line), `${setup.id} ${label}: ${line}`);
    }
  }
});

test("once the claim key is known, no value keeps the placeholder, and every plugin's values carry the key (XML-escaped in RocketMod's)", (t) => {
  const claimKey = "vck_a&b";
  for (const setup of pluginSetups({ base: "https://list.example", serverId: "s1", claimKey })) {
    const all = setup.values.map((v) => v.value).join("\n");
    t.false(all.includes(CLAIM_KEY_PLACEHOLDER), setup.id);
    t.true(all.includes(setup.id === "rocketmod" ? "vck_a&amp;b" : claimKey), setup.id);
  }
});
