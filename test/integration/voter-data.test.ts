/**
 * A voter's export and erasure (issue 30, part 2) on real PostgreSQL, through the production wiring (VoterDataService
 * over Connect with the admin token): the export is one document of everything held about the voter; the erasure puts a
 * tombstone where the voter's identities were and drops their address and agent, while counts, rankings and paid and
 * claimed state stay, and pay-once still pays each heart once: no claim or pull claim by the old name, the old ids or
 * the tombstone pays anything again.
 */
import anyTest, { type TestFn } from "ava";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { ClaimStatus, PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import { PullClaimStatus } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { ReceiptOutcome } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { fromBinary } from "@bufbuild/protobuf";
import { EnvelopeSchema } from "../../gen/proto/events/v1/events_pb.js";
import { ReferralEventType } from "../../gen/proto/referral/v1/referral_pb.js";
import { toReferralDelivery } from "../../services/delivery/pipeline/referral-event.js";
import { VoterDataService, VoterKeyKind } from "../../gen/proto/voters/v1/voters_pb.js";
import { DASHBOARD_SESSION_HEADER } from "../../services/access/auth-interceptor.js";
import { createServiceTransport, withHeaders } from "../../services/shared/rpc/service-transport.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { insertDelivery } from "../../services/delivery/pipeline/insert-deliveries.js";
import { insertSecret, setDefaultEndpoint } from "../../scripts/harness/delivery-harness.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { ERASED_DELIVERY_REASON, TOMBSTONE_PREFIX } from "../../services/voter-data/erase-voter-data.js";
import { hashVoterKey } from "../../services/voter-data/voter-key.js";
import { Prisma } from "../../gen/prisma/client.js";
import { runSql, runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { queueRewardEntries, writeVoterRewardState } from "../../services/rewards/reward-queue-store.js";
import { countPeriodVote } from "../../services/rewards/period-store.js";
import { rewardPeriodsOf } from "../../services/rewards/domain/period-awards.js";

interface Context {
  stack: TestStack;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  t.context = { stack: await startStack({ allowInsecureCallbacks: true }) };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

const UA = "Mozilla/5.0 (X11; Linux x86_64) VoterDataTest/1.0";

/** A pay-once server with a claim key, the pull API and a callback endpoint. */
async function server(stack: TestStack) {
  const { admin } = stack.clients;
  const { server } = await admin.createServer({ name: "Erasure SMP" });
  const serverId = server!.id;
  const { claimKey } = await admin.rotateClaimKey({ serverId });
  await admin.setPullEnabled({ serverId, enabled: true });
  await setDefaultEndpoint(stack.prisma, serverId, { url: "http://127.0.0.1:9/hook", standardWebhooks: false });
  await insertSecret(stack.prisma, stack.secretBox, serverId, "callback");
  await admin.setClaimSettings({ serverId, paysOnce: true });
  return { serverId, claimKey };
}

/** Casts a heart (counted unless the voter is on cooldown) and, when counted, stores its callback and pull deliveries as the consumer does. */
async function cast(stack: TestStack, serverId: string, voter: { username: string; identity: string; steamId: string; ip: string }) {
  const c = await stack.clients.hearts.castHeart({
    serverId,
    voterIdentity: voter.identity,
    username: voter.username,
    ip: voter.ip,
    userAgent: UA,
    steamId: voter.steamId,
  });
  if (c.counted) {
    await insertDelivery(stack.prisma, {
      heartId: c.heartId,
      serverId,
      eventType: "heart.counted",
      username: voter.username,
      voterIdentity: voter.identity,
      period: c.period,
      streakDay: null,
      countedAt: new Date(),
      platformIds: { steamId: voter.steamId, discordId: null, minecraftUuid: null, accountId: null },
    });
  }
  return { heartId: c.heartId, counted: c.counted, token: c.receiptUrl.split("/").pop() ?? "" };
}

/** Every text column of the tables that hold a voter, as one string per row: what a grep of the database would see. */
async function rowsMentioning(stack: TestStack, needle: string): Promise<string[]> {
  const tables = [
    "hearts",
    "vote_claims",
    "deliveries",
    "delivery_attempts",
    "voter_states",
    "heart_address_voters",
    "referrals",
    "referral_clicks",
    "referral_credits",
    "plugin_activity",
    "voter_data_audit",
  ];
  const found: string[] = [];
  for (const table of tables) {
    const rows = await stack.prisma.$queryRawUnsafe<Array<{ row: string }>>(
      `SELECT t::text AS row FROM ${table} t WHERE lower(t::text) LIKE '%' || lower($1) || '%'`,
      needle,
    );
    found.push(...rows.map((r) => `${table}: ${r.row}`));
  }
  return found;
}

test.serial(
  "an erased voter's counted, claimed and paid hearts stay counted, claimed and paid exactly once: no claim by the old name, the old id or the tombstone pays again",
  async (t) => {
    const { stack } = t.context;
    const { claims, delivery, hearts, voters } = stack.clients;
    const { serverId, claimKey } = await server(stack);
    const steve = { username: "Steve_Erase", identity: "list-user-4711", steamId: "76561198000004711", ip: "198.51.100.71" };
    const alex = { username: "Alex", identity: "list-user-4712", steamId: "76561198000004712", ip: "198.51.100.72" };
    const paid = await cast(stack, serverId, steve);
    const cooldown = await cast(stack, serverId, steve);
    // The same player under a second list identity (and address): counted too, held in the ledger, its deliveries waiting.
    const held = await cast(stack, serverId, { ...steve, identity: "list-user-4711-b", ip: "198.51.100.81" });
    const other = await cast(stack, serverId, alex);
    t.true(paid.counted && !cooldown.counted && held.counted && other.counted);
    const steam = (value: string) => ({ kind: PlayerIdKind.STEAM_ID, value });
    t.like(await claims.claimVote({ claimKey, player: steam(steve.steamId) }), { status: ClaimStatus.CLAIMED_NOW, heartId: paid.heartId });
    // One of the voter's events set aside as a dead letter (as the relay does with a row Kafka refuses).
    const [event] = await stack.prisma.outboxMessage.findMany({ where: { key: serverId, type: "heart.counted" }, orderBy: { id: "asc" }, take: 1 });
    await stack.prisma.deadLetter.create({
      data: { source: "relay", code: "MESSAGE_TOO_LARGE", reason: "test", topic: event!.topic, key: serverId, type: event!.type, payload: event!.payload },
    });
    const countedBefore = await stack.prisma.heart.count({ where: { serverId, counted: true } });
    const rankingBefore = await stack.prisma.serverRanking.findMany({ where: { serverId } });

    const exported = JSON.parse((await voters.exportVoterData({ serverId, keyKind: VoterKeyKind.USERNAME, key: "steve_erase" })).document);
    t.is(exported.servers.length, 1);
    const part = exported.servers[0];
    t.deepEqual(
      part.hearts.map((h: { id: string }) => h.id).sort(),
      [paid.heartId, cooldown.heartId, held.heartId].sort(),
      "the export finds the voter's hearts case-insensitively, and only theirs",
    );
    t.deepEqual(part.hearts.map((h: { verdict: string }) => h.verdict).sort(), ["cooldown", "counted", "counted"]);
    t.is(part.voteClaims.length, 2);
    t.deepEqual(
      part.payouts.map((p: { heart_id: string; state: string }) => [p.heart_id, p.state]),
      [[paid.heartId, "paid"]],
    );
    t.deepEqual(
      part.deliveries.map((d: { heart_id: string; status: string }) => `${d.heart_id === paid.heartId ? "paid" : "held"} ${d.status}`).sort(),
      ["held pending", "held pending", "paid withdrawn", "paid withdrawn"],
      "both hearts' callback and pull deliveries (the paid one's withdrawn at the claim)",
    );
    t.is(part.receipts.length, 3);
    t.is(part.voterStates.length, 2);
    const wholeList = JSON.parse((await voters.exportVoterData({ serverId: "", keyKind: VoterKeyKind.STEAM_ID, key: steve.steamId })).document);
    t.deepEqual(
      wholeList.servers.map((s: { serverId: string; hearts: unknown[] }) => [s.serverId, s.hearts.length]),
      [[serverId, 3]],
      "the whole list (admins): the same voter, found by platform id",
    );

    const erased = await voters.eraseVoterData({ serverId, keyKind: VoterKeyKind.STEAM_ID, key: steve.steamId });
    const tombstone = erased.tombstone;
    t.true(tombstone.startsWith(TOMBSTONE_PREFIX));
    t.is(erased.counts.hearts, 3n);

    for (const needle of [steve.username, steve.identity, steve.steamId, steve.ip, "198.51.100.81", UA]) {
      t.deepEqual(
        (await rowsMentioning(stack, needle)).filter((r) => !r.includes(alex.identity)),
        [],
        `nothing of the erased voter is left: ${needle.slice(0, 12)}`,
      );
    }
    t.is(await stack.prisma.deadLetter.count({ where: { key: serverId } }), 0, "the dead letter carrying the voter is dropped");
    t.is(
      await stack.prisma.outboxMessage.count({ where: { key: serverId, type: "heart.counted", publishedAt: null } }),
      1,
      "only Alex's heart event is left to publish",
    );
    t.is(await stack.prisma.heart.count({ where: { serverId, counted: true } }), countedBefore, "counted hearts stay counted");
    t.deepEqual(await stack.prisma.serverRanking.findMany({ where: { serverId } }), rankingBefore, "the ranking is unchanged");
    t.like(await stack.prisma.heart.findUniqueOrThrow({ where: { id: other.heartId } }), { username: "Alex", ip: alex.ip }, "another voter is untouched");
    t.like(await stack.prisma.voteClaim.findUniqueOrThrow({ where: { heartId: paid.heartId } }), { state: "claimed", usernameLower: tombstone });
    t.like(await stack.prisma.voteClaim.findUniqueOrThrow({ where: { heartId: held.heartId } }), { state: "expired", expiredReason: "erased" });
    const heldDeliveries = await stack.prisma.delivery.findMany({ where: { heartId: held.heartId } });
    t.deepEqual(
      heldDeliveries.map((d) => [d.status, d.lastError, d.username]),
      [
        ["withdrawn", ERASED_DELIVERY_REASON, tombstone],
        ["withdrawn", ERASED_DELIVERY_REASON, tombstone],
      ],
    );

    // Claim again, by every name the voter had or has now: nothing pays.
    for (const player of [steam(steve.steamId), { kind: PlayerIdKind.USERNAME, value: steve.username }, { kind: PlayerIdKind.USERNAME, value: tombstone }]) {
      const answer = await claims
        .claimVote({ claimKey, player })
        .catch((e: unknown) => (e instanceof ConnectError ? { status: ClaimStatus.UNSPECIFIED } : Promise.reject(e)));
      t.not(answer.status, ClaimStatus.CLAIMED_NOW, `no claim pays again (${player.kind})`);
    }
    const pull = await delivery.claimPullHearts({ serverId, heartIds: [paid.heartId, held.heartId] });
    t.false(
      pull.results.some((r) => r.status === PullClaimStatus.CLAIMED),
      "no pull claim pays an erased voter's heart",
    );
    const payouts = await stack.prisma.heartPayout.findMany({ where: { serverId } });
    t.deepEqual(
      payouts.map((p) => [p.heartId, p.state]),
      [[paid.heartId, "paid"]],
      "the paid heart is paid exactly once, the held one never",
    );
    t.like(await stack.prisma.voteClaim.findUniqueOrThrow({ where: { heartId: paid.heartId } }), { state: "claimed" }, "claimed exactly once");

    const receipt = (await hearts.getReceipt({ token: paid.token })).receipt!;
    t.like(receipt, { outcome: ReceiptOutcome.ERASED, username: "", paidBy: "" }, "the receipt answers erased, with no name");
    t.deepEqual(receipt.deliveries, []);

    const again = await voters.eraseVoterData({ serverId, keyKind: VoterKeyKind.USERNAME, key: steve.username });
    t.is(again.counts.hearts ?? 0n, 0n, "a second erasure finds nothing left");

    const audit = (await voters.listVoterDataAudit({ limit: 10 })).entries.filter((e) => e.serverId === serverId);
    t.deepEqual(
      audit.map((e) => e.action),
      ["erase", "erase", "export"],
    );
    t.true(
      audit.every((e) => e.principal.startsWith("token:")),
      "the audit names the caller as the access layer does",
    );
    t.is(audit[2]!.keyHash, hashVoterKey({ kind: "username", value: "steve_erase" }));
    t.is(audit[1]!.keyHash, hashVoterKey({ kind: "steam_id", value: steve.steamId }));
    t.is(JSON.parse(audit[1]!.counts).hearts, 3);
  },
);

test.serial("a voter's reward entries and reward counts are in the export, and the erasure deletes them (another voter's stay)", async (t) => {
  const { stack } = t.context;
  const { voters } = stack.clients;
  const { serverId } = await server(stack);
  const alex = { username: "Alex_Rewards", identity: "alex-rewards", steamId: "76561198000000311", ip: "198.51.100.31" };
  const sam = { username: "Sam_Rewards", identity: "sam-rewards", steamId: "76561198000000312", ip: "198.51.100.32" };
  const alexHeart = await cast(stack, serverId, alex);
  const samHeart = await cast(stack, serverId, sam);
  const now = new Date();
  for (const [voter, heart] of [
    [alex, alexHeart],
    [sam, samHeart],
  ] as const) {
    await runSqlTransaction(
      stack.prisma,
      async (tx) => {
        await queueRewardEntries(tx, {
          serverId,
          heartId: heart.heartId,
          player: { username: voter.username, steamId: voter.steamId, discordId: null, minecraftUuid: null, accountId: null },
          rulesVersion: 1,
          entries: [{ key: `${heart.heartId}:vote:0:0`, reason: "vote", commands: [`give ${voter.username} diamond 1`], onlineOnly: true }],
        });
        await writeVoterRewardState(tx, serverId, voter.identity, {
          lastCountedAt: now,
          total: 1,
          month: "2026-11",
          monthTotal: 1,
          week: "2026-W48",
          weekTotal: 1,
          streak: { lastDay: now, days: 1 },
        });
        await countPeriodVote(tx, { serverId, voterIdentity: voter.identity, countedAt: now, periods: rewardPeriodsOf(now) });
      },
      { timeoutMs: 10_000 },
    );
  }
  const exported = JSON.parse((await voters.exportVoterData({ serverId, keyKind: VoterKeyKind.USERNAME, key: alex.username })).document);
  t.deepEqual(
    exported.servers[0].rewardEntries.map((e: { commands: string[] }) => e.commands),
    [[`give ${alex.username} diamond 1`]],
  );
  t.deepEqual(
    exported.servers[0].rewardStates.map((r: { voter_identity: string; total: number }) => [r.voter_identity, r.total]),
    [[alex.identity, 1]],
  );
  t.deepEqual(
    exported.servers[0].rewardPeriodCounts.map((r: { voter_identity: string; votes: number }) => [r.voter_identity, r.votes]),
    [
      [alex.identity, 1],
      [alex.identity, 1],
    ],
    "the voter's week and month counts",
  );
  const erased = await voters.eraseVoterData({ serverId, keyKind: VoterKeyKind.USERNAME, key: alex.username });
  t.is(Number(erased.counts.reward_queue_entries), 1);
  t.is(Number(erased.counts.voter_reward_states), 1);
  // The period standings' counts of the voter (a week and a month) go too.
  t.is(Number(erased.counts.voter_period_tallies), 2);
  const tallies = await runSql<{ voter_identity: string }>(
    stack.prisma,
    Prisma.sql`SELECT DISTINCT voter_identity FROM voter_period_tallies WHERE server_id = ${serverId}::uuid`,
  );
  t.deepEqual(
    tallies.map((r) => r.voter_identity),
    [sam.identity],
  );
  const left = await runSql<{ username: string }>(stack.prisma, Prisma.sql`SELECT username FROM reward_queue_entries WHERE server_id = ${serverId}::uuid`);
  t.deepEqual(
    left.map((r) => r.username),
    [sam.username],
    "the other voter's entry stays",
  );
  const states = await runSql<{ voter_identity: string }>(
    stack.prisma,
    Prisma.sql`SELECT voter_identity FROM voter_reward_states WHERE server_id = ${serverId}::uuid`,
  );
  t.deepEqual(
    states.map((r) => r.voter_identity),
    [sam.identity],
  );
});

test.serial("an export of a voter on a server where they never voted is an empty document, and an unknown key kind is refused", async (t) => {
  const { stack } = t.context;
  const { serverId } = await server(stack);
  const doc = JSON.parse((await stack.clients.voters.exportVoterData({ serverId, keyKind: VoterKeyKind.USERNAME, key: "nobody" })).document);
  t.deepEqual(doc.servers, []);
  await t.throwsAsync(stack.clients.voters.exportVoterData({ serverId, keyKind: VoterKeyKind.UNSPECIFIED, key: "x" }), { message: /key_kind must be one of/ });
  await t.throwsAsync(stack.clients.voters.exportVoterData({ serverId, keyKind: VoterKeyKind.STEAM_ID, key: "12" }), {
    message: /steam_id must be a SteamID64/,
  });
});

test.serial("the RPCs refuse callers without the right: a token without admin, another owner's server, the whole list or the audit for an owner", async (t) => {
  const { stack } = t.context;
  const { access } = stack.clients;
  const mine = await server(stack);
  const theirs = await server(stack);
  await access.createOwner({ ownerId: "voter-data-owner", displayName: "Owner" });
  await access.assignServer({ serverId: mine.serverId, ownerId: "voter-data-owner" });
  const { url } = await access.createDashboardLoginLink({ ownerId: "voter-data-owner" });
  const { sessionToken } = await access.redeemDashboardLoginLink({ loginToken: new URL(url).searchParams.get("token") ?? "" });
  const owner = createClient(
    VoterDataService,
    withHeaders(createServiceTransport(stack.rpcUrl, TEST_SERVICE_TOKEN), { [DASHBOARD_SESSION_HEADER]: sessionToken }),
  );
  const { token } = await access.createServiceToken({ name: "voter-data-reader", scopes: ["read"] });
  const reader = createClient(VoterDataService, createServiceTransport(stack.rpcUrl, token));
  const key = { keyKind: VoterKeyKind.USERNAME, key: "Steve" };
  const code = async (call: Promise<unknown>) =>
    call.then(
      () => "ok",
      (e: unknown) => (e instanceof ConnectError ? Code[e.code] : String(e)),
    );

  t.is(await code(owner.exportVoterData({ serverId: mine.serverId, ...key })), "ok", "the owner exports on their own server");
  t.is(await code(owner.eraseVoterData({ serverId: mine.serverId, ...key })), "ok", "and erases there");
  for (const call of [owner.exportVoterData({ serverId: theirs.serverId, ...key }), owner.eraseVoterData({ serverId: theirs.serverId, ...key })]) {
    t.is(await code(call), "NotFound", "another owner's server answers as a missing one");
  }
  for (const call of [owner.exportVoterData({ serverId: "", ...key }), owner.eraseVoterData({ serverId: "", ...key })]) {
    t.not(await code(call), "ok", "an owner never acts on the whole list");
  }
  t.is(await code(owner.listVoterDataAudit({})), "PermissionDenied", "the audit is for admins only");
  for (const call of [
    reader.exportVoterData({ serverId: mine.serverId, ...key }),
    reader.eraseVoterData({ serverId: "", ...key }),
    reader.listVoterDataAudit({}),
  ]) {
    t.is(await code(call), "PermissionDenied", "a token without admin is refused");
  }
  const audit = (await stack.clients.voters.listVoterDataAudit({ limit: 50 })).entries.filter((e) => e.serverId === mine.serverId);
  t.deepEqual(
    audit.map((e) => [e.action, e.principal]),
    [
      ["erase", "owner:voter-data-owner"],
      ["export", "owner:voter-data-owner"],
    ],
    "an owner's calls are recorded under the owner",
  );
});

test.serial(
  "an erasure reaches the voter's referrals (as referee and as referrer), clicks, referral deliveries and unpublished outbox rows: heart events are withdrawn, referral events name the tombstone",
  async (t) => {
    const { stack } = t.context;
    const { admin, referral, hearts, voters } = stack.clients;
    const { serverId } = await server(stack);
    await admin.setReferralsEnabled({ serverId, enabled: true });
    await stack.prisma.callbackEndpoint.updateMany({ where: { serverId, isDefault: true }, data: { eventTypes: ["heart.counted", "referral.registered"] } });
    const name = "Ref_Voter";
    // The voter as referee (of Mentor) and as referrer (of Newbie); this stack runs no relay, so every event stays in the outbox.
    const asReferee = await referral.recordClick({ serverId, referrerIdentity: "Mentor", ip: "198.51.100.31", userAgent: UA });
    await referral.applyEvent({ serverId, event: ReferralEventType.REGISTERED, token: asReferee.token, refereeIdentity: name, serverEventId: "reg-voter" });
    const asReferrer = await referral.recordClick({ serverId, referrerIdentity: name.toLowerCase(), ip: "198.51.100.32", userAgent: UA });
    await referral.applyEvent({
      serverId,
      event: ReferralEventType.REGISTERED,
      token: asReferrer.token,
      refereeIdentity: "Newbie",
      serverEventId: "reg-newbie",
    });
    const cast = await hearts.castHeart({ serverId, voterIdentity: "list-ref-voter", username: name, ip: "198.51.100.33", userAgent: UA });
    // The referral events' deliveries, stored as the consumer stores them.
    const outbox = await stack.prisma.outboxMessage.findMany({ where: { key: serverId, publishedAt: null }, orderBy: { id: "asc" } });
    for (const row of outbox) {
      const decoded = toReferralDelivery(fromBinary(EnvelopeSchema, row.payload));
      if (decoded.kind === "delivery") await insertDelivery(stack.prisma, decoded.delivery);
    }
    t.is(await stack.prisma.delivery.count({ where: { serverId, eventType: { startsWith: "referral." } } }), 2);

    const exported = JSON.parse((await voters.exportVoterData({ serverId, keyKind: VoterKeyKind.USERNAME, key: name })).document);
    const part = exported.servers[0];
    t.deepEqual(
      [part.referralsAsReferee.length, part.referralsAsReferrer.length, part.clicks.length, part.referralDeliveries.length],
      [1, 1, 2, 2],
      "the export holds the referrals, clicks and referral events",
    );
    const erased = await voters.eraseVoterData({ serverId, keyKind: VoterKeyKind.USERNAME, key: name });
    const tombstone = erased.tombstone;
    t.deepEqual(await rowsMentioning(stack, name), [], "no table names the voter");
    const left = await stack.prisma.outboxMessage.findMany({ where: { key: serverId, publishedAt: null } });
    t.false(
      left.some((r) => Buffer.from(r.payload).toString("latin1").toLowerCase().includes(name.toLowerCase())),
      "no unpublished outbox row names the voter",
    );
    const events = left.map((r) => fromBinary(EnvelopeSchema, r.payload));
    t.false(
      events.some((e) => e.payload.case === "heartCounted" && e.payload.value.heartId === cast.heartId),
      "the heart's event is withdrawn",
    );
    t.deepEqual(
      events.flatMap((e) => (e.payload.case === "referralTransitioned" ? [[e.payload.value.referrerIdentity, e.payload.value.refereeIdentity]] : [])).sort(),
      [
        [tombstone, "Newbie"],
        ["Mentor", tombstone],
      ].sort(),
      "the referral events still go out, naming the tombstone",
    );
    const referrals = await stack.prisma.referral.findMany({ where: { serverId }, orderBy: { registeredAt: "asc" } });
    t.deepEqual(
      referrals.map((r) => [r.referrerIdentity, r.refereeIdentity, r.state]),
      [
        ["Mentor", tombstone, "registered"],
        [tombstone, "Newbie", "registered"],
      ],
    );
    const clicks = await stack.prisma.referralClick.findMany({ where: { serverId }, orderBy: { createdAt: "asc" } });
    t.deepEqual(
      clicks.map((c) => [c.referrerIdentity, c.ip, c.userAgent]),
      [
        ["Mentor", null, null],
        [tombstone, null, null],
      ],
      "both clicks lose address and agent",
    );
    const deliveries = await stack.prisma.delivery.findMany({ where: { serverId, eventType: { startsWith: "referral." } }, orderBy: { createdAt: "asc" } });
    t.deepEqual(
      deliveries
        .map((d) => [d.status, (d.payload as { referrer_identity: string }).referrer_identity, (d.payload as { referee_identity: string }).referee_identity])
        .sort(),
      [
        ["pending", "Mentor", tombstone],
        ["pending", tombstone, "Newbie"],
      ].sort(),
      "the referral deliveries still go out, naming the tombstone",
    );
  },
);
