-- The Discord destination (docs/discord.md): an endpoint may post its events as an embed's description (up to
-- Discord's 4,096 characters) instead of the message's content (2,000 characters). Off for existing endpoints.

-- AlterTable
ALTER TABLE "callback_endpoints" ADD COLUMN     "discord_embed" BOOLEAN NOT NULL DEFAULT false;
