/**
 * A heart the server's Votifier listener can never accept (NuVotifier refuses usernames over 16
 * characters, VotifierProtocol2Decoder.java): CastHeart says so when the heart is cast, the heart
 * still counts and goes out over the server's other transports, and its Votifier delivery fails for
 * good on its first attempt, with the reason, without connecting. Votifier days count their
 * delivered attempts as successes in the daily delivery statistics. Real PostgreSQL, real sockets,
 * the NuVotifier-faithful listener of test/helpers/votifier-receiver.ts.
 */
import test, { type ExecutionContext } from "ava";
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { DeliveryTransport } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { GetDeliveryStatsRequestSchema } from "../../gen/proto/delivery/v1/delivery_stats_pb.js";
import { HeartVerdict } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { getDeliveryStats } from "../../services/delivery/rpc/delivery-stats.js";
import { insertDelivery } from "../../services/delivery/pipeline/insert-deliveries.js";
import { sendVotifierVote } from "../../services/delivery/pipeline/send-votifier.js";
import { votifierRefusal, VOTIFIER_MAX_USERNAME_CHARS } from "../../services/shared/values/votifier-limits.js";
import { eventually } from "../helpers/eventually.js";
import { startVotifierReceiver, type VotifierReceiver } from "../helpers/votifier-receiver.js";
import { insertSecret, insertServer, startDispatchWorld, type Harness } from "../../scripts/harness/delivery-harness.js";

const TOKEN = "nvtoken-undeliverable-7kq2m9x4";
const SIXTEEN = "Sixteen_chars_ok";
const TWENTY = "Twenty_characters_xx";
const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";

async function world(t: ExecutionContext) {
  const w = await startDispatchWorld(t);
  const votifier = async (): Promise<VotifierReceiver> => {
    const r = await startVotifierReceiver({ tokens: { default: TOKEN } });
    w.onClose(() => r.close());
    return r;
  };
  return { ...w, votifier };
}

async function votifierServer(h: Harness, r: { host: string; port: number }, callbackUrl: string | null = null): Promise<string> {
  const serverId = await insertServer(h.db.prisma, { callbackUrl });
  await h.db.prisma.server.update({
    where: { id: serverId },
    data: { votifierHost: r.host, votifierPort: r.port, votifierServiceName: "HeartsList", votifierToken: h.deps.secretBox.seal(TOKEN) },
  });
  return serverId;
}

async function countHeart(h: Harness, serverId: string, username: string): Promise<string> {
  const heartId = randomUUID();
  await insertDelivery(h.db.prisma, {
    heartId,
    serverId,
    eventType: "heart.counted",
    username,
    voterIdentity: `voter-${heartId}`,
    period: "2026-03",
    streakDay: null,
    countedAt: new Date(),
  });
  return heartId;
}

let ipCounter = 0;
function cast(h: Harness, serverId: string, username: string) {
  ipCounter++;
  return h.hearts.castHeart({ serverId, username, voterIdentity: `acct-${randomUUID()}`, ip: `198.51.100.${ipCounter}`, userAgent: UA });
}

test("the rule: up to 16 UTF-16 code units pass, 17 and more are refused with the count and the limit", (t) => {
  t.is(VOTIFIER_MAX_USERNAME_CHARS, 16);
  t.is(votifierRefusal({ username: SIXTEEN }), undefined);
  t.is(votifierRefusal({ username: TWENTY }), "the username is 20 characters; Votifier (NuVotifier) refuses usernames over 16 characters");
  t.truthy(votifierRefusal({ username: "x".repeat(17) }));
});

test("the listener is faithful to NuVotifier: a 16-character username is accepted, a 20-character one answered CorruptedFrameException: Username too long", async (t) => {
  const r = await startVotifierReceiver({ tokens: { default: TOKEN } });
  t.teardown(() => r.close());
  const target = { host: r.host, port: r.port, token: TOKEN };
  const vote = (username: string) => ({ serviceName: "HeartsList", username, address: "0.0.0.0", timestamp: 1767225600123 });
  const ok = await sendVotifierVote(target, vote(SIXTEEN), { timeoutMs: 5_000, allowInsecure: true });
  t.is(ok.kind, "delivered", ok.error);
  const refused = await sendVotifierVote(target, vote(TWENTY), { timeoutMs: 5_000, allowInsecure: true });
  t.is(refused.error, "the Votifier server refused the vote: CorruptedFrameException: Username too long");
  t.is(refused.answer, '{"status":"error","cause":"CorruptedFrameException","error":"Username too long"}', "NuVotifier's keys: status, cause, error");
});

test.serial(
  "CastHeart names the Votifier transport that cannot carry a 20-character name; the heart counts; 16 characters, or no Votifier, name nothing",
  async (t) => {
    const { h, votifier } = await world(t);
    const r = await votifier();
    const withVotifier = await votifierServer(h, r);
    const long = await cast(h, withVotifier, TWENTY);
    t.true(long.counted);
    t.is(long.verdict, HeartVerdict.COUNTED);
    t.deepEqual(
      long.undeliverable.map((u) => ({ transport: u.transport, reason: u.reason })),
      [{ transport: "votifier", reason: "the username is 20 characters; Votifier (NuVotifier) refuses usernames over 16 characters" }],
    );
    t.deepEqual((await cast(h, withVotifier, SIXTEEN)).undeliverable, []);
    const withoutVotifier = await insertServer(h.db.prisma);
    const elsewhere = await cast(h, withoutVotifier, TWENTY);
    t.true(elsewhere.counted);
    t.deepEqual(elsewhere.undeliverable, []);
  },
);

test.serial(
  "a 20-character name: its Votifier delivery fails for good on the first attempt with the reason, nothing sent; its callback is delivered; a 16-character name is voted",
  async (t) => {
    const { h, votifier, receiver, dispatcher } = await world(t);
    const r = await votifier();
    const http = await receiver();
    const serverId = await votifierServer(h, r, http.url);
    await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
    const long = await countHeart(h, serverId, TWENTY);
    const short = await countHeart(h, serverId, SIXTEEN);
    dispatcher().start();
    const failed = await eventually(async () => {
      const d = await h.db.prisma.delivery.findFirstOrThrow({ where: { heartId: long, transport: "votifier" }, include: { attemptsLog: true } });
      return d.status === "failed" ? d : undefined;
    });
    t.is(failed.attempts, 1, "no retry");
    t.is(failed.attemptsLog.length, 1);
    const reason = "not sent: the username is 20 characters; Votifier (NuVotifier) refuses usernames over 16 characters";
    t.like(failed.attemptsLog[0], { error: reason, succeeded: false, url: `votifier://127.0.0.1:${r.port}` });
    t.is(failed.lastError, reason, "the delivery's last error, which the dashboard's Deliveries table shows");
    // The heart still counts for the transports that can carry it.
    await eventually(async () => (await h.db.prisma.delivery.count({ where: { heartId: long, transport: "callback", status: "delivered" } })) === 1);
    await r.waitForVotes(1);
    t.deepEqual(
      r.votes.map((v) => v.username),
      [SIXTEEN],
    );
    t.false(
      r.exchanges.some((x) => x.vote?.username === TWENTY),
      "the 20-character vote never reached the listener",
    );
    t.is((await h.db.prisma.delivery.findFirstOrThrow({ where: { heartId: short, transport: "votifier" } })).attempts, 1);
  },
);

test.serial("daily delivery statistics count delivered Votifier attempts as successes (no HTTP status)", async (t) => {
  const { h, votifier, dispatcher } = await world(t);
  const r = await votifier();
  const serverId = await votifierServer(h, r);
  for (const name of ["Alex", "Steve", "Notch"]) await countHeart(h, serverId, name);
  dispatcher().start();
  await r.waitForVotes(3);
  await eventually(async () => (await h.db.prisma.delivery.count({ where: { serverId, transport: "votifier", status: "delivered" } })) === 3);
  const { days } = await getDeliveryStats(h.deps, create(GetDeliveryStatsRequestSchema, { serverId, days: 1, transport: DeliveryTransport.VOTIFIER }));
  const today = days.at(-1)!;
  t.is(Number(today.delivered), 3);
  t.is(Number(today.attempts), 3);
  t.is(Number(today.attemptsOk), 3, "every delivered vote is a successful attempt");
});
