/**
 * The Discord API emulator (scripts/harness/discord-emulator.ts) does what Discord's published documentation says, so
 * the service's Discord destination, voter roles and DM reminders are tested against the documented behaviour and not
 * against themselves: per-route buckets per top-level resource with the X-RateLimit-* headers, 429 with Retry-After and
 * `retry_after` past a limit (scope user), the shared per-channel webhook limit (scope shared, not counted as invalid),
 * the global limit (X-RateLimit-Global), the documented errors with their codes, and the detection of a client that
 * sends again into a bucket before it reset. Time is an injected clock: nothing sleeps.
 */
import test from "ava";
import { startDiscordEmulator } from "../../scripts/harness/discord-emulator.js";

const clockAt = (start: number) => {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
};

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

test("Execute Webhook: 204 (200 with the message under wait=true), bucket headers on each answer, and 429 with retry_after past the per-webhook limit until it resets", async (t) => {
  const clock = clockAt(1_767_225_600_000);
  const discord = await startDiscordEmulator({ now: clock.now, webhookLimit: { limit: 2, perMs: 2_000 } });
  try {
    const hook = discord.createWebhook("900000000000000001");
    const first = await post(`${hook.url}?wait=true`, { content: "Steve voted!" });
    t.is(first.status, 200);
    t.like(await first.json(), { content: "Steve voted!", channel_id: "900000000000000001", webhook_id: hook.id });
    t.is(first.headers.get("x-ratelimit-limit"), "2");
    t.is(first.headers.get("x-ratelimit-remaining"), "1");
    t.is(first.headers.get("x-ratelimit-reset-after"), "2.000");
    t.is(first.headers.get("x-ratelimit-reset"), ((clock.now() + 2_000) / 1000).toFixed(3));
    const bucket = first.headers.get("x-ratelimit-bucket");
    t.regex(bucket ?? "", /^[0-9a-f]{16}$/);
    t.false((bucket ?? "").includes(hook.id), "the bucket id leaves the webhook (a top-level resource) out");

    clock.advance(500);
    t.is((await post(hook.url, { content: "Alex voted!" })).status, 204);
    const limited = await post(hook.url, { content: "third" });
    t.is(limited.status, 429);
    t.is(limited.headers.get("retry-after"), "2", "Retry-After in whole seconds, rounded up");
    t.is(limited.headers.get("x-ratelimit-scope"), "user");
    t.is(limited.headers.get("x-ratelimit-remaining"), "0");
    t.deepEqual(await limited.json(), { message: "You are being rate limited.", retry_after: 1.5, global: false });

    const other = discord.createWebhook("900000000000000002");
    t.is((await post(other.url, { content: "another webhook" })).status, 204, "another webhook has its own bucket");
    t.is((await post(hook.url, { content: "again too early" })).status, 429);
    t.is(discord.secondTooManyRequests().length, 1, "sending again before the reset is flagged");
    clock.advance(1_500);
    t.is((await post(hook.url, { content: "after the reset" })).status, 204);
    t.deepEqual(
      discord.messages("900000000000000001").map((m) => m.content),
      ["Steve voted!", "Alex voted!", "after the reset"],
      "a 429 stores nothing",
    );
    t.is(discord.invalidRequests(), 2, "user-scope 429s count as invalid requests");
  } finally {
    await discord.close();
  }
});

test("the shared per-channel webhook limit answers scope shared (not counted as invalid); the global limit answers X-RateLimit-Global", async (t) => {
  const clock = clockAt(1_767_225_600_000);
  const discord = await startDiscordEmulator({
    now: clock.now,
    channelWebhookLimit: { limit: 3, perMs: 60_000 },
    globalLimit: { limit: 6, perMs: 1_000 },
  });
  try {
    const hooks = [discord.createWebhook("900000000000000003"), discord.createWebhook("900000000000000003")];
    const statuses: number[] = [];
    let shared: Response | undefined;
    for (let i = 0; i < 4; i++) {
      const res = await post(hooks[i % 2]!.url, { content: `vote ${i}` });
      statuses.push(res.status);
      if (res.status === 429) shared = res;
    }
    t.deepEqual(statuses, [204, 204, 204, 429], "the channel's limit is shared by its webhooks");
    t.is(shared?.headers.get("x-ratelimit-scope"), "shared");
    t.like(await shared!.json(), { message: "The resource is being rate limited.", global: false });
    t.is(discord.invalidRequests(), 0, "a shared 429 is not an invalid request");

    discord.createGuild("800000000000000001", { members: ["700000000000000001"], roles: ["600000000000000001"], managers: ["bot-token"] });
    const bot = { authorization: "Bot bot-token" };
    const role = `${discord.baseUrl}/guilds/800000000000000001/members/700000000000000001/roles/600000000000000001`;
    const answers: Response[] = [];
    for (let i = 0; i < 7; i++) answers.push(await fetch(role, { method: i % 2 === 0 ? "PUT" : "DELETE", headers: bot }));
    t.deepEqual(
      answers.map((a) => a.status),
      [204, 204, 204, 204, 204, 204, 429],
      "the bot's seventh request in a second passes the global limit of 6",
    );
    const global = answers[6]!;
    t.is(global.headers.get("x-ratelimit-global"), "true");
    t.is(global.headers.get("x-ratelimit-scope"), "global");
    t.like(await global.json(), { global: true });
  } finally {
    await discord.close();
  }
});

test("roles, DMs and messages answer the documented errors: 401 without a bot token, 403 Missing Permissions (50013), 10007 Unknown Member, 10015 Unknown Webhook, 50007 closed DMs, 50006 empty and 50035 over-long messages", async (t) => {
  // Limits far above what this test sends: it is about the errors.
  const discord = await startDiscordEmulator({ webhookLimit: { limit: 100, perMs: 1_000 } });
  try {
    discord.createGuild("800000000000000002", { members: ["700000000000000002"], roles: ["600000000000000002"], managers: ["good-bot"] });
    const role = (user: string) => `${discord.baseUrl}/guilds/800000000000000002/members/${user}/roles/600000000000000002`;
    t.is((await fetch(role("700000000000000002"), { method: "PUT" })).status, 401);
    const weak = await fetch(role("700000000000000002"), { method: "PUT", headers: { authorization: "Bot weak-bot" } });
    t.is(weak.status, 403);
    t.like(await weak.json(), { code: 50013, message: "Missing Permissions" });
    const stranger = await fetch(role("700000000000000099"), { method: "PUT", headers: { authorization: "Bot good-bot" } });
    t.like(await stranger.json(), { code: 10007 });
    t.is((await fetch(role("700000000000000002"), { method: "PUT", headers: { authorization: "Bot good-bot" } })).status, 204);
    t.deepEqual(discord.memberRoles("800000000000000002", "700000000000000002"), ["600000000000000002"]);
    t.is((await fetch(role("700000000000000002"), { method: "DELETE", headers: { authorization: "Bot good-bot" } })).status, 204);
    t.deepEqual(discord.memberRoles("800000000000000002", "700000000000000002"), []);

    const dm = await post(`${discord.baseUrl}/users/@me/channels`, { recipient_id: "700000000000000002" }, { authorization: "Bot good-bot" });
    const channel = (await dm.json()) as { id: string; type: number };
    t.is(channel.type, 1);
    t.is((await post(`${discord.baseUrl}/channels/${channel.id}/messages`, { content: "You can vote again!" }, { authorization: "Bot good-bot" })).status, 200);
    discord.closeDms("700000000000000002");
    const closed = await post(`${discord.baseUrl}/channels/${channel.id}/messages`, { content: "again" }, { authorization: "Bot good-bot" });
    t.is(closed.status, 403);
    t.like(await closed.json(), { code: 50007 });

    const hook = discord.createWebhook("900000000000000004");
    t.like(await (await post(`${discord.baseUrl}/webhooks/1/nope`, { content: "x" })).json(), { code: 10015 });
    t.like(await (await post(hook.url, { content: "" })).json(), { code: 50006 });
    t.like(await (await post(hook.url, { content: "x".repeat(2001) })).json(), { code: 50035 });
    t.is((await post(hook.url, { embeds: [{ title: "Steve voted" }] })).status, 204, "embeds alone are a message");
    const sent = await post(`${hook.url}?wait=true`, { content: "to edit" });
    const { id } = (await sent.json()) as { id: string };
    const edited = await fetch(`${hook.url}/messages/${id}`, {
      method: "PATCH",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ content: "edited" }),
    });
    t.is(edited.status, 200);
    t.like(await edited.json(), { content: "edited" });
    t.is((await fetch(`${hook.url}/messages/1`, { method: "PATCH", headers: { "content-type": "application/json" }, body: "{}" })).status, 404);
  } finally {
    await discord.close();
  }
});

test("a client that waits out X-RateLimit-Reset-After when Remaining is 0 sends 30 messages (the channel's minute) through a 5-per-2-s bucket with no 429", async (t) => {
  const clock = clockAt(1_767_225_600_000);
  const discord = await startDiscordEmulator({ now: clock.now });
  try {
    const hook = discord.createWebhook("900000000000000005");
    for (let i = 0; i < 30; i++) {
      const res = await post(hook.url, { content: `vote ${i}` });
      t.is(res.status, 204);
      if (res.headers.get("x-ratelimit-remaining") === "0") clock.advance(Number(res.headers.get("x-ratelimit-reset-after")) * 1000);
    }
    t.is(discord.messages("900000000000000005").length, 30);
    t.deepEqual(discord.secondTooManyRequests(), []);
    t.is(discord.requests.filter((r) => r.status === 429).length, 0);
  } finally {
    await discord.close();
  }
});
