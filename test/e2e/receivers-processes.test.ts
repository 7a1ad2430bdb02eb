/**
 * The platform receivers of docs/receivers/ (Node, Python, PHP, Go, Java, C#) against live callbacks
 * from the system as the README runs it: gateway, referral service, relay and delivery, each its own
 * OS process (`node --import tsx <main.ts>`), on this file's own PostgreSQL database and the shared
 * Kafka broker. One set of processes serves the whole file; each test starts its receiver in its own
 * runtime, as a subprocess, exactly as its README says (test/helpers/receivers-run.ts).
 * Per platform: a counted heart is paid once, a redelivery and a redelivery after a restart of the
 * receiver pay nothing more, the dashboard's test callback gets a 2xx and pays nothing, and a tampered
 * body is refused. The Node and Python receivers also in their Standard Webhooks (`v1,` with the
 * whsec_ secret) and public-key (`v1a,` with the keys the gateway process publishes, no secret) modes.
 * The check/claim flows, against the gateway process's /api/votes: the C# plugin's /claim by SteamID64
 * (pays on 1, not on 2, except when its own previous claim's answer was lost) and the PHP claim page by
 * accountid= or username=.
 * The frozen vectors are test/integration/receivers.test.ts.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import anyTest, { type TestFn } from "ava";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { eventually } from "../helpers/eventually.js";
import { createProcessGroup, freePort, type ProcessGroup } from "../../scripts/harness/processes.js";
import { RECEIVER_PLATFORMS, runCsharpClaim, startPhpClaimPage, startPlatformReceiver, stopOnTeardown } from "../helpers/receivers-run.js";
import { createServiceClients, type ServiceClients } from "../../scripts/harness/stack.js";
import {
  dumpOnFailure,
  newSecretsKey,
  precreateTopics,
  startDeliveryProcess,
  startGatewayProcess,
  startReferralServiceProcess,
  startRelayProcess,
} from "../../scripts/harness/e2e-support.js";

interface Context {
  db: TestDatabase;
  group: ProcessGroup;
  gatewayUrl: string;
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
    const settings = { databaseUrl: db.url, kafkaBrokers: brokers, secretsKey: newSecretsKey(), groupId: `e2e-receivers-${randomBytes(4).toString("hex")}` };
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
    t.context.gatewayUrl = gateway.url;
    t.context.clients = createServiceClients(referralService.rpcUrl);
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

let voter = 0;

/** Casts a heart for `username` (and any platform ids) on `serverId` through the referral service process; returns its heart_id. */
async function castCounted(c: Context, serverId: string, username: string, ids: { steamId?: string; accountId?: string } = {}): Promise<string> {
  voter += 1;
  const vote = {
    serverId,
    username,
    ...ids,
    voterIdentity: `voter-${randomBytes(4).toString("hex")}`,
    ip: `203.0.113.${voter}`,
    userAgent: "Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0",
  };
  // On a loaded machine the heart batch may answer overloaded (retryable): retry as a client would.
  const cast = await eventually(() => c.clients.hearts.castHeart(vote), { timeoutMs: 60_000, intervalMs: 1_000, message: "heart cast" });
  if (!cast.counted) throw new Error(`heart not counted: ${cast.reason}`);
  return cast.heartId;
}

/** Resolves once the delivery of `heartId` has `n` successful attempts; returns its id. */
async function succeeded(c: Context, heartId: string, n: number): Promise<string> {
  return eventually(
    async () => {
      const row = await c.db.prisma.delivery.findFirst({ where: { heartId } });
      if (!row) return undefined;
      return (await c.db.prisma.deliveryAttempt.count({ where: { deliveryId: row.id, succeeded: true } })) >= n ? row.id : undefined;
    },
    { timeoutMs: 60_000, message: `${n} successful attempts for ${heartId}` },
  );
}

for (const platform of Object.keys(RECEIVER_PLATFORMS)) {
  test.serial(
    `${platform} receiver, four processes: a live callback pays once; a redelivery, and a redelivery after a restart, pay nothing more; the test callback gets 2xx and pays nothing; a tampered body is refused`,
    async (t) => {
      const { admin, delivery } = t.context.clients;
      const port = await freePort();
      const storeDir = mkdtempSync(join(tmpdir(), `receiver-live-${platform}-`));
      const { server } = await admin.createServer({ name: `Receivers ${platform}`, registrationUrl: "" });
      const serverId = server!.id;
      await admin.setCallbackSettings({ serverId, callbackUrl: `http://127.0.0.1:${port}/callback`, standardWebhooks: true });
      const { secret } = await admin.revealCallbackSecret({ serverId });
      const first = stopOnTeardown(t, await startPlatformReceiver(platform, { serverId, secrets: [secret], storeDir, port }));

      const username = `Steve_${platform}`;
      const heartId = await castCounted(t.context, serverId, username);
      const paidLine = `PAID ${heartId} ${username}`;
      await eventually(() => first.paid().includes(paidLine), { timeoutMs: 60_000, message: `${platform}: ${paidLine}` });
      const deliveryId = await succeeded(t.context, heartId, 1);

      await delivery.redeliver({ deliveryId, serverId });
      await succeeded(t.context, heartId, 2);
      t.deepEqual(await first.settledPaid(), [paidLine], "a redelivery (same heart_id) is answered 2xx and pays nothing");

      await first.stop();
      const restarted = stopOnTeardown(t, await startPlatformReceiver(platform, { serverId, secrets: [secret], storeDir, port }));
      await delivery.redeliver({ deliveryId, serverId });
      await succeeded(t.context, heartId, 3);
      t.deepEqual(await restarted.settledPaid(), [], "the paid store survived the restart");

      const { report } = await delivery.sendTestCallback({ serverId, username: "Tester" });
      t.true(report?.ok, `${report?.statusCode} ${report?.responseBody}`);
      t.true((report?.statusCode ?? 0) >= 200 && (report?.statusCode ?? 0) < 300);
      t.deepEqual(await restarted.settledPaid(), [], "heart.test pays nothing");

      // The last attempt's exact request, replayed: unchanged it is a duplicate (2xx), changed it is refused.
      const { attempts } = await delivery.getDelivery({ deliveryId, serverId });
      const last = attempts.at(-1)!;
      const header = last.requestHeaders["X-Service-Signature"]!;
      const replay = await restarted.post(Buffer.from(last.requestBody, "utf8"), { "x-service-signature": header });
      t.is(replay.status, 200, replay.text);
      const tampered = Buffer.from(last.requestBody.replace(username, `${username}x`), "utf8");
      t.is((await restarted.post(tampered, { "x-service-signature": header })).status, 401);
      t.deepEqual(await restarted.settledPaid(), [], "nothing paid for a replay or a tampered body");
    },
  );
}

/** The two optional schemes: the server's opt-in and the receiver's settings. */
const SCHEMES = {
  "standard-webhooks": { optIn: { standardWebhooks: true, publicKeySignatures: false }, secret: true },
  "public-key": { optIn: { standardWebhooks: false, publicKeySignatures: true }, secret: false },
} as const;

for (const platform of ["node", "python"]) {
  for (const [scheme, { optIn, secret: needsSecret }] of Object.entries(SCHEMES)) {
    test.serial(
      `${platform} receiver, VERIFY=${scheme}, four processes: a server opted in gets a live callback verified by the webhook-* headers${needsSecret ? "" : " with the gateway's published keys and no secret"}, paid once; its replay pays nothing, a tampered body or signature is refused`,
      async (t) => {
        const { admin, delivery } = t.context.clients;
        const port = await freePort();
        const { server } = await admin.createServer({ name: `Receivers ${platform} ${scheme}`, registrationUrl: "" });
        const serverId = server!.id;
        await admin.setCallbackSettings({ serverId, callbackUrl: `http://127.0.0.1:${port}/callback`, ...optIn });
        const secrets = needsSecret ? [(await admin.revealCallbackSecret({ serverId })).secret] : [];
        const env = { VERIFY: scheme, ...(needsSecret ? {} : { WEBHOOK_KEYS_URL: `${t.context.gatewayUrl}/.well-known/webhook-keys.json` }) };
        const r = stopOnTeardown(t, await startPlatformReceiver(platform, { serverId, secrets, port, env }));

        const username = `Alex_${platform}`;
        const heartId = await castCounted(t.context, serverId, username);
        const paidLine = `PAID ${heartId} ${username}`;
        await eventually(() => r.paid().includes(paidLine), { timeoutMs: 60_000, message: `${platform} ${scheme}: ${paidLine}` });
        const deliveryId = await succeeded(t.context, heartId, 1);

        const { attempts } = await delivery.getDelivery({ deliveryId, serverId });
        const sent = attempts.at(-1)!;
        const webhookHeaders = Object.fromEntries(Object.entries(sent.requestHeaders).filter(([name]) => name.toLowerCase().startsWith("webhook-")));
        const prefix = scheme === "public-key" ? "v1a," : "v1,";
        t.true(
          (webhookHeaders["webhook-signature"] ?? "").split(" ").every((s) => s.startsWith(prefix)),
          JSON.stringify(webhookHeaders),
        );
        const body = Buffer.from(sent.requestBody, "utf8");
        const replay = await r.post(body, webhookHeaders);
        t.is(replay.status, 200, replay.text);
        t.regex(replay.text, /duplicate/);
        t.is((await r.post(Buffer.from(sent.requestBody.replace(username, `${username}x`), "utf8"), webhookHeaders)).status, 401, "a changed byte");
        const flipped = webhookHeaders["webhook-signature"]!.replace(/,(.)/, (_m, c: string) => `,${c === "A" ? "B" : "A"}`);
        t.is((await r.post(body, { ...webhookHeaders, "webhook-signature": flipped })).status, 401, "a changed signature");
        t.is(
          (await r.post(body, { "x-service-signature": sent.requestHeaders["X-Service-Signature"]! })).status,
          400,
          "this mode checks the webhook-* headers",
        );
        t.deepEqual(await r.settledPaid(), [paidLine], "paid once");
      },
    );
  }
}

/** A server with a claim key (votes count into the claim ledger from then on); returns its id and key. */
async function claimServer(c: Context, name: string): Promise<{ serverId: string; claimKey: string }> {
  const { server } = await c.clients.admin.createServer({ name, registrationUrl: "" });
  const { claimKey } = await c.clients.admin.rotateClaimKey({ serverId: server!.id });
  return { serverId: server!.id, claimKey };
}

/** A SteamID64 in the individual range, fresh per call. */
const steamIdOf = () => String(76561198000000000n + BigInt(randomBytes(3).readUIntBE(0, 3)));

test.serial(
  "csharp plugin /claim, four processes: a heart cast with a SteamID64 -> claim answers 1 and pays once -> claim again answers 2, 'already claimed', no pay; a player without a vote gets 'no vote found'",
  async (t) => {
    const { serverId, claimKey } = await claimServer(t.context, "Claims csharp");
    const steamId = steamIdOf();
    await castCounted(t.context, serverId, "Rusty_claim", { steamId });
    const opts = {
      claimUrl: `${t.context.gatewayUrl}/api/votes?action=claim&key={0}&steamid={1}`,
      claimKey,
      storeDir: mkdtempSync(join(tmpdir(), "claims-csharp-")),
    };

    const first = await runCsharpClaim(steamId, opts);
    t.deepEqual(
      first.filter((l) => l.startsWith("PAID ")),
      [`PAID claim ${steamId}`],
      first.join("\n"),
    );
    const second = await runCsharpClaim(steamId, opts);
    t.deepEqual(
      second.filter((l) => l.startsWith("PAID ")),
      [],
      second.join("\n"),
    );
    t.true(second.includes(`REPLY ${steamId} You have already claimed your reward for this vote.`), second.join("\n"));
    const stranger = steamIdOf();
    const none = await runCsharpClaim(stranger, opts);
    t.deepEqual(none, [`REPLY ${stranger} No vote found: vote for the server first.`]);
  },
);

test.serial(
  "csharp plugin /claim, four processes: a claim whose answer is lost (the list claimed it) is in doubt; the next /claim's 2 pays it, once; the one after says 'already claimed'",
  async (t) => {
    const { serverId, claimKey } = await claimServer(t.context, "Claims csharp doubt");
    const steamId = steamIdOf();
    await castCounted(t.context, serverId, "Rusty_doubt", { steamId });
    // In front of the gateway: forwards the claim, lets the list claim it, then drops the answer.
    let forwarded = 0;
    const lossy = http.createServer(async (req, res) => {
      const upstream = await fetch(`${t.context.gatewayUrl}${req.url}`);
      forwarded += Number((await upstream.text()) === "1");
      res.socket?.destroy();
    });
    await new Promise<void>((resolve) => lossy.listen(0, "127.0.0.1", resolve));
    t.teardown(() => new Promise<void>((resolve) => lossy.close(() => resolve())));
    const storeDir = mkdtempSync(join(tmpdir(), "claims-csharp-doubt-"));
    const template = "/api/votes?action=claim&key={0}&steamid={1}";

    const lost = await runCsharpClaim(steamId, { claimUrl: `http://127.0.0.1:${(lossy.address() as AddressInfo).port}${template}`, claimKey, storeDir });
    t.is(forwarded, 1, "the list claimed the vote (answered 1) before the answer was lost");
    t.deepEqual(
      lost.filter((l) => l.startsWith("PAID ")),
      [],
      lost.join("\n"),
    );
    t.true(lost.includes(`REPLY ${steamId} The vote list did not answer; try /claim again in a minute.`), lost.join("\n"));

    const direct = { claimUrl: `${t.context.gatewayUrl}${template}`, claimKey, storeDir };
    const retried = await runCsharpClaim(steamId, direct);
    t.deepEqual(
      retried.filter((l) => l.startsWith("PAID ")),
      [`PAID claim ${steamId}`],
      `the list answers 2, and the doubt says the claim was ours: ${retried.join("\n")}`,
    );
    const again = await runCsharpClaim(steamId, direct);
    t.deepEqual(
      again.filter((l) => l.startsWith("PAID ")),
      [],
      again.join("\n"),
    );
    t.true(again.includes(`REPLY ${steamId} You have already claimed your reward for this vote.`), again.join("\n"));
  },
);

test.serial(
  "php claim page, four processes: a heart cast with an account id -> claim by accountid= pays once -> again does not pay; by username= the same; no vote -> 'no vote found'",
  async (t) => {
    const { serverId, claimKey } = await claimServer(t.context, "Claims php");
    const page = await startPhpClaimPage({ claimUrl: `${t.context.gatewayUrl}/api/votes`, claimKey });
    t.teardown(() => page.stop());
    const paid = () => page.lines.filter((l) => l.startsWith("PAID "));
    const accountId = `acct-${randomBytes(3).toString("hex")}`;
    await castCounted(t.context, serverId, "Mage_claim", { accountId });

    t.deepEqual(await page.claim({ accountid: accountId }), { status: 200, result: "Thanks for voting! Your reward has been sent to your account." });
    await eventually(() => paid().length === 1, { message: "the claim's PAID line" });
    t.deepEqual(await page.claim({ accountid: accountId }), { status: 200, result: "You have already claimed your reward for this vote." });

    await castCounted(t.context, serverId, "Knight_claim");
    t.deepEqual(await page.claim({ username: "knight_claim" }), { status: 200, result: "Thanks for voting! Your reward has been sent to your account." });
    t.deepEqual(await page.claim({ username: "Knight_claim" }), { status: 200, result: "You have already claimed your reward for this vote." });
    t.deepEqual(await page.claim({ accountid: "acct-never-voted" }), { status: 200, result: "No vote found for your account: vote for the server first." });
    await eventually(() => paid().length >= 2, { message: "the username claim's PAID line" });
    t.deepEqual(paid(), [`PAID claim accountid ${accountId}`, "PAID claim username knight_claim"], page.lines.join("\n"));
  },
);
