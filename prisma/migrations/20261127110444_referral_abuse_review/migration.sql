-- CreateEnum
CREATE TYPE "ReferralReview" AS ENUM ('none', 'held', 'approved', 'declined');

-- CreateEnum
CREATE TYPE "ReferralReviewMode" AS ENUM ('off', 'loose', 'strict');

-- AlterTable
ALTER TABLE "referral_clicks" ADD COLUMN     "subnet" TEXT;

-- AlterTable
ALTER TABLE "referrals" ADD COLUMN     "review" "ReferralReview" NOT NULL DEFAULT 'none',
ADD COLUMN     "reviewed_at" TIMESTAMPTZ(3),
ADD COLUMN     "signal_details" JSONB NOT NULL DEFAULT '{}',
ADD COLUMN     "signals" TEXT[] DEFAULT ARRAY[]::TEXT[];

-- AlterTable
ALTER TABLE "servers" ADD COLUMN     "referral_review_mode" "ReferralReviewMode" NOT NULL DEFAULT 'off';

-- CreateIndex
CREATE INDEX "referral_clicks_server_id_ip_created_at_idx" ON "referral_clicks"("server_id", "ip", "created_at");

-- CreateIndex
CREATE INDEX "referral_clicks_server_id_subnet_created_at_idx" ON "referral_clicks"("server_id", "subnet", "created_at");

-- CreateIndex
CREATE INDEX "referral_events_referral_id_idx" ON "referral_events"("referral_id");

-- CreateIndex
CREATE INDEX "referrals_server_id_registered_at_id_idx" ON "referrals"("server_id", "registered_at", "id");

-- Hand-written (Prisma's schema cannot express an expression index): the anti-abuse facts find a
-- referee's hearts by username case-insensitively (services/referral/abuse-facts.ts).
CREATE INDEX "hearts_server_id_lower_username_created_at_idx" ON "hearts"("server_id", lower("username"), "created_at");
