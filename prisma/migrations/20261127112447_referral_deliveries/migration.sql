-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "event_id" TEXT,
ADD COLUMN     "payload" JSONB;
