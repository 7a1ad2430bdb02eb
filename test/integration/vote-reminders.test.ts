/**
 * E-mail vote reminders on the real stack (PostgreSQL, the referral service, the public gateway) and a real SMTP server
 * (scripts/harness/smtp-sink.ts): opt-in from the receipt page (an empty field, nothing pre-checked) -> a confirm mail;
 * the confirm link's GET changes nothing, its POST confirms; the reminder leaves at next eligible + the jitter, once per
 * heart, with a one-click unsubscribe link and the RFC 8058 headers; a one-click POST, a 550 bounce or the voter's
 * erasure stops them; the address never reaches a log line; wrong tokens are 404 and bad input 400.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { Prisma } from "../../gen/prisma/client.js";
import { VoterKeyKind } from "../../gen/proto/voters/v1/voters_pb.js";
import { startSmtpSink, type SmtpSink, type SunkMail } from "../../scripts/harness/smtp-sink.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { HEART_COOLDOWN_MS } from "../../services/hearts/domain/streak.js";
import { REMINDER_RETRY_STEP_MS, reminderJitterMs } from "../../services/reminders/domain/reminder-schedule.js";
import { runReminderPass, type ReminderPassDeps } from "../../services/reminders/send-reminders.js";
import { createUnsubscribeTokens } from "../../services/reminders/reminder-tokens.js";
import { createMailer, type Mailer } from "../../services/shared/adapters/mailer.js";
import { runSql } from "../../services/shared/adapters/sql/executor.js";
import { captureLog, type CapturedLog } from "../helpers/capture-log.js";
import { validateAgainstOpenApi, validatePageAgainstOpenApi } from "./openapi-validate.js";

interface Context {
  sink: SmtpSink;
  stack: TestStack;
  mailer: Mailer;
  captured: CapturedLog;
  pass: ReminderPassDeps;
}
const test = anyTest as TestFn<Context>;
const JITTER_SECONDS = 900;
const T0 = new Date("2026-12-01T00:00:30.000Z");
let ipSeq = 0;

test.before(async (t) => {
  const sink = await startSmtpSink();
  const captured = captureLog("debug");
  const stack = await startStack({ reminders: { smtpUrl: sink.url }, log: captured.log, now: () => T0 });
  const mailer = createMailer({ smtpUrl: sink.url, from: "reminders@list.example" });
  const pass: ReminderPassDeps = {
    db: stack.prisma,
    mailer,
    unsubscribe: createUnsubscribeTokens(stack.secretBox),
    publicBaseUrl: stack.gatewayUrl,
    jitterSeconds: JITTER_SECONDS,
    batchRows: 100,
    log: captured.log,
  };
  t.context = { sink, stack, mailer, captured, pass };
});

test.after.always(async (t) => {
  t.context.mailer?.close();
  await t.context.stack?.close();
  await t.context.sink?.close();
});

const mailsTo = (c: Context, address: string): SunkMail[] => c.sink.messages.filter((m) => m.to.includes(address));
const linkIn = (text: string, path: string): string => {
  const match = new RegExp(`https?://\\S+${path}\\S+`).exec(text);
  if (!match) throw new Error(`no ${path} link in the mail`);
  return match[0];
};

async function castAt(c: Context, serverId: string, voterIdentity: string, at: Date): Promise<string> {
  ipSeq += 1;
  c.stack.clock.now = () => at;
  const answer = await c.stack.clients.hearts.castHeart({
    serverId,
    username: voterIdentity,
    voterIdentity,
    ip: `203.0.113.${ipSeq}`,
    userAgent: "Mozilla/5.0 test",
  });
  return answer.receiptUrl;
}

async function stateOf(c: Context, serverId: string, voterIdentity: string): Promise<string | undefined> {
  const [row] = await runSql<{ state: string }>(
    c.stack.prisma,
    Prisma.sql`SELECT state FROM vote_reminders WHERE server_id = ${serverId}::uuid AND voter_identity = ${voterIdentity}`,
  );
  return row?.state;
}

const postForm = (url: string, body: string) => fetch(url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body });

/** A voter opted in and confirmed on a new server, from a heart counted at T0. */
async function subscribed(c: Context, email: string) {
  const { server } = await c.stack.clients.admin.createServer({ name: `Reminder SMP ${randomBytes(3).toString("hex")}` });
  const serverId = server!.id;
  const voter = `voter-${randomBytes(4).toString("hex")}`;
  const receiptUrl = await castAt(c, serverId, voter, T0);
  const optIn = await postForm(`${receiptUrl}/reminder`, new URLSearchParams({ email }).toString());
  if (optIn.status !== 200) throw new Error(`opt-in answered ${optIn.status}`);
  const confirmUrl = linkIn(mailsTo(c, email).at(-1)!.text, "/reminders/confirm/");
  const confirmed = await fetch(confirmUrl, { method: "POST" });
  if (confirmed.status !== 200) throw new Error(`confirm answered ${confirmed.status}`);
  const [row] = await runSql<{ id: string }>(c.stack.prisma, Prisma.sql`SELECT id FROM vote_reminders WHERE server_id = ${serverId}::uuid`);
  return { serverId, voter, receiptUrl, id: row!.id, due: new Date(T0.getTime() + HEART_COOLDOWN_MS + reminderJitterMs(row!.id, T0, JITTER_SECONDS)) };
}

test.serial(
  "opt-in from the receipt page: an empty field and nothing pre-checked; a confirm mail; a GET of the confirm link does not confirm, its POST does",
  async (t) => {
    const c = t.context;
    const { server } = await c.stack.clients.admin.createServer({ name: "Opt-in SMP" });
    const voter = `voter-${randomBytes(4).toString("hex")}`;
    const receiptUrl = await castAt(c, server!.id, voter, T0);
    const page = await (await fetch(receiptUrl)).text();
    t.regex(page, /Remind me by e-mail when I can vote again/);
    t.regex(page, /<input id="email" name="email" type="email"[^>]* value="">/);
    t.notRegex(page, /checked/);

    const optIn = await postForm(`${receiptUrl}/reminder`, "email=steve%40example.com");
    t.is(optIn.status, 200);
    t.is(await stateOf(c, server!.id, voter), "pending");
    const [mail] = mailsTo(c, "steve@example.com");
    t.truthy(mail);
    const confirmUrl = linkIn(mail!.text, "/reminders/confirm/");

    const shown = await fetch(confirmUrl);
    t.is(shown.status, 200);
    t.regex(await shown.text(), /<form method="post"/);
    t.is(await stateOf(c, server!.id, voter), "pending", "a GET (a mail scanner) never confirms");

    t.is((await fetch(confirmUrl, { method: "POST" })).status, 200);
    t.is(await stateOf(c, server!.id, voter), "active");
    t.is((await fetch(confirmUrl, { method: "POST" })).status, 404, "a confirm token is good once");
  },
);

test.serial(
  "a reminder leaves at next eligible + the jitter, exactly once per heart, with a one-click unsubscribe link and the RFC 8058 headers",
  async (t) => {
    const c = t.context;
    const email = "alex@example.com";
    const s = await subscribed(c, email);
    t.true(s.due.getTime() >= T0.getTime() + HEART_COOLDOWN_MS && s.due.getTime() < T0.getTime() + HEART_COOLDOWN_MS + JITTER_SECONDS * 1000);
    await runReminderPass(c.pass, new Date(T0.getTime() + 60_000));
    await runReminderPass(c.pass, new Date(s.due.getTime() - 1));
    t.is(mailsTo(c, email).length, 1, "only the confirm mail before the heart's next eligible time + jitter");
    await runReminderPass(c.pass, s.due);
    await runReminderPass(c.pass, new Date(s.due.getTime() + 60_000));
    await runReminderPass(c.pass, new Date(s.due.getTime() + HEART_COOLDOWN_MS + 60_000));
    const reminders = mailsTo(c, email).slice(1);
    t.is(reminders.length, 1, "one reminder for the heart, however many passes");
    const [reminder] = reminders;
    const unsubscribeUrl = linkIn(reminder!.text, "/reminders/unsubscribe/");
    t.true(reminder!.raw.replace(/\r?\n(?=[ \t])/g, "").includes(`List-Unsubscribe: <${unsubscribeUrl}>`), reminder!.raw.slice(0, 600));
    t.regex(reminder!.raw, /^List-Unsubscribe-Post: List-Unsubscribe=One-Click/m);
    t.true(unsubscribeUrl.startsWith(c.stack.gatewayUrl));

    // The next counted heart gets its own reminder, once.
    const second = new Date(T0.getTime() + HEART_COOLDOWN_MS + 3_600_000);
    await castAt(c, s.serverId, s.voter, second);
    const secondDue = new Date(second.getTime() + HEART_COOLDOWN_MS + reminderJitterMs(s.id, second, JITTER_SECONDS));
    for (const at of [s.due.getTime() + 2 * HEART_COOLDOWN_MS, secondDue.getTime(), secondDue.getTime() + 2 * HEART_COOLDOWN_MS]) {
      await runReminderPass(c.pass, new Date(at));
    }
    t.is(mailsTo(c, email).length, 3, "confirm + one reminder per counted heart");
  },
);

test.serial("a one-click unsubscribe (RFC 8058 POST) stops every reminder; its GET only shows a button", async (t) => {
  const c = t.context;
  const email = "quits@example.com";
  const s = await subscribed(c, email);
  await runReminderPass(c.pass, s.due);
  const unsubscribeUrl = linkIn(mailsTo(c, email).at(-1)!.text, "/reminders/unsubscribe/");
  t.is((await fetch(unsubscribeUrl)).status, 200);
  t.is(await stateOf(c, s.serverId, s.voter), "active", "a GET never unsubscribes");
  t.is((await postForm(unsubscribeUrl, "List-Unsubscribe=One-Click")).status, 200);
  t.is(await stateOf(c, s.serverId, s.voter), "unsubscribed");
  const before = mailsTo(c, email).length;
  const next = new Date(T0.getTime() + HEART_COOLDOWN_MS + 3_600_000);
  await castAt(c, s.serverId, s.voter, next);
  await runReminderPass(c.pass, new Date(next.getTime() + 3 * HEART_COOLDOWN_MS));
  t.is(mailsTo(c, email).length, before, "nothing after the unsubscribe");
});

test.serial("a 550 bounce ends the subscription: never mailed again", async (t) => {
  const c = t.context;
  const email = "gone@example.com";
  const s = await subscribed(c, email);
  c.sink.refuse(email, "permanent");
  const result = await runReminderPass(c.pass, s.due);
  t.is(result.bounced, 1);
  t.is(await stateOf(c, s.serverId, s.voter), "bounced");
  const next = new Date(T0.getTime() + HEART_COOLDOWN_MS + 3_600_000);
  await castAt(c, s.serverId, s.voter, next);
  const again = await runReminderPass(c.pass, new Date(next.getTime() + 3 * HEART_COOLDOWN_MS));
  t.is(again.claimed, 0, "a bounced subscription is never claimed");
});

test.serial("a temporary refusal (451) is retried later, then sent once", async (t) => {
  const c = t.context;
  const email = "busy@example.com";
  const s = await subscribed(c, email);
  c.sink.refuse(email, "temporary");
  t.is((await runReminderPass(c.pass, s.due)).retried, 1);
  t.is(await stateOf(c, s.serverId, s.voter), "active");
  c.sink.accept(email);
  await runReminderPass(c.pass, new Date(s.due.getTime() + 60_000));
  t.is(mailsTo(c, email).length, 1, "not before the retry time");
  await runReminderPass(c.pass, new Date(s.due.getTime() + REMINDER_RETRY_STEP_MS));
  await runReminderPass(c.pass, new Date(s.due.getTime() + 2 * REMINDER_RETRY_STEP_MS));
  t.is(mailsTo(c, email).length, 2, "the confirm mail and the one reminder, sent at the retry");
});

test.serial("the export lists the voter's reminder and address; an erased voter's subscription (and address) is deleted: no reminder", async (t) => {
  const c = t.context;
  const email = "erased@example.com";
  const s = await subscribed(c, email);
  const exported = JSON.parse((await c.stack.clients.voters.exportVoterData({ serverId: s.serverId, keyKind: VoterKeyKind.USERNAME, key: s.voter })).document);
  t.like(exported.servers[0].reminders[0], { email, state: "active" }, "the export lists the reminder with its address");
  await c.stack.clients.voters.eraseVoterData({ serverId: s.serverId, keyKind: VoterKeyKind.USERNAME, key: s.voter });
  t.is(await stateOf(c, s.serverId, s.voter), undefined);
  t.is((await postForm(`${s.receiptUrl}/reminder`, new URLSearchParams({ email }).toString())).status, 404, "an erased heart's receipt takes no opt-in");
  await runReminderPass(c.pass, new Date(s.due.getTime() + 60_000));
  t.is(mailsTo(c, email).length, 1, "the confirm mail only");
});

test.serial(
  "the reminder routes refuse a wrong token (404), bad input (400, a clear text) and a second opt-in within a minute (503, Retry-After)",
  async (t) => {
    const c = t.context;
    const { server } = await c.stack.clients.admin.createServer({ name: "Refusals SMP" });
    const receiptUrl = await castAt(c, server!.id, `voter-${randomBytes(4).toString("hex")}`, T0);
    const wrongReceipt = `${c.stack.gatewayUrl}/receipts/${"A".repeat(44)}/reminder`;
    t.is((await postForm(wrongReceipt, "email=a%40example.com")).status, 404);
    t.is((await fetch(`${c.stack.gatewayUrl}/reminders/confirm/${"B".repeat(64)}`, { method: "POST" })).status, 404);
    t.is((await postForm(`${c.stack.gatewayUrl}/reminders/unsubscribe/${"C".repeat(64)}`, "List-Unsubscribe=One-Click")).status, 404);
    const empty = await postForm(`${receiptUrl}/reminder`, "email=");
    t.is(empty.status, 400);
    t.regex(await empty.text(), /Enter your e-mail address/);
    const bad = await postForm(`${receiptUrl}/reminder`, "email=not-an-address");
    t.is(bad.status, 400);
    t.regex(await bad.text(), /enter one e-mail address, like name@example\.com/);
    // One opt-in per voter and server a minute: a receipt link cannot flood an address with confirm mails.
    t.is((await postForm(`${receiptUrl}/reminder`, "email=flood%40example.com")).status, 200);
    const again = await postForm(`${receiptUrl}/reminder`, "email=flood%40example.com");
    t.is(again.status, 503);
    t.truthy(again.headers.get("retry-after"));
    t.is(mailsTo(c, "flood@example.com").length, 1);
  },
);

test.serial("every real answer of the reminder routes is in the OpenAPI document: its status, and its page or JSON body", async (t) => {
  const c = t.context;
  const base = c.stack.gatewayUrl;
  const checked: string[] = [];
  const check = async (path: string, method: string, res: Response) => {
    const type = res.headers.get("content-type") ?? "";
    const result = type.startsWith("application/json")
      ? validateAgainstOpenApi(path, method, res.status, await res.json())
      : validatePageAgainstOpenApi(path, method, res.status, type);
    t.deepEqual(result.errors, [], `${method.toUpperCase()} ${path} ${res.status}`);
    checked.push(`${method} ${path} ${res.status}`);
  };
  const { server } = await c.stack.clients.admin.createServer({ name: `Documented SMP ${randomBytes(3).toString("hex")}` });
  const receiptUrl = await castAt(c, server!.id, `voter-${randomBytes(4).toString("hex")}`, T0);
  const optIn = "/receipts/{token}/reminder";
  await check(optIn, "post", await postForm(`${receiptUrl}/reminder`, "email="));
  await check(optIn, "post", await postForm(`${base}/receipts/${"A".repeat(44)}/reminder`, "email=a%40example.com"));
  await check(optIn, "post", await postForm(`${receiptUrl}/reminder`, "email=documented%40example.com"));
  await check(optIn, "post", await postForm(`${receiptUrl}/reminder`, "email=documented%40example.com"));
  await check(optIn, "post", await postForm(`${receiptUrl}/reminder`, `email=${"x".repeat(70_000)}`));
  // Another method's 405 is documented under the path's POST.
  await check(optIn, "post", await fetch(`${receiptUrl}/reminder`, { method: "PUT" }));
  const confirmUrl = linkIn(mailsTo(c, "documented@example.com").at(-1)!.text, "/reminders/confirm/");
  for (const [path, url] of [
    ["/reminders/confirm/{token}", confirmUrl],
    ["/reminders/unsubscribe/{token}", `${base}/reminders/unsubscribe/${"C".repeat(64)}`],
  ] as const) {
    await check(path, "get", await fetch(url));
    await check(path, "get", await fetch(`${url.slice(0, url.lastIndexOf("/") + 1)}${"D".repeat(200)}`));
    await check(path, "post", await fetch(url, { method: "POST" }));
  }
  await check("/reminders/confirm/{token}", "post", await fetch(confirmUrl, { method: "POST" }));
  t.true(checked.length >= 13, "every answer was checked");
});

test.serial("reminders of hearts cast in the same minute leave spread over the jitter window, each at its own time", async (t) => {
  const c = t.context;
  const voters = await Promise.all(Array.from({ length: 6 }, (_, i) => subscribed(c, `wave${i}@example.com`)));
  const eligible = T0.getTime() + HEART_COOLDOWN_MS;
  const sentAt = new Map<string, number>();
  const STEP_MS = 30_000;
  for (let at = eligible - STEP_MS; at <= eligible + JITTER_SECONDS * 1000; at += STEP_MS) {
    await runReminderPass(c.pass, new Date(at));
    voters.forEach((_, i) => {
      if (!sentAt.has(`wave${i}`) && mailsTo(c, `wave${i}@example.com`).length === 2) sentAt.set(`wave${i}`, at);
    });
  }
  t.is(sentAt.size, voters.length, "every voter got their reminder within the window");
  voters.forEach((v, i) => {
    const at = sentAt.get(`wave${i}`)!;
    t.true(at >= v.due.getTime() && at < v.due.getTime() + STEP_MS, "sent at the first pass after its own due time");
    t.true(at >= eligible && at < eligible + JITTER_SECONDS * 1000 + STEP_MS);
  });
  t.true(new Set([...sentAt.values()].map((at) => Math.floor(at / 60_000))).size > 1, "not all in the same minute");
});

test.serial("no e-mail address ever appears in a log line or an error text", async (t) => {
  const c = t.context;
  const raw = c.captured.raw.join("\n");
  t.true(c.captured.raw.length > 0);
  // Every address of this file is on example.com; none may appear (the refusal's own sample name@example.com aside), nor the refused input.
  t.deepEqual(
    c.captured.raw.filter((line) => /(?<!\bname)@example\.com/.test(line)),
    [],
    "an e-mail address was logged",
  );
  t.false(raw.includes("not-an-address"));
});
