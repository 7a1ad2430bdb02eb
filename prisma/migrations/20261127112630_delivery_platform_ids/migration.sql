-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "account_id" TEXT,
ADD COLUMN     "discord_id" TEXT,
ADD COLUMN     "minecraft_uuid" TEXT,
ADD COLUMN     "next_eligible_at" TIMESTAMPTZ(3),
ADD COLUMN     "steam_id" TEXT;
