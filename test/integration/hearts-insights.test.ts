/**
 * The dashboard's hearts list and charts, over real RPCs on a real database:
 * HeartService.ListHearts (search, verdict and date filters, keyset pages, the
 * delivery each counted heart produced), HeartService.GetHeartStats (per UTC day and
 * month by verdict) and DeliveryStatsService.GetDeliveryStats (per day by outcome,
 * latency percentiles).
 */
import anyTest, { type TestFn } from "ava";
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { DeliveryTransport } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { DeliveryStatsService } from "../../gen/proto/delivery/v1/delivery_stats_pb.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { HeartVerdict, type HeartSummary } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { createReferralServiceServer } from "../../services/referral-service/server.js";
import { createMetrics } from "../../services/shared/runtime/metrics.js";
import { createTestClock, insertServer, startHarness, type Harness, type TestClock } from "../../scripts/harness/delivery-harness.js";

const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";

interface Context {
  h: Harness;
  clock: TestClock;
  stats: Client<typeof DeliveryStatsService>;
  closeStats: () => Promise<void>;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const clock = createTestClock("2026-03-10T12:00:00.000Z");
  const h = await startHarness({ now: () => clock.now() });
  // The harness has no DeliveryStatsService client; the same production wiring serves it.
  const server = createReferralServiceServer({ ...h.deps, metrics: createMetrics("test") });
  const port = await server.listen(0);
  const stats = createClient(DeliveryStatsService, createServiceTransport(`http://127.0.0.1:${port}`, TEST_SERVICE_TOKEN));
  t.context = { h, clock, stats, closeStats: () => server.close() };
});
test.after.always(async (t) => {
  await t.context.closeStats?.();
  await t.context.h?.close();
});

let ipCounter = 0;
function freshIp(): string {
  ipCounter++;
  return `198.51.${(ipCounter >> 8) & 0xff}.${ipCounter & 0xff}`;
}

function cast(h: Harness, serverId: string, voter: string, username = "Steve") {
  return h.hearts.castHeart({ serverId, voterIdentity: voter, username, ip: freshIp(), userAgent: UA });
}

/** Every heart of a listing, following next_page_token to the end. */
async function listAll(h: Harness, req: Parameters<Harness["hearts"]["listHearts"]>[0]): Promise<{ hearts: HeartSummary[]; pages: number }> {
  const hearts: HeartSummary[] = [];
  let pageToken = "";
  let pages = 0;
  do {
    const page = await h.hearts.listHearts({ ...req, pageToken });
    hearts.push(...page.hearts);
    pageToken = page.nextPageToken;
    pages++;
  } while (pageToken !== "" && pages < 100);
  return { hearts, pages };
}

async function rpcCode(promise: Promise<unknown>): Promise<{ code: Code; message: string }> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ConnectError) return { code: error.code, message: error.rawMessage };
    throw error;
  }
  throw new Error("the call succeeded");
}

test.serial(
  "ListHearts: newest first with verdict, fraud score and reasons, streak and the deliveries a counted heart produced (one per transport)",
  async (t) => {
    const { h, clock } = t.context;
    const serverId = await insertServer(h.db.prisma);
    clock.set("2026-03-08T09:00:00.000Z");
    const first = await cast(h, serverId, "acct-alex", "Alex");
    clock.set("2026-03-09T09:30:00.000Z");
    const second = await cast(h, serverId, "acct-alex", "Alex");
    clock.set("2026-03-09T10:00:00.000Z");
    const cooldown = await cast(h, serverId, "acct-alex", "Alex");
    clock.set("2026-03-09T10:05:00.000Z");
    const fraud = await cast(h, serverId, "acct-bot", "bad<name>");
    t.is(cooldown.verdict, HeartVerdict.COOLDOWN);
    t.is(fraud.verdict, HeartVerdict.FRAUD);
    // The consumer turns heart.counted into a delivery row; here the row is written as it would be.
    const delivery = await h.db.prisma.delivery.create({
      data: {
        serverId,
        heartId: second.heartId,
        dedupKey: second.heartId,
        eventType: "heart.counted",
        username: "Alex",
        voterIdentity: "acct-alex",
        period: "2026-03",
        streakDay: 2,
        countedAt: new Date("2026-03-09T09:30:00.000Z"),
        status: "delivered",
        attempts: 1,
        lastStatusCode: 200,
        deliveredAt: new Date("2026-03-09T09:30:01.000Z"),
      },
    });
    // The same heart also went out as a Votifier vote (a second transport), which failed.
    const votifier = await h.db.prisma.delivery.create({
      data: {
        serverId,
        heartId: second.heartId,
        dedupKey: second.heartId,
        transport: "votifier",
        eventType: "heart.counted",
        username: "Alex",
        voterIdentity: "acct-alex",
        period: "2026-03",
        countedAt: new Date("2026-03-09T09:30:00.000Z"),
        status: "failed",
        attempts: 3,
      },
    });

    const { hearts } = await h.hearts.listHearts({ serverId });
    t.deepEqual(
      hearts.map((x) => x.heartId),
      [fraud.heartId, cooldown.heartId, second.heartId, first.heartId],
    );
    const [f, c, s, one] = hearts;
    t.like(f, { username: "bad<name>", voterIdentity: "acct-bot", verdict: HeartVerdict.FRAUD, fraudScore: 100, streakDay: 0 });
    t.deepEqual(f!.deliveries, []);
    t.regex(f!.fraudReasons[0] ?? "", /^username:/);
    t.like(c, { verdict: HeartVerdict.COOLDOWN, streakDay: 0 });
    t.deepEqual(c!.deliveries, []);
    t.like(s, { verdict: HeartVerdict.COUNTED, streakDay: 2, period: "2026-03" });
    t.is(timestampDate(s!.castAt!).toISOString(), "2026-03-09T09:30:00.000Z");
    t.deepEqual(
      s!.deliveries.map((x) => [x.transport, x.deliveryId, x.status, x.attempts, x.lastStatusCode]),
      [
        ["callback", delivery.id, "delivered", 1, 200],
        ["votifier", votifier.id, "failed", 3, 0],
      ],
      "one row per heart, with every transport's delivery",
    );
    t.is(timestampDate(s!.deliveries[0]!.deliveredAt!).toISOString(), "2026-03-09T09:30:01.000Z");
    t.like(one, { verdict: HeartVerdict.COUNTED, streakDay: 1 });
    t.deepEqual(one!.deliveries, [], "no delivery row yet: none shown");
  },
);

test.serial("ListHearts: search by part of the username (any case) or an exact voter identity, by verdict and by cast time", async (t) => {
  const { h, clock } = t.context;
  const serverId = await insertServer(h.db.prisma);
  clock.set("2026-03-01T08:00:00.000Z");
  const steve = await cast(h, serverId, "acct-steve", "Steve_42");
  clock.set("2026-03-02T08:00:00.000Z");
  const alex = await cast(h, serverId, "acct-alex", "Alex");
  clock.set("2026-03-02T08:01:00.000Z");
  const percent = await cast(h, serverId, "acct-pct", "100_pct");
  clock.set("2026-03-02T08:02:00.000Z");
  const again = await cast(h, serverId, "acct-alex", "Alex");

  const ids = async (req: { query?: string; verdict?: HeartVerdict; since?: Timestamp; until?: Timestamp }) =>
    (await h.hearts.listHearts({ serverId, ...req })).hearts.map((x) => x.heartId);
  t.deepEqual(await ids({ query: "STEVE" }), [steve.heartId], "username part, case-insensitive");
  t.deepEqual(await ids({ query: "acct-alex" }), [again.heartId, alex.heartId], "exact voter identity");
  t.deepEqual(await ids({ query: "acct-al" }), [], "a voter identity matches only exactly");
  t.deepEqual(await ids({ query: "_" }), [percent.heartId, steve.heartId], "LIKE wildcards in the query are literal");
  t.deepEqual(await ids({ query: "%" }), [], "a lone % matches nothing");
  t.deepEqual(await ids({ verdict: HeartVerdict.COOLDOWN }), [again.heartId]);
  t.deepEqual(await ids({ verdict: HeartVerdict.COUNTED, query: "alex" }), [alex.heartId]);
  t.deepEqual(await ids({ until: timestampFromDate(new Date("2026-03-02T00:00:00.000Z")) }), [steve.heartId], "until is exclusive");
  t.deepEqual(
    await ids({ since: timestampFromDate(new Date("2026-03-02T08:00:00.000Z")) }),
    [again.heartId, percent.heartId, alex.heartId],
    "since is inclusive",
  );
});

test.serial("ListHearts: pages follow next_page_token without repeats or gaps, also when hearts share a cast time", async (t) => {
  const { h, clock } = t.context;
  const serverId = await insertServer(h.db.prisma);
  clock.set("2026-03-05T10:00:00.000Z");
  const cast7: string[] = [];
  for (let i = 0; i < 7; i++) cast7.push((await cast(h, serverId, `acct-page-${i}`, `Player${i}`)).heartId);
  const { hearts, pages } = await listAll(h, { serverId, pageSize: 3 });
  t.is(pages, 3);
  t.is(hearts.length, 7);
  t.deepEqual([...hearts.map((x) => x.heartId)].sort(), [...cast7].sort(), "every heart once");
  const lastPage = await h.hearts.listHearts({ serverId, pageSize: 7 });
  t.is(lastPage.nextPageToken, "", "no token when nothing follows");
});

test.serial("ListHearts: an unknown server is NotFound; a bad page token, verdict or page size is InvalidArgument", async (t) => {
  const { h } = t.context;
  const serverId = await insertServer(h.db.prisma);
  t.deepEqual(await rpcCode(h.hearts.listHearts({ serverId: "00000000-0000-0000-0000-000000000001" })), { code: Code.NotFound, message: "unknown server" });
  t.deepEqual(await rpcCode(h.hearts.listHearts({ serverId: "not-a-uuid" })), { code: Code.NotFound, message: "unknown server" });
  t.deepEqual(await rpcCode(h.hearts.listHearts({ serverId, pageToken: "garbage" })), { code: Code.InvalidArgument, message: "page_token is invalid" });
  t.deepEqual(await rpcCode(h.hearts.listHearts({ serverId, verdict: 42 as HeartVerdict })), {
    code: Code.InvalidArgument,
    message: "verdict must be counted, cooldown or fraud",
  });
  t.deepEqual(await rpcCode(h.hearts.listHearts({ serverId, pageSize: -1 })), { code: Code.InvalidArgument, message: "page_size must not be negative" });
  t.deepEqual(await rpcCode(h.hearts.listHearts({ serverId, query: "x".repeat(201) })), {
    code: Code.InvalidArgument,
    message: "query must be at most 200 characters",
  });
});

test.serial("GetHeartStats: hearts per UTC day and per UTC month by verdict, quiet days and months as zeros", async (t) => {
  const { h, clock } = t.context;
  const serverId = await insertServer(h.db.prisma);
  clock.set("2026-01-20T23:59:59.000Z");
  await cast(h, serverId, "acct-jan", "Jan");
  clock.set("2026-03-09T00:00:00.000Z");
  await cast(h, serverId, "acct-a", "Ann");
  await cast(h, serverId, "acct-a", "Ann");
  await cast(h, serverId, "acct-x", "bad<name>");
  clock.set("2026-03-10T12:00:00.000Z");
  await cast(h, serverId, "acct-b", "Bob");

  const stats = await h.hearts.getHeartStats({ serverId, days: 3, months: 4 });
  t.deepEqual(
    stats.daily.map((b) => [b.bucket, Number(b.counted), Number(b.cooldown), Number(b.fraud)]),
    [
      ["2026-03-08", 0, 0, 0],
      ["2026-03-09", 1, 1, 1],
      ["2026-03-10", 1, 0, 0],
    ],
  );
  t.deepEqual(
    stats.monthly.map((b) => [b.bucket, Number(b.counted), Number(b.cooldown), Number(b.fraud)]),
    [
      ["2025-12", 0, 0, 0],
      ["2026-01", 1, 0, 0],
      ["2026-02", 0, 0, 0],
      ["2026-03", 2, 1, 1],
    ],
  );
  const defaults = await h.hearts.getHeartStats({ serverId });
  t.is(defaults.daily.length, 30);
  t.is(defaults.monthly.length, 12);
  t.deepEqual(await rpcCode(h.hearts.getHeartStats({ serverId, days: 367 })), { code: Code.InvalidArgument, message: "days must be between 1 and 366" });
  t.deepEqual(await rpcCode(h.hearts.getHeartStats({ serverId: "00000000-0000-0000-0000-000000000001" })), { code: Code.NotFound, message: "unknown server" });
});

test.serial("GetDeliveryStats: deliveries per UTC day by outcome, and that day's attempts with latency p50/p95/max, for one transport or all", async (t) => {
  const { h, clock, stats } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const other = await insertServer(h.db.prisma);
  clock.set("2026-03-10T12:00:00.000Z");
  const make = async (
    server: string,
    createdAt: string,
    status: "pending" | "delivered" | "failed",
    latencies: Array<[number, number | null]>,
    transport: "callback" | "votifier" = "callback",
  ) => {
    const heartId = crypto.randomUUID();
    const d = await h.db.prisma.delivery.create({
      data: {
        serverId: server,
        transport,
        heartId,
        dedupKey: heartId,
        eventType: "heart.counted",
        username: "P",
        voterIdentity: "v",
        period: "2026-03",
        countedAt: new Date(createdAt),
        createdAt: new Date(createdAt),
        status,
        attempts: latencies.length,
      },
    });
    let n = 0;
    for (const [latencyMs, statusCode] of latencies) {
      n++;
      await h.db.prisma.deliveryAttempt.create({
        data: { deliveryId: d.id, attempt: n, url: "https://example.com/hook", startedAt: new Date(createdAt), statusCode, latencyMs },
      });
    }
  };
  await make(serverId, "2026-03-09T01:00:00.000Z", "delivered", [[10, 200]]);
  await make(serverId, "2026-03-09T02:00:00.000Z", "delivered", [
    [500, 503],
    [30, 200],
  ]);
  await make(serverId, "2026-03-09T03:00:00.000Z", "failed", [
    [2000, null],
    [40, 500],
  ]);
  await make(serverId, "2026-03-10T03:00:00.000Z", "pending", []);
  await make(other, "2026-03-09T03:00:00.000Z", "failed", [[9999, null]]);
  await make(serverId, "2026-03-09T04:00:00.000Z", "failed", [[7000, null]], "votifier");

  const all = await stats.getDeliveryStats({ serverId, days: 3 });
  const day9 = all.days[1]!;
  t.deepEqual([Number(day9.failed), Number(day9.attempts), day9.latencyMaxMs], [2, 6, 7000], "every transport together");
  const { days } = await stats.getDeliveryStats({ serverId, days: 3, transport: DeliveryTransport.CALLBACK });
  t.deepEqual(
    days.map((d) => ({
      day: d.day,
      delivered: Number(d.delivered),
      failed: Number(d.failed),
      pending: Number(d.pending),
      attempts: Number(d.attempts),
      ok: Number(d.attemptsOk),
      p50: d.latencyP50Ms,
      p95: d.latencyP95Ms,
      max: d.latencyMaxMs,
    })),
    [
      { day: "2026-03-08", delivered: 0, failed: 0, pending: 0, attempts: 0, ok: 0, p50: 0, p95: 0, max: 0 },
      // Callbacks only. Latencies 10, 30, 40, 500, 2000: median 40, p95 2000 (discrete percentiles), max 2000; the other server's 9999 is not here.
      { day: "2026-03-09", delivered: 2, failed: 1, pending: 0, attempts: 5, ok: 2, p50: 40, p95: 2000, max: 2000 },
      { day: "2026-03-10", delivered: 0, failed: 0, pending: 1, attempts: 0, ok: 0, p50: 0, p95: 0, max: 0 },
    ],
  );
  t.deepEqual(await rpcCode(stats.getDeliveryStats({ serverId: "00000000-0000-0000-0000-000000000001" })), { code: Code.NotFound, message: "unknown server" });
  t.deepEqual(await rpcCode(stats.getDeliveryStats({ serverId, days: -1 })), { code: Code.InvalidArgument, message: "days must be between 1 and 366" });
});
