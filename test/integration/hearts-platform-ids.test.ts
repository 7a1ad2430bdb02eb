/**
 * Platform ids on a heart (issue 19, item 1), over real RPCs on a real database: CastHeart
 * format-checks and normalises steam_id, discord_id, minecraft_uuid and account_id, stores them on
 * the heart, carries them (and next_eligible_at) in the heart.counted outbox payload, and
 * ListHearts returns them and finds a heart by any of them.
 */
import anyTest, { type TestFn } from "ava";
import { fromBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { EnvelopeSchema } from "../../gen/proto/events/v1/events_pb.js";
import { createTestClock, insertServer, startHarness, type Harness, type TestClock } from "../../scripts/harness/delivery-harness.js";

const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";
const STEAM = "76561198012345678";
const DISCORD = "80351110224678912";
const MC_SENT = "069A79F444E94726A5BEFCA90E38AAF5";
const MC = "069a79f4-44e9-4726-a5be-fca90e38aaf5";
const ACCOUNT = "realm-7/Player#42";

const test = anyTest as TestFn<{ h: Harness; clock: TestClock }>;

test.before(async (t) => {
  const clock = createTestClock("2026-03-10T12:00:00.000Z");
  t.context = { clock, h: await startHarness({ now: () => clock.now() }) };
});
test.after.always(async (t) => {
  await t.context.h?.close();
});

let ipCounter = 0;
function freshIp(): string {
  ipCounter++;
  return `198.51.${(ipCounter >> 8) & 0xff}.${ipCounter & 0xff}`;
}

test.serial("CastHeart stores the platform ids in normal form and the heart.counted payload carries them and next_eligible_at", async (t) => {
  const { h } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const res = await h.hearts.castHeart({
    serverId,
    voterIdentity: "acct-ids",
    username: "Steve",
    ip: freshIp(),
    userAgent: UA,
    steamId: STEAM,
    discordId: DISCORD,
    minecraftUuid: MC_SENT,
    accountId: ACCOUNT,
  });
  t.true(res.counted);
  const heart = await h.db.prisma.heart.findUniqueOrThrow({ where: { id: res.heartId } });
  t.like(heart, { steamId: STEAM, discordId: DISCORD, minecraftUuid: MC, accountId: ACCOUNT });

  const rows = await h.db.prisma.outboxMessage.findMany({ where: { key: serverId } });
  t.is(rows.length, 1);
  const envelope = fromBinary(EnvelopeSchema, rows[0]!.payload);
  if (envelope.payload.case !== "heartCounted") return t.fail("not a heart.counted payload");
  t.like(envelope.payload.value, { heartId: res.heartId, steamId: STEAM, discordId: DISCORD, minecraftUuid: MC, accountId: ACCOUNT });
  t.is(timestampDate(envelope.payload.value.nextEligibleAt!).toISOString(), "2026-03-11T12:00:00.000Z");
});

test.serial("a heart without platform ids stores none (null) and answers them empty", async (t) => {
  const { h } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const res = await h.hearts.castHeart({ serverId, voterIdentity: "acct-none", username: "Alex", ip: freshIp(), userAgent: UA });
  const heart = await h.db.prisma.heart.findUniqueOrThrow({ where: { id: res.heartId } });
  t.like(heart, { steamId: null, discordId: null, minecraftUuid: null, accountId: null });
  const { hearts } = await h.hearts.listHearts({ serverId });
  t.like(hearts[0], { heartId: res.heartId, steamId: "", discordId: "", minecraftUuid: "", accountId: "" });
});

test.serial("a malformed platform id is invalid_argument naming the field, and nothing is stored", async (t) => {
  const { h } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const base = { serverId, voterIdentity: "acct-bad", username: "Steve", ip: freshIp(), userAgent: UA };
  const cases: Array<[Partial<Record<"steamId" | "discordId" | "minecraftUuid" | "accountId", string>>, string]> = [
    [{ steamId: "76561197960265727" }, "steam_id"],
    [{ steamId: "STEAM_0:1:1" }, "steam_id"],
    [{ discordId: "1234" }, "discord_id"],
    [{ minecraftUuid: "Notch" }, "minecraft_uuid"],
    [{ accountId: "a\u0000b" }, "account_id"],
    [{ accountId: "x".repeat(129) }, "account_id"],
  ];
  for (const [ids, field] of cases) {
    const error = await t.throwsAsync(h.hearts.castHeart({ ...base, ...ids }), { instanceOf: ConnectError });
    t.is(error?.code, Code.InvalidArgument, field);
    t.true(error?.rawMessage.startsWith(`${field} `), `${field}: ${error?.rawMessage}`);
  }
  t.is(await h.db.prisma.heart.count({ where: { serverId } }), 0);
});

test.serial("ListHearts returns the ids and finds a heart by each of them (exact), a Minecraft UUID in any spelling", async (t) => {
  const { h } = t.context;
  const serverId = await insertServer(h.db.prisma);
  const mine = await h.hearts.castHeart({
    serverId,
    voterIdentity: "acct-a",
    username: "Steve",
    ip: freshIp(),
    userAgent: UA,
    steamId: STEAM,
    discordId: DISCORD,
    minecraftUuid: MC,
    accountId: ACCOUNT,
  });
  await h.hearts.castHeart({ serverId, voterIdentity: "acct-b", username: "Other", ip: freshIp(), userAgent: UA, steamId: "76561198000000001" });

  const all = await h.hearts.listHearts({ serverId });
  const summary = all.hearts.find((x) => x.heartId === mine.heartId);
  t.like(summary, { steamId: STEAM, discordId: DISCORD, minecraftUuid: MC, accountId: ACCOUNT });

  for (const query of [STEAM, DISCORD, MC, MC_SENT, MC.replaceAll("-", ""), ACCOUNT]) {
    const found = await h.hearts.listHearts({ serverId, query });
    t.deepEqual(
      found.hearts.map((x) => x.heartId),
      [mine.heartId],
      query,
    );
  }
  // Ids match exactly, not as a part.
  t.deepEqual((await h.hearts.listHearts({ serverId, query: STEAM.slice(0, 12) })).hearts, []);
});
