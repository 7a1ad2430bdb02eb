/**
 * Vote reminders by Discord DM on the real stack (PostgreSQL, the referral service, the public gateway) against the
 * Discord emulator (scripts/harness/discord-emulator.ts), through THE Discord client: the receipt page of a heart with a
 * discord_id offers a button (nothing pre-checked) when the list runs a bot; the opt-in is active at once; the DM (Create
 * DM, then Create Message) leaves at next eligible + the jitter, once per heart, with the server's name and the
 * one-click unsubscribe link; 50007 (the user takes no DMs) ends the subscription; an unsubscribe stops it; neither the
 * bot token nor the Discord id reaches a log line.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { Prisma } from "../../gen/prisma/client.js";
import { startDiscordEmulator, type DiscordEmulator } from "../../scripts/harness/discord-emulator.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { HEART_COOLDOWN_MS } from "../../services/hearts/domain/streak.js";
import { reminderJitterMs } from "../../services/reminders/domain/reminder-schedule.js";
import { createUnsubscribeTokens } from "../../services/reminders/reminder-tokens.js";
import { runReminderPass, type ReminderPassDeps } from "../../services/reminders/send-reminders.js";
import { createDiscordRest, type DiscordRest } from "../../services/shared/adapters/discord-rest.js";
import { runSql } from "../../services/shared/adapters/sql/executor.js";
import { eraseVoterData, newTombstone } from "../../services/voter-data/erase-voter-data.js";
import { exportVoterData } from "../../services/voter-data/export-voter-data.js";
import { captureLog, type CapturedLog } from "../helpers/capture-log.js";

interface Context {
  stack: TestStack;
  discord: DiscordEmulator;
  client: DiscordRest;
  captured: CapturedLog;
  pass: ReminderPassDeps;
}
const test = anyTest as TestFn<Context>;
const JITTER_SECONDS = 900;
const T0 = new Date("2026-12-01T00:00:30.000Z");
const BOT_TOKEN = `bot-${randomBytes(12).toString("hex")}`;
let seq = 0;

test.before(async (t) => {
  const captured = captureLog("debug");
  const stack = await startStack({ discordDmReminders: true, log: captured.log, now: () => T0 });
  const discord = await startDiscordEmulator();
  const client = createDiscordRest({ baseUrl: discord.baseUrl });
  const pass: ReminderPassDeps = {
    db: stack.prisma,
    bot: { rest: client, botToken: BOT_TOKEN },
    unsubscribe: createUnsubscribeTokens(stack.secretBox),
    publicBaseUrl: stack.gatewayUrl,
    jitterSeconds: JITTER_SECONDS,
    batchRows: 100,
    log: captured.log,
  };
  t.context = { stack, discord, client, captured, pass };
});

test.after.always(async (t) => {
  await t.context.client?.close();
  await t.context.discord?.close();
  await t.context.stack?.close();
});

const newDiscordId = () => `3${String(Date.now()).slice(-10)}${String(++seq).padStart(6, "0")}`;
const postForm = (url: string, body: string) => fetch(url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body });

/** A counted heart at T0 on a new server, with `discordId` when given; its receipt URL. */
async function voted(c: Context, discordId?: string) {
  const { server } = await c.stack.clients.admin.createServer({ name: `DM SMP ${randomBytes(3).toString("hex")}` });
  const voter = `voter-${randomBytes(4).toString("hex")}`;
  c.stack.clock.now = () => T0;
  const answer = await c.stack.clients.hearts.castHeart({
    serverId: server!.id,
    username: voter,
    voterIdentity: voter,
    ...(discordId ? { discordId } : {}),
    ip: `203.0.113.${(++seq % 200) + 20}`,
    userAgent: "Mozilla/5.0 test",
  });
  return { serverId: server!.id, serverName: server!.name, voter, receiptUrl: answer.receiptUrl };
}

/** The DMs the bot sent to `userId` (its DM channel is the one Create DM answers again). */
async function dmsTo(c: Context, userId: string) {
  const opened = await c.client.request({ method: "POST", path: "/users/@me/channels", body: { recipient_id: userId }, botToken: BOT_TOKEN });
  if (!opened.ok) throw new Error(opened.error);
  return c.discord.messages((opened.body as { id: string }).id);
}

async function rowOf(c: Context, serverId: string) {
  const [row] = await runSql<{ id: string; state: string; channel: string; email: string | null }>(
    c.stack.prisma,
    Prisma.sql`SELECT id, state, channel, email FROM vote_reminders WHERE server_id = ${serverId}::uuid`,
  );
  return row;
}

/** Opted in by the receipt page's button; the row and its due time. */
async function subscribed(c: Context, discordId: string) {
  const v = await voted(c, discordId);
  const optIn = await postForm(`${v.receiptUrl}/reminder`, "channel=discord");
  if (optIn.status !== 200) throw new Error(`opt-in answered ${optIn.status}`);
  const row = (await rowOf(c, v.serverId))!;
  return { ...v, id: row.id, due: new Date(T0.getTime() + HEART_COOLDOWN_MS + reminderJitterMs(row.id, T0, JITTER_SECONDS)) };
}

test.serial("the receipt page offers a Discord DM reminder (a button, nothing pre-checked) only on a heart that carried a discord_id", async (t) => {
  const c = t.context;
  const withId = await voted(c, newDiscordId());
  const page = await (await fetch(withId.receiptUrl)).text();
  t.regex(page, /Remind me by Discord DM when I can vote again/);
  t.regex(page, /<input type="hidden" name="channel" value="discord">/);
  t.notRegex(page, /checked/);
  t.notRegex(page, /Remind me by e-mail/, "no e-mail form without SMTP_URL");

  const withoutId = await voted(c);
  t.notRegex(await (await fetch(withoutId.receiptUrl)).text(), /Discord DM/);
  const refused = await postForm(`${withoutId.receiptUrl}/reminder`, "channel=discord");
  t.is(refused.status, 400, "a heart without a Discord id cannot be subscribed by hand either");
  t.is(await rowOf(c, withoutId.serverId), undefined);
});

test.serial(
  "opt-in is active at once; the DM leaves at next eligible + the jitter, exactly once per heart, with the server's name and the unsubscribe link",
  async (t) => {
    const c = t.context;
    const discordId = newDiscordId();
    const s = await subscribed(c, discordId);
    const row = await rowOf(c, s.serverId);
    t.like(row, { state: "active", channel: "discord", email: null });

    await runReminderPass(c.pass, new Date(s.due.getTime() - 1));
    t.is((await dmsTo(c, discordId)).length, 0, "nothing before the due time");
    await runReminderPass(c.pass, s.due);
    await runReminderPass(c.pass, new Date(s.due.getTime() + 60_000));
    const dms = await dmsTo(c, discordId);
    t.is(dms.length, 1, "exactly one DM for the heart");
    t.true(dms[0]!.content.includes(s.serverName));
    t.regex(dms[0]!.content, /\/reminders\/unsubscribe\/[A-Za-z0-9_-]{64}/);
    // The next look is a cooldown later: no second DM for the same heart however often the sender passes.
    await runReminderPass(c.pass, new Date(s.due.getTime() + HEART_COOLDOWN_MS + 1));
    t.is((await dmsTo(c, discordId)).length, 1);
  },
);

test.serial("Create DM is called once per subscription: the next heart's DM goes to the DM channel kept from the first", async (t) => {
  const c = t.context;
  const discordId = newDiscordId();
  const s = await subscribed(c, discordId);
  const createDms = () => c.discord.requests.filter((r) => r.method === "POST" && r.path.endsWith("/users/@me/channels")).length;
  const before = createDms();
  await runReminderPass(c.pass, s.due);
  t.is(createDms(), before + 1);
  // A second counted heart a day later, and its DM.
  const second = new Date(T0.getTime() + HEART_COOLDOWN_MS + 1);
  c.stack.clock.now = () => second;
  await c.stack.clients.hearts.castHeart({
    serverId: s.serverId,
    username: s.voter,
    voterIdentity: s.voter,
    discordId,
    ip: "203.0.113.251",
    userAgent: "Mozilla/5.0 test",
  });
  const afterFirst = createDms();
  await runReminderPass(c.pass, new Date(second.getTime() + HEART_COOLDOWN_MS + JITTER_SECONDS * 1000));
  t.is(createDms(), afterFirst, "no second Create DM");
  t.is((await dmsTo(c, discordId)).length, 2, "one DM per heart");
});

test.serial("Discord's 50007 (the user takes no DMs) ends the subscription like a bounce: never tried again", async (t) => {
  const c = t.context;
  const discordId = newDiscordId();
  c.discord.closeDms(discordId);
  const s = await subscribed(c, discordId);
  const result = await runReminderPass(c.pass, s.due);
  t.is(result.bounced, 1);
  t.is((await rowOf(c, s.serverId))?.state, "bounced");
  const tried = c.discord.requests.length;
  await runReminderPass(c.pass, new Date(s.due.getTime() + HEART_COOLDOWN_MS * 2));
  t.is(c.discord.requests.length, tried, "no call to Discord for an ended subscription");
});

test.serial("a rate limit is a temporary failure: the DM is tried again later and the subscription stays active", async (t) => {
  const c = t.context;
  // A bot whose Create DM bucket allows one DM channel per 10 minutes.
  const limited = await startDiscordEmulator({ dmLimit: { limit: 1, perMs: 600_000 } });
  const client = createDiscordRest({ baseUrl: limited.baseUrl });
  try {
    const first = await subscribed(c, newDiscordId());
    const second = await subscribed(c, newDiscordId());
    const at = new Date(Math.max(first.due.getTime(), second.due.getTime()));
    const result = await runReminderPass({ ...c.pass, bot: { rest: client, botToken: BOT_TOKEN } }, at);
    t.like(result, { sent: 1, retried: 1, bounced: 0 });
    const rows = await runSql<{ state: string; attempts: number; next_send_at: Date }>(
      c.stack.prisma,
      Prisma.sql`SELECT state, attempts, next_send_at FROM vote_reminders WHERE server_id IN (${first.serverId}::uuid, ${second.serverId}::uuid) AND attempts > 0`,
    );
    t.is(rows.length, 1);
    t.is(rows[0]!.state, "active");
    t.true(rows[0]!.next_send_at.getTime() > at.getTime(), "tried again later");
    t.deepEqual(limited.secondTooManyRequests(), [], "nothing sent again into a bucket that answered 429");
  } finally {
    await client.close();
    await limited.close();
  }
});

test.serial("the one-click unsubscribe link of a DM stops the reminders", async (t) => {
  const c = t.context;
  const discordId = newDiscordId();
  const s = await subscribed(c, discordId);
  await runReminderPass(c.pass, s.due);
  const link = /https?:\/\/\S+\/reminders\/unsubscribe\/\S+/.exec((await dmsTo(c, discordId))[0]!.content)![0];
  t.is((await fetch(link, { method: "POST" })).status, 200);
  t.is((await rowOf(c, s.serverId))?.state, "unsubscribed");
  // A new counted heart a day later: no DM for it.
  c.stack.clock.now = () => new Date(T0.getTime() + HEART_COOLDOWN_MS + 1);
  await c.stack.clients.hearts.castHeart({
    serverId: s.serverId,
    username: s.voter,
    voterIdentity: s.voter,
    discordId,
    ip: "203.0.113.250",
    userAgent: "Mozilla/5.0 test",
  });
  await runReminderPass(c.pass, new Date(T0.getTime() + 3 * HEART_COOLDOWN_MS));
  t.is((await dmsTo(c, discordId)).length, 1);
});

test.serial("the voter's export lists the DM reminder with its Discord id; their erasure deletes it, so no DM is sent", async (t) => {
  const c = t.context;
  const discordId = newDiscordId();
  const s = await subscribed(c, discordId);
  const key = { kind: "discord_id" as const, value: discordId };
  const exported = await exportVoterData(c.stack.prisma, { serverId: s.serverId, key, now: T0 });
  t.deepEqual(
    exported.servers[0]?.reminders.map((r) => [r.channel, r.discord_id, r.email]),
    [["discord", discordId, null]],
  );
  const erased = await eraseVoterData(c.stack.prisma, { serverId: s.serverId, key, now: T0, tombstone: newTombstone() });
  t.is(erased.counts.vote_reminders, 1);
  await runReminderPass(c.pass, s.due);
  t.is((await dmsTo(c, discordId)).length, 0);
});

test.serial("neither the bot token nor a voter's Discord id appears in any log line", async (t) => {
  const c = t.context;
  t.true(c.captured.raw.length > 0);
  t.deepEqual(
    c.captured.raw.filter((line) => line.includes(BOT_TOKEN)),
    [],
  );
  // Every Discord id of this file starts with 3 and is 17 digits long; none may be logged.
  t.deepEqual(
    c.captured.raw.filter((line) => /\b3\d{16}\b/.test(line)),
    [],
  );
});
