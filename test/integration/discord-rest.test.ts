/**
 * The Discord client (services/shared/adapters/discord-rest.ts) against the Discord API emulator, which does what
 * Discord's documentation says: a burst never sends again into a bucket that answered 429 (the emulator's
 * secondTooManyRequests() stays empty), a bucket whose Remaining is 0 is waited out, a global 429 holds every request
 * of that token, a caller that would rather reschedule gets rateLimited with the time to retry, and Discord's errors
 * come back with their codes and without a token. Time is an injected clock that the client's sleep advances.
 */
import test from "ava";
import { startDiscordEmulator } from "../../scripts/harness/discord-emulator.js";
import { createEnvReader } from "../../services/shared/runtime/config.js";
import {
  createDiscordRest,
  DISCORD_API_BASE_URL,
  DiscordErrorCode,
  readDiscordApiBaseUrl,
  redactDiscordPath,
  routeKeyOf,
} from "../../services/shared/adapters/discord-rest.js";

const clockAt = (start: number) => {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += Math.max(0, ms)), sleep: async (ms: number) => void (t += Math.max(0, ms)) };
};

const webhookPath = (url: string, baseUrl: string) => url.slice(baseUrl.length);

test("a burst of 45 concurrent webhook messages is sent with zero second 429s: Remaining 0 is waited out, the channel's shared 429 is honoured, every message stored once", async (t) => {
  const clock = clockAt(1_767_225_600_000);
  const discord = await startDiscordEmulator({ now: clock.now });
  const client = createDiscordRest({ baseUrl: discord.baseUrl, now: clock.now, sleep: clock.sleep });
  try {
    const hook = discord.createWebhook("900000000000000101");
    const answers = await Promise.all(
      Array.from({ length: 45 }, (_, i) => client.request({ method: "POST", path: webhookPath(hook.url, discord.baseUrl), body: { content: `vote ${i}` } })),
    );
    t.deepEqual(
      answers.map((a) => a.kind),
      Array(45).fill("ok"),
    );
    t.deepEqual(discord.secondTooManyRequests(), [], "never sent into a bucket before its 429 passed");
    t.is(discord.requests.filter((r) => r.status === 429 && r.scope === "user").length, 0, "the per-webhook bucket is never passed: Remaining 0 is waited out");
    const contents = discord.messages("900000000000000101").map((m) => m.content);
    t.is(contents.length, 45);
    t.is(new Set(contents).size, 45, "every message stored once");
  } finally {
    await client.close();
    await discord.close();
  }
});

test("the global limit: requests of one bot token across many buckets keep under it proactively, and a global 429 holds every route of that token until retry_after passes", async (t) => {
  const clock = clockAt(1_767_225_600_000);
  const discord = await startDiscordEmulator({ now: clock.now, globalLimit: { limit: 6, perMs: 1_000 } });
  const guilds = Array.from({ length: 10 }, (_, i) => `80000000000000${1000 + i}`);
  for (const g of guilds) discord.createGuild(g, { members: ["700000000000000001"], roles: ["600000000000000001"], managers: ["bot-a"] });
  const paced = createDiscordRest({ baseUrl: discord.baseUrl, now: clock.now, sleep: clock.sleep, globalLimitPerSecond: 6 });
  const unpaced = createDiscordRest({ baseUrl: discord.baseUrl, now: clock.now, sleep: clock.sleep });
  try {
    const role = (g: string) => `/guilds/${g}/members/700000000000000001/roles/600000000000000001`;
    const answers = await Promise.all(guilds.map((g) => paced.request({ method: "PUT", path: role(g), botToken: "bot-a" })));
    t.deepEqual(
      answers.map((a) => a.kind),
      Array(10).fill("ok"),
    );
    t.is(discord.requests.filter((r) => r.status === 429).length, 0, "kept under the global limit without a 429");

    // A client that does not know the lower limit meets a global 429 and then waits for every route of the token.
    clock.advance(1_000);
    const before = discord.requests.length;
    for (const g of guilds) t.is((await unpaced.request({ method: "DELETE", path: role(g), botToken: "bot-a" })).kind, "ok");
    const mine = discord.requests.slice(before);
    t.is(mine.filter((r) => r.status === 429 && r.scope === "global").length, 1, "one global 429, then waited out");
    t.deepEqual(discord.secondTooManyRequests(), []);
  } finally {
    await paced.close();
    await unpaced.close();
    await discord.close();
  }
});

test("a caller that would rather reschedule (maxWaitMs 0) gets rateLimited with retryAt when the bucket is exhausted, and nothing is sent into it", async (t) => {
  const clock = clockAt(1_767_225_600_000);
  const discord = await startDiscordEmulator({ now: clock.now, webhookLimit: { limit: 2, perMs: 2_000 } });
  const client = createDiscordRest({ baseUrl: discord.baseUrl, now: clock.now, sleep: clock.sleep });
  try {
    const hook = discord.createWebhook("900000000000000102");
    const path = webhookPath(hook.url, discord.baseUrl);
    t.is((await client.request({ method: "POST", path, body: { content: "1" }, maxWaitMs: 0 })).kind, "ok");
    t.is((await client.request({ method: "POST", path, body: { content: "2" }, maxWaitMs: 0 })).kind, "ok");
    const sent = discord.requests.length;
    const third = await client.request({ method: "POST", path, body: { content: "3" }, maxWaitMs: 0 });
    t.like(third, { kind: "rateLimited", ok: false, rateLimited: true, retryAt: clock.now() + 2_000 });
    t.is(discord.requests.length, sent, "nothing sent into an exhausted bucket");
    t.false(JSON.stringify(third).includes(hook.token), "the webhook token is not in the answer");
    clock.advance(2_000);
    t.is((await client.request({ method: "POST", path, body: { content: "3" }, maxWaitMs: 0 })).kind, "ok");
  } finally {
    await client.close();
    await discord.close();
  }
});

test("Discord's errors come back with their codes and a text without tokens: 10015 Unknown Webhook, 50013 Missing Permissions", async (t) => {
  const discord = await startDiscordEmulator();
  const client = createDiscordRest({ baseUrl: discord.baseUrl });
  try {
    const gone = await client.request({ method: "POST", path: "/webhooks/1200000000000000001/secret-webhook-token", body: { content: "x" } });
    t.like(gone, { kind: "error", status: 404, code: DiscordErrorCode.unknownWebhook, message: "Unknown Webhook" });
    t.false(JSON.stringify(gone).includes("secret-webhook-token"));
    discord.createGuild("800000000000000201", { members: ["700000000000000001"], roles: ["600000000000000001"], managers: ["good-bot"] });
    const denied = await client.request({
      method: "PUT",
      path: "/guilds/800000000000000201/members/700000000000000001/roles/600000000000000001",
      botToken: "weak-bot-token",
    });
    t.like(denied, { kind: "error", status: 403, code: DiscordErrorCode.missingPermissions });
    t.false(JSON.stringify(denied).includes("weak-bot-token"));
    const closed = createDiscordRest({ baseUrl: "http://127.0.0.1:1/api/v10" });
    const failed = await closed.request({ method: "POST", path: "/webhooks/1/another-secret", body: { content: "x" } });
    t.is(failed.kind, "failed");
    t.false(JSON.stringify(failed).includes("another-secret"));
    await closed.close();
    await t.notThrowsAsync(closed.close(), "closing twice (a dispatcher stopped twice) is a no-op");
  } finally {
    await client.close();
    await discord.close();
  }
});

test("DISCORD_API_BASE_URL is honoured only in development and tests; production always calls Discord, and route keys keep only the top-level resource", (t) => {
  t.is(readDiscordApiBaseUrl(createEnvReader({}), "production"), DISCORD_API_BASE_URL);
  t.is(readDiscordApiBaseUrl(createEnvReader({ DISCORD_API_BASE_URL: "http://127.0.0.1:9/api/v10/" }), "test"), "http://127.0.0.1:9/api/v10");
  const r = createEnvReader({ DISCORD_API_BASE_URL: "http://evil.example/api" });
  t.is(readDiscordApiBaseUrl(r, "production"), DISCORD_API_BASE_URL);
  t.throws(() => r.finish({}), { message: /DISCORD_API_BASE_URL is honoured only in development and tests/ });
  t.is(routeKeyOf("/guilds/800000000000000201/members/700000000000000001/roles/600000000000000001"), "/guilds/800000000000000201/members/{id}/roles/{id}");
  t.is(routeKeyOf("/webhooks/1200000000000000001/tok/messages/1200000000000000009"), "/webhooks/1200000000000000001/tok/messages/{id}");
  t.is(redactDiscordPath("/webhooks/1200000000000000001/tok/messages/9"), "/webhooks/1200000000000000001/{token}/messages/9");
});
