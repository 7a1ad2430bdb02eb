/**
 * The reward plugins' check/claim API end to end, with the four production processes started as in
 * production (gateway, referral service, relay, delivery) on this file's own PostgreSQL database and the
 * shared Kafka broker. A heart cast with a steam id is checked and claimed through the gateway's
 * `GET /api/votes` by the requests EasyVoteExtended and the FiveM script make (scripts/harness/plugin-clients.ts),
 * parsed as they parse them: check 1 -> claim 1 -> check 2 -> claim 2; a player who never voted and a
 * wrong key get 0; a key-guessing source is refused (429) while the right key from the same source still
 * answers; two claims at once pay once; and the key never appears in any process's output or metrics.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { eventually } from "../helpers/eventually.js";
import { createProcessGroup, freePort, jsonLines, type ProcessGroup } from "../../scripts/harness/processes.js";
import { easyVoteCheck, easyVoteClaim, easyVoteStatus, fivemCheckVote, pluginGet, type EasyVoteSite } from "../../scripts/harness/plugin-clients.js";
import { createServiceClients, type ServiceClients } from "../../scripts/harness/stack.js";
import { DEFAULT_CLAIM_KEY_GUESSES_PER_SOURCE } from "../../gateway/handle-vote-claim.js";
import {
  dumpOnFailure,
  fetchMetrics,
  newSecretsKey,
  precreateTopics,
  startDeliveryProcess,
  startGatewayProcess,
  startReferralServiceProcess,
  startRelayProcess,
  type ServiceProcess,
} from "../../scripts/harness/e2e-support.js";
import { retryOverloaded } from "../helpers/retry-overloaded.js";

interface Context {
  db: TestDatabase;
  group: ProcessGroup;
  gateway: ServiceProcess & { url: string };
  referralService: ServiceProcess & { rpcUrl: string };
  clients: ServiceClients;
}

const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const brokers = process.env.KAFKA_BROKERS;
  if (!brokers) throw new Error("KAFKA_BROKERS is not set: run the e2e tests through `npm test`");
  const db = await createTestDatabase({ maxConnections: 4 });
  const group = createProcessGroup();
  t.context = { db, group } as Context;
  try {
    const settings = { databaseUrl: db.url, kafkaBrokers: brokers, secretsKey: newSecretsKey(), groupId: `e2e-claims-${randomBytes(4).toString("hex")}` };
    const gatewayPort = await freePort();
    const [referralService] = await Promise.all([
      startReferralServiceProcess(group, settings, { publicBaseUrl: `http://127.0.0.1:${gatewayPort}` }),
      precreateTopics(brokers),
    ]);
    const [gateway] = await Promise.all([
      startGatewayProcess(group, { port: gatewayPort, referralServiceUrl: referralService.rpcUrl }),
      startRelayProcess(group, settings),
      startDeliveryProcess(group, settings),
    ]);
    Object.assign(t.context, { gateway, referralService, clients: createServiceClients(referralService.rpcUrl) });
  } catch (error) {
    group.dump("before hook failed");
    throw error;
  }
});

test.afterEach.always((t) => dumpOnFailure(t, t.context.group));

test.after.always(async (t) => {
  await t.context.group?.killAll();
  await t.context.db?.drop();
});

let ip = 20;
async function castWithSteamId(clients: ServiceClients, serverId: string, steamId: string): Promise<string> {
  ip++;
  const cast = await retryOverloaded(() =>
    clients.hearts.castHeart({
      serverId,
      username: `rust${ip}`,
      voterIdentity: `voter-${randomBytes(4).toString("hex")}`,
      ip: `198.51.${ip}.9`,
      userAgent: "Mozilla/5.0 e2e",
      steamId,
    }),
  );
  if (!cast.counted) throw new Error(`heart did not count: ${cast.reason}`);
  return cast.heartId;
}

test.serial(
  "a heart cast with a steam id: check 1, claim 1, check 2, claim 2; never voted 0; wrong key 0; guessing refused while the right key answers; two claims at once pay once; the key in no output",
  async (t) => {
    const { clients, gateway, referralService } = t.context;
    const { server } = await clients.admin.createServer({ name: "Claims E2E" });
    const serverId = server!.id;
    const { claimKey } = await clients.admin.rotateClaimKey({ serverId });
    const steamId = "76561198012345678";
    await castWithSteamId(clients, serverId, steamId);

    // EasyVoteExtended's status/claim family entry, pointed at the gateway.
    const site: EasyVoteSite = {
      statusUrl: `${gateway.url}/api/votes?action=status&key={0}&server={2}&steamid={1}`,
      claimUrl: `${gateway.url}/api/votes?action=claim&key={0}&server={2}&steamid={1}`,
      usesUsername: false,
    };
    const credentials = `${serverId}:${claimKey}`;
    const player = { steamId, displayName: "Rusty" };
    t.is(await easyVoteStatus(site, credentials, player), "claim", "check 1");
    t.deepEqual(await easyVoteClaim(site, credentials, player), { kind: "rewarded" }, "claim 1");
    t.deepEqual(await easyVoteStatus(site, credentials, player), { kind: "told_already_voted" }, "check 2");
    t.deepEqual(await easyVoteClaim(site, credentials, player), { kind: "told_already_voted" }, "claim again 2");
    const bytes = await pluginGet(`${gateway.url}/api/votes?action=claim&key=${claimKey}&steamid=${steamId}`);
    t.deepEqual([bytes.status, bytes.headers["content-type"], bytes.body], [200, "text/plain", "2"]);

    t.deepEqual(await easyVoteCheck(site, credentials, { steamId: "76561198099999999", displayName: "Never" }), { kind: "told_not_voted" }, "never voted: 0");
    const wrongKey = `vck_${randomBytes(16).toString("hex")}`;
    t.deepEqual(await easyVoteCheck(site, `${serverId}:${wrongKey}`, player), { kind: "told_not_voted" }, "wrong key: 0");

    // Two claims at once (the FiveM script on two resources): one pays, the other is told it is claimed.
    const second = "76561198012345679";
    await castWithSteamId(clients, serverId, second);
    const fivem = { apiUrl: `${gateway.url}/api/votes`, serverKey: claimKey, identifier: "steam" as const };
    const fivemPlayer = { steam: `steam:${BigInt(second).toString(16)}`, license: "license:e2e" };
    const raced = await Promise.all([fivemCheckVote(fivem, fivemPlayer), fivemCheckVote(fivem, fivemPlayer)]);
    t.is(raced.filter((r) => r === "rewarded").length, 1, `paid once: ${JSON.stringify(raced)}`);
    t.is(await fivemCheckVote(fivem, fivemPlayer), "vote_already_claimed");

    // Key guessing from this address: 0 until the budget is spent (wrong key 0 above counted once), then 0 with 429.
    const guess = (i: number) => pluginGet(`${gateway.url}/api/votes?action=status&key=vck_guess${i}&steamid=${steamId}`);
    const answered: string[] = [];
    let refused = await guess(0);
    for (let i = 1; refused.status === 200 && i <= 2 * DEFAULT_CLAIM_KEY_GUESSES_PER_SOURCE; i++) {
      answered.push(refused.body);
      refused = await guess(i);
    }
    // Up to the budget (twice it when the limiter's 60 s window rolls over during the loop on a slow machine).
    t.true(
      answered.every((body) => body === "0"),
      `guesses before the limit all answered 0: ${JSON.stringify(answered)}`,
    );
    t.deepEqual([refused.status, refused.body], [429, "0"]);
    t.regex(refused.headers["retry-after"] ?? "", /^[1-9]\d*$/);
    t.deepEqual(await easyVoteStatus(site, credentials, player), { kind: "told_already_voted" }, "the right key still answers from the guessing source");

    // The key (right or wrong) is in no process's output and no metric of the gateway. The processes write their
    // logs asynchronously: wait for the 429's request line (among the last written) before reading the output.
    const requestLines = () => jsonLines(gateway.proc.stdout).filter((l) => String(l.route).startsWith("/api/votes"));
    await eventually(() => requestLines().some((l) => l.outcome === "claim_key_guess_limit" && l.status === 429), {
      timeoutMs: 30_000,
      message: "the refused guess's request line",
    });
    const lines = requestLines();
    t.true(lines.length >= 10, `request lines: ${lines.length}`);
    t.true(
      lines.every((l) => l.path === "/api/votes"),
      "the request line logs the path, never the query",
    );
    const metrics = await fetchMetrics(gateway.opsUrl);
    for (const secret of [claimKey, wrongKey]) {
      t.false(gateway.proc.output.includes(secret), "not in the gateway's output");
      t.false(referralService.proc.output.includes(secret), "not in the referral service's output");
      t.false(metrics.includes(secret), "not in the gateway's metrics");
    }
  },
);
