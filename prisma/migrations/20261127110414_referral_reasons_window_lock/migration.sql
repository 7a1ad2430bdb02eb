-- AlterTable
ALTER TABLE "referral_credits" ADD COLUMN     "clawback_at" TIMESTAMPTZ(3);

-- AlterTable
ALTER TABLE "referral_events" ADD COLUMN     "reason" TEXT,
ADD COLUMN     "reason_text" TEXT;

-- AlterTable
ALTER TABLE "referrals" ADD COLUMN     "clawback_at" TIMESTAMPTZ(3),
ADD COLUMN     "reversal_reason" TEXT,
ADD COLUMN     "reversal_reason_text" TEXT;

-- AlterTable
ALTER TABLE "servers" ADD COLUMN     "attribution_window_days" INTEGER NOT NULL DEFAULT 90,
ADD COLUMN     "lock_days" INTEGER NOT NULL DEFAULT 0;
