-- AlterEnum
ALTER TYPE "DeliveryStatus" ADD VALUE 'withdrawn';

-- AlterTable
ALTER TABLE "servers" ADD COLUMN     "pay_once" BOOLEAN NOT NULL DEFAULT false;

-- CreateTable
CREATE TABLE "heart_payouts" (
    "heart_id" UUID NOT NULL,
    "server_id" UUID NOT NULL,
    "transport" TEXT NOT NULL,
    "delivery_id" UUID,
    "state" TEXT NOT NULL,
    "taken_at" TIMESTAMPTZ(3) NOT NULL,
    "paid_at" TIMESTAMPTZ(3),

    CONSTRAINT "heart_payouts_pkey" PRIMARY KEY ("heart_id")
);
