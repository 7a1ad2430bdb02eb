/**
 * A server's reward rules (issue 31) on real PostgreSQL through the production wiring (RewardRulesService over Connect):
 * rules are validated with every problem named, saved as versions (a save from an old version is refused, so two
 * editors never overwrite each other; the draw seed stays from version to version), previewed, and only the server's
 * owner, admin tokens (save) and read tokens (read, preview) may touch them.
 */
import anyTest, { type TestFn } from "ava";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { RewardQueueService, RewardRulesService } from "../../gen/proto/rewards/v1/rewards_pb.js";
import { ackRewardEntries, queueRewardEntries, REQUEUE_PAGE_ENTRIES } from "../../services/rewards/reward-queue-store.js";
import { runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { DASHBOARD_SESSION_HEADER } from "../../services/access/auth-interceptor.js";
import { createServiceTransport, withHeaders } from "../../services/shared/rpc/service-transport.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { winsLuckyDraw } from "../../services/rewards/domain/lucky-draw.js";

interface Context {
  stack: TestStack;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  t.context = { stack: await startStack() };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

const RULES = {
  perVote: [{ commands: ["give {player} diamond {weight}"] }],
  weekendWeight: 2,
  streak: { graceDays: 1, rewards: [{ day: 7, reward: { commands: ["give {player} emerald 7"] } }] },
  milestones: [{ scope: "month", every: 10, reward: { commands: ["crate give {player} vote"], onlineOnly: false } }],
  lucky: [{ oneIn: 2, reward: { commands: ["give {player} nether_star"] } }],
};

async function newServer(stack: TestStack, name: string): Promise<string> {
  return (await stack.clients.admin.createServer({ name })).server!.id;
}

const code = async (call: Promise<unknown>) =>
  call.then(
    () => "ok",
    (e: unknown) => (e instanceof ConnectError ? Code[e.code] : String(e)),
  );

const message = async (call: Promise<unknown>) =>
  call.then(
    () => "ok",
    (e: unknown) => (e instanceof ConnectError ? e.rawMessage : String(e)),
  );

test.serial("rules are saved as versions: the first save is version 1, the seed stays, and a save from an old version is refused", async (t) => {
  const { rewards } = t.context.stack.clients;
  const serverId = await newServer(t.context.stack, "Rules SMP");
  t.like(await rewards.getRewardRules({ serverId }), { version: 0, rulesJson: "{}", drawSeed: "" });

  t.is((await rewards.putRewardRules({ serverId, rulesJson: JSON.stringify(RULES), baseVersion: 0 })).version, 1);
  const first = await rewards.getRewardRules({ serverId });
  t.is(first.version, 1);
  t.regex(first.drawSeed, /^[0-9a-f]{32}$/);
  t.is(first.savedBy.startsWith("token:"), true);
  t.deepEqual(JSON.parse(first.rulesJson).milestones[0], { scope: "month", every: 10, reward: { commands: ["crate give {player} vote"], onlineOnly: false } });

  t.is((await rewards.putRewardRules({ serverId, rulesJson: JSON.stringify({ perVote: RULES.perVote }), baseVersion: 1 })).version, 2);
  const second = await rewards.getRewardRules({ serverId });
  t.is(second.drawSeed, first.drawSeed, "the draw seed is carried to the new version");
  t.deepEqual(JSON.parse(second.rulesJson).milestones, []);

  // An editor who read version 1 saves after version 2 was saved: refused, nothing written.
  t.is(
    await message(rewards.putRewardRules({ serverId, rulesJson: "{}", baseVersion: 1 })),
    "the rules changed since version 1 was read (now version 2); reload them and edit again",
  );
  t.is(await code(rewards.putRewardRules({ serverId, rulesJson: "{}", baseVersion: 1 })), "FailedPrecondition");
  t.is((await rewards.getRewardRules({ serverId })).version, 2);
  // A base version that was never saved (a made-up or mistyped one) is refused too: versions have no gaps.
  t.is(await message(rewards.putRewardRules({ serverId, rulesJson: "{}", baseVersion: 9 })), "base_version 9 was never saved (the current version is 2)");

  // Two saves from the same version at once: one is version 3, the other is refused.
  const raced = await Promise.all([0, 1].map(() => code(rewards.putRewardRules({ serverId, rulesJson: "{}", baseVersion: 2 }))));
  t.deepEqual(raced.sort(), ["FailedPrecondition", "ok"]);
  t.is((await rewards.getRewardRules({ serverId })).version, 3);
});

test.serial("invalid rules are refused with every problem named, and nothing is saved", async (t) => {
  const { rewards } = t.context.stack.clients;
  const serverId = await newServer(t.context.stack, "Bad Rules SMP");
  const bad = {
    perVote: [{ commands: ["give {playr} diamond"] }],
    milestones: [{ scope: "week", at: 8, reward: { commands: ["x"] } }],
  };
  t.is(await code(rewards.putRewardRules({ serverId, rulesJson: JSON.stringify(bad), baseVersion: 0 })), "InvalidArgument");
  const text = await message(rewards.putRewardRules({ serverId, rulesJson: JSON.stringify(bad), baseVersion: 0 }));
  t.regex(text, /perVote\[0\]\.commands\[0\]: unknown placeholder \{playr\}/);
  t.regex(text, /milestones\[0\]\.at: 8 can never be reached: a week holds at most 7 counted votes of one voter/);
  t.is(await message(rewards.putRewardRules({ serverId, rulesJson: "{perVote:", baseVersion: 0 })), "rules_json: not valid JSON");
  t.is(
    await message(rewards.putRewardRules({ serverId, rulesJson: JSON.stringify({ perVote: [{ commands: [`say ${"x".repeat(600)}`] }] }), baseVersion: 0 })),
    "perVote[0].commands[0]: 604 bytes, over the 512-byte bound of a command",
  );
  t.is(await code(rewards.putRewardRules({ serverId: "00000000-0000-4000-8000-00000000dead", rulesJson: "{}", baseVersion: 0 })), "NotFound");
  t.is((await rewards.getRewardRules({ serverId })).version, 0);
});

test.serial("a preview answers what a vote would give, under the saved rules or a draft", async (t) => {
  const { rewards } = t.context.stack.clients;
  const serverId = await newServer(t.context.stack, "Preview SMP");
  await rewards.putRewardRules({ serverId, rulesJson: JSON.stringify(RULES), baseVersion: 0 });
  const seed = (await rewards.getRewardRules({ serverId })).drawSeed;
  const heartId = "0192f0a0-0000-7000-8000-0000000000aa";
  const saturday = new Date("2026-05-09T12:00:00Z");
  const preview = await rewards.previewRewards({
    serverId,
    heartId,
    countedAt: timestampFromDate(saturday),
    player: "Steve",
    total: 30,
    monthTotal: 10,
    weekTotal: 6,
    streakDays: 7,
    streakExtended: true,
  });
  t.is(preview.weight, 2);
  const expected = [
    ["vote", "give Steve diamond 2"],
    ["vote", "give Steve diamond 2"],
    ["streak", "give Steve emerald 7"],
    ["milestone", "crate give Steve vote"],
    ...(winsLuckyDraw(seed, heartId, 0, 2) ? [["lucky", "give Steve nether_star"]] : []),
  ];
  t.deepEqual(
    preview.entries.map((e) => [e.reason, e.commands[0]]),
    expected,
  );
  t.false(preview.entries.find((e) => e.reason === "milestone")?.onlineOnly);

  const draft = await rewards.previewRewards({
    serverId,
    rulesJson: JSON.stringify({ perVote: [{ commands: ["oxide.grant user {steam_id} voter"] }] }),
    player: "Steve",
    total: 1,
    monthTotal: 1,
    weekTotal: 1,
  });
  t.deepEqual(
    draft.skipped.map((s) => s.why),
    ["the vote carries no {steam_id}"],
  );
  t.is(await code(rewards.previewRewards({ serverId, player: "Steve", total: 0, monthTotal: 1, weekTotal: 1 })), "InvalidArgument");
});

test.serial("only the server's owner, admin tokens (save) and read tokens (read, preview) may touch a server's rules", async (t) => {
  const { stack } = t.context;
  const { access } = stack.clients;
  const mine = await newServer(stack, "Owner SMP");
  const theirs = await newServer(stack, "Other SMP");
  await access.createOwner({ ownerId: "rules-owner", displayName: "Owner" });
  await access.assignServer({ serverId: mine, ownerId: "rules-owner" });
  const { url } = await access.createDashboardLoginLink({ ownerId: "rules-owner" });
  const { sessionToken } = await access.redeemDashboardLoginLink({ loginToken: new URL(url).searchParams.get("token") ?? "" });
  const owner = createClient(
    RewardRulesService,
    withHeaders(createServiceTransport(stack.rpcUrl, TEST_SERVICE_TOKEN), { [DASHBOARD_SESSION_HEADER]: sessionToken }),
  );
  const { token } = await access.createServiceToken({ name: "rules-reader", scopes: ["read"] });
  const reader = createClient(RewardRulesService, createServiceTransport(stack.rpcUrl, token));
  const { token: ingestToken } = await access.createServiceToken({ name: "rules-ingest", scopes: ["ingest"] });
  const ingest = createClient(RewardRulesService, createServiceTransport(stack.rpcUrl, ingestToken));
  const counts = { player: "Steve", total: 1, monthTotal: 1, weekTotal: 1 };

  t.is(await code(owner.putRewardRules({ serverId: mine, rulesJson: JSON.stringify(RULES), baseVersion: 0 })), "ok", "the owner saves their server's rules");
  t.is((await owner.getRewardRules({ serverId: mine })).savedBy, "owner:rules-owner");
  t.is(await code(owner.previewRewards({ serverId: mine, ...counts })), "ok");
  for (const call of [
    owner.getRewardRules({ serverId: theirs }),
    owner.putRewardRules({ serverId: theirs, rulesJson: "{}", baseVersion: 0 }),
    owner.previewRewards({ serverId: theirs, ...counts }),
  ]) {
    t.is(await code(call), "NotFound", "another owner's server answers as a missing one");
  }
  t.is(await code(reader.getRewardRules({ serverId: mine })), "ok", "a read token reads");
  t.is(await code(reader.previewRewards({ serverId: mine, ...counts })), "ok", "and previews");
  t.is(await code(reader.putRewardRules({ serverId: mine, rulesJson: "{}", baseVersion: 1 })), "PermissionDenied", "but never saves");
  for (const call of [ingest.getRewardRules({ serverId: mine }), ingest.putRewardRules({ serverId: mine, rulesJson: "{}", baseVersion: 1 })]) {
    t.is(await code(call), "PermissionDenied", "a token without read or admin is refused");
  }
  t.is((await stack.clients.rewards.getRewardRules({ serverId: mine })).version, 1, "no refused call saved anything");
});

test.serial(
  "the reward queue's RPCs: only the claims scope (and admins) list and acknowledge; an owner lists only their own servers and never acknowledges",
  async (t) => {
    const { stack } = t.context;
    const { access, admin } = stack.clients;
    const mine = await newServer(stack, "Queue Owner SMP");
    const theirs = await newServer(stack, "Queue Other SMP");
    const { claimKey } = await admin.rotateClaimKey({ serverId: mine });
    const [id] = await runSqlTransaction(
      stack.prisma,
      (tx) =>
        queueRewardEntries(tx, {
          serverId: mine,
          heartId: null,
          player: { username: "Steve", steamId: null, discordId: null, minecraftUuid: null, accountId: null },
          rulesVersion: 1,
          entries: [{ key: "k:vote:0", reason: "vote", commands: ["give Steve diamond 1"], onlineOnly: false }],
        }),
      { timeoutMs: 10_000 },
    );
    await access.createOwner({ ownerId: "queue-owner", displayName: "Owner" });
    await access.assignServer({ serverId: mine, ownerId: "queue-owner" });
    const { url } = await access.createDashboardLoginLink({ ownerId: "queue-owner" });
    const { sessionToken } = await access.redeemDashboardLoginLink({ loginToken: new URL(url).searchParams.get("token") ?? "" });
    const owner = createClient(
      RewardQueueService,
      withHeaders(createServiceTransport(stack.rpcUrl, TEST_SERVICE_TOKEN), { [DASHBOARD_SESSION_HEADER]: sessionToken }),
    );
    const { token } = await access.createServiceToken({ name: "queue-reader", scopes: ["read"] });
    const reader = createClient(RewardQueueService, createServiceTransport(stack.rpcUrl, token));

    t.is(await code(owner.listRewardQueue({ serverId: mine })), "ok", "the owner lists their own server's queue");
    t.is(await code(owner.listRewardQueue({ serverId: theirs })), "NotFound", "another owner's server answers as a missing one");
    t.is(await code(owner.ackRewardEntries({ claimKey, ids: [id!] })), "PermissionDenied", "an owner never acknowledges");
    t.is(await code(reader.listRewardQueue({ serverId: mine })), "PermissionDenied", "a token without claims is refused");
    t.is(await code(reader.ackRewardEntries({ claimKey, ids: [id!] })), "PermissionDenied");
    const still = await stack.clients.rewardQueue.listRewardQueue({ serverId: mine });
    t.deepEqual(
      still.entries.map((e) => e.id),
      [id],
      "no refused call acknowledged anything",
    );
  },
);

test.serial(
  "bulk re-queue: the entries acknowledged in a range are queued again as new entries, page by page, once per range; only admins and the server's owner may",
  async (t) => {
    const { stack } = t.context;
    const { access } = stack.clients;
    const mine = await newServer(stack, "Requeue SMP");
    const theirs = await newServer(stack, "Requeue Other SMP");
    const player = { username: "Steve", steamId: null, discordId: null, minecraftUuid: null, accountId: null };
    const entries = Array.from({ length: REQUEUE_PAGE_ENTRIES + 1 }, (_, i) => ({
      key: `h${i}:vote:0`,
      reason: "vote" as const,
      commands: [`give Steve diamond ${i}`],
      onlineOnly: false,
    }));
    const [early, late] = [new Date("2026-11-01T10:00:00Z"), new Date("2026-11-20T10:00:00Z")];
    await runSqlTransaction(
      stack.prisma,
      async (tx) => {
        const ids = await queueRewardEntries(tx, { serverId: mine, heartId: null, player, rulesVersion: 1, entries });
        // All but the last acknowledged inside the range (one instant: the cursor breaks ties by id), the last after it.
        await ackRewardEntries(tx, { serverId: mine, ids: ids.slice(0, -1), at: early });
        await ackRewardEntries(tx, { serverId: mine, ids: ids.slice(-1), at: late });
      },
      { timeoutMs: 10_000 },
    );
    await access.createOwner({ ownerId: "requeue-owner", displayName: "Owner" });
    await access.assignServer({ serverId: mine, ownerId: "requeue-owner" });
    const { url } = await access.createDashboardLoginLink({ ownerId: "requeue-owner" });
    const { sessionToken } = await access.redeemDashboardLoginLink({ loginToken: new URL(url).searchParams.get("token") ?? "" });
    const owner = createClient(
      RewardQueueService,
      withHeaders(createServiceTransport(stack.rpcUrl, TEST_SERVICE_TOKEN), { [DASHBOARD_SESSION_HEADER]: sessionToken }),
    );
    const range = { ackedFrom: timestampFromDate(new Date("2026-11-01T00:00:00Z")), ackedTo: timestampFromDate(new Date("2026-11-10T00:00:00Z")) };
    for (const scopes of [["read"], ["claims"], ["ingest"]]) {
      const { token } = await access.createServiceToken({ name: `requeue-${scopes[0]}`, scopes });
      const other = createClient(RewardQueueService, createServiceTransport(stack.rpcUrl, token));
      t.is(await code(other.requeueRewardEntries({ serverId: mine, ...range })), "PermissionDenied", `a ${scopes[0]} token is refused`);
    }
    t.is(await code(owner.requeueRewardEntries({ serverId: theirs, ...range })), "NotFound", "another owner's server answers as a missing one");
    t.is((await stack.clients.rewardQueue.listRewardQueue({ serverId: mine })).entries.length, 0, "no refused call re-queued anything");
    t.is(
      await message(owner.requeueRewardEntries({ serverId: mine, ackedFrom: range.ackedTo, ackedTo: range.ackedFrom })),
      "acked_to: must be after acked_from",
    );
    t.is(
      await message(owner.requeueRewardEntries({ serverId: mine, ...range, after: "yesterday" })),
      "after: not a cursor a previous page returned (next_after)",
    );

    const first = await owner.requeueRewardEntries({ serverId: mine, ...range });
    t.is(first.requeued, REQUEUE_PAGE_ENTRIES, "a page at a time");
    t.not(first.nextAfter, "", "and a cursor while the range holds more");
    const second = await owner.requeueRewardEntries({ serverId: mine, ...range, after: first.nextAfter });
    t.deepEqual([second.requeued, second.nextAfter], [REQUEUE_PAGE_ENTRIES - first.requeued, ""], "the rest of the range, and no cursor after it");
    const again = await owner.requeueRewardEntries({ serverId: mine, ...range });
    t.is(again.requeued, 0, "a second re-queue of the same range queues nothing twice");

    const pending: string[] = [];
    let page = await stack.clients.rewardQueue.listRewardQueue({ serverId: mine, limit: 100 });
    const seen = new Set<string>();
    // Reads the pending copies by acknowledging each page (the list always shows the oldest pending first).
    while (page.entries.length > 0) {
      for (const e of page.entries) {
        pending.push(e.commands[0]!);
        seen.add(e.id);
      }
      await runSqlTransaction(stack.prisma, (tx) => ackRewardEntries(tx, { serverId: mine, ids: page.entries.map((e) => e.id), at: late }), {
        timeoutMs: 10_000,
      });
      page = await stack.clients.rewardQueue.listRewardQueue({ serverId: mine, limit: 100 });
    }
    t.is(seen.size, REQUEUE_PAGE_ENTRIES, "every copy has an id of its own");
    t.deepEqual(
      [...pending].sort(),
      entries
        .slice(0, -1)
        .map((e) => e.commands[0]!)
        .sort(),
      "the entries acknowledged in the range, each once, with their commands; the one acknowledged after the range is not re-queued",
    );
  },
);
