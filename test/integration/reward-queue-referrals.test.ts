/**
 * Referral rewards in the reward queue (issue 31) through the real pipeline: ApplyEvent on the stack's clock, the
 * outbox, the relay, Kafka and the delivery consumer, on real PostgreSQL. A qualified referral queues the referrer's and
 * the referee's rewards (reason `referral`, each naming its own player) exactly once; a reversal after the lock queues
 * the reversal commands (reason `reversal`), one inside the lock queues none; a referral held for review queues nothing
 * until the owner approves it (the approval queues it), and a declined one never; rules naming a vote's placeholder
 * in a referral reward are refused; a voter's erasure deletes their side's entries.
 */
import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { EnvelopeSchema } from "../../gen/proto/events/v1/events_pb.js";
import { ReferralEventType } from "../../gen/proto/referral/v1/referral_pb.js";
import { ReviewAction, ReviewMode } from "../../gen/proto/referral/v1/referral_review_pb.js";
import { VoterKeyKind } from "../../gen/proto/voters/v1/voters_pb.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import type { ReceivedMessage } from "../../services/shared/adapters/bus.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { eventually } from "../helpers/eventually.js";

const test = (anyTest as TestFn<{ stack: TestStack }>).serial;
const DAY_MS = 86_400_000;
/** The stack's clock: tests move it past a server's lock. */
let clockMs = Date.parse("2027-05-03T12:00:00Z");

anyTest.before(async (t) => {
  const stack = await startStack({
    now: () => new Date(clockMs),
    pipeline: { name: "reward-referrals", delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100 } },
  });
  (t.context as { stack: TestStack }).stack = stack;
});
anyTest.after.always(async (t) => {
  await (t.context as { stack?: TestStack }).stack?.close();
});

const RULES = {
  perVote: [{ commands: ["give {player} diamond 1"] }],
  referral: {
    referrer: [{ commands: ["give {player} gold_ingot 5", "msg {player} thanks for the referral"] }],
    referee: [{ commands: ["give {player} gold_ingot 1"], onlineOnly: false }],
    reversal: { referrer: [{ commands: ["clear {player} gold_ingot 5"] }], referee: [{ commands: ["clear {player} gold_ingot 1"] }] },
  },
};

async function serverWith(stack: TestStack, opts: { lockDays?: number; review?: ReviewMode } = {}): Promise<string> {
  const { server } = await stack.clients.admin.createServer({
    name: `ref-rewards-${randomBytes(3).toString("hex")}`,
    registrationUrl: "https://game.example/register",
  });
  const serverId = server!.id;
  await stack.clients.admin.setReferralsEnabled({ serverId, enabled: true });
  await stack.clients.rewards.putRewardRules({ serverId, rulesJson: JSON.stringify(RULES), baseVersion: 0 });
  if (opts.lockDays !== undefined) await stack.clients.admin.setReferralSettings({ serverId, lockDays: opts.lockDays });
  if (opts.review !== undefined) await stack.clients.reviews.setReferralReviewMode({ serverId, mode: opts.review });
  return serverId;
}

/** `referrer`'s click registered for `referee` and qualified; returns the referral id and its token. */
async function qualifiedReferral(stack: TestStack, serverId: string, referrer: string, referee: string) {
  const { token } = await stack.clients.referral.recordClick({ serverId, referrerIdentity: referrer });
  const reg = await stack.clients.referral.applyEvent({
    serverId,
    event: ReferralEventType.REGISTERED,
    token,
    refereeIdentity: referee,
    serverEventId: `reg-${referee}`,
  });
  if (reg.outcome.case !== "applied") throw new Error("registration not applied");
  await stack.clients.referral.applyEvent({ serverId, event: ReferralEventType.QUALIFIED, token, serverEventId: `q-${referee}` });
  return { referralId: reg.outcome.value.referralId, token };
}

const entriesOf = (stack: TestStack, serverId: string) => stack.prisma.rewardQueueEntry.findMany({ where: { serverId }, orderBy: { entryKey: "asc" } });

/**
 * Waits until every `type` event of the server is published, then hands them to the consumer once more: its handler
 * resolves once they are fully handled (the pipeline's own copy may race it: both are no-ops).
 */
async function handled(stack: TestStack, serverId: string, type: string): Promise<void> {
  const rows = await eventually(
    async () => {
      const all = await stack.prisma.outboxMessage.findMany({ where: { key: serverId, type } });
      return all.length > 0 && all.every((r) => r.publishedAt !== null) ? all : undefined;
    },
    { timeoutMs: 30_000, message: `${type} published` },
  );
  await stack.pipeline!.delivery.consumer.handleBatch(rows.map(messageOf));
}

function messageOf(row: { topic: string; key: string; payload: Uint8Array; id: bigint }): ReceivedMessage {
  return { topic: row.topic, key: row.key, value: row.payload, partition: 0, offset: row.id.toString() };
}

test("a qualified referral queues the referrer's and the referee's rewards (reason referral), each naming its own player, exactly once", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWith(stack);
  const { referralId } = await qualifiedReferral(stack, serverId, "Alice", "Bob");
  const entries = await eventually(
    async () => {
      const rows = await entriesOf(stack, serverId);
      return rows.length >= 2 ? rows : undefined;
    },
    { timeoutMs: 30_000, message: "the referral's entries queued" },
  );
  t.deepEqual(
    entries.map((e) => [e.entryKey, e.reason, e.username, e.commands, e.onlineOnly, e.heartId, e.rulesVersion]),
    [
      [`${referralId}:referral:referee:0`, "referral", "Bob", ["give Bob gold_ingot 1"], false, null, 1],
      [`${referralId}:referral:referrer:0`, "referral", "Alice", ["give Alice gold_ingot 5", "msg Alice thanks for the referral"], true, null, 1],
    ],
  );
  // A redelivered referral.qualified (a restart before the offset commit) queues nothing twice.
  const row = await stack.prisma.outboxMessage.findFirstOrThrow({ where: { key: serverId, type: "referral.qualified" } });
  t.is(fromBinary(EnvelopeSchema, row.payload).payload.case, "referralTransitioned");
  await stack.pipeline!.delivery.consumer.handleBatch([messageOf(row), messageOf(row)]);
  t.is((await entriesOf(stack, serverId)).length, 2);
});

test("a reversal after the lock (a clawback) queues the reversal commands (reason reversal) once; one inside the lock queues none", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWith(stack, { lockDays: 7 });
  const late = await qualifiedReferral(stack, serverId, "Carol", "Dave");
  const early = await qualifiedReferral(stack, serverId, "Carol", "Erin");
  await handled(stack, serverId, "referral.qualified");
  await eventually(async () => ((await entriesOf(stack, serverId)).length >= 4 ? true : undefined), { timeoutMs: 30_000, message: "both referrals paid" });
  // Inside the lock: the credit is removed; nothing is taken back by command.
  await stack.clients.referral.applyEvent({ serverId, event: ReferralEventType.REVERSED, token: early.token, serverEventId: "rev-early" });
  clockMs += 8 * DAY_MS;
  await stack.clients.referral.applyEvent({ serverId, event: ReferralEventType.REVERSED, token: late.token, serverEventId: "rev-late" });
  const reversals = await eventually(
    async () => {
      const rows = (await entriesOf(stack, serverId)).filter((e) => e.reason === "reversal");
      return rows.length >= 2 ? rows : undefined;
    },
    { timeoutMs: 30_000, message: "the clawback's reversal entries" },
  );
  t.deepEqual(
    reversals.map((e) => [e.entryKey, e.username, e.commands]),
    [
      [`${late.referralId}:reversal:referee:0`, "Dave", ["clear Dave gold_ingot 1"]],
      [`${late.referralId}:reversal:referrer:0`, "Carol", ["clear Carol gold_ingot 5"]],
    ],
  );
  // Both reversals handled: the one inside the lock added nothing; a redelivered clawback adds nothing either.
  await handled(stack, serverId, "referral.reversed");
  t.is((await entriesOf(stack, serverId)).filter((e) => e.reason === "reversal").length, 2);
  t.false((await entriesOf(stack, serverId)).some((e) => e.entryKey.startsWith(`${early.referralId}:reversal`)));
});

test("a referral held for review queues nothing until the owner approves it (the approval queues it once); a declined one never pays, and its clawback takes nothing back", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWith(stack, { review: ReviewMode.LOOSE, lockDays: 1 });
  // Loose review: a referee without a counted vote is flagged at qualification (no_activity) and held.
  const held = await qualifiedReferral(stack, serverId, "Frank", "Gina");
  const declined = await qualifiedReferral(stack, serverId, "Frank", "Hank");
  await handled(stack, serverId, "referral.qualified");
  t.is((await stack.prisma.referral.findUniqueOrThrow({ where: { id: held.referralId } })).review, "held");
  t.deepEqual(await entriesOf(stack, serverId), [], "held: nothing queued");

  t.true((await stack.clients.reviews.reviewReferral({ referralId: held.referralId, action: ReviewAction.APPROVE })).changed);
  t.deepEqual(
    (await entriesOf(stack, serverId)).map((e) => [e.entryKey, e.username]),
    [
      [`${held.referralId}:referral:referee:0`, "Gina"],
      [`${held.referralId}:referral:referrer:0`, "Frank"],
    ],
    "the approval queued the referral's rewards in its transaction",
  );
  // The qualified events handled again after the approval queue nothing twice.
  await handled(stack, serverId, "referral.qualified");
  t.is((await entriesOf(stack, serverId)).length, 2);

  await stack.clients.reviews.reviewReferral({ referralId: declined.referralId, action: ReviewAction.DECLINE });
  clockMs += 2 * DAY_MS;
  await stack.clients.referral.applyEvent({ serverId, event: ReferralEventType.REVERSED, token: declined.token, serverEventId: "rev-declined" });
  await handled(stack, serverId, "referral.reversed");
  t.false(
    (await entriesOf(stack, serverId)).some((e) => e.entryKey.startsWith(declined.referralId)),
    "declined: nothing paid, nothing taken back",
  );
});

test("a referral reward may name only {player}: a vote's placeholder there is refused with its field", async (t) => {
  const { stack } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: "ref-rules" });
  const rules = { referral: { referee: [{ commands: ["give {player} gold {streak}"] }], reversal: { referrer: [{ commands: ["ban {steam_id}"] }] } } };
  const error = await stack.clients.rewards.putRewardRules({ serverId: server!.id, rulesJson: JSON.stringify(rules), baseVersion: 0 }).catch((e: unknown) => e);
  t.true(error instanceof ConnectError);
  t.is((error as ConnectError).code, Code.InvalidArgument);
  t.regex((error as ConnectError).rawMessage, /referral\.referee\[0\]\.commands\[0\]: \{streak\} cannot be used in a referral reward/);
  t.regex((error as ConnectError).rawMessage, /referral\.reversal\.referrer\[0\]\.commands\[0\]: \{steam_id\} cannot be used in a referral reward/);
});

test("a voter's export lists their side of their referrals' reward entries, never the other player's", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWith(stack);
  const { referralId } = await qualifiedReferral(stack, serverId, "Kim", "Lou");
  await handled(stack, serverId, "referral.qualified");
  const sideOf = async (name: string) => {
    const exported = JSON.parse((await stack.clients.voters.exportVoterData({ serverId, keyKind: VoterKeyKind.USERNAME, key: name })).document);
    return exported.servers[0].referralRewardEntries.map((e: { entry_key: string; username: string }) => [e.entry_key, e.username]);
  };
  t.deepEqual(await sideOf("Lou"), [[`${referralId}:referral:referee:0`, "Lou"]]);
  t.deepEqual(await sideOf("Kim"), [[`${referralId}:referral:referrer:0`, "Kim"]]);
});

test("a voter's erasure deletes their side of their referrals' reward entries (their identity is the player and in the commands); the other player's stay", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWith(stack);
  const { referralId } = await qualifiedReferral(stack, serverId, "Ivan", "Judy");
  await handled(stack, serverId, "referral.qualified");
  t.is((await entriesOf(stack, serverId)).length, 2);
  await stack.clients.voters.eraseVoterData({ serverId, keyKind: VoterKeyKind.USERNAME, key: "Judy" });
  t.deepEqual(
    (await entriesOf(stack, serverId)).map((e) => [e.entryKey, e.username]),
    [[`${referralId}:referral:referrer:0`, "Ivan"]],
  );
});
