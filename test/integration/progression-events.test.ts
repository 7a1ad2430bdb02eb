/**
 * Progression events and payload version 3 end to end (issue 31): votes cast through the real pipeline (CastHeart on
 * the stack's clock, the outbox, the relay, Kafka, the delivery consumer and dispatcher) on a server with saved reward
 * rules, to local receivers. An endpoint subscribed to `streak.extended`, `streak.lost` and `milestone.reached` gets
 * each event once, signed with its own secret; an endpoint not subscribed gets none; `streak.lost` comes after a gap
 * beyond the grace, not within it; a replayed vote makes no second event; a version-3 endpoint's heart.counted carries
 * the vote's weight, totals and reward streak (null on a server without rules); a voter's erasure reaches the bodies;
 * the signed pull API lists and claims them when opted in.
 */
import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { PROGRESSION_EVENT_TYPES } from "../../services/shared/values/event-types.js";
import { TEST_CALLBACK_REWARD_COUNTS } from "../../services/delivery/rpc/send-test-callback.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { headerOf, startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { eraseVoterData, newTombstone } from "../../services/voter-data/erase-voter-data.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { eventually } from "../helpers/eventually.js";
import { heartCountedMessageOf, isSignedWith } from "../helpers/pipeline-messages.js";
import { validateAgainstOpenApi } from "./openapi-validate.js";

interface Context {
  stack: TestStack;
  receivers: Receiver[];
}
const test = anyTest as TestFn<Context>;

const DAY_MS = 24 * 60 * 60 * 1000;
/** The stack's clock: each cast sets it to the vote's time. */
let clockMs = Date.parse("2027-03-01T12:00:00Z");
let voterN = 0;

test.before(async (t) => {
  const stack = await startStack({
    now: () => new Date(clockMs),
    allowInsecureCallbacks: true,
    pipeline: {
      name: "progression-events",
      delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100, allowInsecureCallbacks: true },
    },
  });
  t.context = { stack, receivers: [] };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
  for (const r of t.context.receivers ?? []) await r.close();
});

async function receiver(c: Context): Promise<Receiver> {
  const r = await startReceiver();
  c.receivers.push(r);
  return r;
}

/**
 * A server whose default endpoint (heart.counted only) goes to `plain` with payload version 3, and a second endpoint
 * to `progress` subscribed to the progression events; `rules` saved unless null.
 */
async function newServer(c: Context, plain: Receiver, progress: Receiver, rules: unknown | null) {
  const admin = c.stack.clients.admin;
  const { server } = await admin.createServer({ name: `progress-${randomBytes(3).toString("hex")}` });
  const serverId = server!.id;
  await admin.setCallbackSettings({ serverId, callbackUrl: plain.url });
  const [defaultEndpoint] = (await admin.listEndpoints({ serverId })).endpoints;
  await admin.updateEndpoint({ serverId, endpointId: defaultEndpoint!.id, payloadVersion: 3 });
  const second = await admin.createEndpoint({ serverId, url: progress.url, eventTypes: [...PROGRESSION_EVENT_TYPES] });
  if (rules !== null) await c.stack.clients.rewards.putRewardRules({ serverId, rulesJson: JSON.stringify(rules), baseVersion: 0 });
  return { serverId, defaultSecret: (await admin.revealCallbackSecret({ serverId })).secret, progressSecret: second.secret };
}

/** Casts a vote of a fresh or given voter at `at` (the stack's clock); it must count. Returns the heart id. */
async function vote(stack: TestStack, serverId: string, voter: string, at: string): Promise<string> {
  clockMs = Date.parse(at);
  const res = await stack.clients.hearts.castHeart({
    serverId,
    voterIdentity: voter,
    username: "Steve",
    ip: `198.51.100.${(voterN % 200) + 20}`,
    userAgent: "Mozilla/5.0 (X11; Linux x86_64) ProgressionEventsTest/1.0",
  });
  if (!res.counted) throw new Error(`the vote at ${at} did not count`);
  // Sent before the clock moves on: a lease taken on the stack's clock would look expired after the next vote's jump.
  await eventually(
    async () => {
      const rows = await stack.prisma.delivery.findMany({ where: { serverId, transport: "callback" }, select: { heartId: true, status: true } });
      return rows.some((r) => r.heartId === res.heartId) && rows.every((r) => r.status === "delivered") ? true : undefined;
    },
    { timeoutMs: 30_000, message: `the vote at ${at} sent` },
  );
  return res.heartId;
}

function newVoter(): string {
  voterN += 1;
  return `progress-voter-${voterN}-${randomBytes(3).toString("hex")}`;
}

/** Day `n` of the test month, a minute later each day (past the 24-hour cooldown). */
const day = (n: number) => new Date(Date.parse("2027-03-01T12:00:00Z") + (n - 1) * DAY_MS + n * 60_000).toISOString();

/** Every delivery of the server delivered (nothing pending): what the receivers hold is all they will get. */
async function allDelivered(stack: TestStack, serverId: string, count: number): Promise<void> {
  await eventually(
    async () => {
      const rows = await stack.prisma.delivery.findMany({ where: { serverId, transport: "callback" }, select: { status: true } });
      return rows.length === count && rows.every((r) => r.status === "delivered") ? true : undefined;
    },
    { timeoutMs: 30_000, message: `${count} callback deliveries of the server delivered` },
  );
}

const bodiesOf = (r: Receiver) => r.requests.map((q) => JSON.parse(q.text) as Record<string, unknown>);

test.serial(
  "a subscribed endpoint gets streak.extended, milestone.reached and streak.lost once each, signed; streak.lost only after a gap beyond the grace; the unsubscribed endpoint none",
  async (t) => {
    const { stack } = t.context;
    const [plain, progress] = [await receiver(t.context), await receiver(t.context)];
    const rules = { streak: { graceDays: 1 }, milestones: [{ scope: "month", every: 3, reward: { commands: ["give {player} diamond 1"] } }] };
    const { serverId, progressSecret } = await newServer(t.context, plain, progress, rules);
    const voter = newVoter();
    // Days 1, 2, 3; day 5 (1 missed day: inside the grace of 1); day 8 (2 missed days: beyond it).
    const hearts: string[] = [];
    for (const d of [1, 2, 3, 5, 8]) hearts.push(await vote(stack, serverId, voter, day(d)));
    // 5 heart.counted to the default endpoint; extended on days 2, 3, 5, milestone (3rd vote), lost on day 8.
    await allDelivered(stack, serverId, 5 + 5);
    const events = bodiesOf(progress);
    t.deepEqual(
      events
        .map((e) => [e.event, e.heart_id, e.reward_streak ?? null, e.lost_streak ?? null, e.count ?? null])
        .sort((a, b) => String(a).localeCompare(String(b))),
      [
        ["milestone.reached", hearts[2], null, null, 3],
        ["streak.extended", hearts[1], 2, null, null],
        ["streak.extended", hearts[2], 3, null, null],
        ["streak.extended", hearts[3], 4, null, null],
        ["streak.lost", hearts[4], 1, 4, null],
      ].sort((a, b) => String(a).localeCompare(String(b))),
    );
    t.is(new Set(events.map((e) => e.event_id)).size, events.length, "each event once");
    for (const request of progress.requests) {
      t.true(isSignedWith(request, progressSecret), "signed with the subscribed endpoint's secret");
      t.is(headerOf(request, "x-service-event"), JSON.parse(request.text).event);
    }
    const milestone = events.find((e) => e.event === "milestone.reached")!;
    t.deepEqual(Object.keys(milestone), [
      "event",
      "event_id",
      "server_id",
      "heart_id",
      "username",
      "cast_at",
      "scope",
      "count",
      "rule_index",
      "every",
      "timestamp",
    ]);
    t.like(milestone, { server_id: serverId, username: "Steve", scope: "month", count: 3, rule_index: 0, every: 3 });
    t.deepEqual(
      bodiesOf(plain).map((b) => b.event),
      ["heart.counted", "heart.counted", "heart.counted", "heart.counted", "heart.counted"],
      "the default endpoint (heart.counted only) gets no progression event",
    );
  },
);

test.serial(
  "a version-3 heart.counted carries the vote's weight, month and all-time totals and reward streak; without saved rules they are null",
  async (t) => {
    const { stack } = t.context;
    const [plain, progress] = [await receiver(t.context), await receiver(t.context)];
    const { serverId, defaultSecret } = await newServer(t.context, plain, progress, { weekendWeight: 5 });
    const voter = newVoter();
    // Tue 30 and Wed 31 March, Thu 1 April (a new month), Sat 3 April (a missed day: the streak of 3 is lost; weekend weight).
    const at = ["2027-03-30T12:00:00Z", "2027-03-31T12:01:00Z", "2027-04-01T12:02:00Z", "2027-04-03T12:03:00Z"];
    const hearts: string[] = [];
    for (const a of at) hearts.push(await vote(stack, serverId, voter, a));
    await allDelivered(stack, serverId, 4 + 3);
    const byHeart = new Map(bodiesOf(plain).map((b) => [b.heart_id, b]));
    t.like(byHeart.get(hearts[0]), { payload_version: 3, weight: 1, month_total: 1, total: 1, reward_streak: 1 });
    t.like(byHeart.get(hearts[2]), { payload_version: 3, weight: 1, month_total: 1, total: 3, reward_streak: 3 });
    t.like(byHeart.get(hearts[3]), { payload_version: 3, weight: 5, month_total: 2, total: 4, reward_streak: 1 });
    const keys = Object.keys(byHeart.get(hearts[3])!);
    t.deepEqual(keys.slice(-4), ["weight", "month_total", "total", "reward_streak"], "after every version-2 field");
    t.true(keys.indexOf("payload_version") < keys.indexOf("cast_at"), "payload_version where version 2 has it");
    for (const request of plain.requests) t.true(isSignedWith(request, defaultSecret));

    const [plain2, progress2] = [await receiver(t.context), await receiver(t.context)];
    const bare = await newServer(t.context, plain2, progress2, null);
    const heart = await vote(stack, bare.serverId, newVoter(), "2027-04-05T12:00:00Z");
    await allDelivered(stack, bare.serverId, 1);
    t.like(bodiesOf(plain2)[0], { heart_id: heart, payload_version: 3, weight: null, month_total: null, total: null, reward_streak: null });
    t.is(progress2.requests.length, 0, "no counts, no progression events");
  },
);

test.serial("a replayed vote emits no second progression event and stores no second delivery", async (t) => {
  const { stack } = t.context;
  const [plain, progress] = [await receiver(t.context), await receiver(t.context)];
  // Every counted vote reaches this milestone: a replay counted again would make one more.
  const { serverId } = await newServer(t.context, plain, progress, {
    milestones: [{ scope: "all", every: 1, reward: { commands: ["give {player} diamond 1"] } }],
  });
  const voter = newVoter();
  await vote(stack, serverId, voter, "2027-04-10T12:00:00Z");
  const heartId = await vote(stack, serverId, voter, "2027-04-11T12:01:00Z");
  await allDelivered(stack, serverId, 2 + 3);
  const before = await stack.prisma.delivery.count({ where: { serverId } });
  await stack.pipeline!.delivery.consumer.handle(await heartCountedMessageOf(stack, serverId, heartId));
  t.is(await stack.prisma.delivery.count({ where: { serverId } }), before, "the replay stores nothing");
  await allDelivered(stack, serverId, 2 + 3);
  t.deepEqual(
    bodiesOf(progress)
      .map((e) => e.event)
      .sort(),
    ["milestone.reached", "milestone.reached", "streak.extended"],
  );
});

test.serial("a voter's erasure puts the tombstone in their progression events' bodies: a redelivery never names them", async (t) => {
  const { stack } = t.context;
  const [plain, progress] = [await receiver(t.context), await receiver(t.context)];
  const { serverId } = await newServer(t.context, plain, progress, {
    milestones: [{ scope: "all", every: 1, reward: { commands: ["give {player} diamond 1"] } }],
  });
  const voter = newVoter();
  const username = `Erin_${randomBytes(3).toString("hex")}`;
  clockMs = Date.parse("2027-04-20T12:00:00Z");
  const res = await stack.clients.hearts.castHeart({
    serverId,
    voterIdentity: voter,
    username,
    ip: "198.51.100.250",
    userAgent: "Mozilla/5.0 ProgressionEventsTest/1.0",
  });
  t.true(res.counted);
  await allDelivered(stack, serverId, 2);
  const tombstone = newTombstone();
  await eraseVoterData(stack.prisma, { serverId, key: { kind: "username", value: username }, now: new Date(clockMs), tombstone });
  const events = await stack.prisma.delivery.findMany({ where: { serverId, eventType: "milestone.reached" } });
  t.is(events.length, 1);
  t.like(events[0], { username: tombstone, payload: { username: tombstone, event: "milestone.reached" } });
  t.false(JSON.stringify(events[0]!.payload).includes(username));
});

test.serial("the signed pull API lists a server's progression events when opted in, in the callback's fields, and claims them by event_id once", async (t) => {
  const { stack } = t.context;
  const admin = stack.clients.admin;
  const [plain, progress] = [await receiver(t.context), await receiver(t.context)];
  const { serverId } = await newServer(t.context, plain, progress, {
    milestones: [{ scope: "all", every: 1, reward: { commands: ["give {player} diamond 1"] } }],
  });
  await admin.setPullEnabled({ serverId, enabled: true });
  await admin.setPullEventTypes({ serverId, eventTypes: ["heart.counted", "streak.extended", "milestone.reached"] });
  const pullSecret = (await admin.revealPullSecret({ serverId })).secret;
  const voter = newVoter();
  const first = await vote(stack, serverId, voter, "2027-04-25T12:00:00Z");
  const second = await vote(stack, serverId, voter, "2027-04-26T12:01:00Z");
  const post = async (path: string, fields: Record<string, unknown>) => {
    const raw = JSON.stringify({ server_id: serverId, ...fields });
    const res = await fetch(`${stack.gatewayUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-service-signature": formatIngestSignature(pullSecret, Math.floor(clockMs / 1000), raw) },
      body: raw,
    });
    const body = (await res.json()) as Record<string, unknown>;
    return { status: res.status, body, openApiErrors: validateAgainstOpenApi(path, "post", res.status, body).errors };
  };
  const listed = await eventually(
    async () => {
      const page = await post("/api/pull/events", {});
      return (page.body.events as unknown[] | undefined)?.length === 3 ? page : undefined;
    },
    { timeoutMs: 30_000, message: "three progression events on pull" },
  );
  t.is(listed.status, 200);
  t.deepEqual(listed.openApiErrors, []);
  const events = listed.body.events as Array<Record<string, unknown>>;
  const extended = events.find((e) => e.event === "streak.extended")!;
  t.deepEqual(Object.keys(extended), ["event", "event_id", "server_id", "heart_id", "username", "cast_at", "reward_streak", "occurred_at"]);
  t.like(extended, { server_id: serverId, heart_id: second, username: "Steve", reward_streak: 2 });
  t.deepEqual(
    events
      .filter((e) => e.event === "milestone.reached")
      .map((e) => [e.heart_id, e.scope, e.count, e.rule_index, e.every])
      .sort((a, b) => Number(a[2]) - Number(b[2])),
    [
      [first, "all", 1, 0, 1],
      [second, "all", 2, 0, 1],
    ],
  );
  const claim = await post("/api/pull/events/claims", { event_ids: [extended.event_id] });
  t.deepEqual(claim.body, { results: [{ event_id: extended.event_id, status: "claimed" }] });
  const again = await post("/api/pull/events/claims", { event_ids: [extended.event_id] });
  t.deepEqual(again.body, { results: [{ event_id: extended.event_id, status: "already_claimed" }] });
});

test.serial("the test callback of a version-3 endpoint has the version-3 shape with the sample counts", async (t) => {
  const { stack } = t.context;
  const [plain, progress] = [await receiver(t.context), await receiver(t.context)];
  const { serverId } = await newServer(t.context, plain, progress, null);
  const sent = await stack.clients.delivery.sendTestCallback({ serverId });
  t.true(sent.report?.ok);
  const body = JSON.parse(sent.report!.requestBody) as Record<string, unknown>;
  t.like(body, { event: "heart.test", payload_version: 3, ...TEST_CALLBACK_REWARD_COUNTS });
  t.deepEqual(Object.keys(body).slice(-4), ["weight", "month_total", "total", "reward_streak"]);
});
