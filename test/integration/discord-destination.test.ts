/**
 * The Discord destination end to end (docs/discord.md): hearts cast through the real services (CastHeart, outbox,
 * relay, Kafka, delivery consumer and dispatcher) reach a Discord channel of the Discord API emulator, which enforces
 * Discord's documented rate limits; the endpoint RPCs refuse what is not a Discord webhook URL and a template error
 * (with its line); Unknown Webhook disables the endpoint like a 410; the webhook token is never in an RPC answer, an
 * attempt record, an error text or a log line.
 */
import anyTest, { type TestFn } from "ava";
import { Code } from "@connectrpc/connect";
import { rpcError } from "../../scripts/harness/referral-harness.js";
import { Prisma } from "../../gen/prisma/client.js";
import { startDiscordEmulator, type DiscordEmulator } from "../../scripts/harness/discord-emulator.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { runSql } from "../../services/shared/adapters/sql/executor.js";
import { NOT_A_DISCORD_WEBHOOK } from "../../services/servers/discord-endpoint.js";
import { captureLog, type CapturedLog } from "../helpers/capture-log.js";
import { createClient } from "@connectrpc/connect";
import { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";
import { DASHBOARD_SESSION_HEADER } from "../../services/access/auth-interceptor.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createServiceTransport, withHeaders } from "../../services/shared/rpc/service-transport.js";
import { ownerApi, signInOwner, startDashboardGateway } from "../helpers/owner-session.js";
import { eventually } from "../helpers/eventually.js";

interface Context {
  stack: TestStack;
  discord: DiscordEmulator;
  captured: CapturedLog;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const discord = await startDiscordEmulator();
  const captured = captureLog("debug");
  const stack = await startStack({
    log: captured.log,
    pipeline: {
      name: "discord-destination",
      delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100, discordApiBaseUrl: discord.baseUrl },
    },
  });
  t.context = { stack, discord, captured };
});

test.after.always(async (t) => {
  await t.context.stack?.close();
  await t.context.discord?.close();
});

/** A Discord webhook URL as the owner pastes it (Discord's host); the delivery service calls the emulator. */
const pasted = (hook: { id: string; token: string }) => `https://discord.com/api/webhooks/${hook.id}/${hook.token}`;

let ipCounter = 0;
/** Casts a counted heart from an address of its own /24 (so no fraud rule adds up). */
async function castHeart(stack: TestStack, serverId: string, username: string): Promise<void> {
  ipCounter += 1;
  const res = await stack.clients.hearts.castHeart({
    serverId,
    username,
    voterIdentity: `voter-${username}`,
    ip: `10.${(ipCounter >> 8) & 255}.${ipCounter & 255}.7`,
    userAgent: "Mozilla/5.0 (discord destination test)",
  });
  if (!res.heartId) throw new Error(`the heart of ${username} did not count`);
}

test("1,000 votes in 10 s on one server reach one Discord channel in batched messages with zero second 429s from the emulator, every vote shown once", async (t) => {
  t.timeout(240_000);
  const { stack, discord } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: "S", registrationUrl: "https://example.com/register" });
  const serverId = server!.id;
  const channel = "900000000000001000";
  const hook = discord.createWebhook(channel);
  const { endpoint } = await stack.clients.admin.createDiscordEndpoint({ serverId, webhookUrl: pasted(hook), eventTypes: ["heart.counted"] });
  t.is(endpoint?.kind, "discord");

  const names = Array.from({ length: 1000 }, (_, i) => `p${String(i).padStart(4, "0")}`);
  // 1,000 votes within 10 s: 20 waves of 50, one every half second at most.
  const started = Date.now();
  for (let wave = 0; wave < 20; wave++) {
    await Promise.all(names.slice(wave * 50, wave * 50 + 50).map((name) => castHeart(stack, serverId, name)));
    const due = started + (wave + 1) * 500;
    if (Date.now() < due) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
  }
  // The pace is the test's aim, not a check: on a loaded machine the casts take longer, and what is checked below (every
  // vote shown once, in batched messages, no second 429) must hold at any pace (a CI run beside other work took over 12 s).
  t.log(`1,000 votes cast in ${Date.now() - started} ms`);

  const lines = await eventually(
    () => {
      const shown = discord.messages(channel).flatMap((m) => m.content.split("\n"));
      return shown.length >= 1000 ? shown : undefined;
    },
    { timeoutMs: 180_000, intervalMs: 500, message: "all 1,000 votes shown in the channel" },
  );
  const shownNames = lines.map((line) => /^\*\*(p\d{4})\*\* voted for \*\*S\*\*!$/.exec(line)?.[1]);
  t.deepEqual([...shownNames].sort(), names, "every vote shown exactly once, in the default template");
  const messages = discord.messages(channel);
  t.true(messages.length <= 100, `batched: ${messages.length} messages for 1,000 votes`);
  t.deepEqual(discord.secondTooManyRequests(), [], "never sent again into a bucket that had answered 429");

  // Each vote keeps its own delivery row and attempt record.
  const [counts] = await runSql<{ delivered: number; attempts: number }>(
    stack.prisma,
    Prisma.sql`SELECT (SELECT count(*)::int FROM deliveries WHERE endpoint_id = ${endpoint!.id}::uuid AND status = 'delivered') AS delivered,
                      (SELECT count(*)::int FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = ${endpoint!.id}::uuid AND a.succeeded) AS attempts`,
  );
  t.deepEqual(counts, { delivered: 1000, attempts: 1000 });
});

test("an endpoint set to embeds posts its events as an embed's description, with nothing to ping", async (t) => {
  const { stack, discord } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: "Embeds", registrationUrl: "https://example.com/register" });
  const serverId = server!.id;
  const channel = "900000000000001001";
  const hook = discord.createWebhook(channel);
  const { endpoint } = await stack.clients.admin.createDiscordEndpoint({ serverId, webhookUrl: pasted(hook), eventTypes: ["heart.counted"], embed: true });
  t.true(endpoint?.discordEmbed);
  for (const name of ["e001", "e002", "e003"]) await castHeart(stack, serverId, name);
  const lines = await eventually(
    () => {
      const shown = discord.messages(channel).flatMap((m) => (m.embeds as Array<{ description?: string }>).flatMap((e) => (e.description ?? "").split("\n")));
      return shown.length >= 3 ? shown : undefined;
    },
    { timeoutMs: 30_000, message: "the three votes shown" },
  );
  t.deepEqual([...lines].sort(), ["**e001** voted for **Embeds**!", "**e002** voted for **Embeds**!", "**e003** voted for **Embeds**!"]);
  t.true(
    discord.messages(channel).every((m) => m.content === ""),
    "nothing in the content",
  );
});

test("only a Discord webhook URL is accepted: another host, http, a port, a query or another path is refused with a clear error that never repeats the URL", async (t) => {
  const { stack } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: "refusals", registrationUrl: "https://example.com/register" });
  const token = "T0kenValueThatMustNeverBeEchoed_abcdefghij";
  for (const webhookUrl of [
    `https://evil.example/api/webhooks/123456789012345678/${token}`,
    `https://discord.com.evil.example/api/webhooks/123456789012345678/${token}`,
    `http://discord.com/api/webhooks/123456789012345678/${token}`,
    `https://discord.com:8443/api/webhooks/123456789012345678/${token}`,
    `https://discord.com/api/webhooks/123456789012345678/${token}?wait=true`,
    `https://discord.com/api/channels/123456789012345678/${token}`,
    "not a url",
  ]) {
    const error = await rpcError(stack.clients.admin.createDiscordEndpoint({ serverId: server!.id, webhookUrl, eventTypes: ["heart.counted"] }));
    t.is(error.code, Code.InvalidArgument, webhookUrl);
    t.is(error.rawMessage, NOT_A_DISCORD_WEBHOOK);
    t.false(error.message.includes(token));
  }
  for (const host of ["discordapp.com", "ptb.discord.com", "canary.discord.com"]) {
    const { endpoint } = await stack.clients.admin.createDiscordEndpoint({
      serverId: server!.id,
      webhookUrl: `https://${host}/api/webhooks/123456789012345678/${token}`,
      eventTypes: ["heart.counted"],
    });
    t.is(endpoint?.discordWebhookId, "123456789012345678", host);
  }
});

test("a template error is refused at save time with its line and column; a valid one is saved and previewed with mentions neutralised", async (t) => {
  const { stack } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: "Templates", registrationUrl: "https://example.com/register" });
  const serverId = server!.id;
  const error = await rpcError(
    stack.clients.admin.createDiscordEndpoint({
      serverId,
      webhookUrl: "https://discord.com/api/webhooks/123456789012345678/abcdefghijklmnopqrstuvwxyz",
      eventTypes: ["heart.counted"],
      templates: [{ eventType: "heart.counted", template: "New vote!\n{{player}} has {{votes}} votes" }],
    }),
  );
  t.is(error.code, Code.InvalidArgument);
  t.regex(error.rawMessage, /^template for heart\.counted, line 2, column 16: unknown placeholder \{\{votes\}\}/);
  const unclosed = await rpcError(stack.clients.admin.previewDiscordMessage({ serverId, eventType: "heart.counted", template: "a\nb\n  {{player" }));
  t.regex(unclosed.rawMessage, /line 3, column 3: unclosed \{\{/);

  const { endpoint } = await stack.clients.admin.createDiscordEndpoint({
    serverId,
    webhookUrl: "https://discord.com/api/webhooks/123456789012345678/abcdefghijklmnopqrstuvwxyz",
    eventTypes: ["heart.counted"],
    templates: [{ eventType: "heart.counted", template: "@everyone {{player}} voted ({{month_total}} this month)" }],
  });
  const preview = await stack.clients.admin.previewDiscordMessage({ serverId, endpointId: endpoint!.id, eventType: "heart.counted" });
  t.is(preview.content, "@\u200beveryone Steve voted (12 this month)");
  const saved = await stack.clients.admin.setDiscordTemplates({
    serverId,
    endpointId: endpoint!.id,
    templates: [{ eventType: "heart.counted", template: "{{player}} voted for {{server}}" }],
  });
  t.deepEqual(
    saved.endpoint?.discordTemplates.map((x) => [x.eventType, x.template]),
    [["heart.counted", "{{player}} voted for {{server}}"]],
  );
});

test("Unknown Webhook (10015) disables the endpoint like a 410; the webhook token is in no RPC answer, attempt record, error text or log line", async (t) => {
  const { stack, discord, captured } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: "Gone", registrationUrl: "https://example.com/register" });
  const serverId = server!.id;
  // A webhook the emulator does not know (deleted in Discord).
  const token = "DeletedWebhookTokenNeverShown_0123456789";
  const created = await stack.clients.admin.createDiscordEndpoint({
    serverId,
    webhookUrl: `https://discord.com/api/webhooks/123456789012345999/${token}`,
    eventTypes: ["heart.counted"],
  });
  const endpointId = created.endpoint!.id;
  await castHeart(stack, serverId, "gone0001");
  const disabled = await eventually(
    async () => {
      const { endpoints } = await stack.clients.admin.listEndpoints({ serverId });
      const e = endpoints.find((x) => x.id === endpointId);
      return e?.disabledAt ? e : undefined;
    },
    { timeoutMs: 30_000, message: "the endpoint disabled" },
  );
  t.regex(disabled.disabledReason, /Unknown Webhook \(10015\)/);
  t.true(discord.requests.some((r) => r.status === 404));

  const answers = JSON.stringify([created, await stack.clients.admin.listEndpoints({ serverId })], (_, v: unknown) => (typeof v === "bigint" ? String(v) : v));
  t.false(answers.includes(token), "no RPC answer carries the token");
  const [stored] = await runSql<{ text: string }>(
    stack.prisma,
    Prisma.sql`SELECT coalesce(string_agg(concat_ws(' ', a.url, a.error, a.request_body, a.response_body, a.request_headers::text, d.last_error), ' '), '') AS text
               FROM deliveries d LEFT JOIN delivery_attempts a ON a.delivery_id = d.id WHERE d.endpoint_id = ${endpointId}::uuid`,
  );
  t.true(stored!.text.includes("Unknown Webhook"), "the attempt was recorded");
  t.false(stored!.text.includes(token), "no attempt record or error text carries the token");
  const [sealed] = await runSql<{ token: string }>(
    stack.prisma,
    Prisma.sql`SELECT discord_webhook_token AS token FROM callback_endpoints WHERE id = ${endpointId}::uuid`,
  );
  t.false(sealed!.token.includes(token), "stored sealed");
  t.false(
    captured.raw.some((line) => line.includes(token)),
    "no log line carries the token",
  );
});

test("a Discord endpoint has health like a callback: failing since its first failure (403 Missing Permissions), recovered by its next message", async (t) => {
  t.timeout(60_000);
  const { stack, discord } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: "Health", registrationUrl: "https://example.com/register" });
  const serverId = server!.id;
  const channel = "900000000000003000";
  const hook = discord.createWebhook(channel);
  const { endpoint } = await stack.clients.admin.createDiscordEndpoint({ serverId, webhookUrl: pasted(hook), eventTypes: ["heart.counted"] });
  const endpointId = endpoint!.id;
  const healthOf = async () => {
    const [row] = await runSql<{ failing_since: Date | null; last_success_at: Date | null }>(
      stack.prisma,
      Prisma.sql`SELECT failing_since, last_success_at FROM callback_health WHERE endpoint_id = ${endpointId}::uuid`,
    );
    return row;
  };
  // The owner removed the webhook's permission in the channel: every message is refused.
  discord.failWebhook(hook.id, { status: 403, code: 50013, message: "Missing Permissions" });
  await castHeart(stack, serverId, "health01");
  const failing = await eventually(async () => ((await healthOf())?.failing_since ? healthOf() : undefined), {
    timeoutMs: 30_000,
    message: "the endpoint's health says failing",
  });
  t.truthy(failing?.failing_since, "failing since the first failed message");
  discord.failWebhook(hook.id, null);
  await castHeart(stack, serverId, "health02");
  const recovered = await eventually(
    async () => {
      const h = await healthOf();
      return h && h.failing_since === null && h.last_success_at !== null ? h : undefined;
    },
    { timeoutMs: 30_000, message: "the endpoint recovered" },
  );
  t.truthy(recovered.last_success_at);
  // The first vote's retry may be what recovered it; the next vote is posted too.
  t.true(
    await eventually(() => discord.messages(channel).some((m) => m.content.includes("health02")) || undefined, {
      timeoutMs: 30_000,
      message: "the next vote posted",
    }),
  );
});

test("who may configure a Discord endpoint: the server's owner (dashboard session) and a list admin; another owner gets unknown server, a token without admin is refused", async (t) => {
  const { stack } = t.context;
  const { access, admin } = stack.clients;
  const gatewayToken = (await access.createServiceToken({ name: "discord-gateway", scopes: ["ingest", "pull", "clicks:record", "dashboard"] })).token;
  const gateway = await startDashboardGateway({ rpcUrl: stack.rpcUrl, token: gatewayToken, log: createLogger("test", "silent") });
  try {
    const serverOf = async (ownerId: string) => {
      const { server } = await admin.createServer({ name: `Discord ${ownerId}`, registrationUrl: "https://example.com/register" });
      await access.createOwner({ ownerId, displayName: ownerId });
      await access.assignServer({ serverId: server!.id, ownerId });
      return server!.id;
    };
    const mine = await serverOf("discord-owner-a");
    const theirs = await serverOf("discord-owner-b");
    const session = await signInOwner(access, gateway.url, "discord-owner-a");
    const asOwnerA = createClient(
      ServerAdminService,
      withHeaders(createServiceTransport(stack.rpcUrl, gatewayToken), { [DASHBOARD_SESSION_HEADER]: session.sessionToken }),
    );
    const request = (serverId: string) => ({
      serverId,
      webhookUrl: "https://discord.com/api/webhooks/123456789012345678/abcdefghijklmnopqrstuvwxyz",
      eventTypes: ["heart.counted"],
    });
    t.is((await asOwnerA.createDiscordEndpoint(request(mine))).endpoint?.kind, "discord", "the owner configures their own server");
    const other = await rpcError(asOwnerA.createDiscordEndpoint(request(theirs)));
    t.is(other.code, Code.NotFound);
    t.is(other.rawMessage, "unknown server", "another owner's server answers as a missing one");
    t.is((await rpcError(asOwnerA.previewDiscordMessage({ serverId: theirs, eventType: "heart.counted" }))).code, Code.NotFound);
    t.is((await rpcError(asOwnerA.setDiscordTemplates({ serverId: theirs, endpointId: "", templates: [] }))).code, Code.NotFound);
    t.is((await admin.createDiscordEndpoint(request(theirs))).endpoint?.kind, "discord", "a list admin configures any server");
    // The dashboard: the owner adds a Discord channel, sees its webhook id (never its token) and previews a template.
    const token = "DashboardWebhookTokenNeverShown_0123456789";
    const added = await ownerApi(gateway.url, session, "POST", `/servers/${mine}/discord-endpoints`, {
      webhook_url: `https://discord.com/api/webhooks/123456789012345677/${token}`,
      event_types: ["heart.counted"],
      templates: { "heart.counted": "{{player}} voted!" },
    });
    t.is(added.status, 201);
    const listed = await ownerApi(gateway.url, session, "GET", `/servers/${mine}/endpoints`);
    t.true(listed.text.includes('"discord_webhook_id":"123456789012345677"'));
    t.false(`${added.text}${listed.text}`.includes(token), "the dashboard never shows the token");
    const preview = await ownerApi(gateway.url, session, "POST", `/servers/${mine}/discord-preview`, {
      event_type: "heart.counted",
      template: "{{player}} voted!",
    });
    t.deepEqual(JSON.parse(preview.text), { content: "Steve voted!" });
    const bad = await ownerApi(gateway.url, session, "POST", `/servers/${mine}/discord-preview`, { event_type: "heart.counted", template: "{{player}\n" });
    t.is(bad.status, 400);
    t.regex(bad.text, /line 1, column 1: unclosed/);
    t.is((await ownerApi(gateway.url, session, "POST", `/servers/${theirs}/discord-endpoints`, { webhook_url: "x", event_types: [] })).status, 404);
    const readOnly = (await access.createServiceToken({ name: "discord-read", scopes: ["read"] })).token;
    const reader = createClient(ServerAdminService, createServiceTransport(stack.rpcUrl, readOnly));
    t.is((await rpcError(reader.createDiscordEndpoint(request(mine)))).code, Code.PermissionDenied, "a token without admin cannot");
  } finally {
    await gateway.close();
  }
});
