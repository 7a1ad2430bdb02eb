-- Vote reminders by Discord DM (issue 32 item 3, docs/reminders.md): a subscription is sent by e-mail or as a
-- Discord DM through the list's bot (channel), to the voter's Discord user id (discord_id, from the heart at opt-in).
-- discord_channel_id keeps the bot's DM channel once learnt, so Create DM is called once per subscription. A DM row
-- has no address, so email becomes nullable. Existing rows are e-mail ones (the default).
-- AlterTable
ALTER TABLE "vote_reminders" ADD COLUMN     "channel" TEXT NOT NULL DEFAULT 'email',
ADD COLUMN     "discord_id" TEXT,
ADD COLUMN     "discord_channel_id" TEXT,
ALTER COLUMN "email" DROP NOT NULL;
