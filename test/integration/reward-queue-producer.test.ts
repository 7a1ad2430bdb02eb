/**
 * A counted vote's rewards are queued (issue 31) through the real pipeline: CastHeart on the stack's clock, the outbox,
 * the relay, Kafka and the delivery consumer, on real PostgreSQL. A server with saved reward rules gets each counted
 * heart's entries queued exactly once (per-vote rewards rendered with the player's name, the streak reward with grace,
 * the month milestone, the month total starting again in a new month); a redelivered `heart.counted` queues and counts
 * nothing twice; a server without rules gets no state and no entries; a skipped reward is logged in counts only; a
 * failure to queue fails the message after its deliveries are stored all the same, and handling it again queues the rewards once.
 */
import { randomBytes, randomUUID } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import pg from "pg";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { queueVoteRewards, type CountedHeart } from "../../services/rewards/queue-vote-rewards.js";
import { recordingClient, rowsReadByStatements } from "../helpers/rows-read.js";
import { captureLog, type CapturedLog } from "../helpers/capture-log.js";
import { eventually } from "../helpers/eventually.js";
import { castCountedVote } from "../helpers/reward-votes.js";
import { heartCountedMessageOf } from "../helpers/pipeline-messages.js";

interface Context {
  stack: TestStack;
  captured: CapturedLog;
}
const test = anyTest as TestFn<Context>;

const DAY_MS = 24 * 60 * 60 * 1000;
/** The stack's clock: each cast sets it to the vote's time. */
let clockMs = Date.parse("2027-03-01T12:00:00Z");
let voterN = 0;

test.before(async (t) => {
  const captured = captureLog("debug");
  const stack = await startStack({
    now: () => new Date(clockMs),
    log: captured.log,
    pipeline: { name: "reward-producer", delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100 } },
  });
  t.context = { stack, captured };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

async function serverWithRules(stack: TestStack, rules: unknown | null): Promise<string> {
  const { server } = await stack.clients.admin.createServer({ name: `rewards-${randomBytes(3).toString("hex")}` });
  const serverId = server!.id;
  if (rules !== null) await stack.clients.rewards.putRewardRules({ serverId, rulesJson: JSON.stringify(rules), baseVersion: 0 });
  return serverId;
}

interface Voter {
  identity: string;
  username: string;
  ip: string;
  steamId?: string;
}

function newVoter(username: string, steamId?: string): Voter {
  voterN += 1;
  return { identity: `reward-voter-${voterN}-${randomBytes(3).toString("hex")}`, username, ip: `198.51.100.${voterN}`, ...(steamId ? { steamId } : {}) };
}

/** Casts a vote at `at` (the stack's clock); it must count. Returns the heart id. */
async function vote(stack: TestStack, serverId: string, voter: Voter, at: string): Promise<string> {
  clockMs = Date.parse(at);
  return castCountedVote(stack, serverId, voter, at);
}

/** Waits until the consumer has counted `total` votes of the voter into their reward state. */
async function countedTotal(stack: TestStack, serverId: string, voter: Voter, total: number) {
  return eventually(
    async () => {
      const state = await stack.prisma.voterRewardState.findUnique({ where: { serverId_voterIdentity: { serverId, voterIdentity: voter.identity } } });
      return state !== null && state.total >= total ? state : undefined;
    },
    { timeoutMs: 30_000, message: `the voter's reward state reaching total ${total}` },
  );
}

const entriesOf = (stack: TestStack, serverId: string) => stack.prisma.rewardQueueEntry.findMany({ where: { serverId }, orderBy: { entryKey: "asc" } });

const day = (n: number) => new Date(Date.parse("2027-03-01T12:00:00Z") + (n - 1) * DAY_MS + n * 60_000).toISOString();

test.serial("a counted vote on a server with reward rules queues its per-vote reward, the command rendered with the player's name", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWithRules(stack, { perVote: [{ commands: ["give {player} diamond 1", "msg {player} vote {total} of {month_total}"] }] });
  const steve = newVoter("Steve", "76561198000000042");
  const heartId = await vote(stack, serverId, steve, day(1));
  await countedTotal(stack, serverId, steve, 1);
  const entries = await entriesOf(stack, serverId);
  t.is(entries.length, 1);
  t.like(entries[0], {
    entryKey: `${heartId}:vote:0:0`,
    reason: "vote",
    heartId,
    username: "Steve",
    usernameLower: "steve",
    steamId: "76561198000000042",
    commands: ["give Steve diamond 1", "msg Steve vote 1 of 1"],
    onlineOnly: true,
    rulesVersion: 1,
    ackedAt: null,
  });
});

test.serial("a 7-day reward streak with one missed day inside a grace of 1 queues the day-7 streak reward exactly once", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWithRules(stack, { streak: { graceDays: 1, rewards: [{ day: 7, reward: { commands: ["give {player} emerald {streak}"] } }] } });
  const alex = newVoter("Alex");
  // Vote days 1-4, day 5 missed (inside the grace), days 6-9: the 7th vote day is day 8; day 9 makes the streak 8.
  const hearts: string[] = [];
  for (const d of [1, 2, 3, 4, 6, 7, 8, 9]) hearts.push(await vote(stack, serverId, alex, day(d)));
  const state = await countedTotal(stack, serverId, alex, 8);
  t.is(state.streakDays, 8);
  const entries = await entriesOf(stack, serverId);
  t.deepEqual(
    entries.map((e) => [e.reason, e.heartId, e.commands]),
    [["streak", hearts[6], ["give Alex emerald 7"]]],
  );
});

test.serial("the 10th counted vote of a month queues the month milestone once, not again at the 11th; a new month's first vote is month_total 1", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWithRules(stack, {
    perVote: [{ commands: ["msg {player} month {month_total} total {total}"] }],
    milestones: [{ scope: "month", every: 10, reward: { commands: ["crate give {player} vote"], onlineOnly: false } }],
  });
  const kim = newVoter("Kim");
  // March 21 to 31 (11 votes), then April 1.
  const hearts: string[] = [];
  for (let d = 21; d <= 31; d++) hearts.push(await vote(stack, serverId, kim, `2027-03-${d}T12:${d}:00Z`));
  hearts.push(await vote(stack, serverId, kim, "2027-04-01T12:40:00Z"));
  const state = await countedTotal(stack, serverId, kim, 12);
  t.like(state, { month: "2027-04", monthTotal: 1, total: 12 });
  const entries = await entriesOf(stack, serverId);
  t.deepEqual(
    entries.filter((e) => e.reason === "milestone").map((e) => [e.heartId, e.commands, e.onlineOnly]),
    [[hearts[9], ["crate give Kim vote"], false]],
  );
  const april = entries.find((e) => e.heartId === hearts[11] && e.reason === "vote");
  t.deepEqual(april?.commands, ["msg Kim month 1 total 12"]);
});

test.serial("a redelivered heart.counted queues nothing twice and does not count twice", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWithRules(stack, { perVote: [{ commands: ["give {player} diamond 1"] }] });
  const sam = newVoter("Sam");
  const first = await vote(stack, serverId, sam, day(1));
  const second = await vote(stack, serverId, sam, day(2));
  const before = await countedTotal(stack, serverId, sam, 2);
  const consumer = stack.pipeline!.delivery.consumer;
  // The older heart again (a replay from before the state), then the newest twice (one message, then a batch of two copies).
  await consumer.handle(await heartCountedMessageOf(stack, serverId, first));
  await consumer.handle(await heartCountedMessageOf(stack, serverId, second));
  const again = await heartCountedMessageOf(stack, serverId, second);
  await consumer.handleBatch([again, again]);
  const after = await stack.prisma.voterRewardState.findUnique({ where: { serverId_voterIdentity: { serverId, voterIdentity: sam.identity } } });
  t.deepEqual(after, before);
  t.deepEqual((await entriesOf(stack, serverId)).map((e) => e.heartId).sort(), [first, second].sort());
});

test.serial("a server without reward rules gets no reward state and no queue entries", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWithRules(stack, null);
  const lee = newVoter("Lee");
  const heartId = await vote(stack, serverId, lee, day(1));
  // The consumer's handler resolves once the message is fully handled (the pipeline's own copy may race it: both are no-ops).
  await stack.pipeline!.delivery.consumer.handle(await heartCountedMessageOf(stack, serverId, heartId));
  t.is(await stack.prisma.voterRewardState.count({ where: { serverId } }), 0);
  t.is(await stack.prisma.rewardQueueEntry.count({ where: { serverId } }), 0);
});

test.serial("a reward skipped for a vote (a command naming an id the vote lacks) is logged in counts, without the voter's name or ids", async (t) => {
  const { stack, captured } = t.context;
  const serverId = await serverWithRules(stack, { perVote: [{ commands: ["give {player} diamond 1"] }, { commands: ["discord role {discord_id} voter"] }] });
  const uniqueName = `Zed${randomBytes(3).toString("hex")}`;
  const zed = newVoter(uniqueName, "76561198000000777");
  const heartId = await vote(stack, serverId, zed, day(1));
  await countedTotal(stack, serverId, zed, 1);
  t.deepEqual(
    (await entriesOf(stack, serverId)).map((e) => e.commands),
    [[`give ${uniqueName} diamond 1`]],
  );
  const line = await eventually(() => captured.lines.find((l) => l.heartId === heartId && l.skipped !== undefined));
  t.deepEqual(line.skipped, { vote: 1 });
  const mentions = captured.raw.filter((l) => l.includes(uniqueName) || l.includes("76561198000000777") || l.includes(zed.identity));
  t.deepEqual(mentions, []);
});

test.serial(
  "a failure to queue a vote's rewards fails the message (not acknowledged) after its deliveries are stored; handled again, the rewards are queued once",
  async (t) => {
    const { stack } = t.context;
    const serverId = await serverWithRules(stack, { perVote: [{ commands: ["give {player} diamond 1"] }] });
    await stack.clients.admin.setPullEnabled({ serverId, enabled: true });
    // The queue refuses this server's entries until the trigger is dropped (a database failure inside the reward transaction).
    const fn = `refuse_${serverId.replaceAll("-", "")}`;
    await stack.prisma.$executeRawUnsafe(
      `CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'queue refused in test'; END $$`,
    );
    await stack.prisma.$executeRawUnsafe(
      `CREATE TRIGGER ${fn} BEFORE INSERT ON reward_queue_entries FOR EACH ROW WHEN (NEW.server_id = '${serverId}'::uuid) EXECUTE FUNCTION ${fn}()`,
    );
    const ada = newVoter("Ada");
    const heartId = await vote(stack, serverId, ada, day(1));
    const message = await heartCountedMessageOf(stack, serverId, heartId);
    const consumer = stack.pipeline!.delivery.consumer;
    await t.throwsAsync(consumer.handle(message), { message: /queue refused in test/ });
    t.is(await stack.prisma.delivery.count({ where: { heartId, transport: "pull" } }), 1, "the delivery is stored all the same");
    t.is(await stack.prisma.voterRewardState.count({ where: { serverId } }), 0, "nothing of the failed transaction is kept");
    const deliveries = await stack.prisma.delivery.count({ where: { heartId } });

    await stack.prisma.$executeRawUnsafe(`DROP TRIGGER ${fn} ON reward_queue_entries`);
    await consumer.handle(message);
    await countedTotal(stack, serverId, ada, 1);
    t.deepEqual(
      (await entriesOf(stack, serverId)).map((e) => [e.heartId, e.commands]),
      [[heartId, ["give Ada diamond 1"]]],
    );
    t.is(await stack.prisma.delivery.count({ where: { heartId } }), deliveries, "handled again, no delivery is stored twice");
  },
);

test.serial(
  "a batch reads the reward rules once and counts its votes with one statement per table, whatever its size (one voter's two votes in it add up); hearts of servers without rules cost nothing more",
  async (t) => {
    const { stack } = t.context;
    const serverId = await serverWithRules(stack, { perVote: [{ commands: ["give {player} diamond 1"] }] });
    for (let version = 1; version < 20; version++) {
      await stack.clients.rewards.putRewardRules({
        serverId,
        rulesJson: JSON.stringify({ perVote: [{ commands: [`give {player} diamond ${version}`] }] }),
        baseVersion: version,
      });
    }
    const without = [await serverWithRules(stack, null), await serverWithRules(stack, null)];
    const heartOf = (id: string, n: number, second: number) => ({
      heartId: randomUUID(),
      serverId: id,
      voterIdentity: `batch-voter-${n}`,
      countedAt: new Date(Date.parse(day(1)) + second * 1000),
      player: { username: `Batch${n}`, steamId: null, discordId: null, minecraftUuid: null, accountId: null },
    });
    // Voter 1 votes twice in the batch (its second vote listed first: the batch is counted in time order).
    const hearts: CountedHeart[] = [heartOf(serverId, 1, 10), ...[serverId, ...without].flatMap((id) => [1, 2, 3].map((n) => heartOf(id, n, n)))];
    const pool = new pg.Pool({ connectionString: stack.db.url, max: 2 });
    try {
      const { client, statements } = recordingClient(pool);
      t.like(await queueVoteRewards(client, hearts, stack.log), { counted: 4, replays: 0, queued: 4 });
      const rulesReads = statements().filter((s) => s.text.includes("reward_rule_versions"));
      t.is(rulesReads.length, 1);
      // For the batch: the network goals' one probe (count-goal-votes.ts), then lock its voters' states, queue its
      // entries, write the states, count the weeks and months; no statement per heart, nothing for the servers without rules.
      t.is(statements().length, 1 + 1 + 4);
      const tallies = await stack.prisma.$queryRawUnsafe<Array<{ period: string; votes: number }>>(
        "SELECT period, votes FROM voter_period_tallies WHERE server_id = $1::uuid AND voter_identity = 'batch-voter-1' ORDER BY period",
        serverId,
      );
      t.deepEqual(
        tallies.map((r) => r.votes),
        [2, 2],
        "voter 1's two votes are both in its week and its month",
      );
      const [state] = await stack.prisma.$queryRawUnsafe<Array<{ total: number; last_counted_at: Date }>>(
        "SELECT total, last_counted_at FROM voter_reward_states WHERE server_id = $1::uuid AND voter_identity = 'batch-voter-1'",
        serverId,
      );
      t.is(state?.total, 2);
      t.is(state?.last_counted_at.toISOString(), new Date(Date.parse(day(1)) + 10_000).toISOString());
      const read = await rowsReadByStatements(stack.prisma, rulesReads);
      t.true((read.reward_rule_versions ?? 0) <= 3, `reward_rule_versions rows read: ${read.reward_rule_versions}`);
      t.deepEqual((await entriesOf(stack, serverId)).map((e) => `${e.rulesVersion}: ${e.commands.join("; ")}`).sort(), [
        "20: give Batch1 diamond 19",
        "20: give Batch1 diamond 19",
        "20: give Batch2 diamond 19",
        "20: give Batch3 diamond 19",
      ]);
    } finally {
      await pool.end();
    }
  },
);
