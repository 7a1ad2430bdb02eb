-- CreateEnum
CREATE TYPE "DeliveryTransport" AS ENUM ('callback', 'votifier', 'pull');

-- AlterEnum
ALTER TYPE "SecretPurpose" ADD VALUE 'pull';

-- DropIndex
DROP INDEX "deliveries_heart_id_server_id_key";

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "transport" "DeliveryTransport" NOT NULL DEFAULT 'callback';

-- AlterTable
ALTER TABLE "servers" ADD COLUMN     "pull_enabled" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "votifier_host" TEXT,
ADD COLUMN     "votifier_port" INTEGER,
ADD COLUMN     "votifier_service_name" TEXT,
ADD COLUMN     "votifier_token" TEXT;

-- CreateIndex
CREATE INDEX "deliveries_server_id_transport_status_created_at_id_idx" ON "deliveries"("server_id", "transport", "status", "created_at", "id");

-- CreateIndex
CREATE UNIQUE INDEX "deliveries_heart_id_server_id_transport_key" ON "deliveries"("heart_id", "server_id", "transport");
