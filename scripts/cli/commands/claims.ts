/**
 * `claims setup`: what to paste into each supported reward plugin for one server, the same values the
 * dashboard's claim card shows (gateway/dashboard/static/plugin-setup.js, their one home).
 */
import { CLAIM_KEY_PLACEHOLDER, pluginSetups } from "../../../gateway/dashboard/static/plugin-setup.js";
import { stringFlag, type Command } from "../command.js";
import { CliError, EXIT_OK, EXIT_USAGE } from "../output.js";
import { callRpc, createClients } from "../rpc.js";
import { CLI_RUN } from "../name.js";

export const claimsSetup: Command = {
  name: "claims setup",
  summary: "print what to paste into each reward plugin (check/claim API) for a server",
  usage: "--server ID [--base URL]",
  flagHelp: [
    ["--server ID", "the server whose claim key goes into the plugins"],
    ["--base URL", "the list's public address the plugins call (default: the gateway URL)"],
  ],
  flags: { server: { type: "string" }, base: { type: "string" } },
  examples: [`${CLI_RUN} claims setup --server 0b7c... --base https://list.example`],
  async run(ctx) {
    const serverId = stringFlag(ctx.flags, "server");
    if (serverId === undefined)
      throw new CliError("--server is required", { hint: "for example --server <server id from `servers list`>", exitCode: EXIT_USAGE });
    const config = ctx.config();
    const base = (stringFlag(ctx.flags, "base") ?? config.gatewayUrl).replace(/\/+$/, "");
    const admin = createClients(config).admin;
    const notFound = { notFound: `no server "${serverId}" (\`${CLI_RUN} servers list\` lists them)` };
    const server = (await callRpc(config, "reading the server", (o) => admin.getServer({ serverId }, o), notFound)).server!;
    const claimKey = server.claims?.claimKeySet
      ? (await callRpc(config, "revealing the claim key", (o) => admin.revealClaimKey({ serverId }, o), notFound)).claimKey
      : "";
    const setups = pluginSetups({ base, serverId, claimKey });
    ctx.out.result({ server_id: serverId, base, claim_key_set: claimKey !== "", plugins: setups });
    for (const setup of setups) {
      ctx.out.line(`== ${setup.plugin}`);
      ctx.out.line(setup.where);
      for (const { label, value } of setup.values) ctx.out.line(`${label}:\n  ${value.replace(/\n/g, "\n  ")}`);
      ctx.out.line();
    }
    if (claimKey === "")
      ctx.out.progress(`No claim key yet: mint one in the dashboard (Integration tab), then run this again to fill in ${CLAIM_KEY_PLACEHOLDER}.`);
    else ctx.out.progress("These values carry the claim key: keep them out of screenshots and public repositories.");
    return EXIT_OK;
  },
};
