/**
 * The plugin activity card's store (issue 33) on the real stack: the gateway records every answered
 * check/claim call in memory and sends them in batches (gateway/record-plugin-calls.ts) to
 * PluginActivityService.RecordPluginCalls, which upserts plugin_activity with one statement per batch
 * (services/plugin-activity/record-plugin-calls.ts). A wrong key is kept under a server only when the URL
 * names it; the table stays bounded (one row per server, path, id kind and outcome) and ages out; the key
 * never reaches a stored column or a log line; the RPCs refuse tokens without their scope and other owners.
 */
import anyTest, { type TestFn } from "ava";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import { PluginCallOutcome, PluginCallSchema, type PluginCall } from "../../gen/proto/claims/v1/plugin_activity_pb.js";
import { PLUGIN_PRESET_PATHS, VOTES_JSON_PATH, VOTES_PATH } from "../../gateway/handle-vote-claim.js";
import { MAX_PLUGIN_ACTIVITY_ROWS } from "../../services/plugin-activity/get-plugin-activity.js";
import { PLUGIN_ACTIVITY_DELETE_PER_BATCH, PLUGIN_ACTIVITY_MAX_AGE_MS } from "../../services/plugin-activity/record-plugin-calls.js";
import { MAX_PLUGIN_CALLS_PER_BATCH } from "../../services/shared/values/plugin-call-limits.js";
import { runSql } from "../../services/shared/adapters/sql/executor.js";
import { Prisma } from "../../gen/prisma/client.js";
import { captureLog, type CapturedLog } from "../helpers/capture-log.js";
import { eventually } from "../helpers/eventually.js";
import { ownerApi, signInOwner } from "../helpers/owner-session.js";
import { pluginGet } from "../../scripts/harness/plugin-clients.js";
import { createServiceClients, startStack, type TestGateway, type TestStack } from "../../scripts/harness/stack.js";

interface Context {
  stack: TestStack;
  gateway: TestGateway;
  gatewayLog: CapturedLog;
  serviceLog: CapturedLog;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const serviceLog = captureLog("debug");
  const gatewayLog = captureLog("debug");
  // Login links are opened on the test's gateway by their path (openLoginLink): the base only has to be a URL.
  const stack = await startStack({ gateway: false, log: serviceLog.log, publicBaseUrl: "http://gateway.invalid" });
  const gateway = await stack.startGateway({
    log: gatewayLog.log,
    serviceToken: "gateway",
    dashboard: { token: undefined },
    overrides: () => ({ pluginCallFlushMs: 50 }),
  });
  t.context = { stack, gateway, gatewayLog, serviceLog };
});

test.after.always(async (t) => {
  await t.context.stack?.close();
});

let seq = 0;
async function serverWithKey(t: { context: Context }) {
  const { clients } = t.context.stack;
  const { server } = await clients.admin.createServer({ name: `Activity ${++seq}` });
  const serverId = server!.id;
  const { claimKey } = await clients.admin.rotateClaimKey({ serverId });
  return { serverId, claimKey };
}

async function rowsOf(t: { context: Context }, serverId: string) {
  return (await t.context.stack.clients.pluginActivity.getPluginActivity({ serverId })).rows;
}

const STEAM_ID = "76561198000001234";

test.serial(
  "a batch of calls is stored per path, id kind and outcome: a wrong key under the server its URL names, a malformed SteamID, a player who never voted, a paid claim",
  async (t) => {
    const { serverId, claimKey } = await serverWithKey(t);
    const { clients } = t.context.stack;
    const cast = await clients.hearts.castHeart({
      serverId,
      username: "Rusty",
      voterIdentity: `voter-${randomBytes(6).toString("hex")}`,
      ip: "198.51.100.7",
      userAgent: "Mozilla/5.0 activity test",
      steamId: STEAM_ID,
    });
    t.true(cast.counted);
    const base = t.context.gateway.url;
    const wrong = `vck_${randomBytes(32).toString("base64url").slice(0, 43)}`;
    const answers = [
      await pluginGet(`${base}/api/votes?action=status&key=${wrong}&server=${serverId}&steamid=${STEAM_ID}`),
      await pluginGet(`${base}/api/votes?action=status&key=${wrong}&server=${serverId}&steamid=${STEAM_ID}`),
      // A wrong key whose URL names no server belongs to no one: kept nowhere.
      await pluginGet(`${base}/api/votes?action=status&key=${wrong}&steamid=${STEAM_ID}`),
      await pluginGet(`${base}/api/?object=votes&element=claim&key=${claimKey}&steamid=STEAM_0:1:1234`),
      await pluginGet(`${base}/api/votes/json?action=status&key=${claimKey}&username=nobody`),
      await pluginGet(`${base}/api/votes?action=claim&key=${claimKey}&steamid=${STEAM_ID}`),
    ];
    t.deepEqual(
      answers.map((a) => a.body.slice(0, 1)),
      ["0", "0", "0", "0", "{", "1"],
      "the plugins' answers are unchanged",
    );

    const rows = await eventually(async () => {
      const found = await rowsOf(t, serverId);
      return found.length === 4 && found.find((r) => r.outcome === PluginCallOutcome.WRONG_KEY)?.calls === 2 ? found : undefined;
    });
    const byOutcome = (outcome: PluginCallOutcome) => rows.find((r) => r.outcome === outcome)!;
    t.like(byOutcome(PluginCallOutcome.WRONG_KEY), { family: VOTES_PATH, playerIdKind: PlayerIdKind.STEAM_ID, calls: 2, lastAction: "check", lastAnswer: "0" });
    t.is(byOutcome(PluginCallOutcome.WRONG_KEY).lastPlayerId, "", "a wrong-key call's player id is not kept: anyone can send one");
    t.like(byOutcome(PluginCallOutcome.MALFORMED_ID), {
      family: "/api/",
      playerIdKind: PlayerIdKind.STEAM_ID,
      calls: 1,
      lastAnswer: "0",
      lastPlayerId: "STEAM_0:1:1234",
    });
    t.like(byOutcome(PluginCallOutcome.NEVER_VOTED), {
      family: VOTES_JSON_PATH,
      playerIdKind: PlayerIdKind.USERNAME,
      lastAnswer: "not_found",
      lastPlayerId: "nobody",
    });
    t.like(byOutcome(PluginCallOutcome.OK), { family: VOTES_PATH, lastAction: "claim", lastAnswer: "1", lastPlayerId: STEAM_ID });
    const elsewhere = await runSql<{ n: bigint }>(
      t.context.stack.prisma,
      Prisma.sql`SELECT count(*) AS n FROM plugin_activity WHERE server_id <> ${serverId}::uuid`,
    );
    t.is(elsewhere[0]?.n, 0n, "the wrong key without a server in its URL is kept under no server");

    const stored = JSON.stringify(await runSql(t.context.stack.prisma, Prisma.sql`SELECT row_to_json(p)::text AS r FROM plugin_activity p`));
    const logs = [...t.context.gatewayLog.raw, ...t.context.serviceLog.raw].join("\n");
    for (const key of [claimKey, wrong]) {
      const hash = createHash("sha256").update(key).digest("hex");
      for (const secret of [key, hash]) {
        t.false(stored.includes(secret), "neither the key nor its hash is in a stored column");
        t.false(logs.includes(secret), "neither the key nor its hash is in a log line");
      }
    }
  },
);

/** A call as the gateway sends it, attributed by the server the answer named. */
function callOf(serverId: string, family: string, kind: PlayerIdKind, outcome: PluginCallOutcome, at: Date): PluginCall {
  return create(PluginCallSchema, {
    at: timestampFromDate(at),
    family,
    playerIdKind: kind,
    outcome,
    action: "check",
    answer: "0",
    serverId: outcome === PluginCallOutcome.WRONG_KEY ? "" : serverId,
    urlServerId: outcome === PluginCallOutcome.WRONG_KEY ? serverId : "",
    playerId: "76561198000000001",
  });
}

test.serial(
  "the bound holds: 5,000 calls over every path, id kind and outcome leave at most one row per path, id kind and outcome (160), every call counted",
  async (t) => {
    const { serverId } = await serverWithKey(t);
    const families = [VOTES_PATH, VOTES_JSON_PATH, ...PLUGIN_PRESET_PATHS.map((p) => p.path)];
    const kinds = [PlayerIdKind.STEAM_ID, PlayerIdKind.USERNAME, PlayerIdKind.DISCORD_ID, PlayerIdKind.MINECRAFT_UUID, PlayerIdKind.ACCOUNT_ID];
    const outcomes = [PluginCallOutcome.OK, PluginCallOutcome.NEVER_VOTED, PluginCallOutcome.WRONG_KEY, PluginCallOutcome.MALFORMED_ID];
    const at = new Date();
    for (let batch = 0; batch < 5_000 / MAX_PLUGIN_CALLS_PER_BATCH; batch++) {
      const calls = Array.from({ length: MAX_PLUGIN_CALLS_PER_BATCH }, (_, i) => {
        const n = batch * MAX_PLUGIN_CALLS_PER_BATCH + i;
        return callOf(serverId, families[n % families.length]!, kinds[n % kinds.length]!, outcomes[Math.floor(n / 40) % outcomes.length]!, at);
      });
      const { kept } = await t.context.stack.clients.pluginActivity.recordPluginCalls({ calls });
      t.is(kept, MAX_PLUGIN_CALLS_PER_BATCH);
    }
    const rows = await rowsOf(t, serverId);
    t.is(rows.length, families.length * kinds.length * outcomes.length);
    t.true(rows.length <= MAX_PLUGIN_ACTIVITY_ROWS);
    t.is(
      rows.reduce((sum, r) => sum + r.calls, 0),
      5_000,
    );
  },
);

test.serial("a count an hour old starts over at its next call; rows past the age limit are deleted by the next batches, at most 100 per batch", async (t) => {
  const { serverId } = await serverWithKey(t);
  const { pluginActivity } = t.context.stack.clients;
  const start = new Date();
  await pluginActivity.recordPluginCalls({ calls: [callOf(serverId, VOTES_PATH, PlayerIdKind.STEAM_ID, PluginCallOutcome.OK, start)] });
  await pluginActivity.recordPluginCalls({
    calls: [callOf(serverId, VOTES_PATH, PlayerIdKind.STEAM_ID, PluginCallOutcome.OK, new Date(start.getTime() + 1_000))],
  });
  t.like((await rowsOf(t, serverId))[0], { calls: 2 });
  const later = new Date(start.getTime() + 61 * 60_000);
  await pluginActivity.recordPluginCalls({ calls: [callOf(serverId, VOTES_PATH, PlayerIdKind.STEAM_ID, PluginCallOutcome.OK, later)] });
  const [row] = await rowsOf(t, serverId);
  t.is(row?.calls, 1);
  t.is(row?.since?.seconds, BigInt(Math.floor(later.getTime() / 1000)));

  const old = new Date(Date.now() - PLUGIN_ACTIVITY_MAX_AGE_MS - 60_000);
  await t.context.stack.prisma.pluginActivity.createMany({
    data: Array.from({ length: 150 }, (_, i) => ({
      serverId,
      family: `/old/${i}`,
      playerIdKind: "steam_id",
      outcome: "ok",
      calls: 1,
      since: old,
      lastAt: old,
      lastAction: "check",
      lastAnswer: "1",
    })),
  });
  const oldRows = () => t.context.stack.prisma.pluginActivity.count({ where: { serverId, family: { startsWith: "/old/" } } });
  await pluginActivity.recordPluginCalls({ calls: [callOf(serverId, VOTES_PATH, PlayerIdKind.STEAM_ID, PluginCallOutcome.OK, new Date())] });
  t.is(await oldRows(), 150 - PLUGIN_ACTIVITY_DELETE_PER_BATCH);
  await pluginActivity.recordPluginCalls({ calls: [callOf(serverId, VOTES_PATH, PlayerIdKind.STEAM_ID, PluginCallOutcome.OK, new Date())] });
  t.is(await oldRows(), 0);
  t.is((await rowsOf(t, serverId)).length, 1, "the fresh row stays");
});

test.serial("RecordPluginCalls needs the claims scope and GetPluginActivity the read scope; a token without them is refused", async (t) => {
  const { serverId } = await serverWithKey(t);
  const { stack } = t.context;
  const { token: noClaims } = await stack.clients.access.createServiceToken({ name: `no-claims-${randomUUID()}`, scopes: ["ingest", "pull", "read"] });
  const { token: claimsOnly } = await stack.clients.access.createServiceToken({ name: `claims-only-${randomUUID()}`, scopes: ["claims"] });
  const call = callOf(serverId, VOTES_PATH, PlayerIdKind.STEAM_ID, PluginCallOutcome.OK, new Date());
  const refused = await t.throwsAsync(createServiceClients(stack.rpcUrl, noClaims).pluginActivity.recordPluginCalls({ calls: [call] }));
  t.is(ConnectError.from(refused).code, Code.PermissionDenied);
  t.is((await createServiceClients(stack.rpcUrl, claimsOnly).pluginActivity.recordPluginCalls({ calls: [call] })).kept, 1);
  const unread = await t.throwsAsync(createServiceClients(stack.rpcUrl, claimsOnly).pluginActivity.getPluginActivity({ serverId }));
  t.is(ConnectError.from(unread).code, Code.PermissionDenied);
});

test.serial("an owner reads the plugin activity of their own servers only: another owner's server answers 404 as a missing one", async (t) => {
  const { stack, gateway } = t.context;
  const mine = await serverWithKey(t);
  const theirs = await serverWithKey(t);
  const owner = `owner-${randomUUID()}`;
  const other = `owner-${randomUUID()}`;
  await stack.clients.access.createOwner({ ownerId: other, displayName: "Other" });
  await stack.clients.access.assignServer({ serverId: theirs.serverId, ownerId: other });
  const session = await signInOwner(stack.clients.access, gateway.url, owner);
  await stack.clients.access.assignServer({ serverId: mine.serverId, ownerId: owner });
  await stack.clients.pluginActivity.recordPluginCalls({
    calls: [callOf(theirs.serverId, VOTES_PATH, PlayerIdKind.STEAM_ID, PluginCallOutcome.MALFORMED_ID, new Date())],
  });

  const own = await ownerApi(gateway.url, session, "GET", `/servers/${mine.serverId}/plugin-activity`);
  t.is(own.status, 200, own.text);
  t.deepEqual(JSON.parse(own.text), { rows: [] });
  const foreign = await ownerApi(gateway.url, session, "GET", `/servers/${theirs.serverId}/plugin-activity`);
  const missing = await ownerApi(gateway.url, session, "GET", `/servers/${randomUUID()}/plugin-activity`);
  t.is(foreign.status, 404);
  t.is(foreign.text, missing.text, "the same answer a missing server gets");
  t.false(foreign.text.includes("76561198000000001"));
});
