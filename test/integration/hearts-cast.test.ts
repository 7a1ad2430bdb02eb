import anyTest, { type TestFn } from "ava";
import { fromBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { EnvelopeSchema } from "../../gen/proto/events/v1/events_pb.js";
import { HeartVerdict } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { DEFAULT_FRAUD_RULES, type FraudRules } from "../../services/hearts/domain/fraud-rules.js";
import { HEARTS_TOPIC } from "../../services/shared/adapters/bus.js";
import { createTestClock, insertServer, startHarness, type Harness, type TestClock } from "../../scripts/harness/delivery-harness.js";

const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";
// The shipped defaults; tests of one rule start a harness of their own with that rule tightened.
const RULES: FraudRules = DEFAULT_FRAUD_RULES;

const test = anyTest as TestFn<{ h: Harness; clock: TestClock }>;

test.before(async (t) => {
  const clock = createTestClock("2026-03-10T12:00:00.000Z");
  t.context = { clock, h: await startHarness({ now: () => clock.now(), fraudRules: RULES }) };
});
test.after.always(async (t) => {
  await t.context.h?.close();
});

let ipCounter = 0;
/** A fresh documentation-range IP per call, so the IP rules of one test do not leak into another. */
function freshIp(): string {
  ipCounter++;
  return `198.${18 + (ipCounter >> 16)}.${(ipCounter >> 8) & 0xff}.${ipCounter & 0xff}`;
}

function cast(h: Harness, serverId: string, voter: string, extra: Partial<{ username: string; ip: string; userAgent: string }> = {}) {
  return h.hearts.castHeart({
    serverId,
    voterIdentity: voter,
    username: extra.username ?? "Steve",
    ip: extra.ip ?? freshIp(),
    userAgent: extra.userAgent ?? UA,
  });
}

async function outboxFor(h: Harness, serverId: string) {
  const rows = await h.db.prisma.outboxMessage.findMany({ where: { key: serverId }, orderBy: { id: "asc" } });
  return rows.map((r) => ({ row: r, envelope: fromBinary(EnvelopeSchema, r.payload) }));
}

test.serial("a counted heart, its ranking increment and its heart.counted outbox row commit together", async (t) => {
  const { h, clock } = t.context;
  clock.set("2026-03-10T12:00:00.000Z");
  const serverId = await insertServer(h.db.prisma);
  const res = await cast(h, serverId, "acct-1", { username: "Steve" });
  t.true(res.counted);
  t.is(res.verdict, HeartVerdict.COUNTED);
  t.is(res.period, "2026-03");
  t.is(res.streakDay, 1);
  t.is(res.nextEligibleAt, BigInt(Date.parse("2026-03-11T12:00:00.000Z") / 1000));
  t.is(res.heartId[14], "7", "the heart's id is time-ordered (uuid version 7): it appends at the primary key's right edge");

  const heart = await h.db.prisma.heart.findUniqueOrThrow({ where: { id: res.heartId } });
  t.like(heart, { counted: true, verdict: "counted", username: "Steve", voterIdentity: "acct-1", period: "2026-03", streakDay: 1 });
  const ranking = await h.db.prisma.serverRanking.findUniqueOrThrow({ where: { serverId_period: { serverId, period: "2026-03" } } });
  t.is(ranking.hearts, 1);

  const [outbox, ...more] = await outboxFor(h, serverId);
  t.is(more.length, 0);
  t.is(outbox?.row.topic, HEARTS_TOPIC);
  t.is(outbox?.row.type, "heart.counted");
  const envelope = outbox!.envelope;
  t.is(envelope.type, "heart.counted");
  t.is(envelope.serverId, serverId);
  t.is(envelope.payload.case, "heartCounted");
  if (envelope.payload.case !== "heartCounted") return;
  t.like(envelope.payload.value, { heartId: res.heartId, serverId, username: "Steve", voterIdentity: "acct-1", period: "2026-03", streakDay: 1 });
  t.is(timestampDate(envelope.payload.value.countedAt!).toISOString(), "2026-03-10T12:00:00.000Z");
});

test.serial("the username is kept exactly as typed (the reward recipient), not trimmed or re-cased", async (t) => {
  const { h } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const res = await cast(h, serverId, "acct-typed", { username: "xX_Ærø_Xx " });
  t.true(res.counted);
  const [outbox] = await outboxFor(h, serverId);
  t.is(outbox?.envelope.payload.case === "heartCounted" ? outbox.envelope.payload.value.username : undefined, "xX_Ærø_Xx ");
});

test.serial(
  "a second heart within 24 h is a cooldown: recorded uncounted, no outbox row, ranking unchanged, next_eligible_at = last counted + 24 h",
  async (t) => {
    const { h, clock } = t.context;
    clock.set("2026-03-10T08:00:00.000Z");
    const serverId = await insertServer(h.db.prisma);
    t.true((await cast(h, serverId, "acct-cool")).counted);
    clock.set("2026-03-11T07:59:59.999Z");
    const second = await cast(h, serverId, "acct-cool");
    t.false(second.counted);
    t.is(second.verdict, HeartVerdict.COOLDOWN);
    t.is(second.nextEligibleAt, BigInt(Date.parse("2026-03-11T08:00:00.000Z") / 1000));
    t.is(second.reason, "cooldown until 2026-03-11T08:00:00.000Z");
    const heart = await h.db.prisma.heart.findUniqueOrThrow({ where: { id: second.heartId } });
    t.like(heart, { counted: false, verdict: "cooldown" });
    t.is((await outboxFor(h, serverId)).length, 1);
    t.is((await h.db.prisma.serverRanking.findFirstOrThrow({ where: { serverId } })).hearts, 1);
  },
);

test.serial("the cooldown is per server: the same identity counts for another server", async (t) => {
  const { h, clock } = t.context;
  clock.set("2026-03-10T08:00:00.000Z");
  const a = await insertServer(h.db.prisma);
  const b = await insertServer(h.db.prisma);
  t.true((await cast(h, a, "acct-both")).counted);
  t.true((await cast(h, b, "acct-both")).counted);
});

test.serial("exactly 24 h after the last counted heart the identity counts again and the streak extends to day 2", async (t) => {
  const { h, clock } = t.context;
  clock.set("2026-03-10T08:00:00.000Z");
  const serverId = await insertServer(h.db.prisma);
  t.is((await cast(h, serverId, "acct-streak")).streakDay, 1);
  clock.set("2026-03-11T08:00:00.000Z");
  const next = await cast(h, serverId, "acct-streak");
  t.true(next.counted);
  t.is(next.streakDay, 2);
  clock.set("2026-03-12T09:00:00.000Z");
  t.is((await cast(h, serverId, "acct-streak")).streakDay, 3);
});

test.serial("a UTC day without a counted heart restarts the streak at 1", async (t) => {
  const { h, clock } = t.context;
  clock.set("2026-03-10T08:00:00.000Z");
  const serverId = await insertServer(h.db.prisma);
  await cast(h, serverId, "acct-gap");
  clock.set("2026-03-11T09:00:00.000Z");
  t.is((await cast(h, serverId, "acct-gap")).streakDay, 2);
  clock.set("2026-03-13T10:00:00.000Z");
  const after = await cast(h, serverId, "acct-gap");
  t.true(after.counted);
  t.is(after.streakDay, 1);
  const state = await h.db.prisma.voterState.findUniqueOrThrow({ where: { serverId_voterIdentity: { serverId, voterIdentity: "acct-gap" } } });
  t.is(state.streakDays, 1);
  t.is(state.lastDay.toISOString(), "2026-03-13T00:00:00.000Z");
});

test.serial("period is the UTC month of the counted heart (23:59:59 on Jan 31 UTC is January)", async (t) => {
  const { h, clock } = t.context;
  clock.set("2026-01-31T23:59:59.000Z");
  const serverId = await insertServer(h.db.prisma);
  t.is((await cast(h, serverId, "acct-period")).period, "2026-01");
  clock.set("2026-02-01T23:59:59.000Z");
  t.is((await cast(h, serverId, "acct-period")).period, "2026-02");
  const rankings = await h.db.prisma.serverRanking.findMany({ where: { serverId }, orderBy: { period: "asc" } });
  t.deepEqual(
    rankings.map((r) => [r.period, r.hearts]),
    [
      ["2026-01", 1],
      ["2026-02", 1],
    ],
  );
});

test.serial("20 concurrent casts for one identity: exactly one counts (the conditional upsert decides the race)", async (t) => {
  const { h, clock } = t.context;
  clock.set("2026-03-10T12:00:00.000Z");
  const serverId = await insertServer(h.db.prisma);
  const results = await Promise.all(Array.from({ length: 20 }, () => cast(h, serverId, "acct-race")));
  t.is(results.filter((r) => r.counted).length, 1);
  t.is(results.filter((r) => r.verdict === HeartVerdict.COOLDOWN).length, 19);
  t.is(await h.db.prisma.heart.count({ where: { serverId, counted: true } }), 1);
  t.is(await h.db.prisma.heart.count({ where: { serverId, verdict: "cooldown" } }), 19);
  t.is((await outboxFor(h, serverId)).length, 1);
  t.is((await h.db.prisma.serverRanking.findFirstOrThrow({ where: { serverId } })).hearts, 1);
});

test.serial("fraud: more voter identities than the max on one IP is blocked, recorded with score and reasons, never counted", async (t) => {
  const { h, clock } = t.context;
  clock.set("2026-03-10T12:00:00.000Z");
  const serverId = await insertServer(h.db.prisma);
  const ip = freshIp();
  for (const voter of ["farm-1", "farm-2", "farm-3"]) t.true((await cast(h, serverId, voter, { ip })).counted, voter);
  const blocked = await cast(h, serverId, "farm-4", { ip });
  t.false(blocked.counted);
  t.is(blocked.verdict, HeartVerdict.FRAUD);
  t.is(blocked.fraudScore, 100);
  t.deepEqual(blocked.fraudReasons, ["ip_identities: 4 voter identities from this IP in 1440 min (max 3)"]);
  const heart = await h.db.prisma.heart.findUniqueOrThrow({ where: { id: blocked.heartId } });
  t.like(heart, { counted: false, verdict: "fraud", fraudScore: 100 });
  t.deepEqual(heart.fraudReasons, blocked.fraudReasons);
  t.is((await outboxFor(h, serverId)).length, 3);
  // An identity that already voted from this IP is not a new identity.
  clock.set("2026-03-11T12:00:00.000Z");
  t.true((await cast(h, serverId, "farm-1", { ip })).counted);
});

test.serial("fraud: identities on one /24 are counted across its addresses", async (t) => {
  const rules: FraudRules = { ...DEFAULT_FRAUD_RULES, subnetIdentities: { windowMinutes: 60, max: 2, score: 100 } };
  const clock = createTestClock("2026-03-10T12:00:00.000Z");
  const own = await startHarness({ now: () => clock.now(), fraudRules: rules });
  try {
    const serverId = await insertServer(own.db.prisma);
    t.true((await cast(own, serverId, "sub-1", { ip: "203.0.113.1" })).counted);
    t.true((await cast(own, serverId, "sub-2", { ip: "203.0.113.2" })).counted);
    const third = await cast(own, serverId, "sub-3", { ip: "203.0.113.3" });
    t.is(third.verdict, HeartVerdict.FRAUD);
    t.regex(third.fraudReasons[0] ?? "", /^subnet_identities: 3 voter identities/);
    t.true((await cast(own, serverId, "sub-4", { ip: "203.0.114.3" })).counted, "another /24");
    const heart = await own.db.prisma.heart.findUniqueOrThrow({ where: { id: third.heartId } });
    t.is(heart.subnet, "203.0.113.0/24");
  } finally {
    await own.close();
  }
});

test.serial("fraud: velocity counts every heart from the IP in the window, any verdict, any server", async (t) => {
  const { h } = t.context;
  const rules: FraudRules = { ...DEFAULT_FRAUD_RULES, ipVelocity: { windowSeconds: 60, max: 2, score: 100 } };
  const clock = createTestClock("2026-03-10T12:00:00.000Z");
  const own = await startHarness({ now: () => clock.now(), fraudRules: rules });
  try {
    const a = await insertServer(own.db.prisma);
    const b = await insertServer(own.db.prisma);
    const ip = "203.0.113.77";
    t.true((await cast(own, a, "v-1", { ip })).counted);
    t.is((await cast(own, a, "v-1", { ip })).verdict, HeartVerdict.COOLDOWN);
    const third = await cast(own, b, "v-2", { ip });
    t.is(third.verdict, HeartVerdict.FRAUD);
    t.deepEqual(third.fraudReasons, ["ip_velocity: 3 hearts from this IP in 60 s (max 2)"]);
    clock.advanceMs(61_000);
    t.true((await cast(own, b, "v-2", { ip })).counted, "the window has passed");
  } finally {
    await own.close();
  }
  void h;
});

test.serial("fraud: a malformed username is blocked, and a blocked heart starts no cooldown", async (t) => {
  const { h, clock } = t.context;
  clock.set("2026-03-10T12:00:00.000Z");
  const serverId = await insertServer(h.db.prisma);
  const blocked = await cast(h, serverId, "acct-name", { username: "   " });
  t.is(blocked.verdict, HeartVerdict.FRAUD);
  t.deepEqual(blocked.fraudReasons, ["username: empty after trimming"]);
  const fixed = await cast(h, serverId, "acct-name", { username: "Alex" });
  t.true(fixed.counted);
});

test.serial("fraud: a missing user agent alone does not block; scores are recorded on counted hearts too", async (t) => {
  const { h } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const res = await cast(h, serverId, "acct-noua", { userAgent: "" });
  t.true(res.counted);
  t.is(res.fraudScore, DEFAULT_FRAUD_RULES.userAgent.missingScore);
  t.deepEqual(res.fraudReasons, ["user_agent: missing"]);
  const heart = await h.db.prisma.heart.findUniqueOrThrow({ where: { id: res.heartId } });
  t.is(heart.fraudScore, DEFAULT_FRAUD_RULES.userAgent.missingScore);
});

test.serial("CastHeart for an unknown server -> NotFound 'unknown server'", async (t) => {
  const { h } = t.context;
  for (const serverId of ["5b1f0c9e-2d3a-4b5c-8d7e-9f0a1b2c3d4e", "not-a-uuid"]) {
    const error = await t.throwsAsync(cast(h, serverId, "acct-x"), { instanceOf: ConnectError });
    t.is(error?.code, Code.NotFound);
    t.is(error?.rawMessage, "unknown server");
  }
});

test.serial("CastHeart validation: username, voter_identity and server_id required; ip must be an IP -> InvalidArgument", async (t) => {
  const { h } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const cases: [Promise<unknown>, string][] = [
    [h.hearts.castHeart({ serverId, voterIdentity: "v", username: "", ip: "203.0.113.5", userAgent: UA }), "username is required"],
    [h.hearts.castHeart({ serverId, voterIdentity: "  ", username: "Steve", ip: "203.0.113.5", userAgent: UA }), "voter_identity is required"],
    [h.hearts.castHeart({ serverId: "", voterIdentity: "v", username: "Steve", ip: "203.0.113.5", userAgent: UA }), "server_id is required"],
    [h.hearts.castHeart({ serverId, voterIdentity: "v", username: "Steve", ip: "not-an-ip", userAgent: UA }), "ip must be an IPv4 or IPv6 address"],
  ];
  for (const [call, message] of cases) {
    const error = await t.throwsAsync(call, { instanceOf: ConnectError });
    t.is(error?.code, Code.InvalidArgument);
    t.is(error?.rawMessage, message);
  }
  t.is(await h.db.prisma.heart.count({ where: { serverId } }), 0);
});

test.serial("GetRanking: servers by counted hearts desc, ties share a rank, limit applies, default period is the current UTC month", async (t) => {
  const { clock } = t.context;
  const own = await startHarness({ now: () => clock.now(), fraudRules: RULES });
  try {
    clock.set("2026-04-02T10:00:00.000Z");
    const [a, b, c, d] = await Promise.all([1, 2, 3, 4].map(() => insertServer(own.db.prisma)));
    const votes: [string, number][] = [
      [a!, 3],
      [b!, 5],
      [c!, 3],
      [d!, 1],
    ];
    for (const [serverId, n] of votes) for (let i = 0; i < n; i++) await cast(own, serverId, `rank-${serverId}-${i}`);
    // A heart in another month does not count toward April.
    clock.set("2026-03-31T23:00:00.000Z");
    await cast(own, d!, "rank-march");
    clock.set("2026-04-20T10:00:00.000Z");

    const ranking = await own.hearts.getRanking({});
    t.is(ranking.period, "2026-04");
    t.deepEqual(
      ranking.entries.map((e) => [e.serverId, Number(e.hearts), e.rank]),
      [
        [b, 5, 1],
        ...[
          [a, 3, 2],
          [c, 3, 2],
        ].sort((x, y) => String(x[0]).localeCompare(String(y[0]))),
        [d, 1, 4],
      ],
    );
    const top2 = await own.hearts.getRanking({ period: "2026-04", limit: 2 });
    t.is(top2.entries.length, 2);
    const march = await own.hearts.getRanking({ period: "2026-03" });
    t.deepEqual(
      march.entries.map((e) => [e.serverId, Number(e.hearts), e.rank]),
      [[d, 1, 1]],
    );
    const error = await t.throwsAsync(own.hearts.getRanking({ period: "April" }), { instanceOf: ConnectError });
    t.is(error?.code, Code.InvalidArgument);
  } finally {
    await own.close();
  }
});
