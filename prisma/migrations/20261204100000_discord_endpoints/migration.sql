-- The Discord destination (issue 32, item 1; docs/discord.md): a callback endpoint may instead post to a Discord
-- channel through the owner's Discord webhook. Its deliveries carry the new transport `discord`; the endpoint keeps the
-- webhook's id and host in the clear (shown on the dashboard), its token sealed with SECRETS_KEY (never returned), and
-- the owner's message templates by event type.

-- AlterEnum
ALTER TYPE "DeliveryTransport" ADD VALUE 'discord';

-- AlterTable
ALTER TABLE "callback_endpoints" ADD COLUMN     "discord_templates" JSONB,
ADD COLUMN     "discord_webhook_host" TEXT,
ADD COLUMN     "discord_webhook_id" TEXT,
ADD COLUMN     "discord_webhook_token" TEXT;
