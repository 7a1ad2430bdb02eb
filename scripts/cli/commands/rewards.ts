/**
 * A server's reward rules and reward queue (RewardRulesService, RewardQueueService; docs/reward-rules.md,
 * docs/reward-queue.md): `rewards get`, `rewards put`, `rewards preview` and `rewards requeue`, with the service
 * token (`read` for get and preview, `admin` for put and requeue).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { stringFlag, type Command, type CommandContext } from "../command.js";
import { CliError, EXIT_OK, EXIT_USAGE } from "../output.js";
import { callRpc, createClients } from "../rpc.js";
import { CLI_RUN } from "../name.js";

const SERVER_HELP: [string, string] = ["--server ID", "the server (ids: `servers list`)"];

function serverOf(ctx: CommandContext): string {
  const serverId = stringFlag(ctx.flags, "server");
  if (serverId === undefined)
    throw new CliError("--server is required", { hint: "for example --server <server id from `servers list`>", exitCode: EXIT_USAGE });
  return serverId;
}

const notFoundHint = (serverId: string) => ({ notFound: `no server "${serverId}" (\`${CLI_RUN} servers list\` lists them)` });

/** A file's text; a usage error naming the file when it cannot be read. */
function readText(path: string, flag: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    // Failure policy: an unreadable file is the user's to fix; say which and why (the OS's code, never the content).
    throw new CliError(`${flag}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? "error"})`, { exitCode: EXIT_USAGE });
  }
}

/** A whole-number flag at least `min`, or `fallback` when absent. */
function intFlag(ctx: CommandContext, name: string, min: number, fallback: number): number {
  const text = stringFlag(ctx.flags, name);
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) throw new CliError(`--${name} must be a whole number, at least ${min}`, { exitCode: EXIT_USAGE });
  return value;
}

/** An instant flag (ISO 8601 with its offset); usage error otherwise. */
function instantFlag(ctx: CommandContext, name: string): Date {
  const text = stringFlag(ctx.flags, name);
  const at = text === undefined ? undefined : new Date(text);
  if (at === undefined || Number.isNaN(at.getTime()) || !/(Z|[+-]\d\d:?\d\d)$/.test(text ?? ""))
    throw new CliError(`--${name} is required: an instant with its offset`, { hint: `for example --${name} 2026-11-20T00:00:00Z`, exitCode: EXIT_USAGE });
  return at;
}

export const rewardsGet: Command = {
  name: "rewards get",
  summary: "print a server's reward rules (JSON) and their version",
  usage: "--server ID [--out FILE]",
  flagHelp: [SERVER_HELP, ["--out FILE", "write the rules to FILE (to edit, then `rewards put --file FILE --base VERSION`)"]],
  flags: { server: { type: "string" }, out: { type: "string" } },
  examples: [`${CLI_RUN} rewards get --server 0b7c... --out rules.json`],
  async run(ctx) {
    const serverId = serverOf(ctx);
    const config = ctx.config();
    const got = await callRpc(config, "reading the reward rules", (o) => createClients(config).rewards.getRewardRules({ serverId }, o), notFoundHint(serverId));
    const rules = JSON.parse(got.rulesJson) as unknown;
    const savedAt = got.savedAt ? timestampDate(got.savedAt).toISOString() : null;
    ctx.out.result({ server_id: serverId, version: got.version, rules, saved_by: got.savedBy || null, saved_at: savedAt });
    const out = stringFlag(ctx.flags, "out");
    if (out !== undefined) {
      writeFileSync(out, `${JSON.stringify(rules, null, 2)}\n`);
      ctx.out.progress(
        `wrote ${out} (version ${got.version}); save your edit with: ${CLI_RUN} rewards put --server ${serverId} --file ${out} --base ${got.version}`,
      );
    } else {
      ctx.out.line(`version ${got.version}${savedAt ? `, saved ${savedAt} by ${got.savedBy}` : " (nothing saved yet)"}`);
      ctx.out.line(JSON.stringify(rules, null, 2));
    }
    return EXIT_OK;
  },
};

export const rewardsPut: Command = {
  name: "rewards put",
  summary: "validate and save a server's reward rules from a JSON file as the next version",
  usage: "--server ID --file FILE --base VERSION",
  flagHelp: [
    SERVER_HELP,
    ["--file FILE", "the rules (docs/reward-rules.md)"],
    ["--base VERSION", "the version you edited (`rewards get` prints it; 0 for the first save): refused if someone saved since"],
  ],
  flags: { server: { type: "string" }, file: { type: "string" }, base: { type: "string" } },
  examples: [`${CLI_RUN} rewards put --server 0b7c... --file rules.json --base 3`],
  async run(ctx) {
    const serverId = serverOf(ctx);
    const file = stringFlag(ctx.flags, "file");
    if (file === undefined)
      throw new CliError("--file is required", { hint: `${CLI_RUN} rewards get --server ${serverId} --out rules.json`, exitCode: EXIT_USAGE });
    if (stringFlag(ctx.flags, "base") === undefined)
      throw new CliError("--base is required: the version you edited", { hint: `${CLI_RUN} rewards get --server ${serverId} prints it`, exitCode: EXIT_USAGE });
    const baseVersion = intFlag(ctx, "base", 0, 0);
    const rulesJson = readText(file, "--file");
    const config = ctx.config();
    const { version } = await callRpc(
      config,
      "saving the reward rules",
      (o) => createClients(config).rewards.putRewardRules({ serverId, rulesJson, baseVersion }, o),
      { ...notFoundHint(serverId), failedPrecondition: `read them again (${CLI_RUN} rewards get) and redo your edit on the new version` },
    );
    ctx.out.result({ server_id: serverId, version });
    ctx.out.line(`Saved as version ${version}.`);
    return EXIT_OK;
  },
};

export const rewardsPreview: Command = {
  name: "rewards preview",
  summary: "what a vote would give under the saved rules, or under a draft file",
  usage: "--server ID [--file DRAFT] [--player NAME] [--total N] [--month-total N] [--week-total N] [--streak N] [--at INSTANT]",
  flagHelp: [
    SERVER_HELP,
    ["--file DRAFT", "preview a draft instead of the saved rules (validated the same way, not saved)"],
    ["--player NAME", "the voter's name (default Steve)"],
    ["--total N, --month-total N, --week-total N", "the voter's counted votes with this one (default 1)"],
    ["--streak N", "the reward streak this vote makes (default 1; the vote extends it)"],
    ["--at INSTANT", "when the vote counts (default now; weights depend on it)"],
  ],
  flags: {
    server: { type: "string" },
    file: { type: "string" },
    player: { type: "string" },
    total: { type: "string" },
    "month-total": { type: "string" },
    "week-total": { type: "string" },
    streak: { type: "string" },
    at: { type: "string" },
  },
  examples: [`${CLI_RUN} rewards preview --server 0b7c... --file rules.json --month-total 10`],
  async run(ctx) {
    const serverId = serverOf(ctx);
    const file = stringFlag(ctx.flags, "file");
    const at = stringFlag(ctx.flags, "at") === undefined ? undefined : instantFlag(ctx, "at");
    const config = ctx.config();
    const preview = await callRpc(
      config,
      "previewing the rewards",
      (o) =>
        createClients(config).rewards.previewRewards(
          {
            serverId,
            rulesJson: file === undefined ? "" : readText(file, "--file"),
            player: stringFlag(ctx.flags, "player") ?? "Steve",
            total: intFlag(ctx, "total", 1, 1),
            monthTotal: intFlag(ctx, "month-total", 1, 1),
            weekTotal: intFlag(ctx, "week-total", 1, 1),
            streakDays: intFlag(ctx, "streak", 1, 1),
            streakExtended: true,
            ...(at === undefined ? {} : { countedAt: timestampFromDate(at) }),
          },
          o,
        ),
      notFoundHint(serverId),
    );
    const entries = preview.entries.map((e) => ({ key: e.key, reason: e.reason, commands: e.commands, online_only: e.onlineOnly }));
    ctx.out.result({ weight: preview.weight, entries, skipped: preview.skipped.map((s) => ({ key: s.key, reason: s.reason, why: s.why })) });
    ctx.out.line(`weight ${preview.weight}; ${entries.length} entr${entries.length === 1 ? "y" : "ies"}`);
    for (const e of entries) ctx.out.line(`  ${e.reason} ${e.key}${e.online_only ? " (online only)" : ""}\n    ${e.commands.join("\n    ")}`);
    for (const s of preview.skipped) ctx.out.line(`  skipped ${s.key}: ${s.why}`);
    return EXIT_OK;
  },
};

export const rewardsRequeue: Command = {
  name: "rewards requeue",
  summary: "queue again what the server's plugin acknowledged in a time range (after a lost game server)",
  usage: "--server ID --from INSTANT --to INSTANT",
  flagHelp: [SERVER_HELP, ["--from INSTANT", "acknowledged at or after (ISO 8601 with offset)"], ["--to INSTANT", "and before"]],
  flags: { server: { type: "string" }, from: { type: "string" }, to: { type: "string" } },
  examples: [`${CLI_RUN} rewards requeue --server 0b7c... --from 2026-11-20T00:00:00Z --to 2026-11-21T00:00:00Z`],
  async run(ctx) {
    const serverId = serverOf(ctx);
    const range = { ackedFrom: timestampFromDate(instantFlag(ctx, "from")), ackedTo: timestampFromDate(instantFlag(ctx, "to")) };
    const config = ctx.config();
    const queue = createClients(config).rewardQueue;
    let after = "";
    let requeued = 0;
    let scanned = 0;
    // A page of at most 500 entries per call, each its own transaction; progress after each page.
    do {
      const page = await callRpc(config, "re-queueing", (o) => queue.requeueRewardEntries({ serverId, ...range, after }, o), notFoundHint(serverId));
      requeued += page.requeued;
      scanned += page.scanned;
      after = page.nextAfter;
      if (after !== "") ctx.out.progress(`${scanned} acknowledged entries looked at, ${requeued} re-queued so far`);
    } while (after !== "");
    ctx.out.result({ server_id: serverId, requeued, scanned });
    ctx.out.line(`Re-queued ${requeued} of ${scanned} entries acknowledged in the range${scanned > requeued ? " (the others were re-queued before)" : ""}.`);
    return EXIT_OK;
  },
};
