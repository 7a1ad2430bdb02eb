/** Owner alerts' pure parts: the Discord webhook URLs accepted, alert text without secrets, the digest messages' bounds. */
import test from "ava";
import { endpointDisabledAlert, endpointFailingAlert, hostOf } from "../../services/alerts/alert-kinds.js";
import { DISCORD_DIGEST_LISTED, MAIL_DIGEST_LISTED, digestDiscordMessage, digestMail } from "../../services/alerts/alert-digest.js";
import { DISCORD_CONTENT_MAX_CHARS } from "../../services/shared/values/discord-template.js";
import { readDiscordWebhookUrl as parseDiscordWebhookUrl } from "../../services/shared/values/discord-webhook-url.js";

test("a Discord webhook URL is accepted on Discord's hosts only, https, with /api/webhooks/<id>/<token>", (t) => {
  const accepted: [string, string][] = [
    ["https://discord.com/api/webhooks/123456789/abc_DEF-9", "123456789"],
    ["https://discordapp.com/api/webhooks/1/t", "1"],
    ["https://ptb.discord.com/api/v10/webhooks/42/tok", "42"],
    ["https://canary.discord.com/api/webhooks/42/tok/", "42"],
  ];
  for (const [url, id] of accepted) t.is(parseDiscordWebhookUrl(url)?.id, id, url);
  const refused = [
    "http://discord.com/api/webhooks/1/t",
    "https://discord.com.evil.example/api/webhooks/1/t",
    "https://evil.example/api/webhooks/1/t",
    "https://user:pass@discord.com/api/webhooks/1/t",
    "https://discord.com:8443/api/webhooks/1/t",
    "https://discord.com/api/webhooks/abc/t",
    "https://discord.com/api/webhooks/1/t/messages/2",
    "https://discord.com/api/users/1",
    "not a url",
  ];
  for (const url of refused) t.is(parseDiscordWebhookUrl(url), undefined, url);
});

test("an endpoint alert names the receiver's host, never its path or query (they can carry a token)", (t) => {
  const at = new Date("2026-12-04T00:00:00.000Z");
  const url = "https://hooks.example:8443/cb/s3cret-path?token=q-secret";
  t.is(hostOf(url), "hooks.example:8443");
  t.is(hostOf("::not a url"), "(unparsable URL)");
  const failing = endpointFailingAlert({
    serverId: "s",
    serverName: "S",
    endpointId: "e",
    url,
    failingSince: at,
    reason: "HTTP 500",
    lastFailedDeliveryId: "d",
    at,
  });
  const disabled = endpointDisabledAlert({ serverId: "s", serverName: "S", endpointId: "e", url, reason: "410 Gone", at });
  for (const a of [failing, disabled]) {
    t.false(`${a.title} ${a.detail} ${a.link}`.includes("s3cret-path"));
    t.false(`${a.title} ${a.detail} ${a.link}`.includes("q-secret"));
  }
  t.is(failing.cause_key, "endpoint_failing:e:2026-12-04T00:00:00.000Z", "one key per run of failures");
});

test("a digest lists at most its share of alerts and counts the rest; the Discord one stays within 2,000 characters", (t) => {
  const lines = Array.from({ length: 500 }, (_, n) => ({
    title: `Server ${n}: callback endpoint failing for 24 hours ${"x".repeat(200)}`,
    detail: "d",
    link: `/dashboard/?server=${n}`,
  }));
  const mail = digestMail({ to: "o@owner.example", lines, dashboardBaseUrl: "https://list.example/" });
  t.is(mail.subject, "500 alerts about your servers");
  t.is(mail.text.split("\n").filter((l) => l.startsWith("* ")).length, MAIL_DIGEST_LISTED);
  t.true(mail.text.includes(`... and ${500 - MAIL_DIGEST_LISTED} alerts more on the dashboard: https://list.example/dashboard/`));
  const discord = digestDiscordMessage({ lines, dashboardBaseUrl: "https://list.example" });
  t.true(discord.content.length <= DISCORD_CONTENT_MAX_CHARS);
  const listed = discord.content.split("\n").filter((l) => l.startsWith("- ")).length;
  t.true(listed >= 1 && listed <= DISCORD_DIGEST_LISTED, String(listed));
  t.true(discord.content.endsWith(`... and ${500 - listed} alerts more: <https://list.example/dashboard/>`), "the count of the rest always fits");
  t.deepEqual(discord.allowed_mentions, { parse: [] }, "no mention pings");
  const one = digestMail({ to: "o@owner.example", lines: lines.slice(0, 1), dashboardBaseUrl: "https://list.example" });
  t.is(one.subject, lines[0]!.title, "a single alert is its own subject");
});
