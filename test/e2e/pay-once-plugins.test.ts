/**
 * Pay-once mode against the reward plugins' own retry rules, on real PostgreSQL, the shared Kafka broker and the
 * four production processes (gateway, referral service, relay, delivery), each its own OS process. A pay-once
 * server has a claim key and an HTTP callback endpoint whose receiver pays each heart_id once. For each supported
 * plugin client (scripts/harness/plugin-clients.ts) the sequence of issue 27 runs:
 *
 * 1. the delivery process is paused (SIGSTOP) and the player's heart is cast, so no callback is sent yet;
 * 2. the plugin checks: `1` (voted, not claimed); its claim is held where the plugin queues it;
 * 3. the referral service (or the gateway) is SIGKILLed, and the plugin's claim fails before reaching the ledger;
 * 4. the process is started again on the same port and the delivery process resumed: the callback is answered 200
 *    and takes the payout;
 * 5. the plugin retries as it does after a failed request (EasyVoteExtended 3.2.9: its claim transaction's retry;
 *    the others: the player's next command, the whole check again).
 *
 * A heart is paid by the receiver (a verified callback answered 200, counted once per heart_id) plus every reward
 * the plugin gave: it must be exactly one. The processes are paused and stopped by signals; every wait is an
 * `eventually` on an outcome, never a sleep.
 */
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { eventually } from "../helpers/eventually.js";
import {
  createEasyVoteExtended329,
  easyVoteCheck,
  fivemCheckVote,
  pluginGet,
  rocketModReward,
  voteRewardQuery,
  type EasyVoteSite,
} from "../../scripts/harness/plugin-clients.js";
import { createProcessGroup, freeRestartablePort, type ProcessGroup } from "../../scripts/harness/processes.js";
import { startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { createServiceClients, type ServiceClients } from "../../scripts/harness/stack.js";
import {
  createPaymentLedger,
  dumpOnFailure,
  newSecretsKey,
  precreateTopics,
  startDeliveryProcess,
  startGatewayProcess,
  startReferralServiceProcess,
  startRelayProcess,
  type PaymentLedger,
  type ServiceProcess,
  type SystemSettings,
} from "../../scripts/harness/e2e-support.js";
import { retryOverloaded } from "../helpers/retry-overloaded.js";

interface Context {
  db: TestDatabase;
  group: ProcessGroup;
  settings: SystemSettings;
  clients: ServiceClients;
  gatewayPort: number;
  referralPort: number;
  /** The current process of each role (replaced when a test restarts one; an object shared by every test's context copy). */
  live: { referralService?: ServiceProcess; gateway?: ServiceProcess; delivery?: ServiceProcess };
  receivers: Receiver[];
}

const test = anyTest as TestFn<Context>;

/** Long enough that the paused delivery process keeps its partitions (no rebalance while it is stopped). */
const PAUSED_DELIVERY_SESSION_MS = "60000";

test.before(async (t) => {
  const brokers = process.env.KAFKA_BROKERS;
  if (!brokers) throw new Error("KAFKA_BROKERS is not set: run the e2e tests through `npm test`");
  const db = await createTestDatabase({ maxConnections: 4 });
  const group = createProcessGroup();
  t.context = { db, group, live: {}, receivers: [] } as unknown as Context;
  try {
    const settings: SystemSettings = {
      databaseUrl: db.url,
      kafkaBrokers: brokers,
      secretsKey: newSecretsKey(),
      groupId: `e2e-pay-once-plugins-${randomBytes(4).toString("hex")}`,
    };
    // Both are stopped and started again on their ports; the gateway and the clients keep their addresses.
    const [gatewayPort, referralPort] = [await freeRestartablePort(), await freeRestartablePort()];
    Object.assign(t.context, { settings, gatewayPort, referralPort });
    const [referralService] = await Promise.all([startReferralService(t.context), precreateTopics(brokers)]);
    const [gateway, , delivery] = await Promise.all([
      startGateway(t.context),
      startRelayProcess(group, settings),
      startDeliveryProcess(group, settings, "delivery", { KAFKA_SESSION_TIMEOUT_MS: PAUSED_DELIVERY_SESSION_MS }),
    ]);
    Object.assign(t.context.live, { referralService, gateway, delivery });
    t.context.clients = createServiceClients(referralService.rpcUrl);
  } catch (error) {
    group.dump("before hook failed");
    throw error;
  }
});

test.afterEach.always((t) => dumpOnFailure(t, t.context.group));

test.after.always(async (t) => {
  await t.context.group?.killAll();
  await Promise.all((t.context.receivers ?? []).map((r) => r.close()));
  await t.context.db?.drop();
});

/** The referral service on its fixed port (a restarted one is where the gateway and the clients look). */
function startReferralService(c: Context): Promise<ServiceProcess & { rpcUrl: string }> {
  return startReferralServiceProcess(c.group, c.settings, { publicBaseUrl: `http://127.0.0.1:${c.gatewayPort}`, env: { PORT: String(c.referralPort) } });
}

function startGateway(c: Context): Promise<ServiceProcess & { url: string }> {
  return startGatewayProcess(c.group, { port: c.gatewayPort, referralServiceUrl: `http://127.0.0.1:${c.referralPort}` });
}

/** The process a plugin's claim fails on: SIGKILLed, then started again on the same port. */
type Outage = "referral service" | "gateway";

async function stop(c: Context, outage: Outage): Promise<void> {
  await (outage === "gateway" ? c.live.gateway : c.live.referralService)!.proc.kill();
}

async function restart(c: Context, outage: Outage): Promise<void> {
  if (outage === "gateway") c.live.gateway = await startGateway(c);
  else c.live.referralService = await startReferralService(c);
}

/** A pay-once server with a claim key and a callback to a receiver of its own that pays each heart_id once (answering 200). */
async function createPayOnceServer(c: Context, name: string): Promise<{ serverId: string; claimKey: string; ledger: PaymentLedger }> {
  const { admin } = c.clients;
  let secret = "";
  const ledger = createPaymentLedger(() => secret);
  const receiver = await startReceiver({ fallback: (request) => ledger.respond(request) });
  c.receivers.push(receiver);
  const { server } = await admin.createServer({ name, registrationUrl: "" });
  const serverId = server!.id;
  const { claimKey } = await admin.rotateClaimKey({ serverId });
  await admin.setCallbackSettings({ serverId, callbackUrl: receiver.url, standardWebhooks: false });
  secret = (await admin.revealCallbackSecret({ serverId })).secret;
  const set = await admin.setClaimSettings({ serverId, paysOnce: true });
  if (!set.server?.claims?.paysOnce) throw new Error("the server is not in pay-once mode");
  return { serverId, claimKey, ledger };
}

let voter = 0;
/** A fresh SteamID64 per player. */
function nextSteamId(): string {
  voter++;
  return `765611980${String(voter).padStart(8, "0")}`;
}

/** Casts the player's heart from an address of its own (a /24 of its own, so the fraud rules stay quiet). */
async function castHeart(c: Context, serverId: string, player: { username: string; steamId?: string }): Promise<string> {
  voter++;
  const cast = await retryOverloaded(() =>
    c.clients.hearts.castHeart({
      serverId,
      username: player.username,
      voterIdentity: `voter-${serverId}-${voter}`,
      ip: `100.${64 + Math.floor(voter / 256)}.${voter % 256}.9`,
      userAgent: "Mozilla/5.0 (X11; Linux x86_64) e2e-pay-once-plugins",
      ...(player.steamId ? { steamId: player.steamId } : {}),
    }),
  );
  if (!cast.counted) throw new Error(`the heart of ${player.username} did not count: ${cast.reason}`);
  return cast.heartId;
}

/** One plugin client in the sequence: its player's heart, its first command, its retry, and the rewards it gave. */
interface PluginRun {
  name: string;
  heartId: string;
  /** The first command; the plugin's claim waits for `gate` (where the plugin queues it). */
  first(gate: () => Promise<void>): Promise<unknown>;
  /** What the plugin does after its failed request (EasyVoteExtended 3.2.9: the claim retry; the others: the next command). */
  retry(): Promise<unknown>;
  /** Rewards the plugin gave. */
  paid(): number;
}

type PluginName = "EasyVoteExtended 3.2.9" | "EasyVoteExtended 3.2.1" | "FiveM vote script" | "VoteReward" | "RocketMod Votifier";

/** Counts the rewards of a stateless plugin's commands. */
function counting<T>(command: (gate?: () => Promise<void>) => Promise<T>, isReward: (outcome: T) => boolean) {
  let rewards = 0;
  const run = async (gate?: () => Promise<void>) => {
    const outcome = await command(gate);
    if (isReward(outcome)) rewards++;
    return outcome;
  };
  return { first: (gate: () => Promise<void>) => run(gate), retry: () => run(), paid: () => rewards };
}

/** A plugin client pointed at the gateway with the server's key, and its player's heart cast. */
async function preparePlugin(c: Context, name: PluginName, server: { serverId: string; claimKey: string }): Promise<PluginRun> {
  const gw = `http://127.0.0.1:${c.gatewayPort}/api/votes`;
  const { serverId, claimKey } = server;
  const steamId = nextSteamId();
  const credentials = `${serverId}:${claimKey}`;
  const rust = { steamId, displayName: `Rusty ${voter}` };
  switch (name) {
    case "EasyVoteExtended 3.2.9": {
      // The status/claim family (rustservers.gg's entry, with server={2}).
      const site: EasyVoteSite = {
        statusUrl: `${gw}?action=status&key={0}&server={2}&steamid={1}`,
        claimUrl: `${gw}?action=claim&key={0}&server={2}&steamid={1}`,
        usesUsername: false,
      };
      let gate: (() => Promise<void>) | undefined;
      const plugin = createEasyVoteExtended329({ site, credentials, beforeClaim: (_, attempt) => (attempt === 1 && gate ? gate() : Promise.resolve()) });
      const heartId = await castHeart(c, serverId, { username: rust.displayName, steamId });
      return {
        name,
        heartId,
        first: (g) => {
          gate = g;
          return plugin.checkVotingStatus(rust);
        },
        retry: () => plugin.retryClaims(),
        paid: () => plugin.paidCount(steamId),
      };
    }
    case "EasyVoteExtended 3.2.1": {
      // Its default rust-servers.net templates: the object=votes check and the action=custom claim.
      const site: EasyVoteSite = {
        statusUrl: `${gw}?object=votes&element=claim&key={0}&steamid={1}`,
        claimUrl: `${gw}?action=custom&object=plugin&element=reward&key={0}&steamid={1}`,
        usesUsername: false,
      };
      const heartId = await castHeart(c, serverId, { username: rust.displayName, steamId });
      const runs = counting(
        (gate) => easyVoteCheck(site, credentials, rust, gate ? { beforeClaim: gate } : {}),
        (o) => o.kind === "rewarded",
      );
      return { name, heartId, ...runs };
    }
    case "FiveM vote script": {
      const config = { apiUrl: gw, serverKey: claimKey, identifier: "steam" as const };
      const player = { steam: `steam:${BigInt(steamId).toString(16)}`, license: `license:${randomBytes(20).toString("hex")}` };
      const heartId = await castHeart(c, serverId, { username: `FiveM ${voter}`, steamId });
      const runs = counting(
        (gate) => fivemCheckVote(config, player, gate ? { beforeClaim: gate } : {}),
        (o) => o === "rewarded",
      );
      return { name, heartId, ...runs };
    }
    case "VoteReward": {
      const vrc = {
        name: "HeartsList",
        website: `http://127.0.0.1:${c.gatewayPort}`,
        check: `${gw}/json?object=votes&element=claim&key=${claimKey}&username={USERNAME}`,
        claim: `${gw}/json?action=post&object=votes&element=claim&key=${claimKey}&username={USERNAME}`,
      };
      const playerName = `Pocket Miner ${voter}`;
      const heartId = await castHeart(c, serverId, { username: playerName });
      const runs = counting(
        (gate) => voteRewardQuery(vrc, playerName, gate ? { beforeClaim: gate } : {}),
        (o) => o.kind === "rewarded",
      );
      return { name, heartId, ...runs };
    }
    case "RocketMod Votifier": {
      // unturned-servers.net's ServiceDefinition, pointed at the gateway.
      const service = {
        apiKey: claimKey,
        checkHasVoted: `${gw}?object=votes&element=claim&key={0}&steamid={1}`,
        reportSuccess: `${gw}?action=post&object=votes&element=claim&key={0}&steamid={1}`,
      };
      const heartId = await castHeart(c, serverId, { username: `Unturned ${voter}`, steamId });
      const runs = counting(
        (gate) => rocketModReward(service, steamId, gate ? { beforeClaim: gate } : {}),
        (o) => o.kind === "rewarded",
      );
      return { name, heartId, ...runs };
    }
  }
}

/** Payments of each plugin's heart: the receiver's (once per heart_id) plus the plugin's own rewards. */
function paymentsOf(plugins: PluginRun[], ledger: PaymentLedger): Record<string, number> {
  return Object.fromEntries(plugins.map((p) => [p.name, (ledger.paid.has(p.heartId) ? 1 : 0) + p.paid()]));
}

/**
 * The sequence of the file's comment for `names` on one fresh pay-once server, with `outage` as the process the
 * claims fail on. Returns the payments per plugin and what each step answered (for the failure message).
 */
async function runSequence(t: ExecutionContext<Context>, outage: Outage, names: PluginName[]): Promise<{ payments: Record<string, number>; steps: string[] }> {
  const c = t.context;
  const { db } = c;
  const server = await createPayOnceServer(c, `Pay once, ${outage} stopped`);
  const steps: string[] = [];
  const delivery = c.live.delivery!.proc;
  const plugins: PluginRun[] = [];
  delivery.signal("SIGSTOP");
  try {
    for (const name of names) plugins.push(await preparePlugin(c, name, server));

    // Every plugin checks (1) and queues its claim; the claims wait until the outage has begun.
    let opened: () => void = () => undefined;
    const outageBegun = new Promise<void>((resolve) => (opened = resolve));
    const atClaim = new Set<string>();
    const firsts = plugins.map((p) =>
      p.first(() => {
        atClaim.add(p.name);
        return outageBegun;
      }),
    );
    const settled = new Set<string>();
    firsts.forEach((f, i) => void f.finally(() => settled.add(plugins[i]!.name)));
    await eventually(() => plugins.every((p) => atClaim.has(p.name) || settled.has(p.name)), { message: "every plugin checked" });
    const checkedOne = plugins.filter((p) => atClaim.has(p.name)).map((p) => p.name);
    t.deepEqual(checkedOne, names, "every plugin's check answered 1 (the heart voted and not claimed) and it went on to claim");

    await stop(c, outage);
    if (outage === "referral service") {
      // What the plugins' claims get while the referral service is down: the retryable 503 with Retry-After, never a 500.
      const probe = await pluginGet(`http://127.0.0.1:${c.gatewayPort}/api/votes?action=claim&key=${server.claimKey}&steamid=${nextSteamId()}`);
      t.is(probe.status, 503, `a claim while the referral service is down answers 503: ${probe.body}`);
      t.regex(probe.headers["retry-after"] ?? "", /^[1-9]\d*$/, "with Retry-After");
    }
    opened();
    const first = await Promise.all(firsts);
    plugins.forEach((p, i) => steps.push(`${p.name} first: ${JSON.stringify(first[i])}`));
    await restart(c, outage);
  } finally {
    delivery.signal("SIGCONT");
  }

  // The callback of every heart is answered 200 and takes the payout (the row settled, so no claim races the send).
  const heartIds = plugins.map((p) => p.heartId);
  await eventually(() => heartIds.every((id) => server.ledger.paid.has(id)), { timeoutMs: 60_000, message: "the receiver paid every heart" });
  await eventually(
    async () => {
      const payouts = await db.prisma.heartPayout.findMany({ where: { heartId: { in: heartIds } } });
      return payouts.length === heartIds.length && payouts.every((p) => p.state === "paid" && p.transport === "callback");
    },
    { message: "every heart's payout is the callback's, paid" },
  );

  for (const p of plugins) steps.push(`${p.name} retry: ${JSON.stringify(await p.retry())}`);
  return { payments: paymentsOf(plugins, server.ledger), steps };
}

const PAY_ONCE_PLUGINS: PluginName[] = ["EasyVoteExtended 3.2.9", "EasyVoteExtended 3.2.1", "FiveM vote script", "VoteReward"];
const exactlyOnce = (names: PluginName[]) => Object.fromEntries(names.map((n) => [n, 1]));

for (const outage of ["referral service", "gateway"] as const) {
  test.serial(
    `pay-once: check 1, the claim fails while the ${outage} is down, the callback pays, the plugin retries as it does: every plugin client pays the heart exactly once in all`,
    async (t) => {
      t.timeout(120_000);
      const { payments, steps } = await runSequence(t, outage, PAY_ONCE_PLUGINS);
      t.deepEqual(payments, exactlyOnce(PAY_ONCE_PLUGINS), `payments per heart (receiver + plugin); ${steps.join("; ")}`);
    },
  );
}

// RocketMod Votifier gives the reward on the check's "1" and only then reports the claim, whose answer (or failure) it
// never reads. When that report fails, nothing tells the service the heart was paid, and the callback pays it as well:
// no answer of the service can prevent it. Kept as a known failure so the limit stays visible.
test.serial.failing(
  "pay-once (known limit of RocketMod Votifier, which pays before it claims): check 1, its report fails while the gateway is down, the callback pays: paid once in all",
  async (t) => {
    t.timeout(120_000);
    const names: PluginName[] = ["RocketMod Votifier"];
    const { payments, steps } = await runSequence(t, "gateway", names);
    t.deepEqual(payments, exactlyOnce(names), `payments per heart (receiver + plugin); ${steps.join("; ")}`);
  },
);

test.serial(
  "pay-once: a heart the callback paid answers 0 on check and on claim in both digit families, and voted, not claimed, paid_elsewhere in JSON",
  async (t) => {
    const c = t.context;
    const { serverId, claimKey, ledger } = await createPayOnceServer(c, "Paid elsewhere");
    const steamId = nextSteamId();
    const heartId = await castHeart(c, serverId, { username: "Paid Elsewhere", steamId });
    await eventually(() => ledger.paid.has(heartId), { timeoutMs: 30_000, message: "the callback paid the heart" });
    await eventually(async () => (await c.db.prisma.heartPayout.findUnique({ where: { heartId } }))?.state === "paid", { message: "the payout is paid" });

    const gw = `http://127.0.0.1:${c.gatewayPort}/api/votes`;
    const digits: Record<string, string> = {};
    for (const query of [
      "action=status",
      "action=claim",
      "object=votes&element=claim",
      "action=post&object=votes&element=claim",
      "action=custom&object=plugin&element=reward",
    ]) {
      const res = await pluginGet(`${gw}?${query}&key=${claimKey}&steamid=${steamId}`);
      digits[query] = `${res.status} ${res.body}`;
    }
    t.deepEqual(digits, {
      "action=status": "200 0",
      "action=claim": "200 0",
      "object=votes&element=claim": "200 0",
      "action=post&object=votes&element=claim": "200 0",
      "action=custom&object=plugin&element=reward": "200 0",
    });
    for (const query of ["object=votes&element=claim", "action=post&object=votes&element=claim"]) {
      const res = await pluginGet(`${gw}/json?${query}&key=${claimKey}&steamid=${steamId}`);
      const body = JSON.parse(res.body) as Record<string, unknown>;
      t.deepEqual([res.status, body.voted, body.claimed, body.status], [200, true, false, "paid_elsewhere"], `${query}: ${res.body}`);
    }
  },
);
