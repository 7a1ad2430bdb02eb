/**
 * An owner's network goals (vote party; NetworkGoalService, docs/reward-rules.md "Network goals"): `goals put`,
 * `goals get`, `goals list` and `goals delete`, with the service token (`admin` to save and delete, `read` to read and list).
 */
import { readFileSync } from "node:fs";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { GetNetworkGoalResponse } from "../../../gen/proto/rewards/v1/rewards_pb.js";
import { stringFlag, type Command, type CommandContext } from "../command.js";
import { CliError, EXIT_OK, EXIT_USAGE } from "../output.js";
import { callRpc, createClients } from "../rpc.js";
import { CLI_RUN } from "../name.js";

/** The goal file's fields, as `goals get --json` prints them (docs/cli.md). */
interface GoalFile {
  name?: unknown;
  server_ids?: unknown;
  target?: unknown;
  payees?: unknown;
  rewards?: unknown;
}

/** The goal definition in FILE, or a usage error naming what is wrong (the service validates the rest). */
function readGoalFile(path: string): { name: string; serverIds: string[]; target: number; payees: string; rewardsJson: string } {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    // Failure policy: an unreadable file is the user's to fix; say which and why (the OS's code, never the content).
    throw new CliError(`--file: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? "error"})`, { exitCode: EXIT_USAGE });
  }
  let goal: GoalFile;
  try {
    goal = JSON.parse(text) as GoalFile;
  } catch {
    // Failure policy: not JSON is a usage error with the file named; the parser's message may quote the content, so it is not shown.
    throw new CliError(`--file: ${path} is not JSON`, { exitCode: EXIT_USAGE });
  }
  if (goal === null || typeof goal !== "object" || Array.isArray(goal))
    throw new CliError(`--file: ${path} must hold one object: {"name", "server_ids", "target", "payees", "rewards"}`, { exitCode: EXIT_USAGE });
  const serverIds = Array.isArray(goal.server_ids) ? goal.server_ids.filter((s): s is string => typeof s === "string") : [];
  return {
    name: typeof goal.name === "string" ? goal.name : "",
    serverIds,
    target: typeof goal.target === "number" ? goal.target : 0,
    payees: typeof goal.payees === "string" ? goal.payees : "",
    rewardsJson: JSON.stringify(goal.rewards ?? []),
  };
}

/** A goal as `goals get --json` and `goals list --json` print it (docs/cli.md). */
function toGoalJson(got: GetNetworkGoalResponse) {
  return {
    goal_id: got.goalId,
    name: got.name,
    server_ids: got.serverIds,
    target: got.target,
    payees: got.payees,
    rewards: JSON.parse(got.rewardsJson) as unknown,
    round: got.round,
    progress: got.progress,
    reached: got.reached,
    last_reached_at: got.lastReachedAt ? timestampDate(got.lastReachedAt).toISOString() : null,
  };
}

/** The --id flag of `goals get` and `goals delete`, or a usage error that says where ids come from. */
function requireGoalId(ctx: CommandContext): string {
  const goalId = stringFlag(ctx.flags, "id");
  if (goalId === undefined) throw new CliError("--id is required", { hint: `the id \`goals put\` printed, or ${CLI_RUN} goals list`, exitCode: EXIT_USAGE });
  return goalId;
}

export const goalsPut: Command = {
  name: "goals put",
  summary: "validate and save a network goal (vote party) from a JSON file: a new one, or --id's new definition",
  usage: "--file FILE [--id GOAL]",
  flagHelp: [
    ["--file FILE", 'the goal: {"name", "server_ids", "target", "payees": "voters" or "online", "rewards": [{"commands": [...]}]}'],
    ["--id GOAL", "replace this goal's definition (its round and progress carry on); without it a new goal"],
  ],
  flags: { file: { type: "string" }, id: { type: "string" } },
  examples: [`${CLI_RUN} goals put --file party.json`],
  async run(ctx) {
    const file = stringFlag(ctx.flags, "file");
    if (file === undefined) throw new CliError("--file is required", { hint: `${CLI_RUN} goals put --file party.json`, exitCode: EXIT_USAGE });
    const goal = readGoalFile(file);
    const goalId = stringFlag(ctx.flags, "id") ?? "";
    const config = ctx.config();
    const saved = await callRpc(config, "saving the network goal", (o) => createClients(config).goals.putNetworkGoal({ goalId, ...goal }, o), {
      notFound: `no such goal or server (\`${CLI_RUN} servers list\` lists the servers)`,
    });
    ctx.out.result({ goal_id: saved.goalId });
    ctx.out.line(`Saved goal ${saved.goalId}; see its progress with: ${CLI_RUN} goals get --id ${saved.goalId}`);
    return EXIT_OK;
  },
};

export const goalsGet: Command = {
  name: "goals get",
  summary: "print a network goal's definition and its progress in the round counted now",
  usage: "--id GOAL",
  flagHelp: [["--id GOAL", "the goal (`goals put` prints it)"]],
  flags: { id: { type: "string" } },
  examples: [`${CLI_RUN} goals get --id 5b1e...`],
  async run(ctx) {
    const goalId = requireGoalId(ctx);
    const config = ctx.config();
    const got = await callRpc(config, "reading the network goal", (o) => createClients(config).goals.getNetworkGoal({ goalId }, o), {
      notFound: `no goal "${goalId}"`,
    });
    const goal = toGoalJson(got);
    const lastReachedAt = goal.last_reached_at;
    ctx.out.result(goal);
    ctx.out.line(`${got.name}: round ${got.round}, ${got.progress} of ${got.target} votes across ${got.serverIds.length} servers`);
    ctx.out.line(`reached ${got.reached} time(s)${lastReachedAt ? `, last at ${lastReachedAt}` : ""}; pays ${got.payees}`);
    return EXIT_OK;
  },
};

/** Goals one ListNetworkGoals page asks for (the service's most); `goals list` follows the pages to the end. */
const LIST_PAGE = 100;

export const goalsList: Command = {
  name: "goals list",
  summary: "list an owner's network goals (not deleted) with their target, the round counted now and its progress",
  usage: "[--owner OWNER]",
  flagHelp: [["--owner OWNER", "the owner whose goals (`owners` ids); without it the goals of servers no owner has"]],
  flags: { owner: { type: "string" } },
  examples: [`${CLI_RUN} goals list --owner acme`],
  async run(ctx) {
    const ownerId = stringFlag(ctx.flags, "owner") ?? "";
    const config = ctx.config();
    const goals: ReturnType<typeof toGoalJson>[] = [];
    let cursor = "";
    do {
      const page = await callRpc(config, "listing the network goals", (o) =>
        createClients(config).goals.listNetworkGoals({ ownerId, limit: LIST_PAGE, cursor }, o),
      );
      goals.push(...page.goals.map(toGoalJson));
      cursor = page.nextCursor;
    } while (cursor !== "");
    ctx.out.result({ goals });
    if (goals.length === 0) ctx.out.line(`No network goals; define one with: ${CLI_RUN} goals put --file party.json`);
    ctx.out.table(
      ["ID", "NAME", "ROUND", "PROGRESS", "REACHED", "SERVERS"],
      goals.map((g) => [g.goal_id, g.name, String(g.round), `${g.progress}/${g.target}`, String(g.reached), String(g.server_ids.length)]),
    );
    return EXIT_OK;
  },
};

export const goalsDelete: Command = {
  name: "goals delete",
  summary: "delete a network goal: later votes count nothing; the rounds it reached are still paid",
  usage: "--id GOAL",
  flagHelp: [["--id GOAL", "the goal (`goals list` lists them)"]],
  flags: { id: { type: "string" } },
  examples: [`${CLI_RUN} goals delete --id 5b1e...`],
  async run(ctx) {
    const goalId = requireGoalId(ctx);
    const config = ctx.config();
    const deleted = await callRpc(config, "deleting the network goal", (o) => createClients(config).goals.deleteNetworkGoal({ goalId }, o), {
      notFound: `no goal "${goalId}"`,
    });
    ctx.out.result({ goal_id: goalId, unpaid_rounds: deleted.unpaidRounds });
    ctx.out.line(
      `Deleted goal ${goalId}; it counts no more votes.${deleted.unpaidRounds > 0 ? ` ${deleted.unpaidRounds} reached round(s) not paid yet are still paid.` : ""}`,
    );
    return EXIT_OK;
  },
};
