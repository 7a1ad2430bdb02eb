-- CreateEnum
CREATE TYPE "VoteClaimState" AS ENUM ('held', 'claimed', 'expired', 'withdrawn');

-- AlterEnum
ALTER TYPE "SecretPurpose" ADD VALUE 'claim';

-- AlterTable
ALTER TABLE "server_secrets" ADD COLUMN     "lookup_hash" TEXT;

-- AlterTable
ALTER TABLE "servers" ADD COLUMN     "claim_hold_days" INTEGER NOT NULL DEFAULT 30,
ADD COLUMN     "claim_max_held" INTEGER NOT NULL DEFAULT 20,
ADD COLUMN     "claim_pay_once" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "claims_enabled" BOOLEAN NOT NULL DEFAULT false;

-- CreateTable
CREATE TABLE "vote_claims" (
    "heart_id" UUID NOT NULL,
    "server_id" UUID NOT NULL,
    "player_key" TEXT NOT NULL,
    "username_lower" TEXT NOT NULL,
    "steam_id" TEXT,
    "discord_id" TEXT,
    "minecraft_uuid" TEXT,
    "account_id" TEXT,
    "counted_at" TIMESTAMPTZ(3) NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "claimed_at" TIMESTAMPTZ(3),
    "state" "VoteClaimState" NOT NULL DEFAULT 'held',
    "expired_reason" TEXT,
    "expired_at" TIMESTAMPTZ(3),

    CONSTRAINT "vote_claims_pkey" PRIMARY KEY ("heart_id")
);

-- CreateIndex
CREATE INDEX "vote_claims_server_id_username_lower_counted_at_idx" ON "vote_claims"("server_id", "username_lower", "counted_at");

-- CreateIndex
CREATE INDEX "vote_claims_server_id_steam_id_counted_at_idx" ON "vote_claims"("server_id", "steam_id", "counted_at");

-- CreateIndex
CREATE INDEX "vote_claims_server_id_discord_id_counted_at_idx" ON "vote_claims"("server_id", "discord_id", "counted_at");

-- CreateIndex
CREATE INDEX "vote_claims_server_id_minecraft_uuid_counted_at_idx" ON "vote_claims"("server_id", "minecraft_uuid", "counted_at");

-- CreateIndex
CREATE INDEX "vote_claims_server_id_account_id_counted_at_idx" ON "vote_claims"("server_id", "account_id", "counted_at");

-- CreateIndex
CREATE INDEX "vote_claims_server_id_player_key_counted_at_idx" ON "vote_claims"("server_id", "player_key", "counted_at");

-- CreateIndex
CREATE UNIQUE INDEX "server_secrets_lookup_hash_key" ON "server_secrets"("lookup_hash");
