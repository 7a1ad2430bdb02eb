/**
 * The claim ledger (issue 19, items 2 core and 3) on real PostgreSQL, through the production wiring:
 * ClaimService.CheckVote / ClaimVote answer reward plugins' check/claim polls from vote_claims, which
 * CastHeart writes in its own statement; ServerAdminService mints, reveals and rotates the claim key
 * and sets the hold window and the per-player cap. The clock is injected.
 */
import anyTest, { type TestFn } from "ava";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { ClaimService, ClaimStatus, PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { DEFAULT_GATEWAY_SCOPES } from "../../services/access/bootstrap.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { eventually } from "../helpers/eventually.js";
import { randomUUID } from "node:crypto";
import { Prisma } from "../../gen/prisma/client.js";
import { runSql, runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { toOutboxRow } from "../../services/shared/adapters/outbox.js";
import { writeHearts, type HeartWrite } from "../../services/hearts/store.js";
import { createTestClock, type TestClock } from "../../scripts/harness/delivery-harness.js";

const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";
const DAY_MS = 86_400_000;
const STEAM = "76561198012345678";
const OTHER_STEAM = "76561198099999999";

interface Context {
  stack: TestStack;
  clock: TestClock;
  claims: Client<typeof ClaimService>;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const clock = createTestClock("2026-03-10T12:00:00.000Z");
  const stack = await startStack({ now: () => clock.now() });
  const claims = createClient(ClaimService, createServiceTransport(stack.rpcUrl, TEST_SERVICE_TOKEN));
  t.context = { stack, clock, claims };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

let counter = 0;
function fresh(): { ip: string; voter: string } {
  counter++;
  return { ip: `203.0.${(counter >> 8) & 0xff}.${counter & 0xff}`, voter: `voter-${counter}` };
}

/** A server with a claim key (and the settings given); returns its id and key. */
async function claimServer(t: { context: Context }, settings: { holdDays?: number; maxHeldPerPlayer?: number } = {}) {
  const { admin } = t.context.stack.clients;
  const { server } = await admin.createServer({ name: "Rust x3" });
  const serverId = server!.id;
  const { claimKey } = await admin.rotateClaimKey({ serverId });
  if (settings.holdDays || settings.maxHeldPerPlayer) {
    await admin.setClaimSettings({ serverId, holdDays: settings.holdDays ?? 0, maxHeldPerPlayer: settings.maxHeldPerPlayer ?? 0 });
  }
  return { serverId, claimKey };
}

function vote(
  t: { context: Context },
  serverId: string,
  ids: Partial<{ username: string; steamId: string; discordId: string; minecraftUuid: string; accountId: string }> = {},
) {
  const { ip, voter } = fresh();
  return t.context.stack.clients.hearts.castHeart({ serverId, voterIdentity: voter, username: ids.username ?? "Steve", ip, userAgent: UA, ...ids });
}

const steam = (value: string) => ({ kind: PlayerIdKind.STEAM_ID, value });

test.serial("check 0 -> vote -> check 1 -> claim 1 -> check 2 -> claim 2; another player 0; a wrong key 0 with key_valid false", async (t) => {
  const { claims } = t.context;
  const { serverId, claimKey } = await claimServer(t);
  t.true(claimKey.startsWith("vck_"));

  t.like(await claims.checkVote({ claimKey, player: steam(STEAM) }), { status: ClaimStatus.NOT_FOUND, keyValid: true, serverId, heartId: "" });
  const heart = await vote(t, serverId, { steamId: STEAM });
  t.true(heart.counted);

  const check1 = await claims.checkVote({ claimKey, player: steam(STEAM) });
  t.like(check1, { status: ClaimStatus.VOTED_UNCLAIMED, keyValid: true, serverId, heartId: heart.heartId });
  t.is(timestampDate(check1.votedAt!).toISOString(), "2026-03-10T12:00:00.000Z");
  t.is(timestampDate(check1.expiresAt!).toISOString(), "2026-04-09T12:00:00.000Z", "counted_at + 30 days by default");
  t.is(check1.claimedAt, undefined);

  t.like(await claims.claimVote({ claimKey, player: steam(STEAM) }), { status: ClaimStatus.CLAIMED_NOW, keyValid: true, heartId: heart.heartId });
  const check2 = await claims.checkVote({ claimKey, player: steam(STEAM) });
  t.like(check2, { status: ClaimStatus.ALREADY_CLAIMED, heartId: heart.heartId });
  t.truthy(check2.claimedAt);
  t.like(await claims.claimVote({ claimKey, player: steam(STEAM) }), { status: ClaimStatus.ALREADY_CLAIMED, heartId: heart.heartId });

  t.like(await claims.checkVote({ claimKey, player: steam(OTHER_STEAM) }), { status: ClaimStatus.NOT_FOUND, keyValid: true });
  t.like(await claims.claimVote({ claimKey, player: steam(OTHER_STEAM) }), { status: ClaimStatus.NOT_FOUND, keyValid: true });

  for (const wrong of [`vck_${"A".repeat(43)}`, "not-a-key", "", `${claimKey}x`]) {
    for (const answer of [
      await claims.checkVote({ claimKey: wrong, player: steam(STEAM) }),
      await claims.claimVote({ claimKey: wrong, player: steam(STEAM) }),
    ]) {
      t.like(answer, { status: ClaimStatus.NOT_FOUND, keyValid: false, serverId: "", heartId: "" });
    }
  }
});

test.serial("every id kind finds the heart; usernames compare case-insensitively; a Minecraft UUID in any spelling", async (t) => {
  const { claims } = t.context;
  const { claimKey, serverId } = await claimServer(t);
  const heart = await vote(t, serverId, {
    username: "Steve_Builder",
    discordId: "80351110224678912",
    minecraftUuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5",
    accountId: "realm-7/42",
  });
  const players = [
    { kind: PlayerIdKind.USERNAME, value: "steve_builder" },
    { kind: PlayerIdKind.USERNAME, value: "STEVE_BUILDER" },
    { kind: PlayerIdKind.DISCORD_ID, value: "80351110224678912" },
    { kind: PlayerIdKind.MINECRAFT_UUID, value: "069A79F444E94726A5BEFCA90E38AAF5" },
    { kind: PlayerIdKind.ACCOUNT_ID, value: "realm-7/42" },
  ];
  for (const player of players)
    t.like(await claims.checkVote({ claimKey, player }), { status: ClaimStatus.VOTED_UNCLAIMED, heartId: heart.heartId }, player.value);
  t.like(
    await claims.checkVote({ claimKey, player: { kind: PlayerIdKind.ACCOUNT_ID, value: "REALM-7/42" } }),
    { status: ClaimStatus.NOT_FOUND },
    "account ids are exact",
  );
  t.like(await claims.checkVote({ claimKey, player: { kind: PlayerIdKind.USERNAME, value: "Steve" } }), { status: ClaimStatus.NOT_FOUND });
});

test.serial("a malformed player id is invalid_argument naming the field, whatever the key", async (t) => {
  const { claims } = t.context;
  const { claimKey } = await claimServer(t);
  const cases: Array<[{ kind: PlayerIdKind; value: string }, string]> = [
    [{ kind: PlayerIdKind.UNSPECIFIED, value: STEAM }, "player.kind"],
    [{ kind: PlayerIdKind.STEAM_ID, value: "123" }, "steam_id"],
    [{ kind: PlayerIdKind.DISCORD_ID, value: "abc" }, "discord_id"],
    [{ kind: PlayerIdKind.MINECRAFT_UUID, value: "Notch" }, "minecraft_uuid"],
    [{ kind: PlayerIdKind.ACCOUNT_ID, value: "" }, "account_id"],
    [{ kind: PlayerIdKind.USERNAME, value: "" }, "username"],
  ];
  for (const key of [claimKey, "wrong"]) {
    for (const [player, field] of cases) {
      const error = await t.throwsAsync(claims.checkVote({ claimKey: key, player }), { instanceOf: ConnectError });
      t.is(error?.code, Code.InvalidArgument);
      t.true(error?.rawMessage.startsWith(field), `${field}: ${error?.rawMessage}`);
      t.false(error?.rawMessage.includes(claimKey), "the key is never echoed");
    }
  }
});

test.serial("a heart past its hold window is expired: check and claim answer 0; a claimed one past its window is 0, not 2", async (t) => {
  const { claims, clock, stack } = t.context;
  clock.set("2026-05-01T00:00:00.000Z");
  const { claimKey, serverId } = await claimServer(t, { holdDays: 2 });
  const held = await vote(t, serverId, { steamId: STEAM });
  const claimed = await vote(t, serverId, { steamId: OTHER_STEAM });
  t.like(await claims.claimVote({ claimKey, player: steam(OTHER_STEAM) }), { status: ClaimStatus.CLAIMED_NOW, heartId: claimed.heartId });

  clock.advanceMs(2 * DAY_MS - 1);
  t.like(await claims.checkVote({ claimKey, player: steam(STEAM) }), { status: ClaimStatus.VOTED_UNCLAIMED, heartId: held.heartId });
  t.like(await claims.checkVote({ claimKey, player: steam(OTHER_STEAM) }), { status: ClaimStatus.ALREADY_CLAIMED });
  clock.advanceMs(1);
  t.like(await claims.checkVote({ claimKey, player: steam(STEAM) }), { status: ClaimStatus.NOT_FOUND, keyValid: true });
  t.like(await claims.claimVote({ claimKey, player: steam(STEAM) }), { status: ClaimStatus.NOT_FOUND, keyValid: true });
  t.like(await claims.checkVote({ claimKey, player: steam(OTHER_STEAM) }), { status: ClaimStatus.NOT_FOUND });
  t.like(await claims.claimVote({ claimKey, player: steam(OTHER_STEAM) }), { status: ClaimStatus.NOT_FOUND });

  // Kept, not deleted; the player's next vote marks it expired ("window") and holds the new heart.
  const next = await vote(t, serverId, { steamId: STEAM });
  t.like(await stack.prisma.voteClaim.findUniqueOrThrow({ where: { heartId: held.heartId } }), { state: "expired", expiredReason: "window" });
  t.like(await claims.claimVote({ claimKey, player: steam(STEAM) }), { status: ClaimStatus.CLAIMED_NOW, heartId: next.heartId });
});

test.serial("the per-player cap: a vote beyond it expires the player's OLDEST held heart (reason cap), in the same statement", async (t) => {
  const { claims, clock, stack } = t.context;
  clock.set("2026-06-01T00:00:00.000Z");
  const { claimKey, serverId } = await claimServer(t, { maxHeldPerPlayer: 2 });
  const hearts: string[] = [];
  for (let i = 0; i < 4; i++) {
    hearts.push((await vote(t, serverId, { steamId: STEAM })).heartId);
    clock.advanceMs(60_000);
  }
  const rows = await stack.prisma.voteClaim.findMany({ where: { serverId }, orderBy: { countedAt: "asc" } });
  t.deepEqual(
    rows.map((r) => [r.heartId, r.state, r.expiredReason]),
    [
      [hearts[0], "expired", "cap"],
      [hearts[1], "expired", "cap"],
      [hearts[2], "held", null],
      [hearts[3], "held", null],
    ],
  );
  // Another player's hearts are not counted against this one.
  await vote(t, serverId, { steamId: OTHER_STEAM });
  t.is(await stack.prisma.voteClaim.count({ where: { serverId, state: "held" } }), 3);
  t.like(await claims.claimVote({ claimKey, player: steam(STEAM) }), { status: ClaimStatus.CLAIMED_NOW, heartId: hearts[2] });
  t.like(await claims.claimVote({ claimKey, player: steam(STEAM) }), { status: ClaimStatus.CLAIMED_NOW, heartId: hearts[3] });
  t.like(await claims.claimVote({ claimKey, player: steam(STEAM) }), { status: ClaimStatus.ALREADY_CLAIMED, heartId: hearts[3] });
});

test.serial("the cap counts only hearts still in their window: a newer heart past a shorter window does not push out an older one", async (t) => {
  const { stack, clock } = t.context;
  clock.set("2026-07-01T00:00:00.000Z");
  const { serverId } = await claimServer(t, { holdDays: 10, maxHeldPerPlayer: 2 });
  const older = await vote(t, serverId, { steamId: STEAM }); // held until 07-11
  await stack.clients.admin.setClaimSettings({ serverId, holdDays: 1, maxHeldPerPlayer: 0 });
  clock.advanceMs(DAY_MS);
  const newer = await vote(t, serverId, { steamId: STEAM }); // held until 07-03
  clock.advanceMs(2 * DAY_MS);
  const latest = await vote(t, serverId, { steamId: STEAM });
  const state = async (heartId: string) => {
    const row = await stack.prisma.voteClaim.findUniqueOrThrow({ where: { heartId } });
    return [row.state, row.expiredReason];
  };
  t.deepEqual(await state(newer.heartId), ["expired", "window"]);
  t.deepEqual(await state(older.heartId), ["held", null], "the cap of 2 holds the older heart and the latest one");
  t.deepEqual(await state(latest.heartId), ["held", null]);
});

test.serial(
  "the per-player cap holds under concurrent casts: two CastHeart writes for one player at the cap, both begun before either commits, leave the cap held",
  async (t) => {
    const { stack, clock } = t.context;
    clock.set("2026-09-01T00:00:00.000Z");
    const { serverId } = await claimServer(t, { maxHeldPerPlayer: 2 });
    for (let i = 0; i < 2; i++) {
      await vote(t, serverId, { steamId: STEAM });
      clock.advanceMs(60_000);
    }
    const [{ period } = { period: "" }] = await runSql<{ period: string }>(
      stack.prisma,
      Prisma.sql`SELECT period FROM server_rankings WHERE server_id = ${serverId}::uuid`,
    );
    // Two voters (two voter identities) of one player (one SteamID): each statement counts its own heart.
    const write = (voter: string, at: Date): HeartWrite => {
      const heart = {
        id: randomUUID(),
        serverId,
        username: "Steve",
        voterIdentity: voter,
        ip: "198.51.100.7",
        subnet: "198.51.100.0/24",
        ipKey: null,
        subnetKey: null,
        userAgent: UA,
        ids: { steamId: STEAM, discordId: null, minecraftUuid: null, accountId: null },
        fraudScore: 0,
        fraudReasons: [],
        period,
        at,
      };
      const outbox = toOutboxRow({ topic: "hearts", type: "heart.counted", serverId, occurredAt: at, payload: { case: undefined } });
      return { kind: "count", heart, streakDay: 1, outbox };
    };
    // The server's ranking row is held by another transaction, so both writes start (their snapshots taken) and wait before either commits.
    let release = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    let locked = () => {};
    const holding = new Promise<void>((resolve) => (locked = resolve));
    const holder = runSqlTransaction(
      stack.prisma,
      async (tx) => {
        await tx.query(Prisma.sql`SELECT 1 FROM server_rankings WHERE server_id = ${serverId}::uuid FOR UPDATE`);
        locked();
        await released;
      },
      { timeoutMs: 30_000 },
    );
    await holding;
    const at = clock.now();
    const writes = [writeHearts(stack.prisma, [write("cap-race-a", at)]), writeHearts(stack.prisma, [write("cap-race-b", new Date(at.getTime() + 1))])];
    await eventually(async () => {
      const [row] = await runSql<{ waiting: bigint }>(
        stack.prisma,
        Prisma.sql`SELECT count(*) AS waiting FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return (row?.waiting ?? 0n) >= 2n;
    });
    release();
    await holder;
    const won = await Promise.all(writes);
    t.deepEqual(
      won.map((w) => w.size),
      [1, 1],
      "both hearts counted",
    );
    t.is(await stack.prisma.voteClaim.count({ where: { serverId, state: "held" } }), 2, "the player holds the cap, not one over");
    t.is(await stack.prisma.voteClaim.count({ where: { serverId, state: "expired", expiredReason: "cap" } }), 2);
  },
);

test.serial("10 concurrent ClaimVote calls for one held heart: exactly one answers 1 (CLAIMED_NOW), the other nine 2", async (t) => {
  const { claims, stack } = t.context;
  const { claimKey, serverId } = await claimServer(t);
  const heart = await vote(t, serverId, { username: "Racer" });
  // Warm up: the key is resolved (and cached), the HTTP/2 session and ten pooled connections are open, so the ten
  // claims really run at once (else connection set-up spaces them out and they pass one by one).
  const player = { kind: PlayerIdKind.USERNAME, value: "racer" };
  const warm = await Promise.all(Array.from({ length: 10 }, () => claims.checkVote({ claimKey, player })));
  t.true(warm.every((a) => a.status === ClaimStatus.VOTED_UNCLAIMED));
  const answers = await Promise.all(Array.from({ length: 10 }, () => claims.claimVote({ claimKey, player })));
  const statuses = answers.map((a) => a.status).sort();
  t.deepEqual(statuses, [ClaimStatus.CLAIMED_NOW, ...Array<ClaimStatus>(9).fill(ClaimStatus.ALREADY_CLAIMED)]);
  t.true(answers.every((a) => a.heartId === heart.heartId));
  t.like(await stack.prisma.voteClaim.findUniqueOrThrow({ where: { heartId: heart.heartId } }), { state: "claimed" });
});

test.serial("a server without a claim key keeps no ledger: its counted hearts are not held", async (t) => {
  const { stack } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: "No plugin" });
  const heart = await vote(t, server!.id, { steamId: STEAM });
  t.true(heart.counted);
  t.is(await stack.prisma.voteClaim.count({ where: { heartId: heart.heartId } }), 0);
  t.like((await stack.clients.admin.getServer({ serverId: server!.id })).server?.claims, { claimKeySet: false, holdDays: 30, maxHeldPerPlayer: 20 });
});

test.serial("the claim key: sealed at rest with only its SHA-256 for lookup; reveal shows it; rotation stops the old key (after the cache)", async (t) => {
  const { stack, claims, clock } = t.context;
  const { claimKey, serverId } = await claimServer(t);
  const row = await stack.prisma.serverSecret.findFirstOrThrow({ where: { serverId, purpose: "claim" } });
  t.false(row.ciphertext.includes(claimKey));
  t.is(row.lookupHash?.length, 64);
  t.is((await stack.clients.admin.revealClaimKey({ serverId })).claimKey, claimKey);
  t.like((await stack.clients.admin.getServer({ serverId })).server?.claims, { claimKeySet: true });

  t.like(await claims.checkVote({ claimKey, player: steam(STEAM) }), { keyValid: true });
  const rotated = (await stack.clients.admin.rotateClaimKey({ serverId })).claimKey;
  t.not(rotated, claimKey);
  t.is((await stack.clients.admin.revealClaimKey({ serverId })).claimKey, rotated);
  t.like(await claims.checkVote({ claimKey: rotated, player: steam(STEAM) }), { keyValid: true, serverId });
  clock.advanceMs(6_000);
  t.like(await claims.checkVote({ claimKey, player: steam(STEAM) }), { keyValid: false, status: ClaimStatus.NOT_FOUND });
});

test.serial("SetClaimSettings: hold window 1..90 and cap 1..1000 (0 keeps), named in the error; reported on the server", async (t) => {
  const { admin } = t.context.stack.clients;
  const { serverId } = await claimServer(t);
  const { server } = await admin.setClaimSettings({ serverId, holdDays: 90, maxHeldPerPlayer: 5 });
  t.like(server?.claims, { claimKeySet: true, holdDays: 90, maxHeldPerPlayer: 5 });
  t.like((await admin.setClaimSettings({ serverId, holdDays: 7 })).server?.claims, { holdDays: 7, maxHeldPerPlayer: 5 });
  for (const [input, field] of [
    [{ holdDays: 91 }, "hold_days"],
    [{ holdDays: -1 }, "hold_days"],
    [{ maxHeldPerPlayer: 1001 }, "max_held_per_player"],
  ] as const) {
    const error = await t.throwsAsync(admin.setClaimSettings({ serverId, ...input }), { instanceOf: ConnectError });
    t.is(error?.code, Code.InvalidArgument);
    t.true(error?.rawMessage.startsWith(field));
  }
});

test.serial("access: CheckVote/ClaimVote need the claims scope (the gateway's default token has it); key management needs admin", async (t) => {
  const { stack } = t.context;
  const { claimKey, serverId } = await claimServer(t);
  const tokenWith = async (scopes: string[]) => (await stack.clients.access.createServiceToken({ name: `t-${counter++}`, scopes })).token;
  const clientFor = (token: string) => createClient(ClaimService, createServiceTransport(stack.rpcUrl, token));
  const player = steam(STEAM);

  const gateway = clientFor(await tokenWith([...DEFAULT_GATEWAY_SCOPES]));
  t.like(await gateway.checkVote({ claimKey, player }), { keyValid: true });

  const others = clientFor(await tokenWith(["ingest", "pull", "clicks:record", "hearts:cast", "read", "dashboard"]));
  for (const call of [() => others.checkVote({ claimKey, player }), () => others.claimVote({ claimKey, player })]) {
    t.is((await t.throwsAsync(call(), { instanceOf: ConnectError }))?.code, Code.PermissionDenied);
  }
  const anonymous = createClient(ClaimService, createServiceTransport(stack.rpcUrl, ""));
  t.is((await t.throwsAsync(anonymous.claimVote({ claimKey, player }), { instanceOf: ConnectError }))?.code, Code.Unauthenticated);

  const { createServiceClients } = await import("../../scripts/harness/stack.js");
  const notAdmin = createServiceClients(stack.rpcUrl, await tokenWith([...DEFAULT_GATEWAY_SCOPES, "read"]));
  for (const call of [
    () => notAdmin.admin.rotateClaimKey({ serverId }),
    () => notAdmin.admin.revealClaimKey({ serverId }),
    () => notAdmin.admin.setClaimSettings({ serverId, holdDays: 3 }),
  ]) {
    t.is((await t.throwsAsync(call(), { instanceOf: ConnectError }))?.code, Code.PermissionDenied);
  }
});

test.serial("ListHearts shows each heart's claim state (an unmarked heart past its window as expired) and filters by it", async (t) => {
  const { stack, clock, claims } = t.context;
  clock.set("2026-08-01T00:00:00.000Z");
  const { claimKey, serverId } = await claimServer(t, { holdDays: 1, maxHeldPerPlayer: 1 });
  const capped = await vote(t, serverId, { steamId: STEAM });
  clock.advanceMs(60_000);
  const claimed = await vote(t, serverId, { steamId: STEAM });
  await claims.claimVote({ claimKey, player: steam(STEAM) });
  const held = await vote(t, serverId, { steamId: OTHER_STEAM });
  const { hearts } = stack.clients;

  const states = async () => Object.fromEntries((await hearts.listHearts({ serverId })).hearts.map((h) => [h.heartId, [h.claimState, h.claimExpiredReason]]));
  t.deepEqual(await states(), {
    [capped.heartId]: ["expired", "cap"],
    [claimed.heartId]: ["claimed", ""],
    [held.heartId]: ["held", ""],
  });
  const expiresAt = (await hearts.listHearts({ serverId, claimState: "held" })).hearts[0]?.claimExpiresAt;
  t.is(expiresAt && timestampDate(expiresAt).toISOString(), "2026-08-02T00:01:00.000Z");

  clock.advanceMs(1 * DAY_MS);
  t.deepEqual((await states())[held.heartId], ["expired", "window"], "derived at read time, before any mark");
  t.deepEqual((await hearts.listHearts({ serverId, claimState: "expired" })).hearts.map((h) => h.heartId).sort(), [capped.heartId, held.heartId].sort());
  t.deepEqual(
    (await hearts.listHearts({ serverId, claimState: "claimed" })).hearts.map((h) => h.heartId),
    [claimed.heartId],
  );
  const error = await t.throwsAsync(hearts.listHearts({ serverId, claimState: "lost" }), { instanceOf: ConnectError });
  t.is(error?.code, Code.InvalidArgument);
  t.true(error?.rawMessage.startsWith("claim_state"));
});
