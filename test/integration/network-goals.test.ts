/**
 * Network goals (vote party, issue 31) on real PostgreSQL and through the real pipeline that counts the votes (CastHeart
 * on the stack's clock, outbox, relay, Kafka, the delivery consumer's reward step): a goal over two servers of one
 * owner, reached by votes on both, is paid once to each voter of the round (on the server of their latest vote) or,
 * for an online goal, once per server to the players online; one goal.reached per server and round; votes past the
 * target count toward the next round; a replayed or concurrent batch counts nothing twice; a payer rerun with a
 * later clock pays nothing again; an owner's session defines, reads, lists and deletes only goals over servers it owns;
 * a deleted goal counts nothing more while the rounds it reached are still paid.
 */
import { randomBytes, randomUUID } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { NetworkGoalService } from "../../gen/proto/rewards/v1/rewards_pb.js";
import { VoterKeyKind } from "../../gen/proto/voters/v1/voters_pb.js";
import { DASHBOARD_SESSION_HEADER } from "../../services/access/auth-interceptor.js";
import { decodeHeartMessage } from "../../services/delivery/pipeline/consumer.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { countGoalVotesOf } from "../../services/rewards/count-goal-votes.js";
import { payReachedGoals } from "../../services/rewards/pay-reached-goals.js";
import { createServiceTransport, withHeaders } from "../../services/shared/rpc/service-transport.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { eventually } from "../helpers/eventually.js";
import { validateAgainstOpenApi, validateRequestBody } from "./openapi-validate.js";
import { headerOf, startReceiver } from "../../scripts/harness/receiver.js";
import { expectedCallbackMac, hexEquals, parseCallbackSignature } from "../../scripts/harness/delivery-harness.js";
import { castCountedVote, countedHeart, type RewardVoter } from "../helpers/reward-votes.js";

interface Context {
  stack: TestStack;
}
const test = anyTest as TestFn<Context>;

/** The stack's clock: each cast sets it to the vote's time. */
let clockMs = Date.parse("2027-03-01T12:00:00Z");
let voterN = 0;
const log = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");
const PAY = { pagePayees: 2, passMaxPages: 100 };

test.before(async (t) => {
  const stack = await startStack({
    now: () => new Date(clockMs),
    pipeline: { name: "network-goals", delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100 } },
  });
  t.context = { stack };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

const adminGoals = (stack: TestStack) => createClient(NetworkGoalService, createServiceTransport(stack.rpcUrl, TEST_SERVICE_TOKEN));

/** `count` servers of a new owner; returns the owner id and the server ids. */
async function ownerWithServers(stack: TestStack, count: number): Promise<{ ownerId: string; serverIds: string[] }> {
  const ownerId = `goal-owner-${randomBytes(3).toString("hex")}`;
  await stack.clients.access.createOwner({ ownerId, displayName: "Goal owner" });
  const serverIds: string[] = [];
  for (let i = 0; i < count; i++) {
    const { server } = await stack.clients.admin.createServer({ name: `goal-${randomBytes(3).toString("hex")}` });
    await stack.clients.access.assignServer({ serverId: server!.id, ownerId });
    serverIds.push(server!.id);
  }
  return { ownerId, serverIds };
}

function newVoter(username: string): RewardVoter {
  voterN += 1;
  return { identity: `goal-voter-${voterN}-${randomBytes(3).toString("hex")}`, username, ip: `203.0.113.${voterN}` };
}

async function vote(stack: TestStack, serverId: string, voter: RewardVoter, at: string): Promise<string> {
  clockMs = Date.parse(at);
  return castCountedVote(stack, serverId, voter, at);
}

/** Waits until the goal's counter reads `round` and `progress` (the reward step runs behind Kafka). */
async function goalAt(stack: TestStack, goalId: string, round: number, progress: number) {
  return eventually(
    async () => {
      const goal = await adminGoals(stack).getNetworkGoal({ goalId });
      return goal.round === round && goal.progress === progress ? goal : undefined;
    },
    { timeoutMs: 30_000, message: `the goal at round ${round}, progress ${progress}` },
  );
}

const goalEntriesOf = async (stack: TestStack, serverIds: readonly string[]) =>
  (
    await stack.prisma.rewardQueueEntry.findMany({
      where: { serverId: { in: [...serverIds] }, reason: "goal" },
      orderBy: [{ username: "asc" }, { entryKey: "asc" }],
    })
  )
    .map((e) => [serverIds.indexOf(e.serverId), e.username, e.commands.join(" | "), e.onlineOnly] as const)
    .sort((a, b) => a[1].localeCompare(b[1]) || a[0] - b[0] || a[2].localeCompare(b[2]));

/** The goal.reached events written for the goal, decoded as the delivery consumer stores them: [server index, round, target]. */
async function reachedEventsOf(stack: TestStack, goalId: string, serverIds: readonly string[]) {
  const rows = await stack.prisma.outboxMessage.findMany({ where: { key: { in: [...serverIds] }, type: "goal.reached" }, orderBy: { id: "asc" } });
  return rows
    .flatMap((r) => {
      const decoded = decodeHeartMessage(r.payload);
      if (decoded.kind !== "delivery") throw new Error(`goal.reached did not decode: ${JSON.stringify(decoded)}`);
      const body = decoded.delivery.event?.payload as unknown as Record<string, unknown>;
      return body.goal_id === goalId ? [[serverIds.indexOf(decoded.delivery.serverId), body.round, body.target, body.payees, body.server_ids]] : [];
    })
    .sort((a, b) => (a[0] as number) - (b[0] as number));
}

/** A call's refusal as "Code: text", or "ok". */
const refusal = (call: Promise<unknown>) =>
  call.then(
    () => "ok",
    (e: unknown) => [Code[ConnectError.from(e).code], ConnectError.from(e).rawMessage].join(": "),
  );

/** A client of NetworkGoalService with the owner's dashboard session. */
async function ownerGoals(stack: TestStack, ownerId: string) {
  const { url } = await stack.clients.access.createDashboardLoginLink({ ownerId });
  const { sessionToken } = await stack.clients.access.redeemDashboardLoginLink({ loginToken: new URL(url).searchParams.get("token") ?? "" });
  return createClient(NetworkGoalService, withHeaders(createServiceTransport(stack.rpcUrl, TEST_SERVICE_TOKEN), { [DASHBOARD_SESSION_HEADER]: sessionToken }));
}

test.serial(
  "a goal over two servers reached by votes on both is paid once to each voter of the round, on the server of their latest vote; one goal.reached per server; the votes past the target count toward the next round",
  async (t) => {
    const { stack } = t.context;
    const { serverIds } = await ownerWithServers(stack, 2);
    const [s1, s2] = serverIds as [string, string];
    const { goalId } = await adminGoals(stack).putNetworkGoal({
      name: "Spring party",
      serverIds,
      target: 4,
      payees: "voters",
      rewardsJson: JSON.stringify([{ commands: ["give {player} cake 1"] }, { commands: ["say thanks {player}"], onlineOnly: false }]),
    });
    const [ann, bob, cy, dee] = [newVoter("Ann"), newVoter("Bob"), newVoter("Cy"), newVoter("Dee")];
    await vote(stack, s1, ann, "2027-03-02T10:00:00Z");
    await vote(stack, s2, bob, "2027-03-02T10:01:00Z");
    await vote(stack, s1, cy, "2027-03-02T10:02:00Z");
    await goalAt(stack, goalId, 1, 3);
    t.is((await payReachedGoals({ prisma: stack.prisma, log }, PAY, new Date("2027-03-02T10:03:00Z"))).queued, 0, "nothing is paid before the goal is reached");
    // Ann votes again, on the other server: the 4th vote reaches the goal; Dee's is the next round's first.
    await vote(stack, s2, ann, "2027-03-03T11:00:00Z");
    await goalAt(stack, goalId, 2, 0);
    await vote(stack, s1, dee, "2027-03-03T11:01:00Z");
    const goal = await goalAt(stack, goalId, 2, 1);
    t.is(goal.reached, 1);

    const paid = await payReachedGoals({ prisma: stack.prisma, log }, PAY, new Date("2027-03-03T11:05:00Z"));
    t.like(paid, { rounds: 1, queued: 6, skipped: 0 });
    const expected = [
      [1, "Ann", "give Ann cake 1", true],
      [1, "Ann", "say thanks Ann", false],
      [1, "Bob", "give Bob cake 1", true],
      [1, "Bob", "say thanks Bob", false],
      [0, "Cy", "give Cy cake 1", true],
      [0, "Cy", "say thanks Cy", false],
    ];
    t.deepEqual(await goalEntriesOf(stack, serverIds), expected, "Ann once (on s2, her latest vote), Bob and Cy once; Dee is the next round's");
    // A rerun, and a clock far ahead: the round is paid, its voters gone; nothing is queued again.
    t.like(await payReachedGoals({ prisma: stack.prisma, log }, PAY, new Date("2027-03-03T11:06:00Z")), { rounds: 0, queued: 0 });
    t.like(await payReachedGoals({ prisma: stack.prisma, log }, PAY, new Date("2027-05-01T00:00:00Z")), { rounds: 0, queued: 0 });
    t.deepEqual(await goalEntriesOf(stack, serverIds), expected);
    t.deepEqual(await reachedEventsOf(stack, goalId, serverIds), [
      [0, 1, 4, "voters", [...serverIds].sort()],
      [1, 1, 4, "voters", [...serverIds].sort()],
    ]);
  },
);

test.serial(
  "an online goal queues one entry per chosen server for the players online (no player, not held), once, and one goal.reached per server",
  async (t) => {
    const { stack } = t.context;
    const { serverIds } = await ownerWithServers(stack, 2);
    const [s1, s2] = serverIds as [string, string];
    const { goalId } = await adminGoals(stack).putNetworkGoal({
      name: "Online party",
      serverIds,
      target: 2,
      payees: "online",
      rewardsJson: JSON.stringify([{ commands: ["give @a diamond 1", "say vote party!"] }]),
    });
    await vote(stack, s1, newVoter("Eve"), "2027-03-04T10:00:00Z");
    await vote(stack, s2, newVoter("Fay"), "2027-03-04T10:01:00Z");
    await goalAt(stack, goalId, 2, 0);
    t.like(await payReachedGoals({ prisma: stack.prisma, log }, PAY, new Date("2027-03-04T10:05:00Z")), { rounds: 1, queued: 2 });
    t.like(await payReachedGoals({ prisma: stack.prisma, log }, PAY, new Date("2027-03-04T10:05:00Z")), { rounds: 0, queued: 0 });
    t.is(await stack.prisma.networkGoalVoter.count({ where: { goalId } }), 0, "the round's voters go with it, unpaid by an online goal");
    t.deepEqual(await goalEntriesOf(stack, serverIds), [
      [0, "", "give @a diamond 1 | say vote party!", false],
      [1, "", "give @a diamond 1 | say vote party!", false],
    ]);
    t.is((await reachedEventsOf(stack, goalId, serverIds)).length, 2);
    // The plugin lists it with its online players (none named need be): the entry is not held for anyone.
    const { claimKey } = await stack.clients.admin.rotateClaimKey({ serverId: s1 });
    const res = await fetch(`${stack.gatewayUrl}/api/rewards/queue?key=${encodeURIComponent(claimKey)}&online=`);
    const body = (await res.json()) as { entries: Array<{ reason: string; player: { name: string }; commands: string[]; online_only: boolean }> };
    t.deepEqual(validateAgainstOpenApi("/api/rewards/queue", "get", res.status, body).errors, []);
    t.deepEqual(
      body.entries.map((e) => [e.reason, e.player.name, e.commands, e.online_only]),
      [["goal", "", ["give @a diamond 1", "say vote party!"], false]],
    );
  },
);

test.serial("a replayed batch, and the same batch from two consumers at once, count each heart once per goal", async (t) => {
  const { stack } = t.context;
  const { serverIds } = await ownerWithServers(stack, 2);
  const { goalId } = await adminGoals(stack).putNetworkGoal({
    name: "Replay party",
    serverIds,
    target: 5,
    payees: "voters",
    rewardsJson: JSON.stringify([{ commands: ["give {player} cake 1"] }]),
  });
  const heart = (i: number, serverId: string) => countedHeart({ prefix: "replay", name: "R", from: "2027-03-05T10:00:00Z" }, i, serverId);
  const batch = [heart(1, serverIds[0]!), heart(2, serverIds[1]!), heart(3, serverIds[0]!)];
  t.like(await countGoalVotesOf(stack.prisma, batch, log), { counted: 3, reached: 0 });
  t.like(await countGoalVotesOf(stack.prisma, batch, log), { counted: 0, reached: 0 }, "a redelivered batch counts nothing");
  t.like(await countGoalVotesOf(stack.prisma, [...batch, ...batch], log), { counted: 0 }, "nor a batch that holds its hearts twice");
  const next = [heart(4, serverIds[1]!), heart(5, serverIds[0]!), heart(6, serverIds[1]!)];
  const [a, b] = await Promise.all([countGoalVotesOf(stack.prisma, next, log), countGoalVotesOf(stack.prisma, next, log)]);
  t.is(a.counted + b.counted, 3, "two consumers during a rebalance: one counts the batch");
  t.is(a.reached + b.reached, 1, "and the goal is reached once");
  const goal = await adminGoals(stack).getNetworkGoal({ goalId });
  t.like(goal, { round: 2, progress: 1, reached: 1 });
  t.like(await payReachedGoals({ prisma: stack.prisma, log }, PAY, new Date("2027-03-05T11:00:00Z")), { rounds: 1, queued: 5 });
  t.is((await reachedEventsOf(stack, goalId, serverIds)).length, 2);
});

test.serial(
  "an owner's session defines and reads goals only over servers it owns (another owner's server or goal answers like a missing one); an ingest token none; a list admin any one owner's servers",
  async (t) => {
    const { stack } = t.context;
    const { access } = stack.clients;
    const mine = await ownerWithServers(stack, 2);
    const theirs = await ownerWithServers(stack, 1);
    const owner = await ownerGoals(stack, mine.ownerId);
    const { token: ingestToken } = await access.createServiceToken({ name: "goals-ingest", scopes: ["ingest"] });
    const ingest = createClient(NetworkGoalService, createServiceTransport(stack.rpcUrl, ingestToken));
    const goal = (serverIds: string[]) => ({ name: "Party", serverIds, target: 10, payees: "voters", rewardsJson: '[{"commands":["give {player} cake 1"]}]' });

    const { goalId } = await owner.putNetworkGoal(goal(mine.serverIds));
    t.like(await owner.getNetworkGoal({ goalId }), { name: "Party", target: 10, round: 1, progress: 0, reached: 0 });
    t.is(await refusal(owner.putNetworkGoal(goal([...mine.serverIds, ...theirs.serverIds]))), "NotFound: unknown server");
    t.is(await refusal(owner.putNetworkGoal(goal([randomUUID()]))), "NotFound: unknown server");
    const { goalId: theirGoal } = await adminGoals(stack).putNetworkGoal(goal(theirs.serverIds));
    t.is(await refusal(owner.getNetworkGoal({ goalId: theirGoal })), "NotFound: unknown goal", "another owner's goal answers like a missing one");
    t.is(await refusal(owner.putNetworkGoal({ ...goal(mine.serverIds), goalId: theirGoal })), "NotFound: unknown goal");
    t.is(await refusal(owner.getNetworkGoal({ goalId: randomUUID() })), "NotFound: unknown goal");
    t.is((await refusal(ingest.getNetworkGoal({ goalId }))).split(":")[0], "PermissionDenied");
    t.is((await refusal(ingest.putNetworkGoal(goal(mine.serverIds)))).split(":")[0], "PermissionDenied");
    t.is(
      await refusal(adminGoals(stack).putNetworkGoal(goal([...mine.serverIds, ...theirs.serverIds]))),
      "InvalidArgument: server_ids: the servers have different owners; a goal counts one owner's servers",
    );
    t.is(
      await refusal(owner.putNetworkGoal({ ...goal(mine.serverIds), target: 0, payees: "online", rewardsJson: '[{"commands":["give {player} cake 1"]}]' })),
      "InvalidArgument: target: must be a whole number from 1 to 1000000; rewards[0].commands[0]: {player} cannot be used when the goal pays the players online; such a command names no player",
    );
    // The owner edits their goal: the definition changes, the counter carries on.
    t.is((await owner.putNetworkGoal({ ...goal(mine.serverIds.slice(0, 1)), goalId, target: 20 })).goalId, goalId);
    t.like(await owner.getNetworkGoal({ goalId }), { target: 20, serverIds: mine.serverIds.slice(0, 1), round: 1 });
  },
);

test.serial(
  "a deleted goal counts no later vote and is neither read, listed, saved nor deleted again; the round it reached before is still paid, its unreached round's voters are forgotten",
  async (t) => {
    const { stack } = t.context;
    const { ownerId, serverIds } = await ownerWithServers(stack, 2);
    const [s1, s2] = serverIds as [string, string];
    const rewardsJson = JSON.stringify([{ commands: ["give {player} cake 1"] }]);
    const { goalId } = await adminGoals(stack).putNetworkGoal({ name: "Deleted party", serverIds, target: 2, payees: "voters", rewardsJson });
    const heart = (i: number, serverId: string) => countedHeart({ prefix: "deleted", name: "D", from: "2027-03-08T10:00:00Z" }, i, serverId);
    t.like(await countGoalVotesOf(stack.prisma, [heart(1, s1), heart(2, s2), heart(3, s1)], log), { counted: 3, reached: 1 });

    t.deepEqual(await adminGoals(stack).deleteNetworkGoal({ goalId }), { $typeName: "rewards.v1.DeleteNetworkGoalResponse", unpaidRounds: 1 });
    t.like(await countGoalVotesOf(stack.prisma, [heart(4, s1), heart(5, s2)], log), { counted: 0, reached: 0 }, "a vote after the deletion counts nothing");
    t.like(await stack.prisma.networkGoal.findUniqueOrThrow({ where: { id: goalId } }), { round: 2, progress: 1 });
    t.is(await stack.prisma.networkGoalVoter.count({ where: { goalId, round: 2 } }), 0, "the unreached round's voters are forgotten");

    t.like(await payReachedGoals({ prisma: stack.prisma, log }, PAY, new Date("2027-03-08T11:00:00Z")), { rounds: 1, queued: 2 });
    t.deepEqual(
      (await goalEntriesOf(stack, serverIds)).map((e) => e[1]),
      ["D1", "D2"],
      "the round reached before the deletion is paid to its voters; D3 (unreached round) is not",
    );
    t.is(await refusal(adminGoals(stack).getNetworkGoal({ goalId })), "NotFound: unknown goal");
    t.deepEqual((await adminGoals(stack).listNetworkGoals({ ownerId })).goals, []);
    t.is(
      await refusal(adminGoals(stack).putNetworkGoal({ goalId, name: "Back", serverIds, target: 2, payees: "voters", rewardsJson })),
      "NotFound: unknown goal",
    );
    t.is(await refusal(adminGoals(stack).deleteNetworkGoal({ goalId })), "NotFound: unknown goal");
  },
);

test.serial(
  "an owner's session lists (in keyset pages) and deletes only its own goals: another owner's goal is unknown goal, another owner's list unknown owner; an unauthenticated caller and a read token cannot delete",
  async (t) => {
    const { stack } = t.context;
    const mine = await ownerWithServers(stack, 1);
    const theirs = await ownerWithServers(stack, 1);
    const owner = await ownerGoals(stack, mine.ownerId);
    const goal = (serverIds: string[], name: string) => ({
      name,
      serverIds,
      target: 10,
      payees: "voters",
      rewardsJson: '[{"commands":["give {player} cake 1"]}]',
    });
    // Oldest first: each goal a second after the one before, on the stack's clock.
    const putAfterASecond = async (name: string) => {
      clockMs += 1000;
      return (await owner.putNetworkGoal(goal(mine.serverIds, name))).goalId;
    };
    const a = await putAfterASecond("A");
    const b = await putAfterASecond("B");
    const c = await putAfterASecond("C");
    const theirGoal = (await adminGoals(stack).putNetworkGoal(goal(theirs.serverIds, "Theirs"))).goalId;

    const first = await owner.listNetworkGoals({ limit: 2 });
    t.deepEqual(
      first.goals.map((g) => [g.name, g.target, g.round, g.progress]),
      [
        ["A", 10, 1, 0],
        ["B", 10, 1, 0],
      ],
    );
    t.not(first.nextCursor, "", "a full page says where the next starts");
    const second = await owner.listNetworkGoals({ limit: 2, cursor: first.nextCursor });
    t.deepEqual(
      second.goals.map((g) => g.goalId),
      [c],
    );
    t.is(second.nextCursor, "", "the last page");
    t.deepEqual(
      (await adminGoals(stack).listNetworkGoals({ ownerId: mine.ownerId })).goals.map((g) => g.goalId),
      [a, b, c],
      "a read token lists the owner it names",
    );
    t.is(await refusal(owner.listNetworkGoals({ limit: 101 })), "InvalidArgument: limit must be between 1 and 100");
    t.is(await refusal(owner.listNetworkGoals({ cursor: "nonsense" })), "InvalidArgument: cursor is not valid");

    t.is(await refusal(owner.listNetworkGoals({ ownerId: theirs.ownerId })), "NotFound: unknown owner");
    t.is(await refusal(owner.deleteNetworkGoal({ goalId: theirGoal })), "NotFound: unknown goal", "another owner's goal answers like a missing one");
    t.is(await refusal(owner.deleteNetworkGoal({ goalId: randomUUID() })), "NotFound: unknown goal");
    const anonymous = createClient(NetworkGoalService, createConnectTransport({ baseUrl: stack.rpcUrl, httpVersion: "2" }));
    t.is((await refusal(anonymous.deleteNetworkGoal({ goalId: a }))).split(":")[0], "Unauthenticated");
    t.is((await refusal(anonymous.listNetworkGoals({ ownerId: mine.ownerId }))).split(":")[0], "Unauthenticated");
    const { token: readToken } = await stack.clients.access.createServiceToken({ name: "goals-reader", scopes: ["read"] });
    const reader = createClient(NetworkGoalService, createServiceTransport(stack.rpcUrl, readToken));
    t.is((await refusal(reader.deleteNetworkGoal({ goalId: a }))).split(":")[0], "PermissionDenied");

    t.is((await owner.deleteNetworkGoal({ goalId: b })).unpaidRounds, 0);
    t.deepEqual(
      (await owner.listNetworkGoals({})).goals.map((g) => g.goalId),
      [a, c],
    );
    t.like(await adminGoals(stack).getNetworkGoal({ goalId: theirGoal }), { name: "Theirs" }, "their goal is untouched");
  },
);

test.serial("a voter's erasure on a goal's server removes them from its unpaid round: the goal's count stays, and the round never pays them", async (t) => {
  const { stack } = t.context;
  const { serverIds } = await ownerWithServers(stack, 2);
  const [s1, s2] = serverIds as [string, string];
  const { goalId } = await adminGoals(stack).putNetworkGoal({
    name: "Erasure party",
    serverIds,
    target: 3,
    payees: "voters",
    rewardsJson: JSON.stringify([{ commands: ["give {player} cake 1"] }]),
  });
  const gone = newVoter(`Gone${voterN}`);
  await vote(stack, s1, gone, "2027-03-06T10:00:00Z");
  await vote(stack, s2, newVoter("Stay"), "2027-03-06T10:01:00Z");
  await goalAt(stack, goalId, 1, 2);
  const exported = JSON.parse((await stack.clients.voters.exportVoterData({ serverId: s1, keyKind: VoterKeyKind.USERNAME, key: gone.username })).document);
  t.deepEqual(
    exported.servers[0].goalRounds.map((r: { goal_id: string; round: number; username: string }) => [r.goal_id, r.round, r.username]),
    [[goalId, 1, gone.username]],
    "the export lists the voter's place in the unpaid round",
  );
  const erased = await stack.clients.voters.eraseVoterData({ serverId: s1, keyKind: VoterKeyKind.USERNAME, key: gone.username });
  t.is(Number(erased.counts.network_goal_voters), 1);
  await vote(stack, s2, newVoter("Last"), "2027-03-06T10:02:00Z");
  await goalAt(stack, goalId, 2, 0);
  await payReachedGoals({ prisma: stack.prisma, log }, PAY, new Date("2027-03-06T10:05:00Z"));
  t.deepEqual(
    (await goalEntriesOf(stack, serverIds)).map((e) => e[1]),
    ["Last", "Stay"],
  );
});

test.serial("goal.reached reaches each chosen server's endpoint subscribed to it, signed, once per round; the default endpoint does not get it", async (t) => {
  const { stack } = t.context;
  const { admin } = stack.clients;
  const { serverIds } = await ownerWithServers(stack, 2);
  const [s1, s2] = serverIds as [string, string];
  const [hearts, goals1, goals2] = [await startReceiver(), await startReceiver(), await startReceiver()];
  t.teardown(async () => {
    await Promise.all([hearts.close(), goals1.close(), goals2.close()]);
  });
  await admin.setCallbackSettings({ serverId: s1, callbackUrl: hearts.url });
  const { secret } = await admin.createEndpoint({ serverId: s1, url: goals1.url, eventTypes: ["goal.reached"] });
  await admin.createEndpoint({ serverId: s2, url: goals2.url, eventTypes: ["goal.reached"] });
  const { goalId } = await adminGoals(stack).putNetworkGoal({
    name: "Signed party",
    serverIds,
    target: 2,
    payees: "voters",
    rewardsJson: JSON.stringify([{ commands: ["give {player} cake 1"] }]),
  });
  await vote(stack, s1, newVoter("Gil"), "2027-03-07T10:00:00Z");
  // Hal's vote reaches the goal only once Gil's has counted: the two servers' votes travel on different partitions, and
  // `reached_at` is when the vote that reached the target counted (in the order the consumer counts them).
  await goalAt(stack, goalId, 1, 1);
  await vote(stack, s2, newVoter("Hal"), "2027-03-07T10:01:00Z");
  await goalAt(stack, goalId, 2, 0);
  const [got] = await eventually(() => (goals1.requests.length >= 1 ? goals1.requests : undefined), { timeoutMs: 30_000 });
  await eventually(() => (goals2.requests.length >= 1 ? true : undefined), { timeoutMs: 30_000 });
  const sig = parseCallbackSignature(headerOf(got!, "x-service-signature"));
  if (!sig) return t.fail("malformed X-Service-Signature");
  t.true(hexEquals(sig.v1[0] ?? "", expectedCallbackMac(secret, sig.t, got!.body)), "signed with the endpoint's own secret");
  t.is(headerOf(got!, "x-service-event"), "goal.reached");
  const stored = await stack.prisma.delivery.findFirstOrThrow({ where: { serverId: s1, eventType: "goal.reached", transport: "callback" } });
  t.deepEqual(JSON.parse(got!.text), {
    event: "goal.reached",
    event_id: stored.eventId,
    server_id: s1,
    goal_id: goalId,
    name: "Signed party",
    round: 1,
    target: 2,
    payees: "voters",
    server_ids: [...serverIds].sort(),
    reached_at: "2027-03-07T10:01:00.000Z",
    timestamp: sig.t,
  });
  t.deepEqual(validateRequestBody("goalReached", "post", JSON.parse(got!.text)).errors, [], "the body is the OpenAPI document's");
  t.is(await stack.prisma.delivery.count({ where: { serverId: { in: serverIds }, eventType: "goal.reached" } }), 2, "one per server and round");
  t.false(
    hearts.requests.some((q) => headerOf(q, "x-service-event") === "goal.reached"),
    "the default endpoint is not subscribed",
  );
});
