-- AlterTable
ALTER TABLE "hearts" ADD COLUMN     "account_id" TEXT,
ADD COLUMN     "discord_id" TEXT,
ADD COLUMN     "minecraft_uuid" TEXT,
ADD COLUMN     "steam_id" TEXT;
