/**
 * Votifier v2 and the pull API end to end, with every production process started
 * as in production (gateway, referral service, relay, delivery) on this file's own
 * database and consumer group: a counted heart becomes exactly one Votifier vote
 * at a real TCP listener (retried while the listener is down), and the same heart
 * is pulled and claimed through the gateway's signed pull API.
 */
import anyTest, { type TestFn } from "ava";
import { createHmac, randomBytes } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { eventually } from "../helpers/eventually.js";
import { createProcessGroup, freePort, type ProcessGroup } from "../../scripts/harness/processes.js";
import { createServiceClients, type ServiceClients } from "../../scripts/harness/stack.js";
import { startVotifierReceiver, type VotifierReceiver } from "../helpers/votifier-receiver.js";
import {
  dumpOnFailure,
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
  clients: ServiceClients;
  votifier: VotifierReceiver;
}

const test = anyTest as TestFn<Context>;
const TOKEN = `nvt${randomBytes(12).toString("hex")}`;

test.before(async (t) => {
  const brokers = process.env.KAFKA_BROKERS;
  if (!brokers) throw new Error("KAFKA_BROKERS is not set: run the e2e tests through `npm test`");
  const db = await createTestDatabase({ maxConnections: 4 });
  const group = createProcessGroup();
  t.context = { db, group } as Context;
  try {
    const settings = { databaseUrl: db.url, kafkaBrokers: brokers, secretsKey: newSecretsKey(), groupId: `e2e-votifier-${randomBytes(4).toString("hex")}` };
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
    Object.assign(t.context, {
      gateway,
      clients: createServiceClients(referralService.rpcUrl),
      votifier: await startVotifierReceiver({ tokens: { default: TOKEN } }),
    });
  } catch (error) {
    group.dump("before hook failed");
    throw error;
  }
});

test.afterEach.always((t) => dumpOnFailure(t, t.context.group));

test.after.always(async (t) => {
  await t.context.group?.killAll();
  await t.context.votifier?.close();
  await t.context.db?.drop();
});

let ip = 10;
async function castCounted(clients: ServiceClients, serverId: string, username: string): Promise<string> {
  ip++;
  const cast = await retryOverloaded(() =>
    clients.hearts.castHeart({
      serverId,
      username,
      voterIdentity: `voter-${randomBytes(4).toString("hex")}`,
      ip: `198.51.${ip}.9`,
      userAgent: "Mozilla/5.0 e2e",
    }),
  );
  if (!cast.counted) throw new Error(`heart did not count: ${cast.reason}`);
  return cast.heartId;
}

async function signedPull(gatewayUrl: string, path: string, secret: string, payload: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const body = JSON.stringify(payload);
  const ts = Math.floor(Date.now() / 1000);
  const mac = createHmac("sha256", secret).update(`${ts}.${body}`).digest("hex");
  const res = await fetch(`${gatewayUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-signature": `t=${ts},v1=sha256=${mac}` },
    body,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

test.serial(
  "a counted heart -> one Votifier vote, retried while the listener is down, exactly once after; the same heart is pulled and claimed once",
  async (t) => {
    const { clients, votifier, db, gateway } = t.context;
    const { server } = await clients.admin.createServer({ name: "Votifier E2E" });
    const serverId = server!.id;
    await clients.admin.setVotifierSettings({ serverId, host: votifier.host, port: votifier.port, token: TOKEN, serviceName: "HeartsList" });
    await clients.admin.setPullEnabled({ serverId, enabled: true });
    const { secret: pullSecret } = await clients.admin.revealPullSecret({ serverId });

    await votifier.down();
    const heartId = await castCounted(clients, serverId, "Steve");
    const failing = await eventually(
      async () => {
        const d = await db.prisma.delivery.findFirst({ where: { heartId, transport: "votifier" }, include: { attemptsLog: true } });
        return d && d.attemptsLog.length >= 2 ? d : undefined;
      },
      { timeoutMs: 60_000, message: "two failed Votifier attempts while the listener is down" },
    );
    t.is(failing.status, "pending", "still retrying");
    t.true(failing.attemptsLog.every((a) => a.error === "connection failed: ECONNREFUSED"));

    await votifier.up();
    const [vote] = await votifier.waitForVotes(1, 60_000);
    t.like(vote, { serviceName: "HeartsList", username: "Steve", address: "0.0.0.0" });
    await eventually(async () => (await db.prisma.delivery.findFirstOrThrow({ where: { heartId, transport: "votifier" } })).status === "delivered", {
      timeoutMs: 30_000,
    });

    // A second heart as a barrier: once its vote is in, the first had every chance to arrive twice.
    const second = await castCounted(clients, serverId, "Alex");
    await votifier.waitForVotes(2, 60_000);
    await eventually(async () => (await db.prisma.delivery.findFirstOrThrow({ where: { heartId: second, transport: "votifier" } })).status === "delivered", {
      timeoutMs: 30_000,
    });
    t.deepEqual(
      votifier.votes.map((v) => v.username),
      ["Steve", "Alex"],
      "one vote per heart",
    );

    const listed = await eventually(
      async () => {
        const res = await signedPull(gateway.url, "/api/pull/hearts", pullSecret, { server_id: serverId });
        return (res.body.hearts as unknown[] | undefined)?.length === 2 ? res : undefined;
      },
      { timeoutMs: 30_000, message: "both hearts offered for pulling" },
    );
    t.deepEqual(
      (listed.body.hearts as Array<{ heart_id: string }>).map((h) => h.heart_id),
      [heartId, second],
    );
    const claimed = await signedPull(gateway.url, "/api/pull/claims", pullSecret, { server_id: serverId, heart_ids: [heartId, second] });
    t.deepEqual(claimed.body, {
      results: [
        { heart_id: heartId, status: "claimed" },
        { heart_id: second, status: "claimed" },
      ],
    });
    const again = await signedPull(gateway.url, "/api/pull/claims", pullSecret, { server_id: serverId, heart_ids: [heartId] });
    t.deepEqual(again.body, { results: [{ heart_id: heartId, status: "already_claimed" }] });
    t.deepEqual((await signedPull(gateway.url, "/api/pull/hearts", pullSecret, { server_id: serverId })).body, { hearts: [], next_cursor: null });
    const transports = await db.prisma.delivery.findMany({ where: { heartId }, orderBy: { transport: "asc" } });
    t.deepEqual(
      transports.map((d) => [d.transport, d.status]),
      [
        ["callback", "pending"],
        ["votifier", "delivered"],
        ["pull", "delivered"],
      ],
      "the callback delivery is held (no callback URL); Votifier and pull each delivered once",
    );
  },
);
