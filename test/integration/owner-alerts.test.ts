/**
 * Owner alerts (issue 32 item 4, docs/owner-alerts.md) on the real stack (PostgreSQL, the referral service's
 * OwnerAlertService, the dashboard gateway) and a real SMTP server (scripts/harness/smtp-sink.ts): each endpoint alert
 * fires once for its cause (failing for 24 hours by the bounded scan, disabled in the disabling transaction, recovered
 * in the statement that records the success) and reaches e-mail in one digest, never twice; a storm of 500 failing
 * endpoints of one owner arrives as one digest after the window; another owner's channels, alerts and servers are
 * refused; the webhook URL is Discord's only, sealed and never answered; no address, token or receiver URL secret
 * reaches a message or a log line.
 */
import anyTest, { type TestFn } from "ava";
import { randomUUID } from "node:crypto";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { OwnerAlertService } from "../../gen/proto/alerts/v1/alerts_pb.js";
import { Prisma } from "../../gen/prisma/client.js";
import { startSmtpSink, type SmtpSink } from "../../scripts/harness/smtp-sink.js";
import { startDiscordEmulator, type DiscordEmulator } from "../../scripts/harness/discord-emulator.js";
import { createAlertWebhookPoster } from "../../services/alerts/post-alert-webhook.js";
import { createDiscordRest, type DiscordRest } from "../../services/shared/adapters/discord-rest.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { insertSecret, setDefaultEndpoint } from "../../scripts/harness/delivery-harness.js";
import { DASHBOARD_SESSION_HEADER } from "../../services/access/auth-interceptor.js";
import { runAlertScan } from "../../services/alerts/scan-alert-causes.js";
import { runAlertDigestPass, type AlertDigestDeps } from "../../services/alerts/send-alert-digests.js";
import { WEBHOOK_URL_TEXT } from "../../services/alerts/manage-alerts.js";
import { recordAttempts, type AttemptRecord } from "../../services/delivery/pipeline/attempt-log.js";
import { claimDueDeliveries, type ClaimedDelivery } from "../../services/delivery/pipeline/claim-deliveries.js";
import { disableCallback } from "../../services/delivery/pipeline/endpoint-health.js";
import { insertDelivery } from "../../services/delivery/pipeline/insert-deliveries.js";
import { createMailer, type Mailer } from "../../services/shared/adapters/mailer.js";
import { executeSql, runSql, runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { createServiceTransport, withHeaders } from "../../services/shared/rpc/service-transport.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { captureLog, type CapturedLog } from "../helpers/capture-log.js";
import { ownerApi, signInOwner, startDashboardGateway, type DashboardGateway } from "../helpers/owner-session.js";

interface Context {
  stack: TestStack;
  gateway: DashboardGateway;
  gatewayToken: string;
  sink: SmtpSink;
  mailer: Mailer;
  discord: DiscordEmulator;
  rest: DiscordRest;
  captured: CapturedLog;
}
const test = anyTest as TestFn<Context>;
const WINDOW_SECONDS = 300;
const HOUR_MS = 60 * 60 * 1000;
/** A webhook of the emulator's channel `channelId`, as the owner pastes it (Discord's host; the client posts to the emulator). */
function pastedWebhook(c: Context, channelId: string): { url: string; token: string } {
  const hook = c.discord.createWebhook(channelId);
  return { url: `https://discord.com/api/webhooks/${hook.id}/${hook.token}`, token: hook.token };
}

/** A receiver URL whose query carries a token: alerts name its host only. */
const RECEIVER_URL = "http://127.0.0.1:9/hook?token=receiver-secret-7f3a";

test.before(async (t) => {
  let gatewayUrl = "";
  const captured = captureLog("debug");
  const stack = await startStack({
    gateway: false,
    log: captured.log,
    get publicBaseUrl() {
      return gatewayUrl;
    },
  });
  const gatewayToken = (await stack.clients.access.createServiceToken({ name: "gateway", scopes: ["ingest", "dashboard"] })).token;
  const gateway = await startDashboardGateway({ rpcUrl: stack.rpcUrl, token: gatewayToken, log: createLogger("test", "silent") });
  gatewayUrl = gateway.url;
  const sink = await startSmtpSink();
  const mailer = createMailer({ smtpUrl: sink.url, from: "alerts@list.example" });
  const discord = await startDiscordEmulator();
  const rest = createDiscordRest({ baseUrl: discord.baseUrl });
  t.context = { stack, gateway, gatewayToken, sink, mailer, discord, rest, captured };
});

test.after.always(async (t) => {
  t.context.mailer?.close();
  await t.context.gateway?.close();
  await t.context.stack?.close();
  await t.context.sink?.close();
  await t.context.rest?.close();
  await t.context.discord?.close();
});

/** The alerts client as `ownerId`'s dashboard session (signed in through the dashboard gateway). */
async function sessionClient(c: Context, ownerId: string): Promise<Client<typeof OwnerAlertService>> {
  const session = await signInOwner(c.stack.clients.access, c.gateway.url, ownerId);
  const transport = withHeaders(createServiceTransport(c.stack.rpcUrl, c.gatewayToken), { [DASHBOARD_SESSION_HEADER]: session.sessionToken });
  return createClient(OwnerAlertService, transport);
}

/** A server owned by `ownerId` with its default endpoint at RECEIVER_URL. */
async function ownedServer(c: Context, ownerId: string, name: string): Promise<{ serverId: string; endpointId: string }> {
  const { server } = await c.stack.clients.admin.createServer({ name });
  await c.stack.clients.access.createOwner({ ownerId, displayName: ownerId }).catch(() => undefined);
  await c.stack.clients.access.assignServer({ serverId: server!.id, ownerId });
  await setDefaultEndpoint(c.stack.prisma, server!.id, { url: RECEIVER_URL, standardWebhooks: false });
  await insertSecret(c.stack.prisma, c.stack.secretBox, server!.id, "callback");
  const [endpoint] = await runSql<{ id: string }>(
    c.stack.prisma,
    Prisma.sql`SELECT id::text FROM callback_endpoints WHERE server_id = ${server!.id}::uuid AND is_default`,
  );
  return { serverId: server!.id, endpointId: endpoint!.id };
}

function digestDeps(c: Context): AlertDigestDeps {
  return {
    db: c.stack.prisma,
    mailer: c.mailer,
    postDiscordWebhook: createAlertWebhookPoster(c.rest),
    secretBox: c.stack.secretBox,
    dashboardBaseUrl: "https://list.example",
    windowSeconds: WINDOW_SECONDS,
    log: c.captured.log,
  };
}

/** A fresh counted heart's delivery of `serverId` on `transport`, stored as the consumer does and claimed. */
async function claimFreshDelivery(c: Context, serverId: string, transport: "callback" | "votifier"): Promise<ClaimedDelivery> {
  const heartId = randomUUID();
  await insertDelivery(c.stack.prisma, {
    heartId,
    serverId,
    eventType: "heart.counted",
    username: "Steve",
    voterIdentity: `voter-${heartId}`,
    period: "2026-03",
    streakDay: null,
    countedAt: new Date(),
  });
  const now = new Date();
  const claimed = await claimDueDeliveries(c.stack.prisma, {
    now,
    leaseUntil: new Date(now.getTime() + 60_000),
    limit: 50,
    perServerLimit: 50,
    inFlightByServer: new Map(),
  });
  const mine = claimed.find((d) => d.heartId === heartId && d.transport === transport);
  if (mine === undefined) throw new Error(`the ${transport} delivery was not claimed`);
  return mine;
}

/** One callback attempt of a fresh delivery of `serverId`, recorded at `at` through the attempt log; returns the delivery's id. */
async function recordCallback(c: Context, serverId: string, succeeded: boolean, at: Date): Promise<string> {
  const mine = await claimFreshDelivery(c, serverId, "callback");
  const now = new Date();
  const record: AttemptRecord = {
    delivery: mine,
    startedAt: at,
    finishedAt: at,
    result: succeeded ? { kind: "delivered" } : { kind: "retry", nextAttemptAt: new Date(now.getTime() + 3_600_000) },
    exchange: {
      target: RECEIVER_URL,
      request: { headers: {}, body: "{}" },
      response: { status: succeeded ? 200 : 503, headers: {}, body: "", bodyTruncated: false },
      latencyMs: 3,
      error: succeeded ? null : "receiver answered 503",
      succeeded,
    },
  };
  const [outcome] = await recordAttempts(c.stack.prisma, [record]);
  if (outcome?.kind !== "recorded") throw outcome?.kind === "error" ? outcome.error : new Error("attempt not recorded");
  return mine.id;
}

async function alertsOf(c: Context, serverId: string): Promise<{ kind: string; cause_key: string; resolved: boolean }[]> {
  return runSql(
    c.stack.prisma,
    Prisma.sql`SELECT kind, cause_key, resolved_at IS NOT NULL AS resolved FROM owner_alerts WHERE server_id = ${serverId}::uuid ORDER BY created_at, kind`,
  );
}

test.serial(
  "failing for 24 hours (linking its last failed delivery), disabled and recovered each fire once for their cause, and reach e-mail, Discord and the dashboard list in one digest, never twice",
  async (t) => {
    const c = t.context;
    const alerts = await sessionClient(c, "owner-one");
    const hook = pastedWebhook(c, "channel-one");
    await alerts.setAlertChannels({ email: "one@owner.example", discordWebhookUrl: hook.url });
    const { serverId, endpointId } = await ownedServer(c, "owner-one", "Server One");
    const t0 = new Date(Date.now() - 10 * 24 * HOUR_MS);
    const at = (ms: number) => new Date(t0.getTime() + ms);

    const firstFailed = await recordCallback(c, serverId, false, t0);
    await runAlertScan({ db: c.stack.prisma, batchRows: 100 }, at(23 * HOUR_MS));
    t.deepEqual(await alertsOf(c, serverId), [], "not failing for 24 hours yet");
    await runAlertScan({ db: c.stack.prisma, batchRows: 100 }, at(25 * HOUR_MS));
    await runAlertScan({ db: c.stack.prisma, batchRows: 100 }, at(26 * HOUR_MS));
    await recordCallback(c, serverId, false, at(30 * HOUR_MS));
    await runAlertScan({ db: c.stack.prisma, batchRows: 100 }, at(31 * HOUR_MS));
    t.deepEqual(
      (await alertsOf(c, serverId)).map((a) => a.kind),
      ["endpoint_failing"],
      "one failing alert for the run, however many scans",
    );

    // Five days into the run the next failure disables the endpoint, with its alert in that transaction; once only.
    await recordCallback(c, serverId, false, at(5 * 24 * HOUR_MS + 60_000));
    t.false(await runSqlTransaction(c.stack.prisma, (tx) => disableCallback(tx, endpointId, "again", at(5 * 24 * HOUR_MS + 120_000)), { timeoutMs: 5_000 }));
    t.deepEqual(
      (await alertsOf(c, serverId)).map((a) => a.kind),
      ["endpoint_failing", "endpoint_disabled"],
    );

    // Enabled again, the first success resolves both and fires one recovered alert; a second success fires none.
    await c.stack.clients.admin.enableCallback({ serverId });
    await recordCallback(c, serverId, true, at(6 * 24 * HOUR_MS));
    await recordCallback(c, serverId, true, at(6 * 24 * HOUR_MS + 60_000));
    t.deepEqual(
      (await alertsOf(c, serverId)).map((a) => [a.kind, a.resolved]),
      [
        ["endpoint_failing", true],
        ["endpoint_disabled", true],
        ["endpoint_recovered", false],
      ],
    );

    const listed = await alerts.listOwnerAlerts({});
    t.deepEqual(
      listed.alerts.map((a) => a.kind),
      ["endpoint_recovered", "endpoint_disabled", "endpoint_failing"],
    );
    for (const a of listed.alerts) t.true(a.link.includes(endpointId) && a.link.includes(serverId), "links to the exact endpoint");
    // The failing alert names the endpoint's last failed delivery when it fired (the run's first failure, at 25 hours).
    const failingLink = `/dashboard/?server=${serverId}&endpoint=${endpointId}&delivery=${firstFailed}#deliveries`;
    const failingAlert = listed.alerts.find((a) => a.kind === "endpoint_failing");
    t.is(failingAlert?.link, failingLink, "the dashboard list's link opens the last failed delivery");
    t.true(failingAlert?.detail.includes(`Last failed delivery: ${firstFailed}.`), "the dashboard list's text names it");

    // Nothing leaves before the window has passed since the first alert waiting; then one digest with all three.
    const mailsToOne = () => c.sink.messages.filter((m) => m.to.includes("one@owner.example"));
    const firstDue = at(25 * HOUR_MS + WINDOW_SECONDS * 1000);
    await runAlertDigestPass(digestDeps(c), new Date(firstDue.getTime() - 1_000));
    t.is(mailsToOne().length, 0);
    t.is(c.discord.messages("channel-one").length, 0);
    await runAlertDigestPass(digestDeps(c), at(6 * 24 * HOUR_MS + 120_000));
    t.is(mailsToOne().length, 1);
    const [mail] = mailsToOne();
    t.is(mail!.subject, "3 alerts about your servers");
    for (const title of [
      "Server One: callback endpoint failing for 24 hours",
      "Server One: callback endpoint disabled",
      "Server One: callback endpoint recovered",
    ]) {
      t.is(mail!.text.split(title).length - 1, 1, `${title} once`);
    }
    t.true(mail!.text.includes(`https://list.example/dashboard/?server=${serverId}&endpoint=${endpointId}#deliveries`));
    t.true(mail!.text.includes(`https://list.example${failingLink}`), "the e-mail links the last failed delivery");
    t.true(mail!.text.includes(`Last failed delivery: ${firstFailed}.`), "the e-mail's text names it");
    t.true(mail!.text.includes("127.0.0.1:9"), "names the receiver's host");
    t.false(mail!.raw.includes("receiver-secret-7f3a"), "never the receiver URL's token");
    const [post] = c.discord.messages("channel-one");
    t.is(c.discord.messages("channel-one").length, 1, "one Discord message");
    t.true(post!.content.startsWith("**3 alerts about your servers**"));
    for (const title of [
      "Server One: callback endpoint failing for 24 hours",
      "Server One: callback endpoint disabled",
      "Server One: callback endpoint recovered",
    ]) {
      t.is(post!.content.split(title).length - 1, 1, `${title} once on Discord`);
    }
    t.false(post!.content.includes("receiver-secret-7f3a"));
    t.true(post!.content.includes(`<https://list.example${failingLink}>`), "the Discord line links the last failed delivery");
    await runAlertDigestPass(digestDeps(c), at(7 * 24 * HOUR_MS));
    t.is(mailsToOne().length, 1, "never twice");
    t.is(c.discord.messages("channel-one").length, 1, "never twice on Discord");
    for (const line of c.captured.raw) t.false(line.includes(hook.token), "the webhook token is never logged");

    // Read on the dashboard list.
    const marked = await alerts.markOwnerAlertsRead({ alertIds: listed.alerts.map((a) => a.id) });
    t.is(marked.marked, 3);
    t.deepEqual((await alerts.listOwnerAlerts({ unreadOnly: true })).alerts, []);
  },
);

test.serial("a storm of 500 failing endpoints of one owner arrives as one digest after the window", async (t) => {
  const c = t.context;
  const alerts = await sessionClient(c, "owner-storm");
  await alerts.setAlertChannels({ email: "storm@owner.example", discordWebhookUrl: pastedWebhook(c, "channel-storm").url });
  const { serverId } = await ownedServer(c, "owner-storm", "Storm Server");
  const now = new Date(Date.now() + 30 * 24 * HOUR_MS);
  const failingSince = new Date(now.getTime() - 25 * HOUR_MS);
  await executeSql(
    c.stack.prisma,
    Prisma.sql`
      WITH e AS (
        INSERT INTO callback_endpoints (id, server_id, url, event_types)
        SELECT gen_random_uuid(), ${serverId}::uuid, 'https://receiver-' || n || '.example/hook', ARRAY['heart.counted']
        FROM generate_series(1, 500) n
        RETURNING id
      )
      INSERT INTO callback_health (endpoint_id, server_id, failing_since, last_failure_at, last_failure_reason)
      SELECT e.id, ${serverId}::uuid, ${failingSince}::timestamptz, ${failingSince}::timestamptz, 'receiver answered 503' FROM e`,
  );
  let passes = 0;
  while ((await runAlertScan({ db: c.stack.prisma, batchRows: 100 }, now)).failing > 0) passes += 1;
  t.is(passes, 5, "five bounded batches of 100");
  t.is((await alertsOf(c, serverId)).length, 500);

  const stormMails = () => c.sink.messages.filter((m) => m.to.includes("storm@owner.example"));
  await runAlertDigestPass(digestDeps(c), now);
  t.is(stormMails().length, 0, "within the window nothing leaves");
  await runAlertDigestPass(digestDeps(c), new Date(now.getTime() + WINDOW_SECONDS * 1000));
  await runAlertDigestPass(digestDeps(c), new Date(now.getTime() + 2 * WINDOW_SECONDS * 1000));
  t.is(stormMails().length, 1, "one digest");
  t.is(stormMails()[0]!.subject, "500 alerts about your servers");
  t.true(stormMails()[0]!.text.includes("... and 450 alerts more on the dashboard"));
  const posts = c.discord.messages("channel-storm");
  t.is(posts.length, 1, "one Discord digest");
  t.true(posts[0]!.content.startsWith("**500 alerts about your servers**"));
  t.true(posts[0]!.content.length <= 2_000);
  t.deepEqual(c.discord.secondTooManyRequests(), []);
});

test.serial("a temporary SMTP failure retries the digest later; it is mailed once", async (t) => {
  const c = t.context;
  const alerts = await sessionClient(c, "owner-retry");
  await alerts.setAlertChannels({ email: "retry@owner.example" });
  const { endpointId } = await ownedServer(c, "owner-retry", "Retry Server");
  const now = new Date(Date.now() + 60 * 24 * HOUR_MS);
  t.true(await runSqlTransaction(c.stack.prisma, (tx) => disableCallback(tx, endpointId, "receiver answered 410 Gone", now), { timeoutMs: 5_000 }));
  c.sink.refuse("retry@owner.example", "temporary");
  const later = new Date(now.getTime() + WINDOW_SECONDS * 1000);
  t.like(await runAlertDigestPass(digestDeps(c), later), { retried: 1, mailed: 0 });
  c.sink.accept("retry@owner.example");
  await runAlertDigestPass(digestDeps(c), later);
  t.is(c.sink.messages.filter((m) => m.to.includes("retry@owner.example")).length, 0, "waits for the retry time");
  await runAlertDigestPass(digestDeps(c), new Date(later.getTime() + 60 * 60_000));
  await runAlertDigestPass(digestDeps(c), new Date(later.getTime() + 120 * 60_000));
  t.is(c.sink.messages.filter((m) => m.to.includes("retry@owner.example")).length, 1);
});

test("another owner's channels, alerts and servers are refused to an owner's session; lists hold the caller's own only", async (t) => {
  const c = t.context;
  const a = await sessionClient(c, "owner-iso-a");
  const b = await sessionClient(c, "owner-iso-b");
  await b.setAlertChannels({ email: "b@owner.example" });
  const bServer = await ownedServer(c, "owner-iso-b", "B's server");
  const now = new Date();
  await runSqlTransaction(c.stack.prisma, (tx) => disableCallback(tx, bServer.endpointId, "receiver answered 410 Gone", now), { timeoutMs: 5_000 });
  const bAlerts = (await b.listOwnerAlerts({})).alerts;
  t.is(bAlerts.length, 1);

  const refusal = async (call: Promise<unknown>) => {
    try {
      await call;
      return "answered";
    } catch (error) {
      const e = ConnectError.from(error);
      return `${Code[e.code]}: ${e.rawMessage}`;
    }
  };
  t.is(await refusal(a.listServerAlerts({ serverId: bServer.serverId })), "NotFound: unknown server");
  t.is(await refusal(a.listServerAlerts({ serverId: randomUUID() })), "NotFound: unknown server", "like a missing one");
  t.is((await b.listServerAlerts({ serverId: bServer.serverId })).alerts.length, 1, "B's own server answers");
  t.is(await refusal(a.getAlertChannels({ ownerId: "owner-iso-b" })), "NotFound: unknown owner");
  t.is(await refusal(a.setAlertChannels({ ownerId: "owner-iso-b", email: "attacker@evil.example" })), "NotFound: unknown owner");
  t.is(await refusal(a.listOwnerAlerts({ ownerId: "owner-iso-b" })), "NotFound: unknown owner");
  t.is((await a.markOwnerAlertsRead({ alertIds: bAlerts.map((x) => x.id) })).marked, 0);
  t.is((await b.getAlertChannels({})).channels?.email, "b@owner.example", "B's channels unchanged");
  t.false((await b.listOwnerAlerts({})).alerts[0]!.read, "B's alert still unread");
  t.false(JSON.stringify(await a.listOwnerAlerts({})).includes(bServer.serverId), "A's list holds none of B's");
});

test("the Discord webhook URL: Discord's hosts only, sealed at rest, never answered (the webhook id only)", async (t) => {
  const c = t.context;
  const a = await sessionClient(c, "owner-webhook");
  const bad = [
    "https://evil.example/api/webhooks/123/tok",
    "http://discord.com/api/webhooks/123/tok",
    "https://discord.com.evil.example/api/webhooks/1/t",
    "https://discord.com/api/users/1",
  ];
  for (const url of bad) {
    const error = await t.throwsAsync(a.setAlertChannels({ discordWebhookUrl: url }));
    t.is(ConnectError.from(error).code, Code.InvalidArgument, url);
    t.is(ConnectError.from(error).rawMessage, WEBHOOK_URL_TEXT, url);
  }
  const token = "wh-token-9c2e_secret";
  const set = await a.setAlertChannels({ email: "hook@owner.example", discordWebhookUrl: `https://discord.com/api/webhooks/424242/${token}` });
  t.like(set.channels, { discordWebhookSet: true, discordWebhookId: "424242", email: "hook@owner.example" });
  t.false(JSON.stringify(set).includes(token));
  t.false(JSON.stringify(await a.getAlertChannels({})).includes(token));
  const [row] = await runSql<{ discord_webhook: string }>(
    c.stack.prisma,
    Prisma.sql`SELECT discord_webhook FROM owner_alert_channels WHERE owner_id = 'owner-webhook'`,
  );
  t.false(row!.discord_webhook.includes(token), "sealed at rest");
  // Keeping it when only the address changes; removing it on request.
  t.true((await a.setAlertChannels({ email: "hook2@owner.example" })).channels!.discordWebhookSet);
  t.false((await a.setAlertChannels({ email: "hook2@owner.example", removeDiscordWebhook: true })).channels!.discordWebhookSet);
  for (const line of c.captured.raw) t.false(line.includes(token), "never logged");
});

test("a rotation overlap ending within 24 hours and a reward plugin not seen for the set time each fire once for their cause", async (t) => {
  const c = t.context;
  const { serverId } = await ownedServer(c, "owner-causes", "Causes Server");
  const alertsHere = async () => (await alertsOf(c, serverId)).map((a) => a.kind);
  // A rotation with a 2-day overlap: not yet ending soon; a day and a half later it is, once however many scans.
  await c.stack.clients.admin.createReferralSecret({ serverId });
  const now = new Date();
  await c.stack.clients.admin.rotateReferralSecret({ serverId, graceSeconds: 2n * 24n * 3600n });
  const scan = (at: Date) => runAlertScan({ db: c.stack.prisma, batchRows: 100, pluginSilentHours: 24 }, at);
  await scan(now);
  t.deepEqual(await alertsHere(), []);
  await scan(new Date(now.getTime() + 36 * HOUR_MS));
  await scan(new Date(now.getTime() + 40 * HOUR_MS));
  t.deepEqual(await alertsHere(), ["secret_overlap_ending"]);

  // The plugin's last call 30 hours before the scan (its newest row of two): one alert, once; a newer call ends the silence.
  const calledAt = new Date(now.getTime() + 10 * HOUR_MS);
  await executeSql(
    c.stack.prisma,
    Prisma.sql`
      INSERT INTO plugin_activity (server_id, family, player_id_kind, outcome, calls, since, last_at, last_action, last_answer, last_player_id)
      VALUES (${serverId}::uuid, '/api/votes', 'username', 'ok', 3, ${calledAt}::timestamptz, ${calledAt}::timestamptz, 'check', '1', 'Steve'),
             (${serverId}::uuid, '/api/votes', 'username', 'never_voted', 1, ${calledAt}::timestamptz, ${new Date(calledAt.getTime() - HOUR_MS)}::timestamptz, 'check', '0', 'Alex')`,
  );
  await scan(new Date(calledAt.getTime() + 23 * HOUR_MS));
  t.deepEqual(await alertsHere(), ["secret_overlap_ending"], "not silent for 24 hours yet");
  await scan(new Date(calledAt.getTime() + 30 * HOUR_MS));
  await scan(new Date(calledAt.getTime() + 31 * HOUR_MS));
  t.deepEqual(await alertsHere(), ["secret_overlap_ending", "plugin_silent"]);
  const [silent] = (await c.stack.clients.alerts.listServerAlerts({ serverId })).alerts;
  t.is(silent!.title, "Causes Server: reward plugin not seen for 24 hours");
  t.true(silent!.link.includes(serverId));
});

test.serial("a Votifier listener failing fires once a day for the server, in the transaction that fails the vote, linking to the delivery", async (t) => {
  const c = t.context;
  const { serverId } = await ownedServer(c, "owner-votifier", "Votifier Server");
  await c.stack.clients.admin.setVotifierSettings({ serverId, host: "127.0.0.1", port: 1, serviceName: "HeartsList", token: "votifier-token-3b1c" });
  const failVote = async (at: Date) => {
    const vote = await claimFreshDelivery(c, serverId, "votifier");
    const [outcome] = await recordAttempts(c.stack.prisma, [
      {
        delivery: vote,
        startedAt: at,
        finishedAt: at,
        result: { kind: "failed" },
        exchange: {
          target: "votifier://127.0.0.1:1",
          request: { headers: {}, body: "" },
          response: null,
          latencyMs: 1,
          error: "connect ECONNREFUSED 127.0.0.1:1",
          succeeded: false,
        },
      },
    ]);
    if (outcome?.kind !== "recorded") throw outcome?.kind === "error" ? outcome.error : new Error("not recorded");
    return vote.id;
  };
  const day = new Date("2027-02-01T08:00:00.000Z");
  const first = await failVote(day);
  await failVote(new Date(day.getTime() + HOUR_MS));
  t.deepEqual(
    (await alertsOf(c, serverId)).map((a) => a.kind),
    ["votifier_failing"],
    "once for the day's outage",
  );
  await failVote(new Date(day.getTime() + 24 * HOUR_MS));
  t.deepEqual(
    (await alertsOf(c, serverId)).map((a) => a.kind),
    ["votifier_failing", "votifier_failing"],
    "again the next day",
  );
  const [alert] = (await c.stack.clients.alerts.listServerAlerts({ serverId })).alerts.reverse();
  t.is(alert!.title, "Votifier Server: Votifier listener failing");
  t.true(alert!.link.includes(first), "links to the exact delivery");
  t.true(alert!.detail.includes("127.0.0.1:1"));
  t.false(`${alert!.title} ${alert!.detail} ${alert!.link}`.includes("votifier-token-3b1c"));
});

test("the dashboard's alert list and channel settings: the owner's own alerts with unread/read, the webhook never shown after saving", async (t) => {
  const c = t.context;
  const session = await signInOwner(c.stack.clients.access, c.gateway.url, "owner-dash");
  const { endpointId } = await ownedServer(c, "owner-dash", "Dash Server");
  await runSqlTransaction(c.stack.prisma, (tx) => disableCallback(tx, endpointId, "receiver answered 410 Gone", new Date()), { timeoutMs: 5_000 });
  const token = "dash-token-51d0";
  const saved = await ownerApi(c.gateway.url, session, "PUT", "/alert-channels", {
    email: "dash@owner.example",
    discord_webhook_url: `https://discord.com/api/webhooks/777/${token}`,
  });
  t.is(saved.status, 200, saved.text);
  t.deepEqual(JSON.parse(saved.text), { email: "dash@owner.example", discord_webhook_set: true, discord_webhook_id: "777" });
  const refused = await ownerApi(c.gateway.url, session, "PUT", "/alert-channels", { discord_webhook_url: "https://hooks.example/api/webhooks/1/x" });
  t.deepEqual({ status: refused.status, error: JSON.parse(refused.text).error }, { status: 400, error: WEBHOOK_URL_TEXT });
  const page = await ownerApi(c.gateway.url, session, "GET", "/alert-channels");
  t.false(page.text.includes(token));
  const list = JSON.parse((await ownerApi(c.gateway.url, session, "GET", "/alerts?unread=true")).text) as {
    alerts: { id: string; title: string; read: boolean; link: string }[];
  };
  t.deepEqual(
    list.alerts.map((a) => [a.title, a.read]),
    [["Dash Server: callback endpoint disabled", false]],
  );
  t.true(list.alerts[0]!.link.includes(endpointId));
  const read = await ownerApi(c.gateway.url, session, "POST", "/alerts/read", { ids: list.alerts.map((a) => a.id) });
  t.deepEqual(JSON.parse(read.text), { marked: 1 });
  t.deepEqual(JSON.parse((await ownerApi(c.gateway.url, session, "GET", "/alerts?unread=true")).text), { alerts: [] });
  t.is(JSON.parse((await ownerApi(c.gateway.url, session, "GET", "/alerts")).text).alerts[0].read, true);
});

test.after("no owner address, webhook token or receiver token reached a log line", (t) => {
  for (const line of t.context.captured.raw) {
    for (const secret of ["one@owner.example", "storm@owner.example", "retry@owner.example", "receiver-secret-7f3a", "wh-token-9c2e_secret"]) {
      t.false(line.includes(secret), secret);
    }
  }
});
