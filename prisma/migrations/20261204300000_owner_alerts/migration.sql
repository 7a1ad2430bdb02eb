-- Owner alerts (issue 32 item 4): the channels each owner chose (e-mail address, a sealed Discord webhook) and one
-- alert row per cause occurrence (cause_key unique), listed on the dashboard and sent as digests by send_after
-- (LIMITed batches); callback_health gets an index on failing_since for the scan of endpoints failing for 24 hours and
-- server_secrets one on expires_at for the scan of rotation overlaps that end soon;
-- retention removes old alerts by created_at.
-- CreateTable
CREATE TABLE "owner_alert_channels" (
    "owner_id" TEXT NOT NULL,
    "email" TEXT,
    "discord_webhook" TEXT,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "owner_alert_channels_pkey" PRIMARY KEY ("owner_id")
);

-- CreateTable
CREATE TABLE "owner_alerts" (
    "id" UUID NOT NULL,
    "owner_id" TEXT NOT NULL,
    "server_id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "cause_key" TEXT NOT NULL,
    "endpoint_id" UUID,
    "title" TEXT NOT NULL,
    "detail" TEXT NOT NULL,
    "link" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "read_at" TIMESTAMPTZ(3),
    "resolved_at" TIMESTAMPTZ(3),
    "send_after" TIMESTAMPTZ(3),
    "email_sent" BOOLEAN NOT NULL DEFAULT false,
    "discord_sent" BOOLEAN NOT NULL DEFAULT false,
    "attempts" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "owner_alerts_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "owner_alerts_cause_key_key" ON "owner_alerts"("cause_key");

-- CreateIndex
CREATE INDEX "owner_alerts_owner_id_created_at_idx" ON "owner_alerts"("owner_id", "created_at");

-- CreateIndex
CREATE INDEX "owner_alerts_server_id_created_at_idx" ON "owner_alerts"("server_id", "created_at");

-- CreateIndex
CREATE INDEX "owner_alerts_send_after_idx" ON "owner_alerts"("send_after");

-- CreateIndex
CREATE INDEX "owner_alerts_endpoint_id_idx" ON "owner_alerts"("endpoint_id");

-- CreateIndex
CREATE INDEX "owner_alerts_created_at_idx" ON "owner_alerts"("created_at");

-- CreateIndex
CREATE INDEX "callback_health_failing_since_idx" ON "callback_health"("failing_since");

-- CreateIndex
CREATE INDEX "server_secrets_expires_at_idx" ON "server_secrets"("expires_at");
