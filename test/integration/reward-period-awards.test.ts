/**
 * Period awards are paid once when the period closes (issue 31), on real PostgreSQL and through the real pipeline that
 * counts the votes (CastHeart on the stack's clock, outbox, relay, Kafka, the delivery consumer's reward step). The
 * closer's pass runs with the time the test gives it (the clock): a jump forward over two months closes each month once,
 * with its top voters' awards and one period.closed per server and period; a rerun, a second closer at the same time
 * and a clock that jumped back close and pay nothing again; voters with as many votes share a place; weeks close too.
 * The period.closed events reach the endpoints subscribed to them, signed, and the pull list when it offers them.
 */
import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { fromBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { EnvelopeSchema, type PeriodClosed } from "../../gen/proto/events/v1/events_pb.js";
import { RewardRulesService } from "../../gen/proto/rewards/v1/rewards_pb.js";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { DASHBOARD_SESSION_HEADER } from "../../services/access/auth-interceptor.js";
import { createServiceTransport, withHeaders } from "../../services/shared/rpc/service-transport.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { closeDuePeriods, createPeriodCloserLoop, readPeriodCloserSettings } from "../../services/rewards/close-periods.js";
import { createEnvReader } from "../../services/shared/runtime/config.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { eventually } from "../helpers/eventually.js";
import { headerOf, startReceiver } from "../../scripts/harness/receiver.js";
import { expectedCallbackMac, hexEquals, parseCallbackSignature } from "../../scripts/harness/delivery-harness.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { validateAgainstOpenApi, validateRequestBody } from "./openapi-validate.js";

interface Context {
  stack: TestStack;
}
const test = anyTest as TestFn<Context>;

/** The stack's clock: each cast sets it to the vote's time. */
let clockMs = Date.parse("2027-01-01T12:00:00Z");
let voterN = 0;
const log = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");
const SETTINGS = { settleSeconds: 300, batchPeriods: 3, passMaxPeriods: 1_000 };

test.before(async (t) => {
  const stack = await startStack({
    now: () => new Date(clockMs),
    pipeline: { name: "period-awards", delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100 } },
  });
  t.context = { stack };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

/** One closer pass at `at` (the closer's clock). */
const closeAt = (stack: TestStack, at: string) => closeDuePeriods({ prisma: stack.prisma, log }, SETTINGS, new Date(at));

async function serverWithRules(stack: TestStack, rules: unknown): Promise<string> {
  const { server } = await stack.clients.admin.createServer({ name: `periods-${randomBytes(3).toString("hex")}` });
  await stack.clients.rewards.putRewardRules({ serverId: server!.id, rulesJson: JSON.stringify(rules), baseVersion: 0 });
  return server!.id;
}

interface Voter {
  identity: string;
  username: string;
  ip: string;
}

function newVoter(username: string): Voter {
  voterN += 1;
  return { identity: `period-voter-${voterN}-${randomBytes(3).toString("hex")}`, username, ip: `198.51.100.${voterN}` };
}

/** Casts a counted vote of `voter` at `at` (the stack's clock). */
async function vote(stack: TestStack, serverId: string, voter: Voter, at: string): Promise<void> {
  clockMs = Date.parse(at);
  const res = await stack.clients.hearts.castHeart({
    serverId,
    voterIdentity: voter.identity,
    username: voter.username,
    ip: voter.ip,
    userAgent: "Mozilla/5.0 (X11; Linux x86_64) PeriodAwardsTest/1.0",
  });
  if (!res.counted) throw new Error(`the vote at ${at} did not count`);
}

/** Casts one vote of `voter` on each of `days` ("2027-01-03", ...), at `hour` UTC. */
async function voteOn(stack: TestStack, serverId: string, voter: Voter, days: readonly string[], hour = "12:00"): Promise<void> {
  for (const d of days) await vote(stack, serverId, voter, `${d}T${hour}:00Z`);
}

/** Waits until the reward step counted `total` votes of each voter (it runs behind Kafka). */
async function counted(stack: TestStack, serverId: string, totals: ReadonlyArray<[Voter, number]>): Promise<void> {
  await eventually(
    async () => {
      for (const [voter, total] of totals) {
        const s = await stack.prisma.voterRewardState.findUnique({ where: { serverId_voterIdentity: { serverId, voterIdentity: voter.identity } } });
        if (s === null || s.total < total) return undefined;
      }
      return true;
    },
    { timeoutMs: 30_000, message: "the reward step counting the votes" },
  );
}

const awardsOf = async (stack: TestStack, serverId: string) =>
  (await stack.prisma.rewardQueueEntry.findMany({ where: { serverId, reason: "award" }, orderBy: { entryKey: "asc" } })).map((e) => [
    e.entryKey,
    e.username,
    e.commands,
  ]);

/** The period.closed events written for the server, by period. */
async function closedEventsOf(stack: TestStack, serverId: string): Promise<PeriodClosed[]> {
  const rows = await stack.prisma.outboxMessage.findMany({ where: { key: serverId, type: "period.closed" }, orderBy: { id: "asc" } });
  return rows.map((r) => {
    const envelope = fromBinary(EnvelopeSchema, r.payload);
    if (envelope.payload.case !== "periodClosed") throw new Error("period.closed without its payload");
    return envelope.payload.value;
  });
}

const standingsOf = (e: PeriodClosed) => e.standings.map((s) => [s.place, s.username, s.votes]);

/** What the voters' ranking RPC (GetPeriodStandings) reports for the server in `period`, top 10. */
async function rankingOf(stack: TestStack, serverId: string, period: string) {
  const { standings } = await stack.clients.rewards.getPeriodStandings({ serverId, period, limit: 10 });
  return standings.map((e) => [e.place, e.username, e.votes]);
}

test.serial(
  "a clock jump forward over two months closes each month once: its top voters' awards queued and one period.closed with its standings",
  async (t) => {
    const { stack } = t.context;
    const serverId = await serverWithRules(stack, {
      awards: {
        month: [
          { place: 1, reward: { commands: ["lp user {player} parent add top-voter", "say {player} won {month_total} votes, place {place}"] } },
          { place: 2, reward: { commands: ["give {player} gold_ingot {place}"] } },
        ],
      },
    });
    const [ann, bob, cyd] = [newVoter("Ann"), newVoter("Bob"), newVoter("Cyd")];
    // January: Ann 3, Bob 2, Cyd 1. February: Cyd 3, Ann 1.
    await voteOn(stack, serverId, ann, ["2027-01-05", "2027-01-06", "2027-01-07"]);
    await voteOn(stack, serverId, bob, ["2027-01-10", "2027-01-11"]);
    await voteOn(stack, serverId, cyd, ["2027-01-20"]);
    await voteOn(stack, serverId, cyd, ["2027-02-02", "2027-02-03", "2027-02-04"]);
    await voteOn(stack, serverId, ann, ["2027-02-10"]);
    await counted(stack, serverId, [
      [ann, 4],
      [bob, 2],
      [cyd, 4],
    ]);

    // Before the settle time after January's end nothing of January closes.
    await closeAt(stack, "2027-02-01T00:04:00Z");
    t.deepEqual(await awardsOf(stack, serverId), []);

    // The clock jumps to April: January and February (and every week voted in) are due, each closed once.
    const first = await closeAt(stack, "2027-04-15T00:00:00Z");
    t.true(first.closed >= 2);
    t.deepEqual(await awardsOf(stack, serverId), [
      [`${serverId}:2027-01:award:1:1`, "Ann", ["lp user Ann parent add top-voter", "say Ann won 3 votes, place 1"]],
      [`${serverId}:2027-01:award:2:2`, "Bob", ["give Bob gold_ingot 2"]],
      [`${serverId}:2027-02:award:1:1`, "Cyd", ["lp user Cyd parent add top-voter", "say Cyd won 3 votes, place 1"]],
      [`${serverId}:2027-02:award:2:2`, "Ann", ["give Ann gold_ingot 2"]],
    ]);
    const months = (await closedEventsOf(stack, serverId)).filter((e) => e.kind === "month");
    t.deepEqual(
      months.map((e) => [e.period, timestampDate(e.startsAt!).toISOString(), timestampDate(e.endsAt!).toISOString(), standingsOf(e)]),
      [
        [
          "2027-01",
          "2027-01-01T00:00:00.000Z",
          "2027-02-01T00:00:00.000Z",
          [
            [1, "Ann", 3],
            [2, "Bob", 2],
            [3, "Cyd", 1],
          ],
        ],
        [
          "2027-02",
          "2027-02-01T00:00:00.000Z",
          "2027-03-01T00:00:00.000Z",
          [
            [1, "Cyd", 3],
            [2, "Ann", 1],
          ],
        ],
      ],
    );
    for (const e of months) t.deepEqual(standingsOf(e), await rankingOf(stack, serverId, e.period), `${e.period}'s standings equal the ranking RPC's`);
    const weeks = (await closedEventsOf(stack, serverId)).filter((e) => e.kind === "week").map((e) => e.period);
    t.deepEqual(weeks, [...new Set(weeks)], "one period.closed per week too");
    t.deepEqual(weeks, ["2027-W01", "2027-W02", "2027-W03", "2027-W05", "2027-W06"]);

    // A rerun, and two closers at once, later still: nothing closes or pays again.
    const again = await Promise.all([closeAt(stack, "2027-05-01T00:00:00Z"), closeAt(stack, "2027-05-01T00:00:00Z"), closeAt(stack, "2027-06-01T00:00:00Z")]);
    t.deepEqual(
      again.map((r) => r.closed + r.awarded),
      [0, 0, 0],
    );
    t.is((await awardsOf(stack, serverId)).length, 4);
    t.is((await closedEventsOf(stack, serverId)).length, 7);
  },
);

test.serial("a clock jumping back into a closed month closes and pays nothing again, even with new votes in it", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWithRules(stack, { awards: { month: [{ place: 1, reward: { commands: ["give {player} diamond 1"] } }] } });
  const [dan, eve] = [newVoter("Dan"), newVoter("Eve")];
  await voteOn(stack, serverId, dan, ["2027-03-03"]);
  await counted(stack, serverId, [[dan, 1]]);
  await closeAt(stack, "2027-04-02T00:00:00Z");
  t.deepEqual(await awardsOf(stack, serverId), [[`${serverId}:2027-03:award:1:1`, "Dan", ["give Dan diamond 1"]]]);
  const events = (await closedEventsOf(stack, serverId)).length;

  // The clocks go back into March: Eve votes twice there (she would now lead March), and the closer runs inside March,
  // then at March's end again.
  await voteOn(stack, serverId, eve, ["2027-03-20", "2027-03-21"]);
  await counted(stack, serverId, [[eve, 2]]);
  const back = [await closeAt(stack, "2027-03-25T00:00:00Z"), await closeAt(stack, "2027-04-02T00:00:00Z")];
  t.deepEqual(
    back.map((r) => r.awarded),
    [0, 0],
  );
  t.deepEqual(await awardsOf(stack, serverId), [[`${serverId}:2027-03:award:1:1`, "Dan", ["give Dan diamond 1"]]]);
  const march = (await closedEventsOf(stack, serverId)).filter((e) => e.period === "2027-03");
  t.deepEqual(march.map(standingsOf), [[[1, "Dan", 1]]], "March's period.closed stays the only one, with the standings it closed with");
  t.true((await closedEventsOf(stack, serverId)).length >= events);
});

test.serial(
  "voters with as many votes share a place (1, 1, 3), the one who reached the count first listed first; the place after a tie pays nobody",
  async (t) => {
    const { stack } = t.context;
    const serverId = await serverWithRules(stack, {
      awards: {
        month: [1, 2, 3].map((place) => ({ place, reward: { commands: [`give {player} prize_${place}`] } })),
      },
    });
    const [fay, gus, hal, ida] = [newVoter("Fay"), newVoter("Gus"), newVoter("Hal"), newVoter("Ida")];
    // Gus reaches 2 votes on the 6th, Fay on the 8th: both 2, Gus first. Hal 1 (place 3), Ida 1 (place 3, later).
    await voteOn(stack, serverId, gus, ["2027-05-05", "2027-05-06"]);
    await voteOn(stack, serverId, fay, ["2027-05-07", "2027-05-08"]);
    await voteOn(stack, serverId, hal, ["2027-05-09"]);
    await voteOn(stack, serverId, ida, ["2027-05-10"]);
    await counted(stack, serverId, [
      [fay, 2],
      [gus, 2],
      [hal, 1],
      [ida, 1],
    ]);
    await closeAt(stack, "2027-06-01T06:00:00Z");
    t.deepEqual(await awardsOf(stack, serverId), [
      [`${serverId}:2027-05:award:1:1`, "Gus", ["give Gus prize_1"]],
      [`${serverId}:2027-05:award:1:2`, "Fay", ["give Fay prize_1"]],
      [`${serverId}:2027-05:award:3:3`, "Hal", ["give Hal prize_3"]],
      [`${serverId}:2027-05:award:3:4`, "Ida", ["give Ida prize_3"]],
    ]);
    const may = (await closedEventsOf(stack, serverId)).find((e) => e.period === "2027-05")!;
    t.deepEqual(standingsOf(may), [
      [1, "Gus", 2],
      [1, "Fay", 2],
      [3, "Hal", 1],
      [3, "Ida", 1],
    ]);
    t.deepEqual(standingsOf(may), await rankingOf(stack, serverId, "2027-05"), "ties placed as the ranking RPC places them");
  },
);

test.serial("weekly awards: an ISO week (Monday to Sunday, UTC) closes after its Sunday and pays its places once, {week_total} its votes", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWithRules(stack, { awards: { week: [{ place: 1, reward: { commands: ["give {player} emerald {week_total}"] } }] } });
  const [jo, kim] = [newVoter("Jo"), newVoter("Kim")];
  // ISO week 2027-W27 runs Monday 5 July to Sunday 11 July.
  await voteOn(stack, serverId, jo, ["2027-07-05", "2027-07-06", "2027-07-11"]);
  await voteOn(stack, serverId, kim, ["2027-07-07"]);
  // Kim's Monday vote is the next week's.
  await voteOn(stack, serverId, kim, ["2027-07-12"], "00:30");
  await counted(stack, serverId, [
    [jo, 3],
    [kim, 2],
  ]);
  await closeAt(stack, "2027-07-11T23:59:00Z");
  t.deepEqual(await awardsOf(stack, serverId), [], "the week has not ended");
  await closeAt(stack, "2027-07-12T00:04:00Z");
  t.deepEqual(await awardsOf(stack, serverId), [], "the week ended less than the settle time ago");
  await closeAt(stack, "2027-07-12T01:00:00Z");
  await closeAt(stack, "2027-07-13T01:00:00Z");
  t.deepEqual(await awardsOf(stack, serverId), [[`${serverId}:2027-W27:award:1:1`, "Jo", ["give Jo emerald 3"]]]);
  const w27 = (await closedEventsOf(stack, serverId)).filter((e) => e.period === "2027-W27");
  t.deepEqual(w27.map(standingsOf), [
    [
      [1, "Jo", 3],
      [2, "Kim", 1],
    ],
  ]);
  t.deepEqual(w27.map(standingsOf), [await rankingOf(stack, serverId, "2027-W27")], "equal to the ranking RPC's week");
});

test.serial(
  "period.closed reaches an endpoint subscribed to it, signed, once per period, and the pull list offering it; the default endpoint does not get it",
  async (t) => {
    const { stack } = t.context;
    const { admin } = stack.clients;
    const serverId = await serverWithRules(stack, { awards: { month: [{ place: 1, reward: { commands: ["give {player} diamond 1"] } }] } });
    const [hearts, periods] = [await startReceiver(), await startReceiver()];
    t.teardown(async () => {
      await hearts.close();
      await periods.close();
    });
    await admin.setCallbackSettings({ serverId, callbackUrl: hearts.url });
    const { secret } = await admin.createEndpoint({ serverId, url: periods.url, eventTypes: ["period.closed"] });
    await admin.setPullEnabled({ serverId, enabled: true });
    await admin.setPullEventTypes({ serverId, eventTypes: ["heart.counted", "period.closed"] });
    const pullSecret = (await admin.revealPullSecret({ serverId })).secret;
    const [lea, max] = [newVoter("Lea"), newVoter("Max")];
    // ISO week 2027-W35: Monday 30 August to Sunday 5 September; August ends inside it.
    await voteOn(stack, serverId, lea, ["2027-08-30", "2027-08-31"]);
    await voteOn(stack, serverId, max, ["2027-08-31"], "13:00");
    await counted(stack, serverId, [
      [lea, 2],
      [max, 1],
    ]);
    clockMs = Date.parse("2027-09-01T01:00:00Z");
    await closeAt(stack, "2027-09-01T01:00:00Z");
    await closeAt(stack, "2027-09-01T01:00:00Z");

    const [got] = await eventually(() => (periods.requests.length >= 1 ? periods.requests : undefined), { timeoutMs: 30_000 });
    const sig = parseCallbackSignature(headerOf(got!, "x-service-signature"));
    if (!sig) return t.fail("malformed X-Service-Signature");
    t.true(hexEquals(sig.v1[0] ?? "", expectedCallbackMac(secret, sig.t, got!.body)), "signed with the endpoint's own secret");
    t.is(headerOf(got!, "x-service-event"), "period.closed");
    const stored = await stack.prisma.delivery.findFirstOrThrow({ where: { serverId, eventType: "period.closed", transport: "callback" } });
    t.deepEqual(JSON.parse(got!.text), {
      event: "period.closed",
      event_id: stored.eventId,
      server_id: serverId,
      kind: "month",
      period: "2027-08",
      starts_at: "2027-08-01T00:00:00.000Z",
      ends_at: "2027-09-01T00:00:00.000Z",
      standings: [
        { place: 1, username: "Lea", votes: 2 },
        { place: 2, username: "Max", votes: 1 },
      ],
      timestamp: sig.t,
    });
    t.deepEqual(validateRequestBody("periodClosed", "post", JSON.parse(got!.text)).errors, []);

    // The week is still open (it ends on 6 September): only August closed. One delivery per endpoint and transport.
    t.is(await stack.prisma.delivery.count({ where: { serverId, eventType: "period.closed" } }), 2);
    t.false(
      hearts.requests.some((q) => headerOf(q, "x-service-event") === "period.closed"),
      "the default endpoint is not subscribed",
    );

    const raw = JSON.stringify({ server_id: serverId });
    const res = await fetch(`${stack.gatewayUrl}/api/pull/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-service-signature": formatIngestSignature(pullSecret, Math.floor(clockMs / 1000), raw) },
      body: raw,
    });
    const listed = (await res.json()) as { events: Array<Record<string, unknown>> };
    t.is(res.status, 200);
    t.deepEqual(validateAgainstOpenApi("/api/pull/events", "post", 200, listed).errors, []);
    const pulled = await stack.prisma.delivery.findFirstOrThrow({ where: { serverId, eventType: "period.closed", transport: "pull" } });
    t.deepEqual(listed.events, [
      {
        event: "period.closed",
        event_id: pulled.eventId,
        server_id: serverId,
        kind: "month",
        period: "2027-08",
        starts_at: "2027-08-01T00:00:00.000Z",
        ends_at: "2027-09-01T00:00:00.000Z",
        standings: [
          { place: 1, username: "Lea", votes: 2 },
          { place: 2, username: "Max", votes: 1 },
        ],
        occurred_at: "2027-09-01T01:00:00.000Z",
      },
    ]);
  },
);

test.serial(
  "the voters' ranking RPC (GetPeriodStandings): an owner sees only their own server's, a read token any, an ingest token none; a bad period is refused",
  async (t) => {
    const { stack } = t.context;
    const { access } = stack.clients;
    const [mine, theirs] = [await serverWithRules(stack, {}), await serverWithRules(stack, {})];
    await access.createOwner({ ownerId: "periods-owner", displayName: "Owner" });
    await access.assignServer({ serverId: mine, ownerId: "periods-owner" });
    const { url } = await access.createDashboardLoginLink({ ownerId: "periods-owner" });
    const { sessionToken } = await access.redeemDashboardLoginLink({ loginToken: new URL(url).searchParams.get("token") ?? "" });
    const owner = createClient(
      RewardRulesService,
      withHeaders(createServiceTransport(stack.rpcUrl, TEST_SERVICE_TOKEN), { [DASHBOARD_SESSION_HEADER]: sessionToken }),
    );
    const refusal = (call: Promise<unknown>) =>
      call.then(
        () => "ok",
        (e: unknown) => [Code[ConnectError.from(e).code], ConnectError.from(e).rawMessage].join(": "),
      );
    const { token } = await access.createServiceToken({ name: "standings-reader", scopes: ["read"] });
    const reader = createClient(RewardRulesService, createServiceTransport(stack.rpcUrl, token));
    const { token: ingestToken } = await access.createServiceToken({ name: "standings-ingest", scopes: ["ingest"] });
    const ingest = createClient(RewardRulesService, createServiceTransport(stack.rpcUrl, ingestToken));
    t.is(await refusal(owner.getPeriodStandings({ serverId: mine, period: "2027-05" })), "ok");
    t.is(
      await refusal(owner.getPeriodStandings({ serverId: theirs, period: "2027-05" })),
      "NotFound: unknown server",
      "another owner's server answers like a missing one",
    );
    t.is(await refusal(reader.getPeriodStandings({ serverId: theirs, period: "2027-W20" })), "ok");
    t.is((await refusal(ingest.getPeriodStandings({ serverId: mine }))).split(":")[0], "PermissionDenied");
    t.is(await refusal(reader.getPeriodStandings({ serverId: mine, period: "2027-13" })), "InvalidArgument: period must be YYYY-MM or YYYY-Www");
  },
);

test.serial("the closer loop runs a pass at start on its clock and closes what is due; with REWARD_PERIOD_CLOSE_ENABLED=false it closes nothing", async (t) => {
  const { stack } = t.context;
  const serverId = await serverWithRules(stack, {});
  const open = async (period: string) => {
    await stack.prisma.rewardPeriod.create({ data: { serverId, kind: "month", period, endsAt: new Date("2020-02-01T00:00:00Z") } });
  };
  const closedAt = async (period: string) =>
    (await stack.prisma.rewardPeriod.findUniqueOrThrow({ where: { serverId_kind_period: { serverId, kind: "month", period } } })).closedAt;

  await open("2020-01");
  const off = createPeriodCloserLoop({
    prisma: stack.prisma,
    settings: readPeriodCloserSettings(createEnvReader({ REWARD_PERIOD_CLOSE_ENABLED: "false" })),
    log,
    now: () => new Date("2020-03-01T00:00:00Z"),
  });
  off.start();
  await off.stop();
  t.is(await closedAt("2020-01"), null, "a disabled closer closes nothing");

  const on = createPeriodCloserLoop({
    prisma: stack.prisma,
    settings: readPeriodCloserSettings(createEnvReader({})),
    log,
    now: () => new Date("2020-03-01T00:00:00Z"),
  });
  on.start();
  const at = await eventually(async () => (await closedAt("2020-01")) ?? undefined, {
    timeoutMs: 10_000,
    message: "the loop's first pass closing January 2020",
  });
  await on.stop();
  t.deepEqual(at, new Date("2020-03-01T00:00:00Z"), "closed at the loop's clock");
});
