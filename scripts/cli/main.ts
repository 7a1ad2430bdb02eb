/**
 * The project's command-line tool (package.json "bin": rcb -> scripts/cli/bin.js -> here).
 * `rcb <command> [flags]`: every command has --help, --json, errors that say what to do, and
 * exit codes 0 (success), 1 (failure), 2 (usage). See docs/cli.md.
 */
import { parseArgs } from "node:util";
import { eventsSend, sign, verify } from "./commands/signing.js";
import { clicksRecord, heartsCast, loginLink, serversCreate, serversList, trigger } from "./commands/admin.js";
import { claimsSetup } from "./commands/claims.js";
import { votersAudit, votersErase, votersExport } from "./commands/voters.js";
import { goalsDelete, goalsGet, goalsList, goalsPut } from "./commands/goals.js";
import { rewardsGet, rewardsPreview, rewardsPut, rewardsRequeue } from "./commands/rewards.js";
import { listen } from "./commands/listen.js";
import type { Command, FlagSpec, FlagValues } from "./command.js";
import { resolveConfig, type CliConfig } from "./config.js";
import { CLI_NAME, CLI_RUN } from "./name.js";
import { findClosest, suggestCommand } from "./suggest-command.js";
import { CliError, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, createOutput, formatTable, reportError } from "./output.js";

export const COMMANDS: Command[] = [
  serversCreate,
  serversList,
  heartsCast,
  clicksRecord,
  claimsSetup,
  loginLink,
  trigger,
  listen,
  eventsSend,
  sign,
  verify,
  votersExport,
  votersErase,
  votersAudit,
  rewardsGet,
  rewardsPut,
  rewardsPreview,
  rewardsRequeue,
  goalsPut,
  goalsGet,
  goalsList,
  goalsDelete,
];

const GLOBAL_FLAGS: FlagSpec = {
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
  "api-url": { type: "string" },
  "gateway-url": { type: "string" },
  token: { type: "string" },
  "data-dir": { type: "string" },
};

const GLOBAL_HELP: [string, string][] = [
  ["--json", "machine output: one JSON document on stdout (listen: one JSON line per heart)"],
  ["--api-url URL", "the referral service (env REFERRAL_SERVICE_URL; default http://127.0.0.1:8081)"],
  ["--gateway-url URL", "the public gateway (env GATEWAY_URL; default http://127.0.0.1:8080)"],
  ["--token TOKEN", "the service token (env SERVICE_TOKEN or ADMIN_SERVICE_TOKEN; default <DATA_DIR>/service-token of `npm start`)"],
  ["--data-dir DIR", "where `npm start` keeps its data (env DATA_DIR; default .data)"],
  ["-h, --help", "help for a command"],
];

function pairsHelp(pairs: [string, string][]): string {
  const width = Math.max(...pairs.map(([f]) => f.length));
  return pairs.map(([f, m]) => `  ${f.padEnd(width)}  ${m}`).join("\n");
}

export function rootHelp(): string {
  const groups = new Map<string, Command[]>();
  for (const c of COMMANDS) groups.set(c.name, [c]);
  return [
    `${CLI_NAME}: the referral and reward-callback service from the command line.`,
    "",
    "Usage:",
    `  ${CLI_RUN} <command> [flags]`,
    "",
    "Commands:",
    formatTable(
      ["", ""],
      COMMANDS.map((c) => [`  ${c.name}`, c.summary]),
    )
      .split("\n")
      .slice(1)
      .join("\n")
      .trimEnd(),
    "",
    "Global flags:",
    pairsHelp(GLOBAL_HELP),
    "",
    "The five-minute path, after `npm start` (no configuration: the CLI reads .data/service-token):",
    `  ${CLI_RUN} servers create                                     # prints the server id and its secrets once`,
    `  ${CLI_RUN} listen --server ID --forward-to http://localhost:3000/hook`,
    `  ${CLI_RUN} trigger heart.counted --server ID                  # in another terminal`,
    "",
    `Run \`${CLI_RUN} <command> --help\` for a command's flags. Docs: docs/cli.md`,
    "",
  ].join("\n");
}

export function commandHelp(c: Command): string {
  return [
    `${c.summary.charAt(0).toUpperCase() + c.summary.slice(1)}.`,
    "",
    "Usage:",
    `  ${CLI_RUN} ${c.name}${c.usage ? ` ${c.usage}` : ""} [--json]`,
    ...(c.flagHelp.length > 0 ? ["", "Flags:", pairsHelp(c.flagHelp)] : []),
    "",
    "Global flags:",
    pairsHelp(GLOBAL_HELP),
    ...(c.examples?.length ? ["", "Examples:", ...c.examples.map((e) => `  ${e}`)] : []),
    "",
  ].join("\n");
}

/** Finds the command named by the leading words of argv; returns it and the rest of argv. */
function findCommand(argv: string[]): { command: Command; rest: string[] } | { group: string } | { unknown: string[] } | undefined {
  const words: string[] = [];
  for (const arg of argv) {
    if (arg.startsWith("-")) break;
    words.push(arg);
    if (words.length === 2) break;
  }
  if (words.length === 0) return undefined;
  const two = words.slice(0, 2).join(" ");
  const byTwo = words.length === 2 ? COMMANDS.find((c) => c.name === two) : undefined;
  if (byTwo) return { command: byTwo, rest: argv.slice(2) };
  const byOne = COMMANDS.find((c) => c.name === words[0]);
  if (byOne) return { command: byOne, rest: argv.slice(1) };
  if (COMMANDS.some((c) => c.name.startsWith(`${words[0]} `))) return words.length === 1 ? { group: words[0]! } : { unknown: words };
  return { unknown: words };
}

function readStdin(): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    process.stdin.on("data", (c: Buffer) => chunks.push(c));
    process.stdin.on("end", () => resolve(Buffer.concat(chunks)));
    process.stdin.on("error", reject);
  });
}

/** Runs the CLI on `argv` (without node and the script); returns the exit code. */
export async function runCli(argv: string[], env: Record<string, string | undefined> = process.env): Promise<number> {
  // `help` and `help <command>` read as `--help` (as git and gh take them).
  if (argv[0] === "help") return runCli([...argv.slice(1), "--help"], env);
  const json = argv.includes("--json");
  const out = createOutput(json);
  try {
    const found = findCommand(argv);
    if (found === undefined) {
      process.stdout.write(rootHelp());
      return argv.length === 0 || argv.includes("--help") || argv.includes("-h") ? EXIT_OK : EXIT_USAGE;
    }
    if ("group" in found) {
      const sub = COMMANDS.filter((c) => c.name.startsWith(`${found.group} `));
      process.stdout.write(`Usage: ${CLI_RUN} ${found.group} <command>\n\nCommands:\n${pairsHelp(sub.map((c) => [c.name, c.summary]))}\n`);
      return argv.includes("--help") || argv.includes("-h") ? EXIT_OK : EXIT_USAGE;
    }
    if ("unknown" in found) {
      const guess = suggestCommand(
        found.unknown,
        COMMANDS.map((c) => c.name),
      );
      const typed = COMMANDS.some((c) => c.name.startsWith(`${found.unknown[0]} `)) ? found.unknown.join(" ") : found.unknown[0];
      throw new CliError(`unknown command "${typed}" for "${CLI_NAME}"`, {
        hint: `${guess ? `did you mean "${guess}"? ` : ""}Run \`${CLI_RUN} --help\` for the commands.`,
        exitCode: EXIT_USAGE,
      });
    }
    const { command, rest } = found;
    const options = { ...GLOBAL_FLAGS, ...command.flags };
    let parsed: { values: FlagValues; positionals: string[] };
    try {
      parsed = parseArgs({ args: rest, options, strict: true, allowPositionals: true }) as { values: FlagValues; positionals: string[] };
    } catch (error) {
      // Failure policy: a malformed command line is a usage error naming the flag and the command's help.
      const err = error as Error & { code?: string };
      const flag = /'(-{1,2}[^']+)'/.exec(err.message)?.[1];
      if (err.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && flag) {
        const guess = findClosest(flag.replace(/^-+/, ""), Object.keys(options));
        throw new CliError(`unknown flag ${flag} for "${CLI_NAME} ${command.name}"`, {
          hint: `${guess ? `did you mean --${guess}? ` : ""}See \`${CLI_RUN} ${command.name} --help\`.`,
          exitCode: EXIT_USAGE,
        });
      }
      throw new CliError(`${err.message.split(". ")[0]}`, { hint: `See \`${CLI_RUN} ${command.name} --help\`.`, exitCode: EXIT_USAGE });
    }
    if (parsed.values.help) {
      process.stdout.write(commandHelp(command));
      return EXIT_OK;
    }
    const extra = command === trigger ? parsed.positionals.slice(1) : parsed.positionals;
    if (extra.length > 0) {
      throw new CliError(`unexpected argument "${extra[0]}" for "${CLI_NAME} ${command.name}"`, {
        hint: `See \`${CLI_RUN} ${command.name} --help\`.`,
        exitCode: EXIT_USAGE,
      });
    }
    const flags: FlagValues = { ...parsed.values, ...(command === trigger ? { _event: parsed.positionals[0] } : {}) };
    // events send's --token is the click token; the service token then comes only from the environment or the data folder.
    const connection = command === eventsSend ? { ...flags, token: undefined } : flags;
    let config: CliConfig | undefined;
    const controller = new AbortController();
    let interrupts = 0;
    const onSignal = () => {
      interrupts += 1;
      if (interrupts > 1) process.exit(130);
      controller.abort();
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    try {
      return await command.run({
        flags,
        out,
        env,
        config: () => (config ??= resolveConfig(connection as Parameters<typeof resolveConfig>[0], env)),
        interrupted: controller.signal,
        readStdin,
      });
    } finally {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
  } catch (error) {
    if (error instanceof CliError) {
      reportError(error, json);
      return error.exitCode;
    }
    // Failure policy: an unexpected error is reported by its message (never a token: none is put in one) and exits 1.
    reportError(new CliError(`unexpected failure: ${(error as Error).message}`), json);
    return EXIT_FAILURE;
  }
}
