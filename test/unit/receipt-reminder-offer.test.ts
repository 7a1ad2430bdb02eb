/**
 * Which vote reminders a receipt page offers (gateway/handle-receipt.ts, docs/reminders.md): the Discord DM button only
 * when the list runs a bot (DISCORD_BOT_TOKEN) AND the heart carried a Discord user id; the e-mail form only with
 * SMTP_URL; nothing pre-checked.
 */
import test from "ava";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { GetReceiptResponseSchema, ReceiptOutcome, ReceiptSchema } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { handleReceipt } from "../../gateway/handle-receipt.js";

const TOKEN = "a".repeat(40);
const castAt = new Date("2026-12-01T00:00:00Z");

async function pageOf(hasDiscordId: boolean, opts: { reminders?: boolean; discordReminders?: boolean }): Promise<string> {
  const receipt = create(ReceiptSchema, {
    serverName: "Offer SMP",
    username: "Steve",
    castAt: timestampFromDate(castAt),
    outcome: ReceiptOutcome.COUNTED,
    nextVoteAt: timestampFromDate(new Date(castAt.getTime() + 86_400_000)),
    period: "2026-12",
    hasDiscordId,
  });
  const result = await handleReceipt(`/receipts/${TOKEN}`, { getReceipt: async () => create(GetReceiptResponseSchema, { receipt }) }, opts);
  return String(result.reply.body);
}

const DM_OFFER = /Remind me by Discord DM when I can vote again/;

test("the Discord DM reminder is offered only when the list runs a bot and the heart carried a Discord id", async (t) => {
  t.regex(await pageOf(true, { discordReminders: true }), DM_OFFER);
  t.notRegex(await pageOf(true, {}), DM_OFFER, "no bot on the list: no offer");
  t.notRegex(await pageOf(true, { reminders: true }), DM_OFFER, "e-mail only: no DM offer");
  t.notRegex(await pageOf(false, { discordReminders: true }), DM_OFFER, "no Discord id on the heart: no offer");
});

test("with both channels on, the page offers both and pre-checks nothing", async (t) => {
  const page = await pageOf(true, { reminders: true, discordReminders: true });
  t.regex(page, DM_OFFER);
  t.regex(page, /Remind me by e-mail when I can vote again/);
  t.notRegex(page, /checked/);
  t.notRegex(await pageOf(true, { discordReminders: true }), /Remind me by e-mail/, "no SMTP_URL: no e-mail form");
});
