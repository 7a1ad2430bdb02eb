-- DropIndex
DROP INDEX "deliveries_heart_id_server_id_transport_key";

-- AlterTable (existing rows are all heart.counted: their key is their heart_id)
ALTER TABLE "deliveries" ADD COLUMN     "dedup_key" TEXT;
UPDATE "deliveries" SET "dedup_key" = CASE WHEN "event_type" = 'heart.counted' THEN "heart_id"::text ELSE "id"::text END;
ALTER TABLE "deliveries" ALTER COLUMN "dedup_key" SET NOT NULL;

-- AlterTable
ALTER TABLE "delivery_attempts" ADD COLUMN     "request_body" TEXT,
ADD COLUMN     "request_headers" JSONB,
ADD COLUMN     "response_body" TEXT,
ADD COLUMN     "response_body_truncated" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "response_headers" JSONB,
ADD COLUMN     "server_id" UUID,
ADD COLUMN     "succeeded" BOOLEAN NOT NULL DEFAULT false;

-- Backfill: attempts recorded before this migration get their server and outcome.
UPDATE "delivery_attempts" a SET "server_id" = d."server_id", "succeeded" = coalesce(a."status_code" BETWEEN 200 AND 299, false)
FROM "deliveries" d WHERE d."id" = a."delivery_id";

-- CreateTable
CREATE TABLE "callback_health" (
    "server_id" UUID NOT NULL,
    "failing_since" TIMESTAMPTZ(3),
    "last_success_at" TIMESTAMPTZ(3),
    "last_failure_at" TIMESTAMPTZ(3),
    "last_failure_reason" TEXT,

    CONSTRAINT "callback_health_pkey" PRIMARY KEY ("server_id")
);

-- Backfill: last success and last failure of every server's callback endpoint that had attempts
-- (no failure run: history never auto-disables).
INSERT INTO "callback_health" ("server_id", "last_success_at", "last_failure_at")
SELECT a."server_id", max(a."started_at") FILTER (WHERE a."succeeded"), max(a."started_at") FILTER (WHERE NOT a."succeeded")
FROM "delivery_attempts" a JOIN "deliveries" d ON d."id" = a."delivery_id"
WHERE a."server_id" IS NOT NULL AND d."transport" = 'callback' GROUP BY a."server_id";

-- CreateIndex
CREATE INDEX "deliveries_heart_id_idx" ON "deliveries"("heart_id");

-- CreateIndex
CREATE UNIQUE INDEX "deliveries_server_id_transport_dedup_key_key" ON "deliveries"("server_id", "transport", "dedup_key");

-- CreateIndex
CREATE INDEX "delivery_attempts_server_id_started_at_idx" ON "delivery_attempts"("server_id", "started_at");

-- AddForeignKey
ALTER TABLE "callback_health" ADD CONSTRAINT "callback_health_server_id_fkey" FOREIGN KEY ("server_id") REFERENCES "servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;
