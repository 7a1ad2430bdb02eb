/**
 * The service's mailer (services/shared/adapters/mailer.ts, nodemailer over SMTP) against a real local SMTP server
 * (scripts/harness/smtp-sink.ts, smtp-server + mailparser): a message arrives with its headers (List-Unsubscribe,
 * List-Unsubscribe-Post) as a mail client reads them; a recipient refused with 550 is a permanent failure (a bounce),
 * one refused with 451 or an unreachable server a temporary one; the SMTP credentials never appear in an error.
 */
import test from "ava";
import { createMailer } from "../../services/shared/adapters/mailer.js";
import { startSmtpSink } from "../../scripts/harness/smtp-sink.js";

test("a message reaches the SMTP server with its subject, text and List-Unsubscribe headers", async (t) => {
  const sink = await startSmtpSink();
  const mailer = createMailer({ smtpUrl: sink.url, from: "Vote reminders <reminders@list.example>" });
  try {
    const sent = await mailer.send({
      to: "steve@example.com",
      subject: "You can vote for Example SMP again",
      text: "Vote again: https://list.example/servers/1",
      headers: { "List-Unsubscribe": "<https://list.example/reminders/unsubscribe?token=abc>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" },
    });
    t.true(sent.ok);
    t.is(sink.messages.length, 1);
    const [mail] = sink.messages;
    t.deepEqual(mail!.to, ["steve@example.com"]);
    t.is(mail!.from, "reminders@list.example");
    t.is(mail!.subject, "You can vote for Example SMP again");
    t.is(mail!.text.trim(), "Vote again: https://list.example/servers/1");
    t.regex(mail!.raw, /^List-Unsubscribe: <https:\/\/list\.example\/reminders\/unsubscribe\?token=abc>/m);
    t.regex(mail!.raw, /^List-Unsubscribe-Post: List-Unsubscribe=One-Click/m);
  } finally {
    mailer.close();
    await sink.close();
  }
});

test("a 550 refusal is permanent (a bounce: stop mailing the address), a 451 or an unreachable server temporary; the credentials never show", async (t) => {
  const sink = await startSmtpSink();
  sink.refuse("gone@example.com", "permanent");
  sink.refuse("busy@example.com", "temporary");
  const mailer = createMailer({ smtpUrl: sink.url, from: "reminders@list.example" });
  try {
    t.like(await mailer.send({ to: "gone@example.com", subject: "s", text: "t" }), { ok: false, kind: "permanent", reason: "SMTP 550" });
    t.like(await mailer.send({ to: "busy@example.com", subject: "s", text: "t" }), { ok: false, kind: "temporary", reason: "SMTP 451" });
    t.is(sink.messages.length, 0, "nothing was delivered");
  } finally {
    mailer.close();
    await sink.close();
  }
  const down = createMailer({ smtpUrl: `smtp://user:s3cret-pass@127.0.0.1:${new URL(sink.url).port}`, from: "reminders@list.example", timeoutMs: 2_000 });
  try {
    const result = await down.send({ to: "steve@example.com", subject: "s", text: "t" });
    t.like(result, { ok: false, kind: "temporary" });
    t.false(JSON.stringify(result).includes("s3cret-pass"));
  } finally {
    down.close();
  }
  const error = t.throws(() => createMailer({ smtpUrl: "http://user:s3cret-pass@mail.example", from: "x@example.com" }));
  t.false(error?.message.includes("s3cret-pass") ?? true, "a wrong URL is refused without its password");
});
