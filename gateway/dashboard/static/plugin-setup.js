// What a server owner pastes into each supported reward plugin to use this list's check/claim API
// (docs/votifier-and-pull.md, "Check/claim API for reward plugins"): one home for these values,
// used by the dashboard's claim card (claim-setup.js), `rcb claims setup` and the docs' test.
// Plain JavaScript served to the browser and imported by the CLI; types in plugin-setup.d.ts.

/** Shown where the claim key goes until the owner reveals or mints it. */
export const CLAIM_KEY_PLACEHOLDER = "<claim key>";

/**
 * The values per plugin, for a list whose public address is `base` (no trailing slash), a server id and
 * the claim key (CLAIM_KEY_PLACEHOLDER when not at hand). Each plugin: an id, its name, where the values
 * go, and the values as { label, value } in the order the owner pastes them.
 */
export function pluginSetups({ base, serverId, claimKey }) {
  const key = claimKey || CLAIM_KEY_PLACEHOLDER;
  const votes = `${base}/api/votes`;
  return [
    easyVote({ votes, serverId, key, byName: false }),
    easyVote({ votes, serverId, key, byName: true }),
    {
      id: "fivem",
      plugin: "FiveM vote script (trackyserver family)",
      where: "config.lua, and the `endpoints` table at the top of server/server.lua. Then `ensure <resource>`.",
      values: [
        { label: "config.lua", value: `Config.trackyServerKey = "${key}"\nConfig.identifier = "steam"` },
        {
          label: "server/server.lua endpoints",
          value: `["status"] = "${votes}?action=status&key=%s&"..Config.identifier.."id=%s&customid=%s",\n["claim"] = "${votes}?action=claim&key=%s&"..Config.identifier.."id=%s&customid=%s"`,
        },
      ],
    },
    {
      id: "votereward",
      plugin: "VoteReward (PocketMine-MP)",
      where: "A file plugins/VoteReward/Lists/HeartsList.vrc with this line. Then `/vote reload`.",
      values: [
        {
          label: "HeartsList.vrc",
          value: JSON.stringify({
            name: "HeartsList",
            website: base,
            check: `${votes}/json?object=votes&element=claim&key=${key}&username={USERNAME}`,
            claim: `${votes}/json?action=post&object=votes&element=claim&key=${key}&username={USERNAME}`,
          }),
        },
      ],
    },
    {
      id: "rocketmod",
      plugin: "RocketMod Votifier (Unturned)",
      where:
        "Plugins/Votifier/Votifier.configuration.xml: the first line inside <Services>, the second inside <ServiceDefinitions> (an XML file: & is written &amp;). Then restart the server or `/rocket reload Votifier`.",
      values: [
        { label: "<Services>", value: `<Service Name="HeartsList" APIKey="${claimKey ? xml(claimKey) : CLAIM_KEY_PLACEHOLDER}" />` },
        {
          label: "<ServiceDefinitions>",
          value: `<ServiceDefinition Name="HeartsList"><CheckHasVoted>${xml(`${base}/api/?object=votes&element=claim&key={0}&steamid={1}`)}</CheckHasVoted><ReportSuccess>${xml(`${base}/api/?action=post&object=votes&element=claim&key={0}&steamid={1}`)}</ReportSuccess></ServiceDefinition>`,
        },
      ],
    },
  ];
}

/** Text as XML character data or an attribute value. */
function xml(text) {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** EasyVoteExtended's site entry: by SteamID64, or in its username mode (`byName`). */
function easyVote({ votes, serverId, key, byName }) {
  const player = byName ? "username={1}" : "steamid={1}";
  return {
    id: byName ? "easyvote-username" : "easyvote",
    plugin: byName ? "EasyVoteExtended 3.x, username mode (players voted with their in-game name)" : "EasyVoteExtended 3.x (Rust, uMod/Oxide or Carbon)",
    where: byName
      ? "The same places as for EasyVoteExtended by SteamID, for players who voted with a name instead (3.0.4 sends the name as typed; 3.2.x escapes it)."
      : 'oxide/config/EasyVoteExtended.json: one entry under "Voting Sites API Information" (name it HeartsList), and the id:key under "Server Voting IDs and Keys" in your server\'s block. Then `oxide.reload EasyVoteExtended`.',
    values: [
      { label: '"API Vote status (GET URL)"', value: `${votes}?action=status&key={0}&${player}` },
      { label: '"API Claim Reward (GET URL)"', value: `${votes}?action=claim&key={0}&${player}` },
      { label: '"Site Uses Username Instead of Player Steam ID?"', value: String(byName) },
      { label: '"HeartsList" in "Server Voting IDs and Keys"', value: `${serverId}:${key}` },
    ],
  };
}
