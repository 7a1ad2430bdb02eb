// Types of plugin-setup.js (plain JavaScript served to the browser; imported by the CLI and the tests).

/** Shown where the claim key goes until the owner reveals or mints it. */
export declare const CLAIM_KEY_PLACEHOLDER: string;

/** One value to paste, with where it goes. */
export interface PluginSetupValue {
  label: string;
  value: string;
}

/** One supported reward plugin's setup. */
export interface PluginSetup {
  id: "easyvote" | "easyvote-username" | "fivem" | "votereward" | "rocketmod";
  plugin: string;
  where: string;
  values: PluginSetupValue[];
}

/** The values per plugin for a list's public base, a server id and its claim key (empty: the placeholder). */
export declare function pluginSetups(input: { base: string; serverId: string; claimKey?: string }): PluginSetup[];
