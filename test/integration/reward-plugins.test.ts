/**
 * The reference reward-queue plugins of docs/plugins/, each in its own runtime (test/helpers/reward-plugins-run.ts),
 * against the real gateway and referral service with the whole pipeline: the server's reward rules saved through
 * RewardRulesService, votes cast through CastHeart on the stack's clock, queued by the delivery consumer from Kafka,
 * listed and acknowledged by the plugin over HTTP with the server's claim key.
 *
 * One table of scenarios runs against every plugin: a scenario is its rules and what it does with a running plugin,
 * so a scenario added here (period awards, referrals) runs against each plugin at once, and a plugin added to
 * REWARD_PLUGINS runs every scenario.
 */
import { randomBytes } from "node:crypto";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { REWARD_QUEUE_ACK_PATH, REWARD_QUEUE_PATH } from "../../gateway/handle-reward-queue.js";
import { queueRewardEntries } from "../../services/rewards/reward-queue-store.js";
import { runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { eventually } from "../helpers/eventually.js";
import { castCountedVote, type RewardVoter } from "../helpers/reward-votes.js";
import { REWARD_PLUGINS, pluginDir, type PluginStart, type RewardPlugin, type RunningPlugin } from "../helpers/reward-plugins-run.js";

interface Context {
  stack: TestStack;
}
const test = anyTest as TestFn<Context>;

/** The stack's clock: each vote sets it to the vote's time. */
let clockMs = Date.parse("2027-03-01T12:00:00Z");
let voterN = 0;
const DAY_MS = 24 * 60 * 60 * 1000;
/** The longest next_check the stack answers (the idle interval's default): advancing this far always lists once. */
const IDLE_CHECK_SECONDS = 120;
/** The next_check answered while entries are pending or the last vote is recent (docs/reward-queue.md). */
const BUSY_CHECK_SECONDS = 10;

test.before(async (t) => {
  const stack = await startStack({
    now: () => new Date(clockMs),
    pipeline: { name: "reward-plugins", delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100 } },
  });
  t.context = { stack };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

type Voter = RewardVoter & { steamId: string };

/** What a scenario works with: its server (rules saved, claim key), votes, the queue's rows, and the plugin. */
interface Scenario {
  t: ExecutionContext<Context>;
  serverId: string;
  newVoter(username: string): Voter;
  /** Casts a counted vote at `at` (the stack's clock). */
  vote(voter: Voter, at: string): Promise<void>;
  /** Waits until the consumer has counted `total` of the voter's votes into their reward state. */
  counted(voter: Voter, total: number): Promise<void>;
  /** Queues one entry per command list for `username` with the queue's owner module, as a backlog of votes would. */
  seed(username: string, commands: string[][], onlineOnly: boolean): Promise<void>;
  /** The server's queue entries, oldest first: their commands and whether they are acknowledged. */
  entries(): Promise<Array<{ commands: string[]; acked: boolean }>>;
  /** Starts the plugin for this server in `dir` (default: the scenario's own), stopped when the test ends. */
  start(opts?: Partial<Pick<PluginStart, "dir" | "exitBeforePath">>): Promise<RunningPlugin>;
  dir: string;
}

/** One scenario of the table: a title stating the rule, the server's reward rules, and the steps. */
interface PluginScenario {
  title: string;
  rules: unknown;
  run(s: Scenario): Promise<void>;
}

const day = (n: number) => new Date(Date.parse("2027-03-01T12:00:00Z") + (n - 1) * DAY_MS + n * 60_000).toISOString();

const SCENARIOS: PluginScenario[] = [
  {
    title: "a counted vote of a player online -> the per-vote reward's commands run once, in order, and the entry is acknowledged",
    rules: { perVote: [{ commands: ["give {player} diamond 1", "say thanks {player}"] }] },
    async run(s) {
      const steve = s.newVoter("Steve");
      const plugin = await s.start();
      await plugin.join(steve.username, steve.steamId);
      await s.vote(steve, day(1));
      await s.counted(steve, 1);
      await plugin.advance(IDLE_CHECK_SECONDS);
      await plugin.advance(IDLE_CHECK_SECONDS);
      s.t.deepEqual(plugin.commands(), ["give Steve diamond 1", "say thanks Steve"]);
      s.t.deepEqual(await s.entries(), [{ commands: ["give Steve diamond 1", "say thanks Steve"], acked: true }]);
    },
  },
  {
    title: "a 7-day streak with one missed day inside a grace of 1 -> the day-7 streak reward runs once",
    rules: { streak: { graceDays: 1, rewards: [{ day: 7, reward: { commands: ["give {player} emerald {streak}"] } }] } },
    async run(s) {
      const alex = s.newVoter("Alex");
      // Days 1-4, day 5 missed (inside the grace), days 6-9: the 7th vote day is day 8; day 9 makes the streak 8.
      for (const d of [1, 2, 3, 4, 6, 7, 8, 9]) await s.vote(alex, day(d));
      await s.counted(alex, 8);
      const plugin = await s.start();
      await plugin.join(alex.username, alex.steamId);
      await plugin.advance(IDLE_CHECK_SECONDS);
      await plugin.advance(IDLE_CHECK_SECONDS);
      s.t.deepEqual(plugin.commands(), ["give Alex emerald 7"]);
      s.t.deepEqual(await s.entries(), [{ commands: ["give Alex emerald 7"], acked: true }]);
    },
  },
  {
    title: "the 10th counted vote of a month -> the month milestone runs once, not again at the 11th, without the player online (not online-only)",
    rules: { milestones: [{ scope: "month", every: 10, reward: { commands: ["crate give {player} vote"], onlineOnly: false } }] },
    async run(s) {
      const kim = s.newVoter("Kim");
      for (let d = 21; d <= 31; d++) await s.vote(kim, `2027-03-${d}T12:${d}:00Z`);
      await s.counted(kim, 11);
      const plugin = await s.start();
      await plugin.advance(IDLE_CHECK_SECONDS);
      await plugin.advance(IDLE_CHECK_SECONDS);
      s.t.deepEqual(plugin.commands(), ["crate give Kim vote"]);
      s.t.deepEqual(await s.entries(), [{ commands: ["crate give Kim vote"], acked: true }]);
    },
  },
  {
    title: "killed between running an entry and acknowledging it -> restarted, it acknowledges the entry without running it again",
    rules: { perVote: [{ commands: ["give {player} diamond 1", "say thanks {player}"] }] },
    async run(s) {
      const sam = s.newVoter("Sam");
      await s.vote(sam, day(1));
      await s.counted(sam, 1);
      const killed = await s.start({ exitBeforePath: REWARD_QUEUE_ACK_PATH });
      await killed.join(sam.username, sam.steamId);
      await killed.advance(IDLE_CHECK_SECONDS);
      s.t.true(killed.exited(), "the host died before the acknowledgement");
      s.t.deepEqual(killed.commands(), ["give Sam diamond 1", "say thanks Sam"]);
      s.t.deepEqual(await s.entries(), [{ commands: ["give Sam diamond 1", "say thanks Sam"], acked: false }]);

      const restarted = await s.start();
      await restarted.join(sam.username, sam.steamId);
      await restarted.advance(IDLE_CHECK_SECONDS);
      await restarted.advance(IDLE_CHECK_SECONDS);
      s.t.deepEqual(restarted.commands(), [], "nothing runs twice");
      s.t.true(restarted.requests().some((r) => r === `POST ${REWARD_QUEUE_ACK_PATH}`));
      s.t.deepEqual(await s.entries(), [{ commands: ["give Sam diamond 1", "say thanks Sam"], acked: true }]);
    },
  },
  {
    title: "an online-only reward of a player offline is held; the player joins -> it runs once",
    rules: { perVote: [{ commands: ["give {player} diamond 1"], onlineOnly: true }] },
    async run(s) {
      const lee = s.newVoter("Lee");
      await s.vote(lee, day(1));
      await s.counted(lee, 1);
      const plugin = await s.start();
      await plugin.advance(IDLE_CHECK_SECONDS);
      s.t.deepEqual(plugin.commands(), [], "held while Lee is offline");
      s.t.deepEqual(await s.entries(), [{ commands: ["give Lee diamond 1"], acked: false }]);
      await plugin.join(lee.username, lee.steamId);
      await plugin.advance(IDLE_CHECK_SECONDS);
      await plugin.advance(IDLE_CHECK_SECONDS);
      s.t.deepEqual(plugin.commands(), ["give Lee diamond 1"]);
      s.t.deepEqual(await s.entries(), [{ commands: ["give Lee diamond 1"], acked: true }]);
    },
  },
  {
    title:
      "a backlog of 120 entries (more than two pages) is paid page after page without waiting next_check between full pages, each entry once, all acknowledged",
    rules: { perVote: [{ commands: ["give {player} diamond 1"] }] },
    async run(s) {
      const backlog = Array.from({ length: 120 }, (_, i) => [`give Bob token ${i}`]);
      await s.seed("Bob", backlog, false);
      // Started, the plugin lists at once; a full page that ran something is followed by the next without waiting.
      const plugin = await s.start();
      await plugin.advance(BUSY_CHECK_SECONDS - 1);
      s.t.is(plugin.commands().length, 120, "each entry once, before next_check");
      s.t.deepEqual([...plugin.commands()].sort(), backlog.map(([c]) => c!).sort());
      const entries = await s.entries();
      s.t.is(entries.length, 120);
      s.t.true(
        entries.every((e) => e.acked),
        "every entry acknowledged",
      );
    },
  },
  {
    title: "next_check is honoured: after a list answered 10 s, the plugin lists again only once 10 s have passed",
    rules: { perVote: [{ commands: ["give {player} diamond 1"], onlineOnly: true }] },
    async run(s) {
      const ada = s.newVoter("Ada");
      await s.vote(ada, day(1));
      await s.counted(ada, 1);
      // A pending entry held for Ada (offline): every list answers next_check 10.
      const plugin = await s.start();
      await plugin.advance(IDLE_CHECK_SECONDS);
      const lists = () => plugin.requests().filter((r) => r === `GET ${REWARD_QUEUE_PATH}`).length;
      await plugin.advance(BUSY_CHECK_SECONDS);
      const before = lists();
      s.t.true(before >= 1);
      await plugin.advance(BUSY_CHECK_SECONDS - 1);
      s.t.is(lists(), before, "no list before next_check");
      await plugin.advance(1);
      s.t.is(lists(), before + 1, "one list at next_check");
    },
  },
];

async function runScenario(t: ExecutionContext<Context>, plugin: RewardPlugin, scenario: PluginScenario): Promise<void> {
  const { stack } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: `plugin-${plugin.name}-${randomBytes(3).toString("hex")}` });
  const serverId = server!.id;
  await stack.clients.rewards.putRewardRules({ serverId, rulesJson: JSON.stringify(scenario.rules), baseVersion: 0 });
  const { claimKey } = await stack.clients.admin.rotateClaimKey({ serverId });
  const dir = pluginDir(plugin.name);
  const s: Scenario = {
    t,
    serverId,
    dir,
    newVoter(username) {
      voterN += 1;
      return {
        identity: `plugin-voter-${voterN}-${randomBytes(3).toString("hex")}`,
        username,
        steamId: `7656119800000${String(1000 + voterN)}`,
        ip: `203.0.113.${voterN}`,
      };
    },
    async vote(voter, at) {
      clockMs = Date.parse(at);
      await castCountedVote(stack, serverId, voter, at);
    },
    async counted(voter, total) {
      await eventually(
        async () => {
          const state = await stack.prisma.voterRewardState.findUnique({ where: { serverId_voterIdentity: { serverId, voterIdentity: voter.identity } } });
          return state !== null && state.total >= total;
        },
        { timeoutMs: 30_000, message: `the voter's reward state reaching total ${total}` },
      );
    },
    async seed(username, commands, onlineOnly) {
      const player = { username, steamId: null, discordId: null, minecraftUuid: null, accountId: null };
      const entries = commands.map((c, i) => ({ key: `seed:${randomBytes(6).toString("hex")}:${i}`, reason: "vote" as const, commands: c, onlineOnly }));
      await runSqlTransaction(stack.db.prisma, (tx) => queueRewardEntries(tx, { serverId, heartId: null, player, rulesVersion: 1, entries }), {
        timeoutMs: 10_000,
      });
    },
    async entries() {
      const rows = await stack.prisma.rewardQueueEntry.findMany({ where: { serverId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
      return rows.map((r) => ({ commands: r.commands, acked: r.ackedAt !== null }));
    },
    async start(opts = {}) {
      const running = await plugin.start({ queueUrl: `${stack.gatewayUrl}${REWARD_QUEUE_PATH}`, claimKey, dir: opts.dir ?? dir, ...opts });
      t.teardown(() => running.stop());
      started.push(running);
      return running;
    },
  };
  const started: RunningPlugin[] = [];
  await scenario.run(s);
  // Whatever the scenario did, no plugin printed the claim key (its logs name the status, never the URL).
  t.deepEqual(
    started.flatMap((p) => p.lines).filter((l) => l.includes(claimKey) || l.includes(encodeURIComponent(claimKey))),
    [],
  );
}

for (const plugin of REWARD_PLUGINS) {
  for (const scenario of SCENARIOS) {
    test.serial(`${plugin.name} plugin: ${scenario.title}`, (t) => runScenario(t, plugin, scenario));
  }
}
